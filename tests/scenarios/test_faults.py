"""The fault matrix: each cell breaks one part (model, disk, store, process) and checks the promises.

In every cell the agent's model node still runs for every step of every
request, the views it gets are valid (invariant 1), every message ever added
is in the state or the transcript as added (2), nothing is written twice (4),
and a compaction event (or, for a crash, the resumed run's events) records
what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid

import pytest
from langchain_core.messages import HumanMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import RetryPolicy
from support.checked import TIGHT, CheckedAgent, CheckedThread, build_checked_graph, events, request

import langgraph_compaction.storage.files as storage_module
from langgraph_compaction import FileStorage, StoreStorage
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.core.summary import EXTRACTIVE_MARK
from langgraph_compaction.engine.nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE, CompactionEngine
from langgraph_compaction.testing import ScriptedModel

TURNS = 4
STEPS_PER_TURN = 3  # the scripted agent: tool calls, a write, an answer


def _run(graph, thread: CheckedThread, turns: range, mode: str) -> None:
    if mode == "sync":
        for t in turns:
            graph.invoke(request(t, thread.thread), thread.config)
    else:

        async def main():
            for t in turns:
                await graph.ainvoke(request(t, thread.thread), thread.config)

        asyncio.run(main())


def _assert_promises(thread: CheckedThread, turns: int = TURNS, **check) -> dict:
    assert thread.agent.calls(thread.thread) == turns * STEPS_PER_TURN  # the model node ran every time
    assert thread.check(**check) == []
    return thread.values()


# --- summarizer and flush model faults ---------------------------------------------------------

SLOW = "times-out"
MODEL_FAULTS = {
    "raises": RuntimeError("provider down"),
    SLOW: None,
    "empty": "",
    "error-text": "Error: rate limit exceeded, please retry later",
    "refusal": "I'm sorry, but I can't help with that request.",
    "no-reply": "NO_REPLY",
}


def _faulty(fault: str, role: str) -> ScriptedModel:
    if fault == SLOW:
        return ScriptedModel(latency=2.0)
    answer = MODEL_FAULTS[fault]
    return ScriptedModel(**{role: answer})


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fault", list(MODEL_FAULTS))
def test_summarizer_fault_keeps_the_history_and_records_the_failure(tmp_path, fault, mode):
    config = TIGHT.model_copy(update={"summary": {"timeout": 0.05}})
    graph, agent = build_checked_graph(
        _faulty(fault, "summary"),
        config=config,
        storage=tmp_path,
        checkpointer=InMemorySaver(),
        flush_model=ScriptedModel(),
    )
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    _run(graph, thread, range(TURNS), mode)
    values = _assert_promises(thread)
    # a failed answer is never committed: the history is kept, or (once the breaker opens) an extract replaces it
    summaries = [m for m in values["messages"] if m.name == SUMMARY_MESSAGE_NAME]
    assert all(EXTRACTIVE_MARK in m.content for m in summaries)
    failures = events(values, stage="summarize", error=True)
    assert failures and "history kept" in failures[0]["error"]
    assert values["compaction"]["counts"]["failed"] >= 1
    assert thread.transcript()  # offload ran before the summarizer failed


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fault", [f for f in MODEL_FAULTS if f != "no-reply"])
def test_flush_fault_records_the_failure_and_summarizing_goes_on(tmp_path, fault, mode):
    config = TIGHT.model_copy(update={"summary": {"timeout": 0.05}})
    graph, agent = build_checked_graph(
        ScriptedModel(),
        config=config,
        storage=tmp_path,
        checkpointer=InMemorySaver(),
        flush_model=_faulty(fault, "memory"),
    )
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    _run(graph, thread, range(TURNS), mode)
    values = _assert_promises(thread)
    assert values["compaction"]["counts"]["summarize"] >= 1
    assert events(values, stage="flush", error=True)
    assert values["compaction"]["flushed_ids"] == []  # not marked done: the next flush tries again
    assert not (tmp_path / "memory").exists() or not any((tmp_path / "memory").iterdir())


def test_flush_no_reply_is_an_answer_not_a_failure(tmp_path):
    graph, agent = build_checked_graph(
        ScriptedModel(), storage=tmp_path, checkpointer=InMemorySaver(), flush_model=ScriptedModel(memory="NO_REPLY")
    )
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    _run(graph, thread, range(TURNS), "sync")
    values = _assert_promises(thread)
    assert not events(values, stage="flush", error=True)
    assert events(values, stage="flush", memories=0)


class _Blocking(ScriptedModel):
    """A summarizer that signals when its call started and then never answers."""

    started: object = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.started.set()
        await asyncio.sleep(3600)


def test_cancelled_summarizer_propagates_and_writes_nothing_half(tmp_path):
    async def main():
        summarizer = _Blocking(started=asyncio.Event())
        saver = InMemorySaver()
        graph, agent = build_checked_graph(
            summarizer,
            config=TIGHT.model_copy(update={"summary": {"timeout": None}}),
            storage=tmp_path,
            checkpointer=saver,
            flush_model=ScriptedModel(),
        )
        thread = CheckedThread(graph, agent, FileStorage(tmp_path))
        turn = 0
        while not summarizer.started.is_set():
            task = asyncio.create_task(graph.ainvoke(request(turn, "t"), thread.config))
            waiter = asyncio.create_task(summarizer.started.wait())
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
            turn += 1
        waiter.cancel()
        before = (await graph.aget_state(thread.config)).values
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after = (await graph.aget_state(thread.config)).values
        assert [m.id for m in after["messages"]] == [m.id for m in before["messages"]]  # nothing removed
        lines = (tmp_path / "sessions" / "t.jsonl").read_text().splitlines()
        assert all(json.loads(line) for line in lines)  # whole lines only
        # the next run (a working summarizer) compacts normally
        graph2, _ = build_checked_graph(
            ScriptedModel(), config=TIGHT, storage=tmp_path, checkpointer=saver, agent=agent
        )
        thread2 = CheckedThread(graph2, agent, FileStorage(tmp_path))
        await graph2.ainvoke(request(turn, "t"), thread.config)
        values = (await graph2.aget_state(thread.config)).values
        assert await thread2.acheck() == []
        assert events(values, stage="summarize", layer="summarize")
        return agent

    agent = asyncio.run(main())
    assert agent.calls("t") >= 3


def test_cancelled_summarizer_is_logged_as_a_compaction_event(tmp_path, caplog):
    async def main():
        summarizer = _Blocking(started=asyncio.Event())
        graph, _ = build_checked_graph(
            summarizer,
            config=TIGHT.model_copy(update={"summary": {"timeout": None}}),
            storage=tmp_path,
            checkpointer=InMemorySaver(),
            flush_model=ScriptedModel(),
        )
        turn = 0
        while not summarizer.started.is_set():
            task = asyncio.create_task(graph.ainvoke(request(turn), {"configurable": {"thread_id": "t"}}))
            waiter = asyncio.create_task(summarizer.started.wait())
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
            turn += 1
        waiter.cancel()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level("WARNING", logger="langgraph_compaction"):
        asyncio.run(main())
    assert any("compaction summarize" in r.getMessage() and "cancelled" in r.getMessage() for r in caplog.records)


# --- storage faults ----------------------------------------------------------------------------


def test_unwritable_storage_keeps_every_message_in_the_state(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the storage folder should be")  # root ignores chmod; a file stops it
    root = blocker / "store"
    graph, agent = build_checked_graph(ScriptedModel(), storage=root, checkpointer=InMemorySaver())
    thread = CheckedThread(graph, agent, FileStorage(root))
    _run(graph, thread, range(TURNS), "sync")
    values = thread.values()
    assert agent.calls("t") == TURNS * STEPS_PER_TURN
    assert thread.check() == []
    assert not any(m.name == SUMMARY_MESSAGE_NAME for m in values["messages"])
    assert events(values, stage="offload", error=True)
    assert events(values, stage="summarize", error="offload did not complete; nothing was removed")


class _DiskFull:
    """``os`` for the storage module with a disk that fills up: a short write, then ENOSPC."""

    def __init__(self) -> None:
        self.full = True

    def __getattr__(self, name):
        return getattr(os, name)

    def write(self, fd, data):
        if not self.full:
            return os.write(fd, data)
        if len(data) > 1:
            return os.write(fd, bytes(data[: len(data) // 2]))  # half of it fits
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_disk_full_leaves_no_partial_line_and_recovers_exactly_once(tmp_path, monkeypatch, mode):
    disk = _DiskFull()
    monkeypatch.setattr(storage_module, "os", disk)
    graph, agent = build_checked_graph(ScriptedModel(), storage=tmp_path, checkpointer=InMemorySaver())
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    _run(graph, thread, range(TURNS), mode)
    values = thread.values()
    assert events(values, stage="offload", error=True)
    assert any("No space left" in e["error"] for e in events(values, error=True))
    path = tmp_path / "sessions" / "t.jsonl"
    text = path.read_text() if path.exists() else ""
    assert text == "" or text.endswith("\n")
    assert all(json.loads(line) for line in text.splitlines())  # the failed append left no half line
    assert not any(m.name == SUMMARY_MESSAGE_NAME for m in values["messages"])
    disk.full = False  # space freed: the next compaction offloads everything, once
    _run(graph, thread, range(TURNS, TURNS + 3), mode)
    _assert_promises(thread, TURNS + 3)
    assert events(thread.values(), stage="summarize", layer="summarize")


def test_transcript_deleted_between_compactions_is_rewritten_from_the_state(tmp_path):
    graph, agent = build_checked_graph(ScriptedModel(), storage=tmp_path, checkpointer=InMemorySaver())
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    _run(graph, thread, range(TURNS), "sync")
    assert thread.check() == []
    path = tmp_path / "sessions" / "t.jsonl"
    deleted = {r["data"]["id"]: r for r in map(json.loads, path.read_text().splitlines())}
    # what the state still holds as it was added survives the deletion; what only the file held goes with it
    intact = {m.id for m in thread.values()["messages"] if deleted.get(m.id) == messages_to_dict([m])[0]}
    path.unlink()  # an operator deletes the transcript
    _run(graph, thread, range(TURNS, TURNS + 4), "sync")
    values = thread.values()
    assert events(values, stage="summarize", layer="summarize")
    assert intact - {m.id for m in values["messages"]} <= {
        json.loads(line)["data"]["id"] for line in path.read_text().splitlines()
    }
    assert thread.check(skip_lost=frozenset(set(deleted) - intact)) == []
    assert agent.calls("t") == (TURNS + 4) * STEPS_PER_TURN


_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b'{"type": "human", "data": {"content": "from another process", ')
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    os.write(fd, b'"id": "other-process-1"}}\\n')
    fcntl.flock(fd, fcntl.LOCK_UN)
    """
)


