"""The Studio agent graph, unchanged, on every real checkpointer and store, sync and async.

Backends: ``InMemorySaver`` + ``InMemoryStore``, ``SqliteSaver`` /
``AsyncSqliteSaver`` + ``SqliteStore`` / ``AsyncSqliteStore`` (files in a
temporary directory), ``PostgresSaver`` / ``AsyncPostgresSaver`` +
``PostgresStore`` / ``AsyncPostgresStore`` (the PostgreSQL server of
``postgres_dsn``, a fresh schema per test run; without a server those cases skip). Transcripts and memory go to
the store the graph is compiled with, as on the LangGraph server.
"""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from langgraph.store.sqlite import AsyncSqliteStore, SqliteStore
from typing_extensions import TypedDict

from graphs.agent import OFFLINE_CONTEXT_WINDOW, OfflineAgentModel, build_agent
from langgraph_compaction import CompactionConfig, StoreStorage
from langgraph_compaction.core.config import PruneConfig, TruncateArgsConfig
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.engine.langgraph_internals import messages_delta_reducer
from langgraph_compaction.engine.nodes import SUMMARIZE
from langgraph_compaction.engine.state import MESSAGES_SNAPSHOT_EVERY, merge_compaction, read_compaction
from langgraph_compaction.testing import ScriptedModel, openai_violations

#: Studio-like thresholds: every request after the first compacts.
THRESHOLDS = {"trigger_tokens": 6_000, "keep_tokens": 2_000}
KINDS = ["memory", "sqlite", "postgres"]


class Killed(BaseException):
    """The process dying mid-run: not an ``Exception``, so compaction's own guards do not catch it."""


class Backend:
    """One checkpointer + store pair that can be opened again, as a restarted process would."""

    def __init__(self, kind: str, tmp_path: Path, dsn: str) -> None:
        self.kind, self.tmp_path, self.dsn = kind, tmp_path, dsn
        self.memory = (InMemorySaver(), InMemoryStore())

    @contextmanager
    def open(self):
        """Yield (checkpointer, store) on fresh connections to the same databases."""
        if self.kind == "memory":
            yield self.memory
        elif self.kind == "sqlite":
            with (
                SqliteSaver.from_conn_string(str(self.tmp_path / "checkpoints.sqlite")) as saver,
                SqliteStore.from_conn_string(str(self.tmp_path / "store.sqlite")) as store,
            ):
                store.setup()
                yield saver, store
        else:
            with PostgresSaver.from_conn_string(self.dsn) as saver, PostgresStore.from_conn_string(self.dsn) as store:
                saver.setup()
                store.setup()
                yield saver, store

    @asynccontextmanager
    async def aopen(self):
        """Yield the async (checkpointer, store) on fresh connections to the same databases."""
        if self.kind == "memory":
            yield self.memory
        elif self.kind == "sqlite":
            async with (
                AsyncSqliteSaver.from_conn_string(str(self.tmp_path / "checkpoints.sqlite")) as saver,
                AsyncSqliteStore.from_conn_string(str(self.tmp_path / "store.sqlite")) as store,
            ):
                await store.setup()
                yield saver, store
        else:
            async with (
                AsyncPostgresSaver.from_conn_string(self.dsn) as saver,
                AsyncPostgresStore.from_conn_string(self.dsn) as store,
            ):
                await saver.setup()
                await store.setup()
                yield saver, store


@pytest.fixture(params=KINDS)
def backend(request, tmp_path, postgres_for):
    return Backend(request.param, tmp_path, postgres_for(request.param))


@pytest.fixture
def run_context():
    """Return a run's context and config: a thread and a user of their own (the Postgres schema is shared)."""
    context = {"user_id": f"user-{uuid.uuid4().hex[:8]}", **THRESHOLDS}
    return context, {"configurable": {"thread_id": f"thread-{uuid.uuid4().hex[:8]}"}}


def _graph(saver: Any, store: Any, summarizer: Any = None, **kwargs: Any):
    return build_agent(OfflineAgentModel(), summarizer or ScriptedModel(), **kwargs).compile(
        checkpointer=saver, store=store
    )


def _request(turn: int) -> dict:
    return {"messages": [HumanMessage(f"Task {turn}: fix module{turn} and run its tests")]}


def _summary_events(events: list) -> list[dict]:
    return [e for e in events if e["stage"] == "summarize" and "error" not in e]


