"""Many threads compacting at once in one process; two processes appending to one transcript or flushing one ledger."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from support import run_in_two_processes
from support.checked import CheckedThread, build_checked_graph, events, request

from langgraph_compaction import FileStorage, StoreStorage
from langgraph_compaction.invariants import duplicate_problems, ledgers_of
from langgraph_compaction.memory.ledger import parse_bullets
from langgraph_compaction.testing import ScriptedModel

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
            problems += [
                f"{name}: {p}" for p in await CheckedThread(graph, agent, FileStorage(tmp_path), thread=name).acheck()
            ]
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
        assert events(
            graph.get_state({"configurable": {"thread_id": name}}).values, stage="summarize", layer="summarize"
        )
    ledgers = {n: storage.read_memory_file("default", n) for n in storage.list_memory_files("default")}
    assert ledgers and duplicate_problems([], ledgers) == []  # 50 threads flushed into one ledger, no bullet twice
    for text in ledgers.values():
        assert all(line.startswith(("## ", "- ", "<!--")) or not line.strip() for line in text.splitlines())


def _append_many(root: str, writer: int, batches: int, per_batch: int) -> None:
    storage = FileStorage(root)
    for b in range(batches):
        # large lines (over a pipe buffer) so a torn write would show
        records = messages_to_dict(
            [
                HumanMessage(content=f"writer {writer} batch {b} item {i} " + "x" * 9000, id=f"w{writer}-b{b}-i{i}")
                for i in range(per_batch)
            ]
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
        graph, _ = build_graph(
            ScriptedModel(memory=memory), config=SMALL_WINDOW, storage=storage, checkpointer=InMemorySaver()
        )
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
    assert sorted(bullets) == [
        "Staging is staging-2",
        "The user deploys on Fridays",
        "worker-0 works on its own branch",
        "worker-1 works on its own branch",
    ]
    assert duplicate_problems([], ledgers) == []


# --- two workers serving the same threads on one PostgresSaver and one PostgresStore ---------------------

WORKER_REQUESTS = 12
WORKER_WINDOW = 60_000


class _StatelessAgentModel(ScriptedModel):
    """The agent's model: its next step read from the request alone (another worker served the previous one).

    A user request gets ``bash`` and ``read_file`` in parallel, their results
    a ``write_file``, its result the answer. Each request it is sent is
    checked as OpenAI would check it, and against the window.
    """

    problems: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        from langgraph_compaction.core.conversation import is_user_turn
        from langgraph_compaction.core.tokens import estimate_tokens
        from langgraph_compaction.testing import openai_violations

        self.problems.extend(openai_violations(messages))
        if estimate_tokens(messages) > WORKER_WINDOW:
            self.problems.append(
                f"a request of {estimate_tokens(messages):,} tokens, over the {WORKER_WINDOW:,}-token window"
            )
        last = messages[-1]
        if is_user_turn(last):
            tag = last.id
            calls = [
                {"name": "bash", "args": {"cmd": f"pytest -q {tag}"}, "id": f"{tag}-bash"},
                {"name": "read_file", "args": {"path": f"src/{tag}.py"}, "id": f"{tag}-read"},
            ]
            reply = AIMessage(f"Looking at {tag}.", tool_calls=calls)
        elif isinstance(last, ToolMessage) and not last.tool_call_id.endswith("-write"):
            tag = last.tool_call_id.rsplit("-", 1)[0]
            body = "".join(f"def handler_{i}(event):\n    return event['value'] * {i}\n" for i in range(120))
            reply = AIMessage(
                "Writing the fix.",
                tool_calls=[
                    {"name": "write_file", "args": {"path": f"src/{tag}.py", "content": body}, "id": f"{tag}-write"}
                ],
            )
        else:
            reply = AIMessage("Done: updated and the tests pass.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _worker_agent(front: str, checkpointer, store, model):
    from langchain.agents import create_agent
    from langgraph.graph import START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from support import TOOLS
    from support.checked import TIGHT

    from langgraph_compaction import CompactionMiddleware, CompactionState, add_compaction

    if front == "middleware":
        middleware = CompactionMiddleware(model=ScriptedModel(), config=TIGHT)
        return create_agent(model, TOOLS, middleware=[middleware], checkpointer=checkpointer, store=store)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), config=TIGHT)
    return builder.compile(checkpointer=checkpointer, store=store)


def _worker_request(thread: str, n: int) -> dict:
    return {
        "messages": [HumanMessage(f"Task {n} ({thread}): please fix module{n} and run its tests", id=f"{thread}-r{n}")]
    }


def _serve(root: str, dsn: str, front: str, scenario: str, worker: int, barrier) -> None:
    """Serve one share of the requests: every other request of one thread, or all of this worker's own thread."""
    from pathlib import Path

    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    model = _StatelessAgentModel()
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        agent = _worker_agent(front, saver, store, model)
        for n in range(WORKER_REQUESTS):
            barrier.wait(timeout=120)  # the load balancer: request n goes out once request n - 1 is answered
            thread = f"{front}-{scenario}" + ("" if scenario == "alternate" else f"-{worker}")
            if scenario == "at-once" or n % 2 == worker:
                agent.invoke(
                    _worker_request(thread, n), {"configurable": {"thread_id": thread, "user_id": "shared-user"}}
                )
            barrier.wait(timeout=120)
    Path(root, f"problems-{worker}.json").write_text(json.dumps(model.problems))


@pytest.mark.parametrize("scenario", ["alternate", "at-once"])
@pytest.mark.parametrize("front", ["middleware", "graph"])
def test_two_workers_on_one_postgres_lose_repeat_and_misorder_nothing(tmp_path, postgres_dsn, front, scenario):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    from langgraph_compaction.invariants import ThreadLedger

    with PostgresSaver.from_conn_string(postgres_dsn) as saver, PostgresStore.from_conn_string(postgres_dsn) as store:
        saver.setup()
        store.setup()
    run_in_two_processes(_serve, lambda w: (str(tmp_path), postgres_dsn, front, scenario, w), barrier=True, timeout=600)
    for w in range(2):  # what each worker's model was sent: valid for OpenAI, inside the window
        assert json.loads((tmp_path / f"problems-{w}.json").read_text()) == []
    threads = [f"{front}-{scenario}"] if scenario == "alternate" else [f"{front}-{scenario}-{w}" for w in range(2)]
    with PostgresSaver.from_conn_string(postgres_dsn) as saver, PostgresStore.from_conn_string(postgres_dsn) as store:
        agent, storage = _worker_agent(front, saver, store, _StatelessAgentModel()), StoreStorage(store)
        ledgers = ledgers_of(storage, "shared-user")
        for thread in threads:
            config = {"configurable": {"thread_id": thread}}
            ledger = ThreadLedger()
            for snapshot in reversed(list(agent.get_state_history(config))):  # oldest first: each message as added
                ledger.added(snapshot.values.get("messages") or [])
            values = agent.get_state(config).values
            assert values["compaction"]["counts"].get("summarize", 0) >= 2
            requests = {m.id for m in ledger.history if isinstance(m, HumanMessage) and m.id.startswith(thread)}
            assert requests == {f"{thread}-r{n}" for n in range(WORKER_REQUESTS)}
            assert ledger.check_store(values["messages"], storage.read_transcript(thread), ledgers) == []
        assert ledgers and duplicate_problems([], ledgers) == []