def test_append_waits_for_a_lock_held_by_another_process(tmp_path):
    storage = FileStorage(tmp_path)
    path = tmp_path / "sessions" / "t.jsonl"
    path.parent.mkdir(mode=0o700, parents=True)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        records = messages_to_dict([HumanMessage(content=f"line {i}", id=f"m{i}") for i in range(50)])
        writer = threading.Thread(target=storage.append_transcript, args=("t", records))
        writer.start()
        writer.join(timeout=30)  # bounded: the holder lets go after a second
        assert not writer.is_alive()
    finally:
        holder.wait(timeout=30)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["data"]["id"] == "other-process-1"  # the holder's line is whole, not cut into
    assert [json.loads(line)["data"]["id"] for line in lines[1:]] == [f"m{i}" for i in range(50)]


def test_compaction_waits_for_a_locked_transcript_and_stays_whole(tmp_path):
    graph, agent = build_checked_graph(ScriptedModel(), storage=tmp_path, checkpointer=InMemorySaver())
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    _run(graph, thread, range(2), "sync")
    path = tmp_path / "sessions" / "t.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        runner = threading.Thread(target=_run, args=(graph, thread, range(2, TURNS), "sync"))
        runner.start()
        runner.join(timeout=60)
        assert not runner.is_alive()
    finally:
        holder.wait(timeout=30)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert "other-process-1" in [r["data"]["id"] for r in records]
    _assert_promises(thread)


