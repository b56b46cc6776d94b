"""Offload: every message of a thread reaches the transcript once, losslessly, in files or a store."""

import dataclasses
import json
import os
import re
import stat
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from support import SMALL_WINDOW, ScriptedAgent, agent_builder, build_graph, first_input
from support.fronts import CONFIG, TOOLS, ToolCallingModel, request

from langgraph_compaction import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    FileStorage,
    add_compaction,
    is_summary,
)
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.core.summary import COMPACTION_MARKER
from langgraph_compaction.engine.nodes import FLUSH, OFFLOAD, SUMMARIZE
from langgraph_compaction.memory.ledger import normalize_bullet, parse_bullets
from langgraph_compaction.storage import StoreStorage
from langgraph_compaction.storage.transcript import load_transcript
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "thread-1"}}


@pytest.fixture(params=["files", "memory-store", "sqlite-store"])
def storage_kind(request, tmp_path):
    """Yield (storage for add_compaction, store for compile, what load_transcript reads)."""
    if request.param == "files":
        yield tmp_path, None, tmp_path
    elif request.param == "memory-store":
        store = InMemoryStore()
        yield None, store, store
    else:
        with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as store:
            store.setup()
            yield store, None, store


def test_three_chained_compactions_write_every_message_once_and_round_trip(storage_kind):
    storage, store, where = storage_kind
    graph, agent = build_graph(
        ScriptedModel(), config=SMALL_WINDOW, storage=storage, store=store, checkpointer=InMemorySaver()
    )
    for turn in range(10):
        graph.invoke(first_input(turn), THREAD)
    state = graph.get_state(THREAD).values
    assert state["compaction"]["counts"]["summarize"] >= 3

    transcript = load_transcript(where, "thread-1")
    ids = [m.id for m in transcript]
    assert len(ids) == len(set(ids))
    in_state = {m.id for m in state["messages"]}
    originals = {}
    for view in agent.views:  # the first sight of each message is the original, before any layer edit
        for m in view:
            originals.setdefault(m.id, m)
    assert set(originals) - in_state <= set(ids)  # whatever left the state is in the transcript
    by_id = {m.id: m for m in transcript}
    for message_id, original in originals.items():
        if message_id in by_id and not original.name == SUMMARY_MESSAGE_NAME:
            assert by_id[message_id] == original  # full tool arguments and outputs, ids, names
    write = next(
        m for m in transcript if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["name"] == "write_file"
    )
    assert len(write.tool_calls[0]["args"]["content"]) > 5_000  # not truncated like agentscope's 500/1000 chars
    summaries = [m for m in transcript if m.name == SUMMARY_MESSAGE_NAME]
    assert len(summaries) >= 2  # earlier summaries were offloaded by the later compactions


def test_transcript_bytes_grow_with_the_conversation_not_with_the_compactions(tmp_path):
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    for turn in range(10):
        graph.invoke(first_input(turn), THREAD)
    path = tmp_path / "sessions" / "thread-1.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    unique = {r["data"]["id"]: r for r in records}
    one_copy = sum(len(json.dumps(r, ensure_ascii=False, separators=(",", ":"))) + 1 for r in unique.values())
    assert path.stat().st_size == one_copy


class StatusReader(ToolCallingModel):
    """Records the context status line each call ends with, and answers from the messages before it."""

    statuses: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if messages and (messages[-1].additional_kwargs.get(COMPACTION_MARKER) or {}).get("kind") == "status":
            self.statuses.append(messages[-1].content)
            messages = messages[:-1]
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.mark.parametrize("backend", ["files", "store"])
def test_what_the_model_sees_names_the_transcript_by_its_place_in_the_storage(tmp_path, monkeypatch, backend):
    monkeypatch.chdir(tmp_path)  # a relative folder, as a service gives it: its absolute form must not leak either
    store = InMemoryStore() if backend == "store" else None
    model = StatusReader(statuses=[])
    middleware = CompactionMiddleware(
        model=ScriptedModel(),
        config=CONFIG.model_copy(update={"context_status": True}),
        storage=".compaction" if store is None else None,
    )
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver(), store=store)
    thread = {"configurable": {"thread_id": "s"}}
    for n in range(10):
        agent.invoke({"messages": [request(n)]}, thread)
    location = "sessions/s.jsonl" if store is None else "store://compaction/transcripts/s"
    summaries = [m for m in model.inputs[-1] if is_summary(m)]
    assert summaries and f"saved to {location} should you need" in summaries[0].content
    assert re.search(rf"; full transcript: {re.escape(location)}\.$", summaries[0].content, re.MULTILINE)
    assert model.statuses[-1].endswith(f"full transcript: {location}.]")
    seen = "\n".join([*model.statuses, *(str(m.content) for sent in model.inputs for m in sent)])
    assert str(tmp_path) not in seen and str(tmp_path.resolve()) not in seen
    if store is None:  # the operator's way to the real file
        where = Path(FileStorage(".compaction").transcript_location("s"))
        assert where.is_absolute() and where == (tmp_path / ".compaction" / location).resolve() and where.is_file()


