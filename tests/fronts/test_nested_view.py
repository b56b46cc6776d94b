"""A compacting agent in view mode added directly as a node of a parent graph that shares its ``messages`` key.

In view mode the agent keeps every message and compacts only what its
model is sent, so the parent's messages do not pile up; but the agent's
whole ``compaction`` value comes back to the parent each turn and the
parent's reducer adds its counts again, each turn doubling them. Either
the agent stops with the error that names ``subgraph_node`` (as it does in
rewrite mode), or the parent stays bounded: its counts say how many
summaries were made, and no request goes over the window.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from support.fronts import CONFIG, REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, edge_builder, request
from test_nested_agent import _parent

from langgraph_compaction import CompactionMiddleware, subgraph_node
from langgraph_compaction.testing import ScriptedModel

VIEW = CONFIG.model_copy(update={"mode": "view"})


def _refused_or_bounded(graph, model: ToolCallingModel, thread: dict, run) -> None:
    """Drive the session; pass when the agent refuses with the subgraph_node error, or the parent stays bounded."""
    session = Session(model)
    for n in range(REQUESTS):
        try:
            run(graph, {"messages": [request(n)]}, thread)
        except Exception as exc:  # noqa: BLE001 - the refusal is one of the two outcomes looked for
            assert "subgraph_node" in str(exc) and "assistant" in str(exc), exc
            return
        session.check(request(n))
    assert session.problems == []
    assert session.peak <= WINDOW
    counts = (graph.get_state(thread).values.get("compaction") or {}).get("counts") or {}
    made = counts.get("summarize", 0) + counts.get("extractive", 0)
    assert made <= session.summaries_seen(), (
        f"the parent counts {made:,} summaries; the model was sent {session.summaries_seen()}"
    )


def _invoke(graph, payload, thread):
    graph.invoke(payload, thread)


def _ainvoke(graph, payload, thread):
    asyncio.run(graph.ainvoke(payload, thread))


@pytest.mark.parametrize("run", [_invoke, _ainvoke], ids=["sync", "async"])
def test_a_view_mode_agent_added_directly_as_a_node_is_refused_or_bounded(tmp_path, run):
    model = ToolCallingModel()
    graph = _parent(edge_builder(model, tmp_path, VIEW).compile())
    _refused_or_bounded(graph, model, {"configurable": {"thread_id": "direct-view"}}, run)


def test_a_view_mode_create_agent_added_directly_as_a_node_leaves_the_parent_bounded(tmp_path):
    model = ToolCallingModel()
    middleware = CompactionMiddleware(model=ScriptedModel(), config=VIEW, storage=tmp_path, add_tools=False)
    graph = _parent(create_agent(model, TOOLS, middleware=[middleware]))
    _refused_or_bounded(graph, model, {"configurable": {"thread_id": "middleware-view"}}, _invoke)


def test_through_subgraph_node_a_view_mode_agent_counts_each_summary_once(tmp_path):
    model = ToolCallingModel()
    graph = _parent(subgraph_node(edge_builder(model, tmp_path, VIEW).compile(), name="assistant"))
    _refused_or_bounded(graph, model, {"configurable": {"thread_id": "wrapped-view"}}, _invoke)