def _check_thread(values: dict, events: list[dict], transcript: list[dict], ledger: str) -> None:
    """Assert what a user of any backend would check after a compacted thread."""
    compaction = read_compaction(values["compaction"])
    summaries = _summary_events(events)
    assert len(summaries) >= 2 and compaction["counts"]["summarize"] == len(summaries)
    assert compaction["last_error"] is None and compaction["pending"] is None
    messages = values["messages"]
    assert messages[0].name == SUMMARY_MESSAGE_NAME and openai_violations(messages) == []
    assert messages[-1].content.startswith("Done with module")
    ids = [r["data"]["id"] for r in transcript]
    assert len(ids) == len(set(ids))
    assert {i for e in summaries for i in e["evicted_ids"]} <= set(ids)
    assert ledger.count("## Flush") == sum(1 for e in events if e["stage"] == "flush")


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_graph_compacts_a_thread_across_restarts_sync(kind, tmp_path, postgres_for, run_context):
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    events: list[dict] = []
    for turns in (range(0, 3), range(3, 5)):  # a restart between the two: new connections, new graph
        with backend.open() as (saver, store):
            graph = _graph(saver, store)
            for turn in turns:
                events += [e for e in graph.stream(_request(turn), config, stream_mode="custom", context=context)]
            values = graph.get_state(config).values
            storage = StoreStorage(store)
            transcript = storage.read_transcript(config["configurable"]["thread_id"])
            files = storage.list_memory_files(context["user_id"])
            ledger = "".join(storage.read_memory_file(context["user_id"], f) or "" for f in files)
    _check_thread(values, events, transcript, ledger)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_same_graph_compacts_a_thread_across_restarts_async(kind, tmp_path, postgres_for, run_context):
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    events: list[dict] = []
    for turns in (range(0, 3), range(3, 5)):
        async with backend.aopen() as (saver, store):
            graph = _graph(saver, store)
            for turn in turns:
                events += [
                    e async for e in graph.astream(_request(turn), config, stream_mode="custom", context=context)
                ]
            values = (await graph.aget_state(config)).values
            storage = StoreStorage(store)
            transcript = await storage.aread_transcript(config["configurable"]["thread_id"])
            files = await storage.alist_memory_files(context["user_id"])
            ledger = "".join([await storage.aread_memory_file(context["user_id"], f) or "" for f in files])
    _check_thread(values, events, transcript, ledger)


def _crash_once() -> RunnableLambda:
    """Return a summarizer that kills the run the first time it is asked for a summary, then summarizes.

    A runnable, not a chat model: langchain-core's async chat-model path turns
    a ``BaseException`` from ``_agenerate`` into an ``AttributeError``.
    """
    model, calls = ScriptedModel(), []

    def answer(messages: list) -> Any:
        if "Context Extraction Assistant" in messages[-1].content:
            calls.append(1)
            if len(calls) == 1:
                raise Killed("the process died while summarizing")
        return model.invoke(messages)

    return RunnableLambda(answer)


def _check_resumed(crashed: Any, events: list[dict], values: dict, transcript: list[dict], ledger: str) -> None:
    """Assert that the compaction interrupted by the crash completed exactly once after the resume."""
    assert crashed.next == (SUMMARIZE,)
    pending = read_compaction(crashed.values["compaction"])["pending"]
    assert pending and set(pending["evict_ids"]) <= set(read_compaction(crashed.values["compaction"])["offloaded_ids"])
    first = events.index(_summary_events(events)[0])
    assert events[first]["cutoff_id"] == pending["cutoff_id"]
    assert not [e for e in events[:first] if e["stage"] in ("offload", "flush")]  # not re-run on resume
    compaction = read_compaction(values["compaction"])
    assert compaction["counts"]["summarize"] == len(_summary_events(events))
    assert [e["cutoff_id"] for e in _summary_events(events)].count(pending["cutoff_id"]) == 1
    assert [m.name for m in values["messages"]].count(SUMMARY_MESSAGE_NAME) == 1
    ids = [r["data"]["id"] for r in transcript]
    assert len(ids) == len(set(ids)) and set(pending["evict_ids"]) <= set(ids)
    flushes = 1 + sum(1 for e in events if e["stage"] == "flush")  # the one before the crash
    assert ledger.count("## Flush") == flushes


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_killed_between_offload_and_summarize_resumes_once_sync(kind, tmp_path, postgres_for, run_context):
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    with backend.open() as (saver, store):
        graph = _graph(saver, store, _crash_once())
        with pytest.raises(Killed):
            for turn in range(3):
                graph.invoke(_request(turn), config, context=context)
        crashed = graph.get_state(config)
    with backend.open() as (saver, store):  # a new process: new connections, a summarizer that works
        graph = _graph(saver, store)
        events = list(graph.stream(None, config, stream_mode="custom", context=context))
        values = graph.get_state(config).values
        storage = StoreStorage(store)
        transcript = storage.read_transcript(config["configurable"]["thread_id"])
        ledger = "".join(
            storage.read_memory_file(context["user_id"], f) or "" for f in storage.list_memory_files(context["user_id"])
        )
    _check_resumed(crashed, events, values, transcript, ledger)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_killed_between_offload_and_summarize_resumes_once_async(kind, tmp_path, postgres_for, run_context):
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    async with backend.aopen() as (saver, store):
        graph = _graph(saver, store, _crash_once())
        with pytest.raises(Killed):
            for turn in range(3):
                await graph.ainvoke(_request(turn), config, context=context)
        crashed = await graph.aget_state(config)
    async with backend.aopen() as (saver, store):
        graph = _graph(saver, store)
        events = [e async for e in graph.astream(None, config, stream_mode="custom", context=context)]
        values = (await graph.aget_state(config)).values
        storage = StoreStorage(store)
        transcript = await storage.aread_transcript(config["configurable"]["thread_id"])
        files = await storage.alist_memory_files(context["user_id"])
        ledger = "".join([await storage.aread_memory_file(context["user_id"], f) or "" for f in files])
    _check_resumed(crashed, events, values, transcript, ledger)