def test_transcript_files_are_private(tmp_path):
    graph, _ = build_graph(
        ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path / "private", checkpointer=InMemorySaver()
    )
    for turn in range(4):
        graph.invoke(first_input(turn), THREAD)
    sessions = tmp_path / "private" / "sessions"
    assert stat.S_IMODE(sessions.stat().st_mode) == 0o700
    assert stat.S_IMODE((sessions / "thread-1.jsonl").stat().st_mode) == 0o600


HOSTILE_THREADS = [
    "../../x",
    "/etc/passwd",
    "a\x00b",
    "x" * 5_000,
    "..",
    ".",
    "a/b/../../c",
    "con.jsonl",
    "thread.with.dots",
    "ümlaut/线程",
]


def _files_under(root):
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


@pytest.mark.parametrize("thread_id", HOSTILE_THREADS, ids=lambda t: repr(t)[:20])
def test_hostile_thread_ids_never_touch_a_file_outside_storage(tmp_path, thread_id):
    root = tmp_path / "a" / "b" / "storage"
    root.mkdir(parents=True)
    outside_before = _files_under(tmp_path) - _files_under(root)
    storage = FileStorage(root)
    messages = [HumanMessage("hello", id="m1"), AIMessage("hi", id="m2")]
    name = storage.append_transcript(thread_id, messages_to_dict(messages))
    storage.append_transcript(thread_id, messages_to_dict(messages))  # idempotent
    assert load_transcript(root, thread_id) == messages
    location = storage.transcript_location(thread_id)
    assert name == f"sessions/{os.path.basename(location)}" and location == str(root / name)
    assert os.path.realpath(location).startswith(os.path.realpath(root / "sessions") + os.sep)
    assert len(os.path.basename(location)) < 100
    assert _files_under(tmp_path) - _files_under(root) == outside_before
    # the store form: labels without dots, accepted by a real store
    store = InMemoryStore()
    StoreStorage(store).append_transcript(thread_id, messages_to_dict(messages))
    assert load_transcript(store, thread_id) == messages
    (namespace,) = store.list_namespaces()
    assert all("." not in label and label for label in namespace)


def test_hostile_thread_id_through_the_graph_stays_inside_storage(tmp_path):
    root = tmp_path / "storage"
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=root, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "../../escape"}}
    for turn in range(4):
        graph.invoke(first_input(turn), config)
    assert all(path.startswith(str(root) + os.sep) for path in _files_under(tmp_path))
    assert load_transcript(root, "../../escape")


class Crash(RuntimeError):
    """The process dies here (an exception no compaction node catches)."""


def _crashing_graph(summarizer, storage, saver, node, when):
    """Return the scripted agent graph whose ``node`` crashes once, ``before`` or ``after`` doing its work."""
    builder = agent_builder(ScriptedAgent())
    add_compaction(builder, before="agent", model=summarizer, config=SMALL_WINDOW, storage=storage)
    spec = builder.nodes[node]
    inner = spec.runnable
    crashed = []

    def once(state, config):
        if when == "before" and not crashed:
            crashed.append(node)
            raise Crash(f"killed before {node}")
        update = inner.invoke(state, config)
        if when == "after" and not crashed:
            crashed.append(node)
            raise Crash(f"killed after {node} wrote its files")
        return update

    builder.nodes[node] = dataclasses.replace(spec, runnable=RunnableLambda(once, name=node))
    return builder.compile(checkpointer=saver), crashed


