"""A conversation's lease through storage faults: nothing waits for a summary that will not come where it looks.

Workers share the checkpointer and the storage (here one process with an
engine per worker, as a graph factory builds them). The storage fails now and
then (a database restarting): a worker waiting at the trigger for what another
worker publishes rides out a failed read; a job whose publish meets a failed
write publishes all the same; and a lease whose prefix a blocking compaction
replaced (its swap was postponed, the transcript failing) is not waited for at
the next trigger, where its summary would be looked for under another name.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from support.fronts import WINDOW, ToolCallingModel, edge_builder, request, until_a_job_starts

from langgraph_compaction import CompactionConfig, FileStorage
from langgraph_compaction.engine.jobs import InstantRunner, Job, Published, use_runner
from langgraph_compaction.engine.offload import OFFLOAD_ATTEMPTS
from langgraph_compaction.testing import ScriptedModel

#: A summary call may take this long; a worker that waited it out at the trigger would show it.
TIMEOUT = 30
CONFIG = CompactionConfig(context_window=WINDOW, summary={"timeout": TIMEOUT}, background={"enabled": True})


class _Flaky(FileStorage):
    """Files whose next ``fail[op]`` calls of an operation raise, as a database restarting would."""

    def __init__(self, root: Any) -> None:
        super().__init__(root)
        self.fail: dict[str, int] = {}

    def _maybe_fail(self, op: str) -> None:
        if self.fail.get(op, 0) > 0:
            self.fail[op] -= 1
            raise ConnectionError("the database is restarting")

    def read_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None:
        self._maybe_fail("read_prepared")
        return super().read_prepared(thread_id, key)

    def write_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None:
        self._maybe_fail("write_prepared")
        super().write_prepared(thread_id, key, record)

    def append_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str:
        self._maybe_fail("append_transcript")
        return super().append_transcript(thread_id, records)


def _worker(storage, saver):
    """Return one worker's graph (an engine of its own) on the shared checkpointer and storage."""
    return edge_builder(ToolCallingModel(), storage, CONFIG, ScriptedModel()).compile(checkpointer=saver)


def _waiting_for(storage: _Flaky, record_id: str) -> tuple[Published, Job]:
    runner = Published(storage, "waited", "conversation")
    return runner, Job(("waited", None), {"id": record_id}, runner)


def test_a_worker_waiting_for_another_workers_summary_rides_out_failed_reads(tmp_path):
    storage = _Flaky(tmp_path)
    storage.write_prepared("waited", "conversation", {"id": "ready-1", "status": "ready"})
    storage.fail["read_prepared"] = 3  # the first polls meet the database restarting
    runner, job = _waiting_for(storage, "ready-1")
    assert runner.wait_sync(job, timeout=5.0)
    assert job.outcome()["id"] == "ready-1"

    storage.fail["read_prepared"] = 3
    runner, job = _waiting_for(storage, "ready-1")
    assert asyncio.run(runner.wait_async(job, timeout=5.0))
    assert job.outcome()["id"] == "ready-1"


def test_a_worker_waiting_through_an_outage_stops_at_its_timeout(tmp_path):
    storage = _Flaky(tmp_path)
    storage.write_prepared("waited", "conversation", {"id": "ready-1", "status": "ready"})
    storage.fail["read_prepared"] = 10_000  # down for the whole wait
    runner, job = _waiting_for(storage, "ready-1")
    began = time.monotonic()
    assert not runner.wait_sync(job, timeout=0.3)
    assert time.monotonic() - began < 2.0


def test_a_job_whose_publish_meets_a_failed_write_publishes_all_the_same(tmp_path, events):
    config = {"configurable": {"thread_id": "publish"}}
    storage = _Flaky(tmp_path)
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    storage.fail["write_prepared"] = 1  # the job's publish: the first attempt meets the database restarting
    first = _worker(storage, saver)
    with use_runner(InstantRunner()):
        n = 0
        while not any(e["event"] == "compaction_started" and e.get("mode") == "background" for e in events()):
            first.invoke({"messages": [request(n)]}, config)
            n += 1
            assert n < 40, "no background job started"
    lease = first.get_state(config).values["compaction"]["lease"]
    published = [storage.read_prepared("publish", p.stem) for p in (tmp_path / "prepared" / "publish").glob("*")]
    assert storage.fail["write_prepared"] == 0  # the write did fail once
    assert [r["id"] for r in published if r] == [lease["id"]]


