"""Many threads compacting at once in one process; two processes appending to one transcript or flushing one ledger."""

from __future__ import annotations

import asyncio
import json

from langchain_core.messages import HumanMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver

import pytest

from langgraph_compaction import FileStorage, StoreStorage
from langgraph_compaction.invariants import duplicate_problems, ledgers_of
from langgraph_compaction.memory.ledger import parse_bullets
from langgraph_compaction.testing import ScriptedModel
from checked import CheckedThread, build_checked_graph, events, request
from support import run_in_two_processes

THREADS = 50
TURNS = 4


def test_fifty_threads_compact_at_once_without_leaking_or_tearing_lines(tmp_path):
    # a little latency so that summarizer calls, flushes and appends of different threads overlap
    graph, agent = build_checked_graph(ScriptedModel(latency=0.005), storage=tmp_path, checkpointer=InMemorySaver())
    names = [f"thread-{i:02d}" for i in range(THREADS)]

    async def converse(name):
        for t in range(TURNS):
            await graph.ainvoke(request(t, name), {"configurable": {"thread_id": name}})

    async def main():
        await asyncio.gather(*(converse(n) for n in names))
        problems = []
        for name in names:
            problems += [f"{name}: {p}" for p in await CheckedThread(graph, agent, FileStorage(tmp_path), thread=name).acheck()]
        return problems

    assert asyncio.run(main()) == []
    storage = FileStorage(tmp_path)
    for name in names:
        text = (tmp_path / "sessions" / f"{name}.jsonl").read_text()
        assert text.endswith("\n")
        records = [json.loads(line) for line in text.splitlines()]  # every line parses: none torn or interleaved
        contents = [r["data"]["content"] for r in records if r["type"] == "human" and r["data"].get("name") is None]
        assert contents and all(f"({name})" in c for c in contents), name  # no other thread's request
        assert agent.calls(name) == TURNS * 3
        assert events(graph.get_state({"configurable": {"thread_id": name}}).values, stage="summarize", layer="summarize")
    ledgers = {n: storage.read_memory_file("default", n) for n in storage.list_memory_files("default")}
    assert ledgers and duplicate_problems([], ledgers) == []  # 50 threads flushed into one ledger, no bullet twice
    for text in ledgers.values():
        assert all(line.startswith(("## ", "- ", "<!--")) or not line.strip() for line in text.splitlines())


def _append_many(root: str, writer: int, batches: int, per_batch: int) -> None:
    storage = FileStorage(root)
    for b in range(batches):
        # large lines (over a pipe buffer) so a torn write would show
        records = messages_to_dict(
            [HumanMessage(content=f"writer {writer} batch {b} item {i} " + "x" * 9000, id=f"w{writer}-b{b}-i{i}") for i in range(per_batch)]
        )
        storage.append_transcript("shared-thread", records)


def test_two_processes_append_to_one_transcript_in_whole_lines(tmp_path):
    run_in_two_processes(_append_many, lambda w: (str(tmp_path), w, 40, 5))
    lines = (tmp_path / "sessions" / "shared-thread.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [json.loads(line) for line in lines[:-1]]
    assert len(records) == 2 * 40 * 5
    assert duplicate_problems(records) == []
    for writer in range(2):  # each writer's records are whole and in its own order
        mine = [r["data"]["id"] for r in records if r["data"]["id"].startswith(f"w{writer}-")]
        assert mine == [f"w{writer}-b{b}-i{i}" for b in range(40) for i in range(5)]
    assert all(r["data"]["content"].endswith("x" * 9000) for r in records)


def _flush_in_worker(root: str, dsn: str, thread: str, barrier) -> None:
    """Run one thread of the shared user to its first compactions; the first memory answer waits for the other worker."""
    from langgraph.store.postgres import PostgresStore

    from support import SMALL_WINDOW, build_graph, first_input

    held = []

    def memory(prompt: str) -> str:
        if held:  # later flushes find nothing new: a fact lost in the race would stay lost
            return "NO_REPLY"
        held.append(barrier.wait(timeout=60))  # both flushes are past their ledger read before either writes
        return f"- The user deploys on Fridays\n- Staging is staging-2\n- {thread} works on its own branch\n"

    def run(storage) -> None:
        graph, _ = build_graph(ScriptedModel(memory=memory), config=SMALL_WINDOW, storage=storage, checkpointer=InMemorySaver())
        for turn in range(4):
            graph.invoke(first_input(turn), {"configurable": {"thread_id": thread}})

    if not dsn:
        return run(root)
    with PostgresStore.from_conn_string(dsn) as store:
        run(store)


@pytest.mark.parametrize("form", ["files", "postgres-store"])
def test_two_threads_of_one_user_flushing_at_once_write_each_bullet_once(tmp_path, postgres_for, form):
    from langgraph.store.postgres import PostgresStore

    dsn = postgres_for(form)
    if dsn:
        with PostgresStore.from_conn_string(dsn) as store:
            store.setup()
    run_in_two_processes(_flush_in_worker, lambda w: (str(tmp_path), dsn, f"worker-{w}"), barrier=True, timeout=180)
    if dsn:
        with PostgresStore.from_conn_string(dsn) as store:
            ledgers = ledgers_of(StoreStorage(store), "default")
    else:
        ledgers = ledgers_of(FileStorage(tmp_path), "default")
    bullets = [b for text in ledgers.values() for b in parse_bullets(text)]
    # the shared facts once, and neither worker's own fact lost to the other's write
    assert sorted(bullets) == ["Staging is staging-2", "The user deploys on Fridays", "worker-0 works on its own branch", "worker-1 works on its own branch"]
    assert duplicate_problems([], ledgers) == []
