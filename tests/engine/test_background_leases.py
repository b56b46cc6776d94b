"""A conversation's lease: who prepares its next summary, released when the job fails, judged dead after a restart.

Workers share the checkpointer and the storage (here one process with an
engine per run, as a graph factory builds them, or two processes on the same
files). A job that fails, is discarded or is abandoned releases its lease; a
worker restarted in place (same host name, same process id) is not taken for
the worker it replaced.
"""

from __future__ import annotations

import logging
import sqlite3
import time

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from support.fronts import WINDOW, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionConfig
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.testing import ScriptedModel

#: A summary call may take this long; a worker that waited it out at the trigger would show it.
TIMEOUT = 30
CONFIG = CompactionConfig(context_window=WINDOW, summary={"timeout": TIMEOUT}, background={"enabled": True})


@pytest.fixture
def events(caplog):
    """Return a function listing the background lifecycle events logged so far."""
    caplog.set_level(logging.INFO, logger="langgraph_compaction")

    def named() -> list[dict]:
        found = []
        for record in caplog.records:
            fields = record.args[1] if isinstance(record.args, tuple) and len(record.args) == 2 else None
            if isinstance(fields, dict) and fields.get("event"):
                found.append(fields)
        return found

    return named


def _worker(tmp_path, saver, summarizer=None):
    """Return one worker's graph (an engine of its own) on the shared checkpointer and files."""
    builder = edge_builder(ToolCallingModel(), tmp_path, CONFIG, summarizer or ScriptedModel())
    return builder.compile(checkpointer=saver)


def _until_started(graph, config, events, n: int = 0) -> int:
    """Send requests until a background job starts; return the next request's number."""
    while not any(e["event"] == "compaction_started" and e.get("mode") == "background" for e in events()):
        graph.invoke({"messages": [request(n)]}, config)
        n += 1
        assert n < 40, "no background job started"
    return n


def test_a_job_failing_fast_on_one_worker_does_not_stall_the_next_at_the_trigger(tmp_path, events):
    config = {"configurable": {"thread_id": "failed"}}
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    unavailable = ScriptedModel(summary=RuntimeError("Error code: 503 - service unavailable"))
    with use_runner(InstantRunner()):
        n = _until_started(_worker(tmp_path, saver, unavailable), config, events)
        lease = _worker(tmp_path, saver).get_state(config).values["compaction"]["lease"]
        assert lease is not None and lease["state"] == "preparing"  # worker A's job failed; its lease is in the state
        second, seen, slowest = _worker(tmp_path, saver), len(events()), 0.0
        while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
            began = time.monotonic()
            second.invoke({"messages": [request(n)]}, config)
            slowest, n = max(slowest, time.monotonic() - began), n + 1
            assert n < 60, "the second worker never compacted"
    later = events()[seen:]
    assert slowest < TIMEOUT / 3, f"a request took {slowest:.1f} s: the second worker waited for a failed job"
    assert any(e["event"] == "compaction_discarded" and "503" in e["why"] for e in later)
    assert not any("not ready in time" in str(e.get("why", "")) for e in later)
