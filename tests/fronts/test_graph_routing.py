"""The gate runs before every call of the model node, whatever routes to it.

A tools node that answers with ``Command(goto="agent")`` skips the edges
``add_compaction`` rewires; so do ``Send`` and a resume. The model node meets
the gate anyway, keeps its name (streaming metadata, ``update_state``) and the
long session keeps every promise.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, Send
from support.fronts import CONFIG, REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, request

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction, is_summary, load_transcript
from langgraph_compaction.core.config import FidelityConfig
from langgraph_compaction.engine.nodes import GATE
from langgraph_compaction.testing import ScriptedModel

BY_NAME = {t.name: t for t in TOOLS}
ROUNDS = 4  # tool rounds per request: only the first model call of a request follows an edge


def subtask(n: int) -> HumanMessage:
    """Return request ``n``, which the scripted model works on for ``subtask_rounds`` tool rounds."""
    return HumanMessage(f"Subtask {n}: please check module{n} and its documentation", id=f"subtask-{n}")


def run_tools(state: dict) -> Command[Literal["agent"]]:
    """A tools node that routes back to the model itself: no edge leads from it to the agent."""
    calls = state["messages"][-1].tool_calls
    results = [ToolMessage(BY_NAME[c["name"]].invoke(c["args"]), tool_call_id=c["id"], name=c["name"]) for c in calls]
    return Command(goto="agent", update={"messages": results})


def command_graph(model: ToolCallingModel, tmp_path, config: CompactionConfig):
    bound = model.bind_tools(TOOLS)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config, storage=tmp_path, agent_model=bound)
    return builder.compile(checkpointer=InMemorySaver())


def test_a_command_goto_tools_node_never_lets_a_model_call_exceed_a_6000_token_window(tmp_path):
    model = ToolCallingModel(subtask_rounds=ROUNDS)
    # a window this small leaves room for a summary only with a shorter verbatim-request budget
    graph = command_graph(
        model, tmp_path, CompactionConfig(context_window=6_000, fidelity=FidelityConfig(request_tokens=500))
    )
    thread = {"configurable": {"thread_id": "small"}}
    for n in range(6):
        graph.invoke({"messages": [subtask(n)]}, thread)

    sizes = [model.request_tokens(m) for m in model.inputs]
    assert len(sizes) == 6 * (ROUNDS + 1)  # every request: its tool rounds, then the answer
    assert max(sizes) <= 6_000, sizes
    assert any(is_summary(m) for m in graph.get_state(thread).values["messages"])
    # the async model node meets the same gate
    model.inputs.clear()
    for n in range(6, 9):
        asyncio.run(graph.ainvoke({"messages": [subtask(n)]}, thread))
    assert max(model.request_tokens(m) for m in model.inputs) <= 6_000


def test_a_long_command_goto_session_stays_valid_inside_the_window_and_loses_nothing(tmp_path):
    model = ToolCallingModel()
    graph = command_graph(model, tmp_path, CONFIG)
    session = Session(model)
    thread = {"configurable": {"thread_id": "long"}}
    for n in range(REQUESTS):
        graph.invoke({"messages": [request(n)]}, thread)
        session.check(request(n))

    state = graph.get_state(thread).values
    assert len(model.inputs) == 2 * REQUESTS
    assert session.problems == []
    assert session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    assert state["compaction"]["counts"]["summarize"] == session.summaries_seen()
    assert session.lost(state["messages"], tmp_path, "long") == []


async def test_the_async_model_node_compacts_on_a_command_goto_too(tmp_path):
    model = ToolCallingModel()
    graph = command_graph(model, tmp_path, CONFIG)
    session = Session(model)
    thread = {"configurable": {"thread_id": "async"}}
    for n in range(REQUESTS):
        await graph.ainvoke({"messages": [request(n)]}, thread)
        session.check(request(n))

    state = (await graph.aget_state(thread)).values
    assert session.problems == [] and session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    assert session.lost(state["messages"], tmp_path, "async") == []


def test_the_model_node_keeps_its_name_for_streaming_and_update_state(tmp_path):
    model = ToolCallingModel()
    graph = command_graph(model, tmp_path, CONFIG)
    thread = {"configurable": {"thread_id": "names"}}
    nodes = {
        meta["langgraph_node"] for _, meta in graph.stream({"messages": [request(0)]}, thread, stream_mode="messages")
    }
    assert "agent" in nodes

    # update_state as the model node still leads where the model node leads (tools_condition), not to the gate
    graph.update_state(
        thread,
        {
            "messages": [
                AIMessage("Checking.", tool_calls=[{"name": "run_tests", "args": {"module": "m"}, "id": "manual-call"}])
            ]
        },
        as_node="agent",
    )
    assert graph.get_state(thread).next == ("tools",)


def test_a_send_to_the_model_node_is_gated_without_rewriting_the_state(tmp_path):
    seen: list[int] = []

    def agent(state: dict) -> dict:
        seen.append(len(state["messages"]))
        return {"messages": [AIMessage(f"answer {len(seen)}")]}

    builder = StateGraph(CompactionState)
    builder.add_node("router", lambda state: {})
    builder.add_node("agent", agent)
    builder.add_edge(START, "router")
    # the payload carries a long history of its own: only this call is compacted
    history = [HumanMessage(f"Task {i}: " + "details " * 600, id=f"h{i}") for i in range(12)]
    builder.add_conditional_edges(
        "router", lambda state: [Send("agent", {"messages": history, "compaction": {}})], ["agent"]
    )
    builder.add_edge("agent", END)
    add_compaction(
        builder,
        before="agent",
        model=ScriptedModel(),
        config=CompactionConfig(context_window=12_000, trigger_messages=0),
        storage=tmp_path,
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"messages": [HumanMessage("go", id="go")]}, {"configurable": {"thread_id": "send"}})

    state = graph.get_state({"configurable": {"thread_id": "send"}}).values
    assert seen and seen[0] < len(history)  # the model saw a compacted payload
    # the payload is not the graph's state: nothing of its compaction was written back
    assert [m.id for m in state["messages"]] == ["go", state["messages"][1].id] and not any(
        is_summary(m) for m in state["messages"]
    )


def test_a_resume_into_the_model_node_is_gated(tmp_path):
    """Interrupted before the model node, the state grows by an edit; the resumed model call is compacted."""
    calls: list[int] = []

    def agent(state: dict) -> dict:
        calls.append(len(state["messages"]))
        return {"messages": [AIMessage("done")]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(
        builder,
        before="agent",
        model=ScriptedModel(),
        config=CompactionConfig(context_window=12_000, trigger_messages=0),
        storage=tmp_path,
    )
    graph = builder.compile(checkpointer=InMemorySaver(), interrupt_before=["agent"])
    thread = {"configurable": {"thread_id": "resume"}}
    graph.invoke({"messages": [HumanMessage("start", id="start")]}, thread)
    assert graph.get_state(thread).next == ("agent",)
    # while the run waits, a long history is added; no gate runs for it
    long = [HumanMessage(f"Task {i}: " + "details " * 600, id=f"h{i}") for i in range(12)]
    graph.update_state(thread, {"messages": long})
    assert graph.get_state(thread).next == ("agent",)
    graph.invoke(None, thread)

    assert len(calls) == 1 and calls[0] < 13  # the resumed call saw the compacted history
    assert any(is_summary(m) for m in graph.get_state(thread).values["messages"])
    assert {m.id for m in load_transcript(tmp_path, "resume")} >= {m.id for m in long}


def test_the_gate_node_still_runs_on_edges(tmp_path):
    model = ToolCallingModel()
    graph = command_graph(model, tmp_path, CONFIG)
    steps = [
        next(iter(chunk)) for chunk in graph.stream({"messages": [request(0)]}, {"configurable": {"thread_id": "e"}})
    ]
    assert steps[0] == GATE and "agent" in steps


def test_overflow_recovery_works_for_a_model_node_that_returns_a_list_of_commands(tmp_path):
    """create_agent's model node returns ``list[Command]``; a refusal is compacted and retried all the same."""
    model = ToolCallingModel(refuse_once_over=12_000)
    bound = model.bind_tools(TOOLS)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: [Command(update={"messages": [bound.invoke(state["messages"])]})])
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    add_compaction(
        builder,
        before="agent",
        model=ScriptedModel(),
        config=CompactionConfig(context_window=200_000),
        storage=tmp_path,
        agent_model=bound,
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    session = Session(model)
    thread = {"configurable": {"thread_id": "listed"}}
    for n in range(8):
        graph.invoke({"messages": [request(n)]}, thread)
        session.check(request(n))

    state = graph.get_state(thread).values
    assert model.refused == 1 and state["compaction"]["counts"].get("overflow") == 1
    assert is_summary(state["messages"][0]) and session.problems == []
    assert len(model.inputs) == 2 * 8  # the refused call was retried, nothing else repeated
