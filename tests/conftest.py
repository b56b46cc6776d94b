"""Shared fixtures: a fresh PostgreSQL schema per test run, and the strict local OpenAI server."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from openai_server import StrictOpenAIServer

# tests import the Studio graph (graphs/agent.py, served by langgraph.json) as ``graphs.agent``
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

POSTGRES_DSN = os.environ.get("COMPACTION_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def postgres_dsn():
    """Return a DSN whose search_path is a schema created for this test run (dropped afterwards).

    PostgreSQL must be reachable: these tests never skip (CI checks the server first).
    """
    import psycopg

    schema = f"compaction_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in POSTGRES_DSN else "?"
    yield f"{POSTGRES_DSN}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def openai_server():
    """Yield a started StrictOpenAIServer on 127.0.0.1 (stopped after the test)."""
    with StrictOpenAIServer() as server:
        yield server


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Run in an empty directory without an OpenAI key (the offline demo); return the directory."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path
