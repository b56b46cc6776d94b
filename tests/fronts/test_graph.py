"""The compiled graph end to end: compaction in front of a tool-using agent, sync and async."""

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, messages_from_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from support import SMALL_WINDOW, build_graph, first_input
from typing_extensions import TypedDict

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.core.summary import summary_message_id
from langgraph_compaction.engine.nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "thread-1"}}


def _run_turns(graph, turns, config=THREAD):
    for t in range(turns):
        graph.invoke(first_input(t), config)
    return graph.get_state(config).values


def _transcript(tmp_path, thread="thread-1"):
    lines = (tmp_path / "sessions" / f"{thread}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_twelve_turns_stay_under_the_trigger_with_valid_views(tmp_path):
    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run_turns(graph, 12)
    budget = SMALL_WINDOW.resolve()
    assert agent.problems == []
    assert len(agent.views) == 36
    assert max(agent.view_tokens) < budget.trigger_tokens
    counts = state["compaction"]["counts"]
    assert counts.get("summarize", 0) >= 3
    summaries = [m for m in state["messages"] if m.name == SUMMARY_MESSAGE_NAME]
    assert len(summaries) == 1 and state["messages"][0].id == "system-prompt" and state["messages"][1] is not None
    assert state["messages"][1].name == SUMMARY_MESSAGE_NAME


def test_summary_message_has_the_design_form_and_a_content_id(tmp_path):
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run_turns(graph, 6)
    summary = state["messages"][1]
    assert summary.type == "human" and summary.name == "__compaction_summary__"
    assert summary.id == summary_message_id(summary.content)
    path = "sessions/thread-1.jsonl"  # relative to the storage: no path of the machine
    assert summary.content.startswith(
        "You are in the middle of a conversation that has been summarized.\n\n"
        f"The full conversation history has been saved to {path} should you need to refer back to it for details.\n\n"
        "A condensed summary follows:\n\n<summary>\n## SESSION INTENT"
    )
    assert summary.content.endswith("</summary>")


def test_every_message_reaches_the_transcript_exactly_once_and_round_trips(tmp_path):
    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run_turns(graph, 10)
    records = _transcript(tmp_path)
    ids = [r["data"]["id"] for r in records]
    assert len(ids) == len(set(ids))
    seen = {m.id: m for view in agent.views for m in view} | {m.id: m for m in state["messages"]}
    in_state = {m.id for m in state["messages"]}
    assert set(seen) - in_state <= set(ids)  # whatever left the state is in the transcript
    restored = {m.id: m for m in messages_from_dict(records)}
    for view in agent.views[:3]:  # the first views are before any edit: byte-for-byte originals
        for m in view:
            assert restored[m.id] == m


def test_async_astream_compacts_and_emits_custom_events(tmp_path):
    import asyncio

    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())

    async def main():
        events = []
        for t in range(8):
            async for mode, chunk in graph.astream(first_input(t), THREAD, stream_mode=["custom", "updates"]):
                if mode == "custom":
                    events.append(chunk)
        return events, (await graph.aget_state(THREAD)).values

    events, state = asyncio.run(main())
    assert agent.problems == []
    summarized = [e for e in events if e["stage"] == "summarize" and e.get("layer") == "summarize"]
    assert summarized, events
    first = summarized[0]
    assert first["tokens_after"] < first["tokens_before"]
    assert first["evicted_ids"] and first["offload_path"].endswith("thread-1.jsonl")
    assert state["compaction"]["counts"]["summarize"] == len(summarized)


def test_sqlite_checkpointer_resumes_a_thread_in_a_new_process_like_graph(tmp_path):
    db = tmp_path / "checkpoints.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=saver)
        _run_turns(graph, 5)
        before = graph.get_state(THREAD).values
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=saver)
        assert graph.get_state(THREAD).values["compaction"] == before["compaction"]
        for t in range(5, 10):
            graph.invoke(first_input(t), THREAD)
        after = graph.get_state(THREAD).values
    assert agent.problems == []
    assert after["compaction"]["counts"]["summarize"] > before["compaction"]["counts"]["summarize"]


