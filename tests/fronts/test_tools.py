"""The agent's tools: memory search and reads, transcript search and recall, and compact, through ToolNode."""

import os

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore
from support import SMALL_WINDOW, TOOLS, ScriptedAgent, agent_builder, build_graph, first_input

from langgraph_compaction import CompactionConfig, CompactionState, FileStorage, add_compaction, is_summary
from langgraph_compaction.core.config import PruneConfig
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.fronts.tools import make_compaction_tools, rank
from langgraph_compaction.storage import StoreStorage
from langgraph_compaction.storage.transcript import load_transcript
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "thread-1"}}
MEMORY_MD = (
    "# Memory\n\n- The user's name is Ada\n- The project database is Postgres 16 on db-main\n- The user prefers tabs\n"
)
LEDGER = (
    "## Flush 2026-11-28T09:30:00+00:00\n<!-- flush:00aa -->\n\n"
    "- The staging deploy of module7 failed on a missing Postgres migration\n"
    "- The team standup moved to 10:00\n\n"
    "## Flush 2026-11-28T16:00:00+00:00\n\n- 用户希望周五发布版本\n\n"
)


@pytest.fixture
def memory_dir(tmp_path):
    root = tmp_path / "storage"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY_MD)
    (root / "memory" / "2026-11-28.md").write_text(LEDGER)
    (tmp_path / "secret.txt").write_text("TOP-SECRET-OUTSIDE")
    return root


def _tools_graph(tools, store=None):
    builder = StateGraph(CompactionState)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile(store=store)


def _answer(graph, name, args, messages=(), config=THREAD, **values):
    """Return the ToolMessage a ToolNode answers one call with (``values``: more of the input state)."""
    call = AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}], id=f"ai-{name}")
    state = graph.invoke({"messages": [*messages, call], **values}, config)
    answer = state["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == f"call-{name}"
    return answer


def _call(graph, name, args, messages=(), config=THREAD, **values):
    return _answer(graph, name, args, messages, config, **values).content


async def _acall(graph, name, args, config=THREAD):
    call = AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}])
    return (await graph.ainvoke({"messages": [call]}, config))["messages"][-1].content


def test_memory_search_ranks_with_bm25_and_gives_path_line_and_date(memory_dir):
    graph = _tools_graph(make_compaction_tools(memory_dir))
    answer = _call(graph, "memory_search", {"query": "postgres migration"})
    rows = answer.splitlines()[1:]
    assert rows == [
        "memory/2026-11-28.md#4 [2026-11-28T09:30:00+00:00] "
        "The staging deploy of module7 failed on a missing Postgres migration",
        "MEMORY.md#4 [curated] The project database is Postgres 16 on db-main",
    ]
    assert _call(graph, "memory_search", {"query": "周五发布"}).splitlines()[1] == (
        "memory/2026-11-28.md#9 [2026-11-28T16:00:00+00:00] 用户希望周五发布版本"
    )
    assert _call(graph, "memory_search", {"query": "kubernetes"}) == "No memory matches 'kubernetes'."
    assert len(_call(graph, "memory_search", {"query": "the user", "max_results": 1}).splitlines()) == 2


def test_rank_prefers_rare_terms_and_ignores_non_matching_documents():
    docs = ["alpha beta", "beta gamma", "beta beta delta", "unrelated words"]
    order = [i for i, _ in rank("delta beta", docs, 10)]
    assert order[0] == 2 and sorted(order) == [0, 1, 2]
    assert 3 not in [i for i, _ in rank("beta", docs, 10)]
    assert rank("", docs, 10) == [] and rank("x", [], 10) == []


def test_memory_get_returns_numbered_line_ranges(memory_dir):
    graph = _tools_graph(make_compaction_tools(memory_dir))
    assert _call(graph, "memory_get", {"path": "MEMORY.md", "start_line": 3, "end_line": 4}) == (
        "MEMORY.md lines 3-4 of 5:\n3: - The user's name is Ada\n4: - The project database is Postgres 16 on db-main\n"
        "(lines 5-5 not shown; ask for them with start_line=5)"
    )
    whole = _call(graph, "memory_get", {"path": "memory/2026-11-28.md"})
    assert whole.startswith("memory/2026-11-28.md lines 1-10 of 10:\n1: ## Flush 2026-11-28T09:30:00+00:00")
    assert _call(graph, "memory_get", {"path": "memory/2026-01-01.md"}).startswith(
        "Error: memory/2026-01-01.md does not exist"
    )


