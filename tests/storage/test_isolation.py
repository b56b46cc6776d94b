"""One user never reads another's conversation or memory: thread-less runs and ids built to collide."""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from support import SMALL_WINDOW, build_graph, first_input
from support.fronts import CONFIG, TOOLS, ToolCallingModel

from langgraph_compaction import CompactionMiddleware, FileStorage, StoreStorage, is_summary
from langgraph_compaction.engine import run as run_module
from langgraph_compaction.fronts.tools import recall_messages, search_memory, search_session
from langgraph_compaction.storage import safe_label
from langgraph_compaction.testing import ScriptedModel

VICTIM_THREAD, VICTIM_USER = "user:42", "alice@example.com"


def hashed_label(value: object) -> str:
    """Return a slug-and-hash spelling of an id (``user:42`` -> ``user-42-ea3fd43be1e57d62``), as an attacker guesses.

    A mapping of ids to names that slugs them and adds a hash collides (a new
    id may equal another id's name); ids of this shape are drawn to show that
    ``safe_label`` never does.
    """
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "id"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


#: The victim's ids spelled that way: a new thread and a new user can be given exactly these ids.
HASHED_THREAD, HASHED_USER = hashed_label(VICTIM_THREAD), hashed_label(VICTIM_USER)


def _victim_compacts(where, store=None):
    """Thread "user:42" of user alice@example.com runs until it compacts; return its IBAN message."""
    graph, _ = build_graph(
        ScriptedModel(), config=SMALL_WINDOW, storage=where, store=store, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": VICTIM_THREAD, "user_id": VICTIM_USER}}
    secret = HumanMessage("Task 0 please pay invoice 7 to IBAN DE89370400440532013000", id="iban-request")
    graph.invoke({"messages": [secret]}, config)
    turn = 1
    while not graph.get_state(config).values["compaction"]["counts"].get("summarize"):
        graph.invoke(first_input(turn), config)
        turn += 1
    return secret


@pytest.mark.parametrize("backend", ["files", "store"])
def test_a_thread_named_like_another_ids_label_reads_nothing_of_it(tmp_path, backend):
    store = InMemoryStore() if backend == "store" else None
    storage = StoreStorage(store) if store is not None else FileStorage(tmp_path)
    secret = _victim_compacts(None if store is not None else tmp_path, store)
    assert "IBAN" in search_session(storage, VICTIM_THREAD, "IBAN")  # the victim finds its own message
    for thread in (HASHED_THREAD, safe_label(VICTIM_THREAD)):
        assert "IBAN" not in search_session(storage, thread, "IBAN")
        assert "DE89" not in recall_messages(storage, thread, [secret.id])
    assert "Task 0" in search_memory(storage, VICTIM_USER, "Task")
    for user in (HASHED_USER, safe_label(VICTIM_USER)):
        assert search_memory(storage, user, "Task") == "No memory matches 'Task'."


# --- the mapping is injective ------------------------------------------------------------------

NASTY = [
    "",
    "default",
    ":",
    "@",
    ".",
    "..",
    "/",
    "a/b",
    "a-b",
    "a?b",
    "~",
    "+",
    "+3a",
    "~+3a",
    "é",
    "e\u0301",
    "\ud800",
    "A",
    "a",
    "Alice",
    "alice",
    "user:42",
    VICTIM_USER,
    HASHED_THREAD,
    HASHED_USER,
    "x" * 64,
    "x" * 65,
    "é" * 40,
    "id",
    "-",
    "_",
    "0",
    "no-thread",
]


@st.composite
def colliding_ids(draw):
    """Ids built to collide: nasty ones, random text, and the labels (and slug-and-hash spellings) of the others."""
    base = draw(st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=80)), min_size=1, max_size=8))
    derived = [f(v) for v in base for f in (safe_label, hashed_label, lambda v: v.upper(), lambda v: v + "." + v)]
    return list(dict.fromkeys(base + draw(st.lists(st.sampled_from(derived), max_size=8))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(colliding_ids())
def test_labels_are_injective_valid_names(ids):
    labels = {v: safe_label(v) for v in ids}
    assert len(set(labels.values())) == len(ids)
    assert len({label.casefold() for label in labels.values()}) == len(ids)  # a case-insensitive disk too
    for label in labels.values():
        assert label and len(label) <= 64 and re.fullmatch(r"[a-z0-9_+~-]+", label)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(colliding_ids())
def test_each_id_reads_back_only_its_own_transcript_and_memory(tmp_path_factory, ids):
    root = tmp_path_factory.mktemp("ids")
    for storage in (FileStorage(root), StoreStorage(InMemoryStore())):
        for i, v in enumerate(ids):
            storage.append_transcript(v, messages_to_dict([HumanMessage(f"message of {i}", id=f"m{i}")]))
            storage.append_memory_file(v, "MEMORY.md", f"- fact of {i}\n")
        for i, v in enumerate(ids):
            assert [r["data"]["content"] for r in storage.read_transcript(v)] == [f"message of {i}"]
            if v not in ("", "default"):  # both name the default user
                assert storage.read_memory_file(v, "MEMORY.md") == f"- fact of {i}\n"
    shutil.rmtree(root)


# --- runs without a thread id ------------------------------------------------------------------


class TwoUsersModel(ToolCallingModel):
    """Alice's request: many rounds of tool calls (it compacts); Bob's: session_search and recall of Alice's message."""

    def _reply(self, messages):
        self.inputs.append(list(messages))
        latest = [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)][-1]
        rounds = self.steps.get(latest.content, 0)  # kept outside the view: compaction evicts early rounds
        self.steps[latest.content] = rounds + 1
        if "IBAN" in latest.content and rounds < 30:
            calls = [{"name": "run_tests", "args": {"module": f"billing{rounds}"}, "id": f"alice-{rounds}"}]
            return AIMessage("Checking billing.", tool_calls=calls)
        if "Bob" in latest.content and not rounds:
            calls = [
                {"name": "session_search", "args": {"query": "IBAN"}, "id": "bob-search"},
                {"name": "recall", "args": {"message_ids": ["alice-iban"]}, "id": "bob-recall"},
            ]
            return AIMessage("Looking back.", tool_calls=calls)
        return AIMessage("Done.")


def test_runs_without_a_thread_id_never_share_a_transcript(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(run_module, "_THREADLESS_WARNED", threading.Event())  # as in a fresh process
    model = TwoUsersModel()
    middleware = CompactionMiddleware(model=ScriptedModel(), config=CONFIG, storage=tmp_path)
    agent = create_agent(model, TOOLS, middleware=[middleware])  # no checkpointer: a stateless service
    alice = HumanMessage("Pay invoice 7 from my IBAN DE89370400440532013000, then check billing", id="alice-iban")
    events = []
    with caplog.at_level(logging.WARNING, logger="langgraph_compaction"):
        for mode, chunk in agent.stream(
            {"messages": [alice]}, {"configurable": {"user_id": "alice"}}, stream_mode=["custom", "values"]
        ):
            events.append(chunk) if mode == "custom" else None
        assert any(e.get("stage") == "summarize" and e.get("evicted") for e in events)  # Alice's request compacted
        assert any("DE89" in p.read_text() for p in (tmp_path / "sessions").iterdir())  # and was offloaded
        bob = agent.invoke(
            {"messages": [HumanMessage("Bob here: what did we discuss?")]}, {"configurable": {"user_id": "bob"}}
        )
    answers = {m.tool_call_id: m.content for m in bob["messages"] if isinstance(m, ToolMessage)}
    assert set(answers) == {"bob-search", "bob-recall"}
    assert not any("DE89" in text for text in answers.values()), answers
    assert "not in the transcript: alice-iban" in answers["bob-recall"]
    # one warning in the log and one event in the stream, for the whole process
    warned = [r for r in caplog.records if "no thread id" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    notes = [e for e in events if e.get("stage") == "storage" and e.get("warning")]
    assert len(notes) == 1 and "thread_id" in notes[0]["warning"]
    # Alice's run has a transcript of its own, named for her (Bob's run compacted nothing, so wrote none)
    (name,) = [p.name for p in (tmp_path / "sessions").iterdir()]
    assert name.startswith(safe_label("no-thread:alice:")[:-2]) and name != "default.jsonl"


def test_graph_runs_without_a_thread_id_at_once_each_keep_their_own_transcript(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from support import agent_builder
    from test_storage_cases import snapshot

    from langgraph_compaction import add_compaction, load_transcript

    rounds, lock = {}, threading.Lock()

    def agent(state: dict) -> dict:  # 14 snapshots per request; the runs share this node, not their rounds
        request = next(m for m in state["messages"] if isinstance(m, HumanMessage) and not is_summary(m))
        with lock:
            n = rounds[request.id] = rounds.get(request.id, 0) + 1
        if n > 14:
            return {"messages": [AIMessage("Done.")]}
        call = {"name": "snapshot", "args": {"path": f"f{n}.bin"}, "id": f"{request.id}-{n}"}
        return {"messages": [AIMessage("Looking.", tool_calls=[call])]}

    builder = agent_builder(agent, tools=[snapshot])
    add_compaction(builder, before="agent", model=ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path)
    graph = builder.compile()  # no checkpointer
    users = ["ann", "ben", "cho", "dee"]

    def run(user: str) -> dict:
        request = HumanMessage(f"Snapshot the files of {user}", id=f"request-{user}")
        return graph.invoke({"messages": [request]}, {"configurable": {"user_id": user}})

    with ThreadPoolExecutor(4) as pool:
        states = list(pool.map(run, users))
    assert all(s["compaction"]["counts"].get("summarize") for s in states)
    keys = [s["compaction"]["run_thread"] for s in states]
    assert len(set(keys)) == 4 and all(k.startswith(f"no-thread:{u}:") for k, u in zip(keys, users, strict=True))
    for user, key in zip(users, keys, strict=True):
        requests = {m.id for m in load_transcript(tmp_path, key) if isinstance(m, HumanMessage) and not is_summary(m)}
        assert requests == {f"request-{user}"}
