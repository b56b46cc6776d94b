"""Shared fixtures for every folder of tests/ (see ``support.fixtures``), and the PostgreSQL skips' summary line."""

from __future__ import annotations

import sys
from pathlib import Path

from support.fixtures import POSTGRES_SKIP, offline, openai_server, postgres_dsn, postgres_for

__all__ = ["offline", "openai_server", "postgres_dsn", "postgres_for"]

# tests import the Studio graph (graphs/agent.py, served by langgraph.json) as ``graphs.agent``
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pytest_terminal_summary(terminalreporter):
    """Say once why the PostgreSQL tests did not run (pytest lists skip reasons only with -rs)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if POSTGRES_SKIP in str(r.longrepr)]
    if skipped:
        reason = skipped[0].longrepr[2].removeprefix("Skipped: ")
        terminalreporter.write_line(f"{len(skipped)} PostgreSQL tests skipped: {reason}", yellow=True)