ESCAPES = [
    "../secret.txt",
    "memory/../../secret.txt",
    "/etc/passwd",
    "{outside}",
    "memory/link.md",
    "linked/secret.txt",
    "MEMORY.md\x00../../secret.txt",
    "..\\secret.txt",
    "memory/" + "a/" * 2_500 + "x.md",
    "sessions/thread-1.jsonl",
    "memory/consolidation.json",
    ".hidden.md",
    "",
]


@pytest.mark.parametrize("path", ESCAPES, ids=lambda p: repr(p)[:24])
def test_memory_get_refuses_paths_outside_the_memory_folder_and_reads_nothing(memory_dir, path):
    outside = memory_dir.parent / "secret.txt"
    (memory_dir / "memory" / "link.md").symlink_to(outside)
    (memory_dir / "linked").symlink_to(memory_dir.parent, target_is_directory=True)
    (memory_dir / "sessions").mkdir()
    (memory_dir / "sessions" / "thread-1.jsonl").write_text('{"secret": "TOP-SECRET-OUTSIDE"}\n')
    graph = _tools_graph(make_compaction_tools(memory_dir))
    before = os.stat(outside).st_atime_ns
    answer = _call(graph, "memory_get", {"path": path.format(outside=outside), "start_line": 1, "end_line": 5})
    assert answer.startswith("Error:")
    assert "TOP-SECRET-OUTSIDE" not in answer
    assert os.stat(outside).st_atime_ns == before


def test_session_search_and_recall_bring_evicted_messages_back_in_full(tmp_path):
    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    for turn in range(6):
        graph.invoke(first_input(turn), THREAD)
    state = graph.get_state(THREAD).values
    assert state["messages"][1].name == SUMMARY_MESSAGE_NAME
    tools = _tools_graph(make_compaction_tools(tmp_path))

    found = _call(tools, "session_search", {"query": "module0 write_file handler"}, state["messages"])
    assert all(row.startswith("id=") for row in found.splitlines()[1:])
    first = next(row for row in found.splitlines() if "[ai, evicted]" in row)
    assert "write_file" in first and "module0" in first
    write_id = first.split()[0][3:]
    original = next(m for view in agent.views for m in view if m.id == write_id)

    in_state = {m.id for m in state["messages"]}
    # earlier summaries are in the transcript too; recalled by id, each would bring what it covers
    evicted = [m.id for m in load_transcript(tmp_path, "thread-1") if m.id not in in_state and not is_summary(m)]
    wanted = [write_id, *[i for i in evicted if i != write_id], "no-such-id"]
    pages = [_call(tools, "recall", {"message_ids": wanted}, state["messages"])]
    head = f"Recalled {len(evicted)} of {len(wanted)} messages (page 1 of "
    assert pages[0].startswith(head) and f":\n--- message {write_id} (ai) ---\n" in pages[0]
    count = int(pages[0][len(head) :].split(")")[0])
    assert count >= 3
    for page in range(2, count + 1):
        pages.append(_call(tools, "recall", {"message_ids": wanted, "page": page}, state["messages"]))
        assert f"(page {page} of {count})" in pages[-1]
    assert all(len(p) < 10_500 for p in pages)
    body = "".join(p.split(":\n", 1)[1].split("\n(call recall with page=")[0] for p in pages)
    assert original.tool_calls[0]["args"]["content"] in body.replace("\\n", "\n")  # the full argument, not a preview
    assert body.endswith("(not in the transcript: no-such-id)")