class _FailingStore(InMemoryStore):
    """A store whose writes fail (a database that went away)."""

    def batch(self, ops):
        if any(type(op).__name__ == "PutOp" for op in ops):
            raise ConnectionError("store unavailable")
        return super().batch(ops)

    async def abatch(self, ops):
        return self.batch(ops)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_store_raising_keeps_every_message_in_the_state(mode):
    store = _FailingStore()
    graph, agent = build_checked_graph(ScriptedModel(), storage=store, checkpointer=InMemorySaver())
    thread = CheckedThread(graph, agent, StoreStorage(store))
    _run(graph, thread, range(TURNS), mode)
    values = _assert_promises(thread)
    assert not any(m.name == SUMMARY_MESSAGE_NAME for m in values["messages"])
    assert any("store unavailable" in e["error"] for e in events(values, error=True))
    assert events(values, stage="summarize", error="offload did not complete; nothing was removed")


# --- process faults: a crash between nodes, then resume from a durable checkpointer --------------


class Crash(Exception):
    """A process dying between two compaction nodes (raised outside the nodes' own guard)."""


def _inject(monkeypatch, node: str, when: str, crash: dict) -> None:
    """Make ``node`` raise Crash once during a compaction: before it runs, or after its side effects (its update unsaved)."""
    original = getattr(CompactionEngine, node)

    def wrapper(self, state, config):
        # the side branches and summarize only run during a compaction; the gate is caught on its way into one
        due = node != "gate" or self.plan(state["messages"]).summarize
        if when == "before" and due and not crash["done"]:
            crash["done"] = True
            raise Crash(f"crash before {node}")
        result = original(self, state, config)
        started = node != "gate" or ((result or {}).get("compaction") or {}).get("pending")
        if when == "after" and started and not crash["done"]:
            crash["done"] = True
            raise Crash(f"crash after {node}")
        return result

    monkeypatch.setattr(CompactionEngine, node, wrapper)


