"""A compiled compacting agent added directly as a node of a parent graph that shares its ``messages`` key.

The parent's ``add_messages`` never sees the agent's removals, so each turn
re-sends the agent every message a compaction took out, with the summaries
appended: left alone the parent ends at 75 messages and 25k tokens on a 5k
trigger, holding 11 summaries. The agent finds out at its first call after a
compaction (a summary in the middle of its input, in a parent's namespace)
and stops with an error that names ``subgraph_node``, the supported pattern.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from support.fronts import CONFIG, REQUESTS, TOOLS, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionMiddleware, CompactionState, is_summary, subgraph_node
from langgraph_compaction.testing import ScriptedModel


def _parent(agent, checkpointer=None):
    parent = StateGraph(CompactionState)
    parent.add_node("assistant", agent)
    parent.add_edge(START, "assistant")
    parent.add_edge("assistant", END)
    return parent.compile(checkpointer=checkpointer or InMemorySaver())


def _drive_until_refused(graph, thread: dict) -> tuple[int, Exception]:
    for n in range(REQUESTS):
        try:
            graph.invoke({"messages": [request(n)]}, thread)
        except Exception as exc:  # noqa: BLE001 - the refusal is what the test looks for
            return n, exc
    raise AssertionError("the parent ran every request with the agent as a direct node")


def test_the_agent_added_directly_as_a_node_refuses_to_run_and_names_subgraph_node(tmp_path):
    graph = _parent(edge_builder(ToolCallingModel(), tmp_path, CONFIG).compile())
    thread = {"configurable": {"thread_id": "direct"}}
    turn, error = _drive_until_refused(graph, thread)
    assert "subgraph_node" in str(error) and "assistant" in str(error)
    state = graph.get_state(thread).values
    # stopped at the first call after the first compaction: the parent holds one summary, not eleven
    assert [is_summary(m) for m in state["messages"]].count(True) == 1
    assert turn < REQUESTS - 1


async def test_the_async_agent_added_directly_as_a_node_refuses_too(tmp_path):
    graph = _parent(edge_builder(ToolCallingModel(), tmp_path, CONFIG).compile())
    thread = {"configurable": {"thread_id": "adirect"}}
    with pytest.raises(Exception, match="subgraph_node"):
        for n in range(REQUESTS):
            await graph.ainvoke({"messages": [request(n)]}, thread)


def test_a_create_agent_with_the_middleware_added_directly_as_a_node_refuses_too(tmp_path):
    middleware = CompactionMiddleware(model=ScriptedModel(), config=CONFIG, storage=tmp_path, add_tools=False)
    graph = _parent(create_agent(ToolCallingModel(), TOOLS, middleware=[middleware]))
    _, error = _drive_until_refused(graph, {"configurable": {"thread_id": "middleware"}})
    assert "subgraph_node" in str(error)


def test_through_subgraph_node_the_same_parent_runs_every_request(tmp_path):
    graph = _parent(subgraph_node(edge_builder(ToolCallingModel(), tmp_path, CONFIG).compile(), name="assistant"))
    thread = {"configurable": {"thread_id": "wrapped"}}
    for n in range(REQUESTS):
        graph.invoke({"messages": [request(n)]}, thread)
    messages = graph.get_state(thread).values["messages"]
    assert [is_summary(m) for m in messages].count(True) == 1 and is_summary(messages[0])