def test_compact_tool_compacts_on_the_next_gate_with_the_focus(tmp_path):
    class CompactingAgent(ScriptedAgent):
        def __call__(self, state):
            last = state["messages"][-1]
            if isinstance(last, HumanMessage) and last.content.startswith("compact"):
                self.views.append(list(state["messages"]))
                call = {
                    "name": "compact",
                    "args": {"focus": "the module1 fix"},
                    "id": f"call-compact-{len(self.views)}",
                }
                return {"messages": [AIMessage("", tool_calls=[call])]}
            if isinstance(last, ToolMessage) and last.name == "compact":
                self.views.append(list(state["messages"]))
                return {"messages": [AIMessage("Compacted; continuing.")]}
            return super().__call__(state)

    summarizer = ScriptedModel()
    agent = CompactingAgent()
    builder = agent_builder(agent, tools=[*TOOLS, *make_compaction_tools(tmp_path)])
    config = CompactionConfig(context_window=1_000_000, trigger_messages=0, keep_tokens=2_000)
    add_compaction(builder, before="agent", model=summarizer, config=config, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())

    graph.invoke({"messages": [HumanMessage("compact before anything")]}, THREAD)
    early = graph.get_state(THREAD).values
    assert early["messages"][-2].content.startswith("Nothing to compact")
    view = read_compaction(early.get("compaction"))
    assert view["manual"] is None and "summarize" not in view["counts"]

    for turn in range(3):
        graph.invoke(first_input(turn), THREAD)
    assert (
        "summarize" not in read_compaction(graph.get_state(THREAD).values["compaction"])["counts"]
    )  # below every threshold
    graph.invoke({"messages": [HumanMessage("compact now please")]}, THREAD)
    state = graph.get_state(THREAD).values
    answer = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "compact")
    assert answer.content.startswith("Compaction requested: before your next step the earlier conversation")
    assert "focusing on: the module1 fix" in answer.content
    assert state["compaction"]["counts"]["summarize"] == 1 and read_compaction(state["compaction"])["manual"] is None
    prompt = next(c for c in summarizer.calls if "Context Extraction Assistant" in c)
    assert "Preserve everything about it in detail: the module1 fix" in prompt
    # the system prompt came after the first request, so it is conversation: summarized, not pinned
    assert state["messages"][0].name == SUMMARY_MESSAGE_NAME and not any(m.type == "system" for m in state["messages"])
    assert [type(m).__name__ for m in agent.views[-1][-3:]] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert state["messages"][-1].content == "Compacted; continuing."


def test_compact_tool_with_the_agent_config_says_how_much_goes(tmp_path):
    config = CompactionConfig(context_window=1_000_000, keep_tokens=50)
    tools = _tools_graph(make_compaction_tools(tmp_path, config=config))
    history = [
        HumanMessage("first request " * 50, id="h1"),
        AIMessage("done " * 50, id="a1"),
        HumanMessage("second", id="h2"),
    ]
    answer = _call(tools, "compact", {}, history, compaction={"wired": True})  # as a gate marks it
    assert "(about 2 messages, ~" in answer and "focusing" not in answer