# -- checkpoint growth -----------------------------------------------------------

#: Layers 1-2 off, so "without compaction" below is the raw conversation.
SUMMARY_ONLY = CompactionConfig(
    context_window=OFFLINE_CONTEXT_WINDOW,
    truncate_args=TruncateArgsConfig(enabled=False),
    prune=PruneConfig(enabled=False),
)
NEVER = {"trigger_tokens": 10**9, "trigger_messages": 0}
GROWTH_TURNS = 12


def _sqlite_bytes(saver: SqliteSaver) -> int:
    """Return the bytes SqliteSaver holds: checkpoints, their metadata and pending writes."""
    (checkpoints,) = saver.conn.execute(
        "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints"
    ).fetchone()
    (writes,) = saver.conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()
    return checkpoints + writes


def _bytes_per_turn(tmp_path: Path, name: str, thresholds: dict, durability: str = "async") -> tuple[list[int], Any]:
    """Run GROWTH_TURNS requests on a fresh SQLite file; return the bytes each turn added and the final state."""
    with SqliteSaver.from_conn_string(str(tmp_path / f"{name}.sqlite")) as saver:
        graph = _graph(saver, InMemoryStore(), config=SUMMARY_ONLY)
        config = {"configurable": {"thread_id": "growth"}}
        sizes = [0]
        for turn in range(GROWTH_TURNS):
            graph.invoke(_request(turn), config, context={"user_id": "growth", **thresholds}, durability=durability)
            sizes.append(_sqlite_bytes(saver))
        rows = saver.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        return [b - a for a, b in zip(sizes, sizes[1:], strict=False)], (graph.get_state(config).values, rows)


def _halves(per_turn: list[int]) -> tuple[float, float]:
    """Return the mean bytes per turn of the first and second half, after the first turn (empty history)."""
    turns = per_turn[1:]
    half = len(turns) // 2
    return sum(turns[:half]) / half, sum(turns[half:]) / (len(turns) - half)


def test_sqlite_checkpoint_bytes_grow_by_a_constant_amount_per_turn_with_and_without_compaction(tmp_path):
    # the default state keeps ``messages`` in a DeltaChannel: a checkpoint stores the step's new messages,
    # not the whole list again, so even a thread that never compacts grows linearly, not quadratically
    compacted, _ = _bytes_per_turn(tmp_path, "compacted", THRESHOLDS)
    raw, _ = _bytes_per_turn(tmp_path, "raw", NEVER)
    first, second = _halves(compacted)
    raw_first, raw_second = _halves(raw)
    print(
        f"bytes/turn with compaction {first:.0f} -> {second:.0f}; without {raw_first:.0f} -> {raw_second:.0f}; "
        f"total {sum(compacted)} vs {sum(raw)}"
    )
    assert second <= 1.5 * first
    # without compaction the list grows, and so does the snapshot the channel writes every 50 updates;
    # the whole list in every checkpoint made the second half's turns cost about 2.7x the first half's
    assert raw_second <= 2 * raw_first


def _compaction_copies(saver: Any, config: dict) -> tuple[list[bool], int]:
    """Return, newest first, whether each checkpoint stores the ``compaction`` value, and how many steps wrote it."""
    tuples = list(saver.list(config))
    stored = ["compaction" in t.checkpoint["channel_values"] for t in tuples]
    return stored, sum(any(w[1] == "compaction" for w in t.pending_writes or ()) for t in tuples)


