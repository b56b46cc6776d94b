"""Shared fixtures for every folder of tests/ (see ``support.fixtures``), the slow tier's marks (``support.tiers``), and
the PostgreSQL skips' summary line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.fixtures import POSTGRES_SKIP, offline, openai_server, postgres_dsn, postgres_for
from support.tiers import mark_slow

__all__ = ["offline", "openai_server", "postgres_dsn", "postgres_for"]

# tests import the Studio graph (graphs/agent.py, served by langgraph.json) as ``graphs.agent``
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(items):
    """Mark the long tests `support.tiers` names ``slow``: ``python -m pytest`` leaves them to CI's second run."""
    mark_slow(items)


def pytest_terminal_summary(terminalreporter):
    """Say once why the PostgreSQL tests did not run (pytest lists skip reasons only with -rs)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if POSTGRES_SKIP in str(r.longrepr)]
    if skipped:
        reason = skipped[0].longrepr[2].removeprefix("Skipped: ")
        terminalreporter.write_line(f"{len(skipped)} PostgreSQL tests skipped: {reason}", yellow=True)
