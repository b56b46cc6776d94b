"""The test command without a PostgreSQL server: its tests skip with one line saying how to run them, except in CI."""

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pytest_without_server(ci: bool) -> subprocess.CompletedProcess:
    """Run the sync restart test of every backend (memory, SQLite, PostgreSQL) against a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["COMPACTION_TEST_POSTGRES"] = f"postgresql://postgres@127.0.0.1:{port}/test"
    if ci:
        env["CI"] = "true"
    test = "tests/storage/test_checkpointers.py::test_the_same_graph_compacts_a_thread_across_restarts_sync"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_a_server_the_postgres_cases_skip_with_one_line_and_the_others_run():
    run = _pytest_without_server(ci=False)
    assert run.returncode == 0, run.stdout
    assert "2 passed, 1 skipped" in run.stdout
    lines = [line for line in run.stdout.splitlines() if "PostgreSQL is not reachable" in line]
    assert len(lines) == 1 and lines[0].startswith("1 PostgreSQL tests skipped: ")
    assert "set COMPACTION_TEST_POSTGRES to a server's DSN to run these tests" in lines[0]
    assert "Traceback" not in run.stdout and "psycopg" not in run.stdout


def test_in_ci_a_missing_server_fails_the_run():
    run = _pytest_without_server(ci=True)
    assert run.returncode == 1
    assert "1 failed, 2 passed" in run.stdout
    assert "CI runs the PostgreSQL tests against a real server" in run.stdout and "Traceback" not in run.stdout