def _prepared_by_a_worker(tmp_path, events, thread_id):
    """Worker A runs the thread until its background job starts; return (config, storage, worker B, requests sent).

    B shares A's storage and checkpointer, as a second process of one deployment would.
    """
    config = {"configurable": {"thread_id": thread_id}}
    storage = _Flaky(tmp_path)
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    n = until_a_job_starts(_worker(storage, saver), config, events)
    return config, storage, _worker(storage, saver), n


def test_a_swap_whose_transcript_fails_while_the_request_fits_is_applied_at_the_next_call(tmp_path, events):
    """Worker A prepares the summary; B finds it at the trigger but the transcript write before its swap fails (both
    tries). The request fits: B's agent goes on, and B's next call applies A's summary: no summary made in B's run."""
    with use_runner(InstantRunner()):
        config, storage, second, n = _prepared_by_a_worker(tmp_path, events, "postponed")
        prepared_id, seen = second.get_state(config).values["compaction"]["lease"]["id"], len(events())
        storage.fail["append_transcript"] = OFFLOAD_ATTEMPTS
        while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
            second.invoke({"messages": [request(n)]}, config)
            n += 1
            assert n < 60, "the second worker never compacted"
    later = events()[seen:]
    assert any(e["event"] == "compaction_postponed" for e in later)
    (applied,) = [e for e in later if e["event"] == "compaction_applied"]
    assert (applied["mode"], applied.get("prepared_id")) == ("background", prepared_id)
    assert not any(e["event"] == "compaction_started" and e.get("mode") == "blocking" for e in later)


def test_a_lease_whose_prefix_a_blocking_compaction_replaced_is_not_waited_for_at_the_next_trigger(tmp_path, events):
    """Worker A prepares the summary; B finds it at the trigger but its swap is postponed (the transcript fails) and,
    a long request pasted in, the request no longer fits: B compacts blocking. A's lease was for the prefix B
    replaced: at the next trigger nobody publishes anything for it."""
    with use_runner(InstantRunner()):
        config, storage, second, n = _prepared_by_a_worker(tmp_path, events, "replaced")
        seen = len(events())
        # the swap's transcript write and its second try: postponed, then a blocking compaction
        storage.fail["append_transcript"] = OFFLOAD_ATTEMPTS
        pasted = HumanMessage("Why does this fail?\n" + "ERROR worker 3: connection reset by peer\n" * 1_300)
        second.invoke({"messages": [pasted]}, config)
        assert [e["mode"] for e in events()[seen:] if e["event"] == "compaction_applied"] == ["blocking"]
        assert any(e["event"] == "compaction_postponed" for e in events()[seen:])
        assert second.get_state(config).values["compaction"]["lease"] is None  # it ended with the prefix
        seen, slowest = len(events()), 0.0
        while sum(e["event"] == "compaction_applied" for e in events()[seen:]) < 2:
            began = time.monotonic()
            second.invoke({"messages": [request(n)]}, config)
            slowest, n = max(slowest, time.monotonic() - began), n + 1
            assert n < 120, "the second worker never compacted again"
    later = events()[seen:]
    assert slowest < TIMEOUT / 3, f"a request took {slowest:.1f} s: it waited for the lease of a replaced prefix"
    assert not any("not ready" in str(e.get("why", "")) for e in later)


def test_a_swap_whose_transcript_write_fails_once_writes_it_again_and_applies_the_summary(tmp_path, events):
    config = {"configurable": {"thread_id": "written-again"}}
    storage = _Flaky(tmp_path)
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    graph = _worker(storage, saver)
    with use_runner(InstantRunner()):
        n = 0
        while not any(e["event"] == "compaction_applied" for e in events()):
            if any(e["event"] == "compaction_ready" for e in events()) and "append_transcript" not in storage.fail:
                storage.fail["append_transcript"] = 1  # the next write, the swap's: the database restarting once
            graph.invoke({"messages": [request(n)]}, config)
            n += 1
            assert n < 40, "no summary applied"
    assert storage.fail["append_transcript"] == 0  # the write did fail once
    assert not any(e["event"] == "compaction_postponed" for e in events())
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"