@pytest.mark.parametrize(
    "node,when",
    [(SUMMARIZE, "before"), (FLUSH, "after"), (OFFLOAD, "after")],
    ids=["before-summarize", "after-flush-wrote", "after-offload-wrote"],
)
@pytest.mark.parametrize("backend", ["files", "sqlite-store"])
def test_crash_between_offload_and_summarize_resumes_without_duplicates(tmp_path, node, when, backend):
    summarizer = ScriptedModel(
        memory=lambda prompt: "- The user wants every module fixed and tested\n- Tests run with pytest -q"
    )
    db = str(tmp_path / "checkpoints.sqlite")
    with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as store:
        store.setup()
        storage = tmp_path / "files" if backend == "files" else store
        with SqliteSaver.from_conn_string(db) as saver:
            graph, crashed = _crashing_graph(summarizer, storage, saver, node, when)
            turn = 0
            while not crashed:
                try:
                    graph.invoke(first_input(turn), THREAD)
                except Crash:
                    break
                turn += 1
        assert crashed
        with SqliteSaver.from_conn_string(db) as saver:  # a new process: same checkpoint database
            graph, crashed = _crashing_graph(summarizer, storage, saver, node, when="never")
            graph.invoke(None, THREAD)
            for later in range(turn + 1, turn + 4):
                graph.invoke(first_input(later), THREAD)
            state = graph.get_state(THREAD).values
        assert state["compaction"]["counts"]["summarize"] >= 2
        assert sum(m.name == SUMMARY_MESSAGE_NAME for m in state["messages"]) == 1

        transcript = load_transcript(storage, "thread-1")
        ids = [m.id for m in transcript]
        assert len(ids) == len(set(ids))
        reader = FileStorage(storage) if backend == "files" else StoreStorage(store)
        ledgers = [p for p in reader.list_memory_files("default") if p.startswith("memory/")]
        bullets = [normalize_bullet(b) for p in ledgers for b in parse_bullets(reader.read_memory_file("default", p))]
        assert bullets and len(bullets) == len(set(bullets))
        memory_prompts = [c for c in summarizer.calls if "memory extraction assistant" in c]
        assert len(memory_prompts) == state["compaction"]["counts"]["summarize"]  # each prefix extracted once


def test_offload_failure_keeps_the_history_and_says_why(tmp_path):
    blocked = tmp_path / "storage"
    blocked.mkdir()
    (blocked / "sessions").write_text("not a directory")  # every transcript write fails
    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=blocked, checkpointer=InMemorySaver())
    for turn in range(5):
        graph.invoke(first_input(turn), THREAD)
    state = graph.get_state(THREAD).values
    assert agent.problems == []
    assert not any(m.name == SUMMARY_MESSAGE_NAME for m in state["messages"])
    assert sum(isinstance(m, HumanMessage) for m in state["messages"]) == 5
    errors = [e["error"] for e in state["compaction"]["events"] if e.get("error")]
    assert any("offload" in e for e in errors) and any(
        "NotADirectoryError" in e or "FileExistsError" in e for e in errors
    )


def test_redacted_transcripts_keep_ids_and_pairing(tmp_path):
    secret = "sk-proj-" + "a1B2c3D4" * 4
    messages = [
        HumanMessage(f"my key is {secret}", id="h1"),
        AIMessage(
            "", id="a1", tool_calls=[{"name": "bash", "args": {"cmd": f"export OPENAI_API_KEY={secret}"}, "id": "c1"}]
        ),
        ToolMessage("ok", tool_call_id="c1", name="bash", id="t1"),
    ]
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda s: {"messages": [AIMessage("done")]})
    builder.add_edge(START, "agent")
    config = CompactionConfig(guards={"redact_transcripts": True})
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"messages": messages}, THREAD)
    graph.update_state(THREAD, {"compaction": {"manual": {"focus": None}}})
    graph.invoke({"messages": [HumanMessage("next")]}, THREAD)
    raw = (tmp_path / "sessions" / "thread-1.jsonl").read_text()
    assert secret not in raw and "[REDACTED]" in raw
    restored = {m.id: m for m in load_transcript(tmp_path, "thread-1")}
    assert restored["t1"].tool_call_id == restored["a1"].tool_calls[0]["id"] == "c1"
    assert restored["a1"].tool_calls[0]["args"] == {"cmd": "export OPENAI_API_KEY=[REDACTED]"}


class _CountingStore(InMemoryStore):
    """An in-memory store that counts the batches it is sent (one round trip each on a server)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def batch(self, ops):
        ops = list(ops)
        self.batches.append(len(ops))
        return super().batch(ops)


def test_a_transcript_append_reaches_the_store_in_two_round_trips_however_many_records():
    """One read of what is there, one write of the rest: a store failing one operation in fifty fails a write of
    forty records once in fifty, not two times in three."""
    store = _CountingStore()
    storage = StoreStorage(store)
    records = messages_to_dict([HumanMessage(f"request {n}", id=f"m{n}") for n in range(40)])
    storage.append_transcript("t", records)
    assert store.batches == [80, 40]  # each record's key and bare id read; the 40 missing written
    assert [r["data"]["id"] for r in storage.read_transcript("t")] == [f"m{n}" for n in range(40)]
    store.batches.clear()
    storage.append_transcript("t", records)  # all there: nothing written
    assert store.batches == [80]
