"""A conversation's lease: who prepares its next summary, released when the job fails, judged dead after a restart.

Workers share the checkpointer and the storage (here one process with an
engine per run, as a graph factory builds them, or two processes on the same
files). A job that fails, is discarded or is abandoned releases its lease; a
worker restarted in place (same host name, same process id) is not taken for
the worker it replaced.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from concurrent.futures import Future

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from support.fronts import WINDOW, TimedModel, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionConfig, FileStorage, StoreStorage
from langgraph_compaction.core.background import wait_limit
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.engine import background
from langgraph_compaction.engine.jobs import BackgroundJobs, InstantRunner, owner_gone, use_runner
from langgraph_compaction.testing import ScriptedModel

#: A summary call may take this long; a worker that waited it out at the trigger would show it.
TIMEOUT = 30
CONFIG = CompactionConfig(context_window=WINDOW, summary={"timeout": TIMEOUT}, background={"enabled": True})


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


class _Killed(InstantRunner):
    """Starts each job and never finishes it: the process preparing it was killed."""

    def start_sync(self, job, work, awork) -> None:
        job.future = Future()

    start_async = start_sync


def test_a_worker_restarted_in_place_does_not_trust_the_lease_of_the_process_it_replaced(tmp_path, events):
    """Same host name, same process id (a container's PID 1 after a restart), another process: its lease is dead."""
    config = {"configurable": {"thread_id": "restarted"}}
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    with use_runner(_Killed()):
        first = _worker(tmp_path, saver)
        n = _until_started(first, config, events)
    lease = first.get_state(config).values["compaction"]["lease"]
    # the lease as the process before the restart wrote it: this host, this process id, that process's own token
    dead = f"{socket.gethostname()}:{os.getpid()}:0123456789ab:engine00"
    first.update_state(config, {"compaction": {"lease": {**lease, "owner": dead}}}, as_node="agent")
    with use_runner(InstantRunner()):
        second, seen, slowest = _worker(tmp_path, saver), len(events()), 0.0
        while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
            began = time.monotonic()
            second.invoke({"messages": [request(n)]}, config)
            slowest, n = max(slowest, time.monotonic() - began), n + 1
            assert n < 60, "the restarted worker never compacted"
    later = events()[seen:]
    assert slowest < TIMEOUT / 3, f"a request took {slowest:.1f} s: the restarted worker trusted a dead lease"
    assert not any("not ready in time" in str(e.get("why", "")) for e in later)
    assert any(e["event"] == "compaction_applied" and e.get("mode") == "background" for e in later)


def test_the_lease_of_a_live_process_is_trusted_and_one_of_this_process_is_its_own():
    assert owner_gone(f"{socket.gethostname()}:{os.getpid()}:0123456789ab:engine00")
    assert not owner_gone(BackgroundJobs().owner)  # this very process
    assert not owner_gone(f"{socket.gethostname()}:{os.getppid()}:0123456789ab:engine00")  # a running one
    assert not owner_gone("another-host:1:0123456789ab:engine00")  # its lease lapses when it expires


@pytest.fixture(params=["memory", "postgres"])
def store(request):
    if request.param == "memory":
        yield InMemoryStore()
        return
    from langgraph.store.postgres import PostgresStore

    dsn = request.getfixturevalue("postgres_dsn")
    with PostgresStore.from_conn_string(dsn) as pg:
        pg.setup()
        yield pg


def test_published_summaries_expire_and_a_later_publish_deletes_the_expired(store):
    """A thread that never reaches its trigger leaves a published record nobody applies: it does not stay for ever."""
    storage, tag = StoreStorage(store), uuid.uuid4().hex[:8]
    storage.write_prepared(f"idle-{tag}", "conversation", {"id": "old", "expires_at": time.time() - 1})
    storage.write_prepared(f"busy-{tag}", "conversation", {"id": "new", "expires_at": time.time() + 300})
    assert storage.read_prepared(f"idle-{tag}", "conversation") is None
    assert storage.read_prepared(f"busy-{tag}", "conversation")["id"] == "new"


def test_what_a_job_publishes_carries_its_expiry(tmp_path, events):
    config = {"configurable": {"thread_id": "expiry"}}
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    with use_runner(InstantRunner()):
        _until_started(_worker(tmp_path, saver), config, events)
    (published,) = (tmp_path / "prepared" / "expiry").glob("*.json")
    record = FileStorage(tmp_path).read_prepared("expiry", published.stem)
    assert record is not None and record["status"] == "ready"
    assert time.time() < record["expires_at"] <= time.time() + 2 * (TIMEOUT + 30)


class _Held(InstantRunner):
    """Runs each job at once but reports it in progress until the gate waits for it or ``release()``."""

    held = True

    def is_done(self, job) -> bool:
        return not self.held and super().is_done(job)

    def wait_sync(self, job, timeout) -> bool:
        self.held = False
        return super().wait_sync(job, timeout)


def _remembers_alice(prompt: str) -> str:
    """The memory model: what it answers depends on the memory it was shown (Alice's holds a code word)."""
    seen = "heron" if "code word heron" in prompt else "none"
    return f"<memory>\n## Requests and preferences\n- The code word shown to the memory model: {seen}\n</memory>"


def test_a_job_started_in_one_users_run_writes_its_memory_to_that_users_ledger_only(tmp_path, events):
    """On a thread two users share, the memory a job read for Alice never reaches Bob's ledger."""
    storage = FileStorage(tmp_path)
    storage.replace_memory_file("alice", "MEMORY.md", "# Alice\n- Alice's code word heron\n")
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    summarizer = ScriptedModel(memory=_remembers_alice)
    alice = {"configurable": {"thread_id": "shared", "user_id": "alice"}}
    bob = {"configurable": {"thread_id": "shared", "user_id": "bob"}}
    runner = _Held()
    with use_runner(runner):
        graph = _worker(tmp_path, saver, summarizer)
        n = _until_started(graph, alice, events)  # the job read Alice's memory, in her run
        seen = len(events())
        runner.held = False
        while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
            graph.invoke({"messages": [request(n)]}, bob)  # and Bob's run applies it
            n += 1
            assert n < 60, "the prepared summary was never applied"
    applied = next(e for e in events()[seen:] if e["event"] == "compaction_applied")
    assert applied["mode"] == "background"
    ledgers = {
        user: "".join(storage.read_memory_file(user, f) or "" for f in storage.list_memory_files(user))
        for user in ("alice", "bob")
    }
    assert "heron" not in ledgers["bob"]
    assert "code word shown to the memory model: heron" in ledgers["alice"]


def test_a_lease_lost_with_its_worker_at_the_trigger_is_prepared_again_next_to_the_agent(tmp_path, events):
    """The worker preparing the summary was killed, and the thread is at its trigger when the next worker serves it:
    the summary is prepared again as a job while the request fits, not made in front of the model call."""
    config = {"configurable": {"thread_id": "lost-at-trigger"}}
    saver = SqliteSaver(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
    with use_runner(_Killed()):
        first = _worker(tmp_path, saver)
        n = _until_started(first, config, events)
    state = first.get_state(config).values
    budget, counter = CONFIG.resolve(), TokenCounter()
    missing = budget.trigger_tokens - counter.total(state["messages"])
    filler = HumanMessage("Notes: " + "the build log says nothing new " * max(1, missing // 6), id="filler")
    assert budget.trigger_tokens < counter.total([*state["messages"], filler]) < wait_limit(budget)
    dead = f"{socket.gethostname()}:{os.getpid()}:0123456789ab:engine00"  # the killed worker, as a restart sees it
    lease = {**state["compaction"]["lease"], "owner": dead}
    first.update_state(config, {"messages": [filler], "compaction": {"lease": lease}}, as_node="agent")
    summarizer = TimedModel(latency=0.0, spans=[])
    with use_runner(InstantRunner()):
        second, seen = _worker(tmp_path, saver, summarizer), len(events())
        while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
            second.invoke({"messages": [request(n)]}, config)
            n += 1
            assert n < 60, "the second worker never compacted"
    assert [s for s in summarizer.spans if not s[3]] == []  # no summary or memory call in front of the model call
    (applied,) = [e for e in events()[seen:] if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"


def test_which_lease_is_lost_with_its_worker():
    jobs, now = BackgroundJobs(), time.time()
    alive = f"{socket.gethostname()}:{os.getppid()}:0123456789ab:engine00"  # a process that runs
    dead = f"{socket.gethostname()}:{os.getpid()}:0123456789ab:engine00"  # the one this process replaced
    lease = {"id": "x", "owner": alive, "until": now + 60, "state": "preparing", "cutoff_id": None}
    assert not background._lease_lost(None, jobs)
    assert not background._lease_lost(lease, jobs)  # its worker runs and its time is not out
    assert background._lease_lost({**lease, "until": now - 1}, jobs)  # its time ran out
    assert background._lease_lost({**lease, "owner": dead}, jobs)  # its worker is gone
    assert not background._lease_lost({**lease, "owner": dead, "state": "applied"}, jobs)  # nothing left to do
    assert not background._lease_lost({**lease, "owner": jobs.owner, "until": now - 1}, jobs)  # this engine's own
