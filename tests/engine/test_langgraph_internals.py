"""Each private LangGraph name the package uses (all in ``engine.langgraph_internals``), checked against the installed LangGraph.

A failure names the private name that changed: fix ``langgraph_internals``, nothing else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Send
from typing_extensions import TypedDict

from langgraph_compaction.engine import langgraph_internals as internals


def changed(name: str, what: str) -> str:
    return f"LangGraph changed its private {name}: {what}; update langgraph_compaction/engine/langgraph_internals.py"


class State(TypedDict):
    messages: Annotated[list, operator.add]
    seen: Annotated[list, operator.add]


def test_messages_delta_reducer_applies_writes_as_add_messages_does():
    name = "langgraph.graph.message._messages_delta_reducer"
    first, second = HumanMessage("a", id="1"), AIMessage("b", id="2")
    try:
        merged = internals.messages_delta_reducer([first], [[second], [AIMessage("B", id="2")]])
        removed = internals.messages_delta_reducer(merged, [[RemoveMessage(id="1")]])
        cleared = internals.messages_delta_reducer(merged, [[RemoveMessage(id=REMOVE_ALL_MESSAGES), first]])
    except Exception as error:  # noqa: BLE001 - any failure is the change this test reports
        pytest.fail(changed(name, f"(state, list of writes) raised {error!r}"))
    assert [(m.id, m.content) for m in merged] == [("1", "a"), ("2", "B")], changed(name, "a write by id")
    assert [m.id for m in removed] == ["2"], changed(name, "RemoveMessage")
    assert [m.id for m in cleared] == ["1"], changed(name, "remove-all")


def test_runnable_callable_runs_sync_and_async_bodies_without_a_trace_of_its_own():
    name = "langgraph._internal._runnable.RunnableCallable"
    runs: list[str] = []

    async def afunc(value: int) -> int:
        return value + 2

    try:
        node = internals.RunnableCallable(lambda value: value + 1, afunc, name="node", trace=False)
    except TypeError as error:
        pytest.fail(changed(name, f"(func, afunc, name=, trace=) refused: {error}"))

    from langchain_core.tracers.stdout import FunctionCallbackHandler

    config: RunnableConfig = {"callbacks": [FunctionCallbackHandler(runs.append)]}
    assert node.invoke(1, config) == 2, changed(name, "the sync body")
    assert asyncio.run(node.ainvoke(1, config)) == 3, changed(name, "the async body")
    assert runs == [], changed(name, "trace=False no longer skips the callback run")


def test_a_task_started_by_send_has_the_push_trigger_and_an_edge_task_has_not():
    from langgraph._internal._constants import PUSH

    assert PUSH == internals.PUSH_TRIGGER, changed("langgraph._internal._constants.PUSH", f"it is {PUSH!r}")
    pushed: dict[str, bool] = {}

    def record(name: str):
        def node(state: dict, config: RunnableConfig) -> dict:
            pushed[name] = internals.pushed(config)
            return {}

        return node

    builder = StateGraph(State)
    builder.add_node("edge", record("edge"))
    builder.add_node("sent", record("sent"))
    builder.add_edge(START, "edge")
    builder.add_conditional_edges("edge", lambda state: [Send("sent", state)], ["sent"])
    builder.compile().invoke({"messages": [], "seen": []})
    assert pushed == {"edge": False, "sent": True}, changed(
        "trigger '__pregel_push' in metadata 'langgraph_triggers'", f"seen {pushed}"
    )


def test_set_input_schema_narrows_what_a_run_takes():
    name = "StateGraph._add_schema"

    class Input(TypedDict):
        messages: Annotated[list, operator.add]

    builder = StateGraph(State)
    builder.add_node("node", lambda state: {"seen": [sorted(state)]})
    builder.add_edge(START, "node")
    try:
        internals.set_input_schema(builder, Input)
    except (AttributeError, TypeError) as error:
        pytest.fail(changed(name, repr(error)))
    graph = builder.compile()
    assert set(graph.get_input_jsonschema()["properties"]) == {"messages"}, changed(name, "the input schema")
    assert graph.invoke({"messages": [1], "seen": ["from the caller"]})["seen"] == [["messages", "seen"]], changed(
        name, "a key outside the input schema reached the state"
    )


def test_wrap_node_replaces_the_runnable_of_a_node_spec():
    name = "StateGraph.nodes (StateNodeSpec.runnable)"
    builder = StateGraph(State)
    builder.add_node("node", lambda state: {"seen": ["node"]})
    builder.add_edge(START, "node")
    spec = builder.nodes["node"]
    assert dataclasses.is_dataclass(spec) and hasattr(spec, "runnable"), changed(name, f"a node is {type(spec)}")

    def wrap(inner):
        return lambda state, config: {"seen": ["before", *inner.invoke(state, config)["seen"]]}

    internals.wrap_node(builder, "node", wrap)
    assert builder.compile().invoke({"messages": [], "seen": []})["seen"] == ["before", "node"], changed(
        name, "the wrapped runnable did not run"
    )


def _routed_graph() -> StateGraph:
    """A graph whose plain edge, waiting edge and mapped branch lead to ``model``."""
    builder = StateGraph(State)
    for node in ("a", "b", "model", "gate"):
        builder.add_node(node, lambda state, _n=node: {"seen": [_n]})
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "model")  # a waiting edge
    builder.add_conditional_edges(
        "model", lambda state: "again" if state["seen"].count("model") < 2 else "end", {"again": "model", "end": END}
    )
    return builder


def test_redirect_to_sends_edges_waiting_edges_and_mapped_branches_to_the_new_node():
    builder = _routed_graph()
    internals.redirect_to(builder, "model", "gate", lambda target: target)
    builder.add_edge("gate", "model")
    assert not any(end == "model" for _, end in builder.waiting_edges), changed(
        "StateGraph.waiting_edges", "an edge to the old node is left"
    )
    assert all("model" not in b.ends.values() for b in builder.branches["model"].values()), changed(
        "BranchSpec.ends / BranchSpec._replace", "a mapped end still names the old node"
    )
    seen = builder.compile().invoke({"messages": [], "seen": []})["seen"]
    assert sorted(seen[:2]) == ["a", "b"] and seen[2:] == ["gate", "model", "gate", "model"], changed(
        "StateGraph.edges / waiting_edges / branches", f"the graph ran {seen}"
    )


def test_redirect_to_wraps_an_unmapped_path_for_sync_and_async_runs():
    builder = StateGraph(State)
    builder.add_node("start", lambda state: {"seen": ["start"]})
    builder.add_node("model", lambda state: {"seen": ["model"]})
    builder.add_node("gate", lambda state: {"seen": ["gate"]})
    builder.add_edge(START, "start")
    builder.add_edge(START, "model")
    builder.add_conditional_edges("start", lambda state: ["model"])
    builder.add_edge("gate", END)
    internals.redirect_to(builder, "model", "gate", lambda target: ["gate"] if target == ["model"] else target)
    graph = builder.compile()
    name = "BranchSpec.path / BranchSpec._replace"
    assert graph.invoke({"messages": [], "seen": []})["seen"] == ["gate", "start", "gate"], changed(name, "sync")
    assert asyncio.run(graph.ainvoke({"messages": [], "seen": []}))["seen"] == ["gate", "start", "gate"], changed(
        name, "async"
    )
