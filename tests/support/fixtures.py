"""The fixtures every test folder shares: a fresh PostgreSQL schema per test run, the strict local OpenAI server,
an offline working folder. ``tests/conftest.py`` and ``benchmarks/tests/conftest.py`` take them from here."""

from __future__ import annotations

import os
import uuid

import pytest

from support import in_ci
from support.openai_server import StrictOpenAIServer

__all__ = ["POSTGRES_DSN", "POSTGRES_SKIP", "offline", "openai_server", "postgres_dsn", "postgres_for"]

POSTGRES_DSN = os.environ.get("COMPACTION_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


#: The reason the PostgreSQL tests skip without a server (the terminal summary counts the tests it skipped).
POSTGRES_SKIP = "PostgreSQL is not reachable"


@pytest.fixture(scope="session")
def postgres_dsn():
    """Return a DSN whose search_path is a schema created for this test run (dropped afterwards).

    Without a reachable server the tests that need it skip, saying how to run
    them; in CI (``CI`` set, as ``.ci/run`` does) they fail instead, so they
    never silently stop running.
    """
    import psycopg

    schema = f"compaction_test_{uuid.uuid4().hex[:12]}"
    try:
        conn = psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        conn, reason = None, f"{POSTGRES_SKIP} at {POSTGRES_DSN} ({str(exc).strip().splitlines()[0]})"
    if conn is None:  # out of the except block: no chained psycopg traceback
        if in_ci():
            pytest.fail(f"{reason}; CI runs the PostgreSQL tests against a real server", pytrace=False)
        pytest.skip(f"{reason}; set COMPACTION_TEST_POSTGRES to a server's DSN to run these tests")
    with conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in POSTGRES_DSN else "?"
    yield f"{POSTGRES_DSN}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def postgres_for(request):
    """Return ``dsn(case)``: this run's PostgreSQL DSN when the case's name says postgres, else "" (no server asked for)."""
    return lambda case: request.getfixturevalue("postgres_dsn") if "postgres" in case else ""


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