def test_a_checkpoint_stores_the_compaction_value_only_after_a_step_that_changed_it(tmp_path):
    # SqliteSaver keeps every channel's value in each checkpoint row: the compaction value (counts, the
    # last 20 events, the calibration) stored again at each of a turn's four steps cost more than the turn
    with SqliteSaver.from_conn_string(str(tmp_path / "copies.sqlite")) as saver:
        graph = _graph(saver, InMemoryStore(), config=SUMMARY_ONLY)
        config = {"configurable": {"thread_id": "copies"}}
        for turn in range(6):
            graph.invoke(_request(turn), config, context={"user_id": "copies", **THRESHOLDS})
        stored, written = _compaction_copies(saver, config)
        compaction = read_compaction(graph.get_state(config).values["compaction"])
    assert sum(stored) <= written < len(stored) / 2
    assert compaction["counts"]["summarize"] >= 2 and len(compaction["events"]) > 5 and compaction["wired"]


def test_an_idle_thread_stores_its_compaction_value_again_before_a_load_reads_far_back(tmp_path):
    # a checkpoint that stores no compaction value is rebuilt from the newest one that does: on a thread
    # that never compacts (and whose model reports no usage) that copy must stay near the head
    with SqliteSaver.from_conn_string(str(tmp_path / "idle.sqlite")) as saver:
        graph = _graph(saver, InMemoryStore(), config=SUMMARY_ONLY)
        config = {"configurable": {"thread_id": "idle"}}
        for turn in range(60):
            graph.invoke(_request(turn), config, context={"user_id": "idle", **NEVER})
        tuples = list(saver.list(config))
        newest = next(t for t in tuples if "compaction" in t.checkpoint["channel_values"])
        then = graph.get_state(newest.config).values
        now = graph.get_state(config).values
    assert len(now["messages"]) > 2 * MESSAGES_SNAPSHOT_EVERY and read_compaction(now["compaction"])["wired"]
    # no further back than the messages' own snapshot, which comes every MESSAGES_SNAPSHOT_EVERY updates
    assert len(now["messages"]) - len(then["messages"]) <= MESSAGES_SNAPSHOT_EVERY
    assert sum("compaction" in t.checkpoint["channel_values"] for t in tuples) < len(tuples) / 10


def test_durability_exit_keeps_one_checkpoint_per_run_and_the_same_compaction(tmp_path):
    every_step, (values, rows) = _bytes_per_turn(tmp_path, "every-step", THRESHOLDS)
    at_exit, (exit_values, exit_rows) = _bytes_per_turn(tmp_path, "at-exit", THRESHOLDS, durability="exit")
    # one per run, plus the empty checkpoint (step -2) a thread whose messages are a DeltaChannel starts from
    assert exit_rows == GROWTH_TURNS + 1 < rows
    # both store the same writes (the conversation and the compaction updates); a step's checkpoint holds
    # little else (messages and compaction are DeltaChannels), so one per run saves that much and no more
    assert sum(at_exit) < sum(every_step)
    assert read_compaction(exit_values["compaction"])["counts"] == read_compaction(values["compaction"])["counts"]
    # the same conversation (message ids differ between the two runs, and so does the summary's id line)
    assert [(m.type, m.name) for m in exit_values["messages"]] == [(m.type, m.name) for m in values["messages"]]
    assert [m.content for m in exit_values["messages"][1:]] == [m.content for m in values["messages"][1:]]


class AddMessagesState(TypedDict):
    """A user's own state with ``add_messages``: every checkpoint holds the whole list, and prune works on it."""

    messages: Annotated[list, add_messages]
    compaction: Annotated[dict, merge_compaction]


def test_postgres_prune_keeps_the_latest_checkpoint_and_the_thread_goes_on(postgres_dsn, run_context):
    context, config = run_context
    thread = config["configurable"]["thread_id"]
    with PostgresSaver.from_conn_string(postgres_dsn) as saver, PostgresStore.from_conn_string(postgres_dsn) as store:
        saver.setup()
        store.setup()
        graph = _graph(saver, store, state_schema=AddMessagesState)
        for turn in range(3):
            graph.invoke(_request(turn), config, context=context)
        before = graph.get_state(config).values
        count = "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s"
        with saver._cursor() as cur:
            assert cur.execute(count, (thread,)).fetchone()["n"] > 10
        saver.prune([thread], strategy="keep_latest")
        with saver._cursor() as cur:
            assert cur.execute(count, (thread,)).fetchone()["n"] == 1
        assert graph.get_state(config).values == before
        graph.invoke(_request(3), config, context=context)
        after = read_compaction(graph.get_state(config).values["compaction"])
    assert after["counts"]["summarize"] > read_compaction(before["compaction"])["counts"]["summarize"]


