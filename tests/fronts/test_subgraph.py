"""A compiled compacting agent as a node of a parent graph that shares its ``messages`` key."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from support.fronts import CONFIG, REQUESTS, WINDOW, Session, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionState, is_summary, load_transcript, subgraph_node
from langgraph_compaction.core.tokens import estimate_tokens

TRIGGER = CONFIG.resolve().trigger_tokens


def compacting_agent(model: ToolCallingModel, tmp_path):
    return edge_builder(model, tmp_path, CONFIG).compile()


def parent_graph(agent, node):
    parent = StateGraph(CompactionState)
    parent.add_node("assistant", node(agent))
    parent.add_node("log", lambda state: {})
    parent.add_edge(START, "assistant")
    parent.add_edge("assistant", "log")
    parent.add_edge("log", END)
    return parent.compile(checkpointer=InMemorySaver())


def test_the_parent_stays_bounded_and_counts_each_compaction_once(tmp_path):
    model = ToolCallingModel()
    graph = parent_graph(compacting_agent(model, tmp_path), subgraph_node)
    session = Session(model)
    thread = {"configurable": {"thread_id": "parent"}}
    sizes = []
    for n in range(REQUESTS):
        graph.invoke({"messages": [request(n)]}, thread)
        session.check(request(n))
        sizes.append(estimate_tokens(graph.get_state(thread).values["messages"]))

    state = graph.get_state(thread).values
    assert session.problems == [] and session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    # the parent holds what the agent holds: one summary at the front, never over the trigger
    assert max(sizes) <= TRIGGER, sizes
    assert [is_summary(m) for m in state["messages"]].count(True) == 1 and is_summary(state["messages"][0])
    # each compaction counted once, in the parent's state too
    assert state["compaction"]["counts"]["summarize"] == session.summaries_seen()
    # and each message a summary evicted counted once: never more than the thread ever held
    edited = state["compaction"]["edited_messages"]
    assert 0 < edited.get("summarize", 0) + edited.get("extractive", 0) <= len(load_transcript(tmp_path, "parent"))
    assert session.lost(state["messages"], tmp_path, "parent") == []


async def test_the_async_parent_stays_bounded_too(tmp_path):
    model = ToolCallingModel()
    graph = parent_graph(compacting_agent(model, tmp_path), subgraph_node)
    session = Session(model)
    thread = {"configurable": {"thread_id": "aparent"}}
    for n in range(REQUESTS):
        await graph.ainvoke({"messages": [request(n)]}, thread)
        session.check(request(n))

    state = (await graph.aget_state(thread)).values
    assert session.problems == [] and estimate_tokens(state["messages"]) <= TRIGGER
    assert state["compaction"]["counts"]["summarize"] == session.summaries_seen() >= 2