@pytest.mark.parametrize(
    "summary",
    [RuntimeError("provider down"), "", "   ", "Error: rate limited", "NO_REPLY", "Sure! Here you go."],
    ids=["raises", "empty", "blank", "error-text", "no-reply", "chatter-only"],
)
def test_failed_summary_is_never_committed_and_nothing_is_lost(tmp_path, summary):
    # a window large enough that the history still fits: the failure keeps it whole
    # (the breaker, which turns to extractive summaries after 3 failures, is tested in test_thrash.py)
    config = CompactionConfig(
        context_window=60_000, trigger_tokens=8_000, keep_tokens=2_000, guards={"breaker_failures": 50}
    )
    graph, agent = build_graph(
        ScriptedModel(summary=summary), config=config, storage=tmp_path, checkpointer=InMemorySaver()
    )
    state = _run_turns(graph, 5)
    assert agent.problems == []
    assert not any(m.name == SUMMARY_MESSAGE_NAME for m in state["messages"])
    assert sum(isinstance(m, HumanMessage) for m in state["messages"]) == 5  # every request still there
    assert state["compaction"]["counts"]["failed"] >= 1
    assert "history kept" in state["compaction"]["last_error"]
    assert agent.views[-1][-1].type == "tool"  # the agent kept running


def test_failed_summary_over_the_window_commits_an_extractive_summary(tmp_path):
    config = CompactionConfig(context_window=9_000, trigger_tokens=7_000, keep_tokens=2_000)
    graph, agent = build_graph(
        ScriptedModel(summary=RuntimeError("down")), config=config, storage=tmp_path, checkpointer=InMemorySaver()
    )
    state = _run_turns(graph, 4)
    assert agent.problems == []
    summary = next(m for m in state["messages"] if m.name == SUMMARY_MESSAGE_NAME)
    assert "Extractive summary" in summary.content
    assert "<request>\nTask 0 please fix module0 and run its tests\n</request>" in summary.content
    assert "- src/module0.py (wrote, read)" in summary.content
    assert state["compaction"]["counts"]["extractive"] >= 1


def test_add_compaction_rewires_plain_and_conditional_edges():
    class State(TypedDict):
        messages: list

    builder = StateGraph(CompactionState)
    builder.add_node("router", lambda s: {})
    builder.add_node("agent", lambda s: {"messages": [AIMessage("hi")]})
    builder.add_edge(START, "router")
    builder.add_conditional_edges("router", lambda s: "agent", {"agent": "agent", "end": END})
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=ScriptedModel())
    graph = builder.compile()
    edges = {(e.source, e.target) for e in graph.get_graph().edges}
    assert ("router", GATE) in edges and ("router", "agent") not in edges
    assert {
        (GATE, FLUSH),
        (GATE, OFFLOAD),
        (FLUSH, SUMMARIZE),
        (OFFLOAD, SUMMARIZE),
        (SUMMARIZE, "agent"),
        (GATE, "agent"),
    } <= edges
    out = graph.invoke({"messages": [HumanMessage("hello")]})
    assert out["messages"][-1].content == "hi"


def test_conditional_edge_without_path_map_is_redirected_at_run_time():
    seen = []
    builder = StateGraph(CompactionState)
    builder.add_node("router", lambda s: {})
    builder.add_node("agent", lambda s: seen.append(1) or {"messages": [AIMessage("hi")]})
    builder.add_edge(START, "router")
    builder.add_conditional_edges("router", lambda s: "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=ScriptedModel())
    steps = [list(chunk) for chunk in builder.compile().stream({"messages": [HumanMessage("hello")]})]
    assert [GATE] in steps and seen == [1]


def test_add_compaction_adds_the_compaction_key_to_a_plain_messages_state():
    from langgraph.graph import MessagesState

    builder = StateGraph(MessagesState)
    # long answers: a manual compaction must shrink the context too, or it keeps the history
    builder.add_node(
        "agent", lambda s: {"messages": [AIMessage("hi, " + "the export rounds amounts half-even. " * 200)]}
    )
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), config=CompactionConfig(keep_messages=1))
    graph = builder.compile(checkpointer=InMemorySaver())
    for text in ("first request", "second request"):
        graph.invoke({"messages": [HumanMessage(text)]}, THREAD)
    graph.update_state(THREAD, {"compaction": {"manual": {"focus": "the second request"}}})
    graph.invoke({"messages": [HumanMessage("third request")]}, THREAD)
    state = graph.get_state(THREAD).values
    assert state["compaction"]["counts"] == {"summarize": 1}
    assert [m.content for m in state["messages"] if m.type == "human" and m.name is None][-1] == "third request"
    assert state["messages"][0].name == SUMMARY_MESSAGE_NAME


def test_missing_before_node_and_missing_messages_key_raise_clear_errors():
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda s: {})
    with pytest.raises(ValueError, match="before='model' is not a node of this graph.*agent"):
        add_compaction(builder, before="model", model=ScriptedModel())

    class NoMessages(TypedDict):
        text: str

    other = StateGraph(NoMessages)
    other.add_node("agent", lambda s: {})
    with pytest.raises(ValueError, match="no 'messages' key"):
        add_compaction(other, before="agent", model=ScriptedModel())
