"""One user never reads another's conversation or memory: thread-less runs, ids built to collide, legacy names."""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import threading

import pytest
from fronts import CONFIG, TOOLS, ToolCallingModel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from support import SMALL_WINDOW, build_graph, first_input

from langgraph_compaction import CompactionMiddleware, FileStorage, StoreStorage, is_summary, safe_label
from langgraph_compaction.engine import run as run_module
from langgraph_compaction.fronts.tools import recall_messages, search_memory, search_session
from langgraph_compaction.storage import legacy_label
from langgraph_compaction.testing import ScriptedModel

VICTIM_THREAD, VICTIM_USER = "user:42", "alice@example.com"
#: What earlier releases named the victim's ids: a new thread and a new user can be given exactly these ids.
OLD_THREAD_LABEL, OLD_USER_LABEL = "user-42-ea3fd43be1e57d62", "alice-example-com-ff8d9819fc0e12bf"


def released_label(value: object) -> str:
    """The label earlier releases stored an id under (their ``safe_label``), to write legacy storage with."""
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "id"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def test_the_victims_old_labels_are_what_the_attacker_picks():
    assert (released_label(VICTIM_THREAD), released_label(VICTIM_USER)) == (OLD_THREAD_LABEL, OLD_USER_LABEL)


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
    for thread in (OLD_THREAD_LABEL, safe_label(VICTIM_THREAD)):
        assert "IBAN" not in search_session(storage, thread, "IBAN")
        assert "DE89" not in recall_messages(storage, thread, [secret.id])
    assert "Task 0" in search_memory(storage, VICTIM_USER, "Task")
    for user in (OLD_USER_LABEL, safe_label(VICTIM_USER)):
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
    OLD_THREAD_LABEL,
    OLD_USER_LABEL,
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
    """Ids built to collide: nasty ones, random text, and the labels (new and old) of the others."""
    base = draw(st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=80)), min_size=1, max_size=8))
    derived = [f(v) for v in base for f in (safe_label, released_label, lambda v: v.upper(), lambda v: v + "." + v)]
    return list(dict.fromkeys(base + draw(st.lists(st.sampled_from(derived), max_size=8))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(colliding_ids())
def test_labels_are_injective_valid_names_and_no_legacy_name_is_shared(ids):
    labels = {v: safe_label(v) for v in ids}
    assert len(set(labels.values())) == len(ids)
    assert len({label.casefold() for label in labels.values()}) == len(ids)  # a case-insensitive disk too
    for label in labels.values():
        assert label and len(label) <= 64 and re.fullmatch(r"[a-z0-9_+~-]+", label)
    for thread in (True, False):
        owners = {}
        for v in ids:
            old = legacy_label(v, thread=thread)
            if old is not None:
                assert old not in labels.values()  # nobody writes under a name an earlier release gave another id
                assert owners.setdefault(old, v) == v  # and only one id may take it over


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


# --- storage written under earlier names ---------------------------------------------------------


def _legacy_files(root, thread: str, user: str) -> None:
    """Write what an earlier release wrote for ``thread`` and ``user``: a transcript and a user folder."""
    scratch = FileStorage(root / "scratch")
    scratch.append_transcript("t", messages_to_dict([HumanMessage(f"message of {thread}", id="m1")]))
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    shutil.move(scratch.transcript_location("t"), root / "sessions" / f"{released_label(thread)}.jsonl")
    (root / "users" / released_label(user)).mkdir(parents=True, exist_ok=True)
    (root / "users" / released_label(user) / "MEMORY.md").write_text(f"- fact of {user}\n")
    shutil.rmtree(root / "scratch")


def _legacy_items(store, thread: str, user: str) -> None:
    scratch = StoreStorage(store)
    scratch.append_transcript("scratch", messages_to_dict([HumanMessage(f"message of {thread}", id="m1")]))
    for item in store.search(("compaction", "transcripts", "scratch")):
        store.put(("compaction", "transcripts", released_label(thread)), item.key, item.value)
        store.delete(item.namespace, item.key)
    store.put(("compaction", "memory", released_label(user)), "MEMORY.md", {"text": f"- fact of {user}\n"})


@pytest.mark.parametrize("backend", ["files", "store"])
def test_storage_of_earlier_releases_is_read_by_its_own_ids_and_claimed_by_no_other(tmp_path, backend):
    store = InMemoryStore() if backend == "store" else None
    for thread, user in ((VICTIM_THREAD, VICTIM_USER), ("Thread-A", "Bob"), ("plain-thread", "carol")):
        (_legacy_items(store, thread, user) if store is not None else _legacy_files(tmp_path, thread, user))
    storage = StoreStorage(store) if store is not None else FileStorage(tmp_path)
    # the attackers come first: ids equal to the victim's old labels
    assert storage.read_transcript(OLD_THREAD_LABEL) == []
    assert storage.read_memory_file(OLD_USER_LABEL, "MEMORY.md") is None
    storage.append_transcript(OLD_THREAD_LABEL, messages_to_dict([HumanMessage("attacker", id="x1")]))
    for thread, user in ((VICTIM_THREAD, VICTIM_USER), ("Thread-A", "Bob"), ("plain-thread", "carol")):
        assert [r["data"]["content"] for r in storage.read_transcript(thread)] == [f"message of {thread}"]
        assert storage.read_memory_file(user, "MEMORY.md") == f"- fact of {user}\n"
        assert storage.list_memory_files(user) == ["MEMORY.md"]
    # a second process finds everything at its new name, nothing left under the old one
    again = StoreStorage(store) if store is not None else FileStorage(tmp_path)
    assert [r["data"]["content"] for r in again.read_transcript("Thread-A")] == ["message of Thread-A"]
    assert [r["data"]["content"] for r in again.read_transcript(OLD_THREAD_LABEL)] == ["attacker"]


def test_the_transcript_every_thread_less_run_shared_is_read_by_no_thread(tmp_path):
    _legacy_files(tmp_path, "default", "default")  # sessions/default.jsonl: the runs without a thread id
    storage = FileStorage(tmp_path)
    assert storage.read_transcript("default") == []
    assert (tmp_path / "sessions" / "default.jsonl").exists()  # left for its owner to read or delete by hand


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
    assert len(set(keys)) == 4 and all(k.startswith(f"no-thread:{u}:") for k, u in zip(keys, users))
    for user, key in zip(users, keys):
        requests = {m.id for m in load_transcript(tmp_path, key) if isinstance(m, HumanMessage) and not is_summary(m)}
        assert requests == {f"request-{user}"}


def test_a_service_of_many_thread_less_runs_keeps_a_bounded_memory_of_ids_looked_up(tmp_path):
    storage = FileStorage(tmp_path)
    for n in range(5_000):  # every run without a thread id names a transcript of its own
        storage.transcript_location(f"no-thread:alice:{n:032x}")
    assert len(storage._first_use._seen) <= 4_096