def test_compact_fails_loudly_when_no_compaction_runs_in_front_of_the_model(tmp_path, caplog):
    """The tools in a graph without add_compaction: the model is told, a warning is logged, nothing is requested."""
    graph = _tools_graph(make_compaction_tools(tmp_path))
    history = [
        HumanMessage("first request " * 50, id="h1"),
        AIMessage("done " * 50, id="a1"),
        HumanMessage("second", id="h2"),
    ]
    call = AIMessage(
        "", tool_calls=[{"name": "compact", "args": {"focus": "x"}, "id": "call-compact"}], id="ai-compact"
    )
    with caplog.at_level("WARNING", logger="langgraph_compaction"):
        state = graph.invoke({"messages": [*history, call]}, THREAD)
    answer = state["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert answer.content.startswith("Error: compact is not available here")
    assert "no compaction runs in front of this agent's model" in caplog.text
    assert read_compaction(state.get("compaction"))["manual"] is None


async def test_tools_run_async_with_the_graph_store_and_the_user_namespace():
    store = InMemoryStore()
    StoreStorage(store).replace_memory_file("ada@example.com", "MEMORY.md", MEMORY_MD)
    StoreStorage(store).replace_memory_file("bob", "MEMORY.md", "- Bob likes Postgres too\n")
    graph = _tools_graph(make_compaction_tools(), store=store)
    config = {"configurable": {"thread_id": "t-1", "user_id": "ada@example.com"}}
    answer = await _acall(graph, "memory_search", {"query": "postgres"}, config)
    assert answer.splitlines()[1] == "MEMORY.md#4 [curated] The project database is Postgres 16 on db-main"
    assert "Bob" not in answer
    got = await _acall(graph, "memory_get", {"path": "MEMORY.md", "start_line": 3, "end_line": 3}, config)
    assert (
        got
        == "MEMORY.md lines 3-3 of 5:\n3: - The user's name is Ada\n(lines 4-5 not shown; ask for them with start_line=4)"
    )
    assert (await _acall(graph, "session_search", {"query": "x"}, config)).startswith("Nothing of this conversation")


def test_retrieval_tools_are_never_pruned_by_default():
    names = [t.name for t in make_compaction_tools()]
    assert names == ["memory_search", "memory_get", "session_search", "recall", "compact", "pin", "unpin"]
    assert set(names[:4]) | {"read_file"} <= PruneConfig().excluded_tools


def test_session_search_reads_a_store_transcript(tmp_path):
    store = InMemoryStore()
    graph, _ = build_graph(
        ScriptedModel(), config=SMALL_WINDOW, storage=None, store=store, checkpointer=InMemorySaver()
    )
    for turn in range(5):
        graph.invoke(first_input(turn), THREAD)
    assert load_transcript(store, "thread-1")
    tools = _tools_graph(make_compaction_tools(), store=store)
    found = _call(tools, "session_search", {"query": "module1 pytest"}, graph.get_state(THREAD).values["messages"])
    assert "pytest -q module1" in found and "evicted" in found


@pytest.mark.parametrize(
    "user_id", ["../../x", "/etc", "a\x00b", "u" * 5_000, "ada.lovelace@example.com"], ids=lambda u: repr(u)[:16]
)
def test_hostile_user_ids_keep_memory_inside_storage(tmp_path, user_id):
    root = tmp_path / "storage"
    graph = _tools_graph(make_compaction_tools(root))
    FileStorage(root).append_memory_file(user_id, "memory/2026-11-28.md", "- The user deploys on Fridays\n")
    config = {"configurable": {"thread_id": "t", "user_id": user_id}}
    assert _call(graph, "memory_search", {"query": "deploys"}, config=config).splitlines()[1] == (
        "memory/2026-11-28.md#1 [2026-11-28] The user deploys on Fridays"
    )
    assert (
        _call(graph, "memory_search", {"query": "deploys"}) == "No memory matches 'deploys'."
    )  # not the default user's
    assert all(
        os.path.realpath(p).startswith(str(root) + os.sep) for p in (str(f) for f in tmp_path.rglob("*") if f.is_file())
    )


def test_a_corrupted_transcript_is_an_error_message_not_a_crash(tmp_path):
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "thread-1.jsonl").write_text(
        '{"type": "human", "data": {"content": "hi", "id": "h1"}}\n{not json\n'
    )
    graph = _tools_graph(make_compaction_tools(tmp_path))
    answer = _call(graph, "session_search", {"query": "hi"})
    assert answer.startswith("Error: session_search could not read the compaction storage: JSONDecodeError")


@pytest.mark.parametrize("thread", ["", 0])
def test_session_search_reads_the_transcript_of_its_own_thread_id(tmp_path, thread):
    """``""`` and ``0`` are threads of their own: the tools read where the offload wrote, never ``"default"``."""
    storage = FileStorage(tmp_path)
    storage.append_transcript("default", messages_to_dict([HumanMessage("the default thread's secret plan", id="d1")]))
    storage.append_transcript(str(thread), messages_to_dict([HumanMessage("this thread's deploy checklist", id="t1")]))
    graph = _tools_graph(make_compaction_tools(tmp_path))
    config = {"configurable": {"thread_id": thread}}
    assert "deploy checklist" in _call(graph, "session_search", {"query": "deploy checklist"}, config=config)
    assert "the default thread's" not in _call(graph, "session_search", {"query": "secret plan"}, config=config)


def test_memory_search_finds_word_parts_and_prefixes_as_session_search_does(tmp_path):
    storage = FileStorage(tmp_path)
    storage.replace_memory_file(
        "default", "MEMORY.md", "# Memory\n\n- Fixed readFile in module7\n- Two modules load slowly\n"
    )
    storage.append_transcript(
        "thread-1", messages_to_dict([HumanMessage("Fixed readFile in module7", id="h1"), AIMessage("ok", id="a1")])
    )
    graph = _tools_graph(make_compaction_tools(tmp_path))
    memory = _call(graph, "memory_search", {"query": "module"}).splitlines()
    assert memory[1:] == [
        "MEMORY.md#4 [curated] Two modules load slowly",
        "MEMORY.md#3 [curated] Fixed readFile in module7",
    ]
    assert _call(graph, "memory_search", {"query": "file"}).splitlines()[1:] == [
        "MEMORY.md#3 [curated] Fixed readFile in module7"
    ]
    assert _call(graph, "session_search", {"query": "module"}).splitlines()[1].startswith("id=h1 ")
    assert _call(graph, "memory_search", {"query": "mo"}) == "No memory matches 'mo'."  # too short to be a prefix