NODES = ["gate", "flush", "offload", "summarize"]


def _crash_and_resume(tmp_path, monkeypatch, node, when, saver_factory, thread_id="t"):
    crash = {"done": False}
    _inject(monkeypatch, node, when, crash)
    agent = CheckedAgent()
    turn = 0
    with saver_factory() as saver:
        graph, _ = build_checked_graph(ScriptedModel(), storage=tmp_path, checkpointer=saver, agent=agent)
        thread = CheckedThread(graph, agent, FileStorage(tmp_path), thread=thread_id)
        while not crash["done"] and turn < 8:
            try:
                graph.invoke(request(turn, thread_id), thread.config)
            except Crash:
                pass
            turn += 1
    assert crash["done"], f"no compaction reached {node}"
    with saver_factory() as saver:  # a new process: a fresh graph on the same checkpoints and files
        graph, _ = build_checked_graph(ScriptedModel(), storage=tmp_path, checkpointer=saver, agent=agent)
        thread = CheckedThread(graph, agent, FileStorage(tmp_path), thread=thread_id)
        graph.invoke(None, thread.config)  # resume the interrupted run
        for t in range(turn, turn + 3):
            graph.invoke(request(t, thread_id), thread.config)
        assert agent.calls(thread_id) == (turn + 3) * STEPS_PER_TURN
        assert thread.check() == []
        values = thread.values()
        assert events(values, stage="summarize", layer="summarize")
        assert values["compaction"]["pending"] is None


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("node", NODES)
def test_crash_between_nodes_resumes_from_sqlite(tmp_path, monkeypatch, node, when):
    db = str(tmp_path / "checkpoints.sqlite")
    _crash_and_resume(tmp_path, monkeypatch, node, when, lambda: SqliteSaver.from_conn_string(db))


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("node", NODES)
def test_crash_between_nodes_resumes_from_postgres(tmp_path, monkeypatch, node, when, postgres_dsn):
    @contextlib.contextmanager
    def factory():
        with PostgresSaver.from_conn_string(postgres_dsn) as saver:
            saver.setup()
            yield saver

    # one schema per test run: a fresh thread id per test keeps the cells apart
    _crash_and_resume(tmp_path, monkeypatch, node, when, factory, thread_id=f"t-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize("node", [GATE, FLUSH, OFFLOAD, SUMMARIZE])
def test_retry_policy_reruns_a_node_after_its_side_effects_exactly_once(tmp_path, monkeypatch, node):
    crash = {"done": False}
    short = node.removeprefix("compaction_")
    original = getattr(CompactionEngine, short)

    def flaky(self, st, config):
        result = original(self, st, config)
        if result and not crash["done"]:  # the first run that did something: its update is lost, then retried
            crash["done"] = True
            raise ConnectionError(f"connection reset after {short}")  # retried by the default RetryPolicy
        return result

    monkeypatch.setattr(CompactionEngine, short, flaky)
    agent = CheckedAgent(fail_once=ConnectionError("agent's provider blipped"))  # the model node is retried too
    retry = RetryPolicy(initial_interval=0.01, jitter=False)
    graph, _ = build_checked_graph(
        ScriptedModel(), storage=tmp_path, checkpointer=InMemorySaver(), agent=agent, retry_policy=retry
    )
    thread = CheckedThread(graph, agent, FileStorage(tmp_path))
    for t in range(TURNS):
        graph.invoke(request(t), thread.config)
    assert crash["done"]
    assert thread.check() == []
    assert agent.calls("t") == TURNS * STEPS_PER_TURN + 1  # one retried model call
    assert events(thread.values(), stage="summarize", layer="summarize")