# -- DeltaChannel messages ---------------------------------------------------------


class DeltaState(TypedDict):
    """The state deepagents uses: ``messages`` in a ``DeltaChannel`` (beta), plus ``compaction``."""

    messages: Annotated[list, DeltaChannel(messages_delta_reducer)]
    compaction: Annotated[dict, merge_compaction]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_delta_channel_messages_compact_and_resume(kind, tmp_path, postgres_for, run_context):
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    events: list[dict] = []
    for turns in (range(0, 3), range(3, 5)):
        with backend.open() as (saver, store):
            graph = _graph(saver, store, state_schema=DeltaState)
            for turn in turns:
                events += list(graph.stream(_request(turn), config, stream_mode="custom", context=context))
            values = graph.get_state(config).values
            storage = StoreStorage(store)
            transcript = storage.read_transcript(config["configurable"]["thread_id"])
            ledger = "".join(
                storage.read_memory_file(context["user_id"], f) or ""
                for f in storage.list_memory_files(context["user_id"])
            )
    _check_thread(values, events, transcript, ledger)
    if kind == "postgres":  # prune rebuilds nothing from a DeltaChannel's history: it refuses
        with backend.open() as (saver, _), pytest.raises(NotImplementedError):
            saver.prune([config["configurable"]["thread_id"]], strategy="keep_latest")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_thread_of_the_earlier_default_state_goes_on_under_todays(kind, tmp_path, postgres_for, run_context):
    # the earlier default stored compaction whole in every checkpoint (DeltaState); today's keeps it in a
    # DeltaChannel, which takes such a stored value as its starting point
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    events: list[dict] = []
    for schema, turns in ((DeltaState, range(0, 3)), (None, range(3, 5))):
        with backend.open() as (saver, store):
            graph = _graph(saver, store, **({"state_schema": schema} if schema else {}))
            for turn in turns:
                events += list(graph.stream(_request(turn), config, stream_mode="custom", context=context))
            if schema:
                before = read_compaction(graph.get_state(config).values["compaction"])
            values = graph.get_state(config).values
            storage = StoreStorage(store)
            transcript = storage.read_transcript(config["configurable"]["thread_id"])
            ledger = "".join(
                storage.read_memory_file(context["user_id"], f) or ""
                for f in storage.list_memory_files(context["user_id"])
            )
    _check_thread(values, events, transcript, ledger)
    assert read_compaction(values["compaction"])["counts"]["summarize"] > before["counts"]["summarize"] >= 1


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_default_state_travels_in_time_and_takes_state_edits(kind, tmp_path, postgres_for, run_context):
    # the default state's messages are a DeltaChannel: an earlier checkpoint is rebuilt from its own history
    backend = Backend(kind, tmp_path, postgres_for(kind))
    context, config = run_context
    with backend.open() as (saver, store):
        graph = _graph(saver, store)
        for turn in range(4):
            graph.invoke(_request(turn), config, context=context)
        history = list(graph.get_state_history(config))
        compacted = [s for s in history if read_compaction(s.values.get("compaction"))["counts"].get("summarize")]
        assert compacted and len(compacted) < len(history)
        earlier = next(
            s for s in history if s.values.get("messages") and not read_compaction(s.values.get("compaction"))["counts"]
        )
        assert not any(m.name == SUMMARY_MESSAGE_NAME for m in earlier.values["messages"])
        # fork from before the first summary: the fork sees that checkpoint's messages, and runs on from there
        fork = graph.update_state(earlier.config, {"messages": [HumanMessage("A note added in the past", id="note")]})
        forked = graph.get_state(fork).values["messages"]
        assert [m.id for m in forked] == [*(m.id for m in earlier.values["messages"]), "note"]
        graph.invoke(_request(9), fork, context=context)
        after = graph.get_state(config).values["messages"]  # the thread's newest checkpoint: the fork's run
        assert "Task 9: fix module9 and run its tests" in [m.content for m in after if m.type == "human"]
        assert openai_violations(after) == []
        # the checkpoint the fork branched from, and the one that was newest before it, read as they were
        assert graph.get_state(earlier.config).values["messages"] == earlier.values["messages"]
        assert graph.get_state(history[0].config).values["messages"] == history[0].values["messages"]
