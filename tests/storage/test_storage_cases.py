"""What storage must survive: edited messages, artifacts JSON cannot hold, forks, racing flushes, odd thread ids, chdir."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from pydantic import BaseModel
from support import SMALL_WINDOW, agent_builder, build_graph, first_input, run_in_two_processes

from langgraph_compaction import FileStorage, StoreStorage, add_compaction, aload_transcript, load_transcript
from langgraph_compaction.invariants import duplicate_problems, lost_messages
from langgraph_compaction.storage import message_records
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "thread-1"}}


class Reading(BaseModel):
    """A pydantic artifact, as a tool may return one."""

    sensor: str
    values: tuple[int, int]


def odd_values():
    """Return an artifact with every kind of value plain JSON refuses or changes."""
    return {
        "raw": b"\x00\xffPNG",
        "at": dt.datetime(2026, 11, 30, 9, 15, tzinfo=dt.UTC),
        "day": dt.date(2026, 11, 30),
        "took": dt.timedelta(seconds=1.5),
        1: (3, 4),
        "tags": {"b", "a"},
        "frozen": frozenset({1, 2}),
        "reading": Reading(sensor="t1", values=(1, 2)),
        "price": Decimal("1.10"),
        "nested": [{"$t": "a user key that looks like a tag"}, (1, [2, (3,)])],
    }


@pytest.fixture(params=["files", "store"])
def backend(request, tmp_path):
    """Yield (storage for add_compaction and load_transcript, the storage object)."""
    if request.param == "files":
        yield tmp_path / "storage", FileStorage(tmp_path / "storage")
    else:
        store = InMemoryStore()
        yield store, StoreStorage(store)


# --- case 2: artifacts JSON cannot hold ------------------------------------------------


def test_non_json_artifacts_round_trip_equal_in_both_storage_forms(backend):
    where, storage = backend
    message = ToolMessage("ok", tool_call_id="c1", name="fetch", id="t1", artifact=odd_values())
    record = message_records([message])[0]  # messages_to_dict would dump the pydantic model to a dict
    storage.append_transcript("t", [record])
    storage.append_transcript("t", [record])  # the same version again: stored once
    (back,) = load_transcript(where, "t")
    assert back == message and back.artifact == odd_values()
    assert type(back.artifact[1]) is tuple and isinstance(back.artifact["reading"], Reading)
    assert lost_messages([message], [], storage.read_transcript("t")) == []
    assert duplicate_problems(storage.read_transcript("t")) == []


def test_an_unencodable_value_is_kept_as_a_marked_repr(backend):
    where, storage = backend
    lock = __import__("threading").Lock()  # nothing can serialize a lock
    storage.append_transcript(
        "t", messages_to_dict([ToolMessage("ok", tool_call_id="c1", id="t1", artifact={"lock": lock})])
    )
    (back,) = load_transcript(where, "t")
    assert back.artifact["lock"]["unencodable"] == "_thread.lock" and "lock object" in back.artifact["lock"]["repr"]


@tool(response_format="content_and_artifact")
def snapshot(path: str) -> tuple[str, dict]:
    """Take a snapshot of a file (text for the model, raw data as the artifact)."""
    return "".join(f"{i:4d}  row {i} of {path}\n" for i in range(300)), {**odd_values(), "path": path}


@tool(response_format="content_and_artifact")
def probe(path: str) -> tuple[str, dict]:
    """Probe a device; its handle cannot be serialized by anything."""
    return "".join(f"{i:4d}  probe {i} of {path}\n" for i in range(300)), {"handle": __import__("threading").Lock()}


class ToolLoop:
    """Each user turn: ``rounds`` calls of ``tool_name``, one after the other, then an answer."""

    def __init__(self, tool_name: str, rounds: int = 1) -> None:
        self.tool_name, self.rounds, self.round, self.calls = tool_name, rounds, 0, 0

    def __call__(self, state: dict) -> dict:
        if isinstance(state["messages"][-1], HumanMessage):
            self.round = 0
        if self.round < self.rounds:
            self.round += 1
            self.calls += 1
            call = {"name": self.tool_name, "args": {"path": f"f{self.calls}.bin"}, "id": f"call-{self.calls}"}
            return {"messages": [AIMessage("Looking.", tool_calls=[call])]}
        return {"messages": [AIMessage(f"Done after {self.calls} calls.")]}


def test_artifacts_json_cannot_hold_never_block_compaction(tmp_path):
    builder = agent_builder(ToolLoop("snapshot"), tools=[snapshot])
    add_compaction(builder, before="agent", model=ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    added = {}
    for turn in range(12):
        graph.invoke({"messages": [HumanMessage(f"Snapshot file {turn} " + "please " * 600)]}, THREAD)
        for m in graph.get_state(THREAD).values["messages"]:
            added.setdefault(m.id, m)
    state = graph.get_state(THREAD).values
    assert state["compaction"]["counts"].get("summarize", 0) >= 2
    transcript = FileStorage(tmp_path).read_transcript("thread-1")
    results = [m for m in load_transcript(tmp_path, "thread-1") if isinstance(m, ToolMessage)]
    assert len(results) >= 4
    # what the state held (after the checkpointer's own round trip) is what the transcript gives back
    assert lost_messages(list(added.values()), state["messages"], transcript) == []
    artifact = results[0].artifact
    assert artifact["raw"] == b"\x00\xffPNG" and artifact["at"] == odd_values()["at"] and artifact["tags"] == {"a", "b"}
    assert artifact["took"] == dt.timedelta(seconds=1.5) and 1 in artifact  # an int key stays an int


def test_a_value_nothing_can_encode_is_named_in_the_offload_event_and_compaction_goes_on(tmp_path):
    # no checkpointer: a checkpointer cannot hold it either, so it only lives within one run
    builder = agent_builder(ToolLoop("probe", rounds=14), tools=[probe])
    add_compaction(builder, before="agent", model=ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path)
    state = builder.compile().invoke({"messages": [HumanMessage("Probe every device")]}, THREAD)
    assert state["compaction"]["counts"].get("summarize", 0) >= 1
    results = [m for m in load_transcript(tmp_path, "thread-1") if isinstance(m, ToolMessage)]
    assert results and all(m.artifact["handle"]["unencodable"] == "_thread.lock" for m in results)
    notes = [e for e in state["compaction"]["events"] if e.get("unencodable")]
    assert notes and "marked repr" in notes[0]["note"] and "artifact.handle" in notes[0]["unencodable"][0]


# --- case 1: a message replaced by id after it was offloaded -------------------------------


def test_a_message_replaced_after_offload_keeps_every_version(backend):
    where, _ = backend
    store = where if not isinstance(where, os.PathLike) else None
    graph, _ = build_graph(
        ScriptedModel(),
        config=SMALL_WINDOW,
        storage=None if store else where,
        store=store,
        checkpointer=InMemorySaver(),
    )
    turn = 0
    while not graph.get_state(THREAD).values.get("compaction", {}).get("counts", {}).get("summarize"):
        graph.invoke(first_input(turn), THREAD)
        turn += 1
    offloaded = {m.id for m in load_transcript(where, "thread-1")}
    target = next(
        m for m in graph.get_state(THREAD).values["messages"] if isinstance(m, HumanMessage) and m.id in offloaded
    )
    edited = HumanMessage("Task 99: the edited request the model saw afterwards", id=target.id)
    graph.update_state(THREAD, {"messages": [edited]})
    for later in range(turn, turn + 6):
        graph.invoke(first_input(later), THREAD)
    state = graph.get_state(THREAD).values
    assert target.id not in {m.id for m in state["messages"]}  # evicted since

    latest = {m.id: m for m in load_transcript(where, "thread-1")}
    assert latest[target.id].content == edited.content
    versions = [m.content for m in load_transcript(where, "thread-1", versions="all") if m.id == target.id]
    assert versions == [target.content, edited.content]
    ids = [m.id for m in load_transcript(where, "thread-1")]
    assert len(ids) == len(set(ids))
    assert lost_messages([target, edited], state["messages"], StoreOrFiles(where).read_transcript("thread-1")) == []
    with pytest.raises(ValueError, match="versions="):
        load_transcript(where, "thread-1", versions="newest")


def StoreOrFiles(where):  # noqa: N802 - reads like the type it returns
    return StoreStorage(where) if isinstance(where, InMemoryStore) else FileStorage(where)


def test_latest_and_all_versions_through_the_async_reader(tmp_path):
    storage = FileStorage(tmp_path)
    first, second = HumanMessage("v1", id="m"), HumanMessage("v2", id="m")
    storage.append_transcript("t", messages_to_dict([first, AIMessage("a", id="a")]))
    storage.append_transcript("t", messages_to_dict([second, first]))  # a new version; the old one is stored already
    import asyncio

    assert [m.content for m in asyncio.run(aload_transcript(tmp_path, "t"))] == ["v2", "a"]
    assert [m.content for m in asyncio.run(aload_transcript(tmp_path, "t", versions="all"))] == ["v1", "a", "v2"]


# --- case 3: time travel and a second worker ------------------------------------------------


def test_time_travel_writes_no_message_twice_and_keeps_the_order(backend):
    where, storage = backend
    store = where if isinstance(where, InMemoryStore) else None
    graph, _ = build_graph(
        ScriptedModel(),
        config=SMALL_WINDOW,
        storage=None if store else where,
        store=store,
        checkpointer=InMemorySaver(),
    )
    for turn in range(6):
        graph.invoke(first_input(turn), THREAD)
    assert graph.get_state(THREAD).values["compaction"]["counts"]["summarize"] >= 1
    before = [r["data"]["id"] for r in storage.read_transcript("thread-1")]
    fork = next(
        s.config
        for s in graph.get_state_history(THREAD)
        # a turn's end before the first compaction: that state knows of no offload
        if not s.next and s.values.get("messages") and not (s.values.get("compaction") or {}).get("offloaded_ids")
    )
    for turn in range(6, 12):
        graph.invoke(first_input(turn), fork)
        fork = THREAD
    records = storage.read_transcript("thread-1")
    assert duplicate_problems(records) == []
    after = [r["data"]["id"] for r in records]
    assert after[: len(before)] == before  # oldest first: nothing moved to the end


def _replay(storage, barrier) -> None:
    records = messages_to_dict([HumanMessage(f"message {i} " + "x" * 5000, id=f"m{i}") for i in range(60)])
    barrier.wait(timeout=60)
    for start in range(0, 60, 6):  # both workers replay the same thread in the same batches
        storage.append_transcript("shared", records[start : start + 6])


def _append_same(where: str, dsn: str, barrier) -> None:
    if not dsn:
        return _replay(FileStorage(where), barrier)
    with PostgresStore.from_conn_string(dsn) as store:
        _replay(StoreStorage(store), barrier)


@pytest.mark.parametrize("form", ["files", "postgres-store"])
def test_two_workers_writing_the_same_thread_store_each_message_once(tmp_path, postgres_for, form):
    dsn = postgres_for(form)
    if dsn:
        with PostgresStore.from_conn_string(dsn) as store:
            store.setup()
    run_in_two_processes(_append_same, lambda _: (str(tmp_path), dsn), barrier=True)
    if dsn:
        with PostgresStore.from_conn_string(dsn) as store:
            records = StoreStorage(store).read_transcript("shared")
    else:
        records = FileStorage(tmp_path).read_transcript("shared")
    ids = [r["data"]["id"] for r in records]
    assert duplicate_problems(records) == [] and sorted(ids) == sorted(f"m{i}" for i in range(60))
    if not dsn:  # one lock orders the file; two store workers racing on one batch may interleave it (README)
        assert ids == [f"m{i}" for i in range(60)]


# --- case 12: thread ids that look alike ------------------------------------------------


@pytest.mark.parametrize("form", ["files", "store"])
def test_empty_default_and_zero_thread_ids_get_their_own_transcripts(tmp_path, form):
    store = InMemoryStore() if form == "store" else None
    where = store if store is not None else tmp_path
    graph, _ = build_graph(
        ScriptedModel(),
        config=SMALL_WINDOW,
        storage=None if store else tmp_path,
        store=store,
        checkpointer=InMemorySaver(),
    )
    threads = ["", "default", 0]
    for k, thread in enumerate(threads):
        for turn in range(5):
            request = first_input(10 * k + turn)  # the scripted agent keeps its steps per turn number
            request["messages"][-1].content += f" (thread {thread!r})"
            graph.invoke(request, {"configurable": {"thread_id": thread}})
    for thread in threads:
        transcript = load_transcript(where, thread)
        humans = [m.content for m in transcript if isinstance(m, HumanMessage) and m.content.startswith("Task ")]
        assert humans and all(c.endswith(f"(thread {thread!r})") for c in humans), thread


# --- case 13: a relative storage folder ------------------------------------------------


def test_a_relative_storage_folder_does_not_follow_a_later_chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage="./.compaction", checkpointer=InMemorySaver())
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for turn in range(8):
        if turn == 2:
            os.chdir(workspace)  # an agent's shell tool moves the process
        graph.invoke(first_input(turn), THREAD)
    state = graph.get_state(THREAD).values
    assert state["compaction"]["counts"]["summarize"] >= 2
    assert not any(files for _, _, files in os.walk(workspace))
    in_state = {m.id for m in state["messages"]}
    stored = {m.id for m in load_transcript(tmp_path / ".compaction", "thread-1")}
    evicted = {m.id for s in graph.get_state_history(THREAD) for m in s.values.get("messages", [])} - in_state
    assert evicted and evicted <= stored


class WriteFails(FileStorage):
    """A disk that reads but can no longer write (full)."""

    def append_transcript(self, thread_id, records):
        raise OSError(28, "No space left on device")


def test_a_failed_offload_never_lets_an_older_offload_vouch_for_a_replaced_message(tmp_path):
    from langgraph_compaction import CompactionConfig
    from langgraph_compaction.engine.nodes import CompactionEngine
    from langgraph_compaction.engine.state import merge_compaction

    original = HumanMessage("deploy to staging " * 40, id="h1")
    FileStorage(tmp_path).append_transcript("t", message_records([original]))
    edited = HumanMessage("deploy to production " * 40, id="h1")  # update_state by id since that offload
    messages = [edited, AIMessage("ok " * 200, id="a1"), HumanMessage("next", id="h2"), AIMessage("done", id="a2")]
    pending = {
        "reason": "manual",
        "evict_ids": ["h1", "a1"],
        "cutoff_id": "h2",
        "tokens_before": 900,
        "tokens_after_layers": 900,
    }
    compaction = {"offloaded_ids": ["h1", "a1", "h2", "a2"], "pending": pending}  # what the earlier offload wrote
    nodes = CompactionEngine(
        before="agent", model=ScriptedModel(), config=CompactionConfig(), storage=WriteFails(tmp_path)
    )
    config = {"configurable": {"thread_id": "t"}}
    update = nodes.offload({"messages": messages, "compaction": compaction}, config)
    compaction = merge_compaction(compaction, update["compaction"])
    update = nodes.summarize({"messages": messages, "compaction": compaction}, config)
    assert "messages" not in update  # nothing evicted: the edited text exists nowhere else
    assert "offload did not complete" in update["compaction"]["last_error"]


# --- a checkpointer turns tuples into lists ------------------------------------------------------


@tool(response_format="content_and_artifact")
def pairs(path: str) -> tuple[str, dict]:
    """Measure a file (text for the model, a map of int keys to tuples as the artifact)."""
    return "".join(f"{i:4d}  pair {i} of {path}\n" for i in range(300)), {1: (3, 4)}


class FirstSight(ToolLoop):
    """The tool loop that also keeps each message as it first saw it: in the run that made it, before a checkpoint."""

    def __init__(self) -> None:
        super().__init__("pairs")
        self.seen: dict = {}

    def __call__(self, state: dict) -> dict:
        for m in state["messages"]:
            self.seen.setdefault(m.id, m)
        return super().__call__(state)


def test_tuples_the_checkpointer_turns_into_lists_are_neither_lost_nor_a_new_version(tmp_path):
    agent = FirstSight()
    builder = agent_builder(agent, tools=[pairs])
    add_compaction(builder, before="agent", model=ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    for turn in range(8):
        graph.invoke({"messages": [HumanMessage(f"Measure file {turn} " + "please " * 600)]}, THREAD)
    state = graph.get_state(THREAD).values
    assert state["compaction"]["counts"].get("summarize", 0) >= 1
    transcript = FileStorage(tmp_path).read_transcript("thread-1")
    made = [m for m in agent.seen.values() if isinstance(m, ToolMessage)]
    assert made and all(m.artifact == {1: (3, 4)} for m in made)  # the tool's own value, tuples and all
    # the checkpointer gives {1: [3, 4]} back (msgpack has no tuples): that is not a change compaction made
    assert lost_messages(made, state["messages"], transcript) == []
    ids = [m.id for m in load_transcript(tmp_path, "thread-1", versions="all")]
    assert len(ids) == len(set(ids))  # the list copy is not written as a second version
    assert all(
        m.artifact[1] in ((3, 4), [3, 4]) for m in load_transcript(tmp_path, "thread-1") if isinstance(m, ToolMessage)
    )
