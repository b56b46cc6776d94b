"""What the provider would refuse is said first: one log line and an event naming the field and the fix.

Anthropic refuses a ``compact_20260112`` trigger under 50,000 input tokens
(HTTP 400 on every call of the agent) and the on-demand ``compaction``
parameter on the 4.5 models. The agent's model is known at its first call
(``CompactionMiddleware``) or when the graph is built (``add_compaction(...,
agent_model=...)``); the summarizer when the middleware is built.
"""

from __future__ import annotations

import logging

import anthropic
import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langgraph_compaction import CompactionConfig, CompactionMiddleware, CompactionState, add_compaction
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.providers import AnthropicStandIn

THREAD = {"configurable": {"thread_id": "refusals"}}
FIX = "raise trigger.value to at least 50,000"


def _threshold(value: int) -> dict:
    return {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": value}}]}


def _agent_model(stand_in: AnthropicStandIn, trigger: int) -> ChatAnthropic:
    return ChatAnthropic(
        model="claude-opus-4-7",
        base_url=stand_in.base_url,
        api_key="test",
        max_retries=0,
        betas=["compact-2026-01-12"],
        context_management=_threshold(trigger),
    )


def _said(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "langgraph_compaction" and r.getMessage().startswith("compaction native:")
    ]


def test_a_threshold_under_the_providers_minimum_is_said_at_the_agents_first_call(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    with AnthropicStandIn() as stand_in:
        middleware = CompactionMiddleware(model=ScriptedModel(), storage=tmp_path)
        agent = create_agent(_agent_model(stand_in, 20_000), [], middleware=[middleware], checkpointer=InMemorySaver())
        assert _said(caplog) == []  # the agent's model is not known before its first call
        streamed: list = []
        with pytest.raises(anthropic.BadRequestError):  # the provider refuses it as said
            for event in agent.stream({"messages": [HumanMessage("hi")]}, THREAD, stream_mode="custom"):
                streamed.append(event)
        with pytest.raises(anthropic.BadRequestError):
            agent.invoke({"messages": [HumanMessage("hi again")]}, THREAD)
    (line,) = _said(caplog)  # one line, not one per call
    assert "context_management: the compact_20260112 trigger (20,000 input tokens)" in line and FIX in line
    refusal = next(e for e in streamed if e.get("native") == "refused")
    assert refusal["stage"] == "native" and refusal["error"].startswith("context_management:")
    assert stand_in.errors and "trigger.value" in stand_in.errors[0]


def test_a_threshold_at_the_minimum_is_not_refused(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    with AnthropicStandIn() as stand_in:
        middleware = CompactionMiddleware(model=ScriptedModel(), storage=tmp_path)
        agent = create_agent(_agent_model(stand_in, 50_000), [], middleware=[middleware], checkpointer=InMemorySaver())
        agent.invoke({"messages": [HumanMessage("hi")]}, THREAD)
    assert _said(caplog) == [] and stand_in.errors == []


def test_a_graphs_agent_model_under_the_minimum_is_said_when_the_graph_is_built(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    with AnthropicStandIn() as stand_in:
        bound = _agent_model(stand_in, 10_000).bind_tools([])
        builder = StateGraph(CompactionState)
        builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
        builder.add_edge(START, "agent")
        add_compaction(builder, before="agent", model=ScriptedModel(), agent_model=bound, storage=tmp_path)
    (line,) = _said(caplog)
    assert "(10,000 input tokens)" in line and FIX in line


def test_native_with_an_unsupported_summarizer_is_said_when_the_middleware_is_built(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    summarizer = ChatAnthropic(model="claude-sonnet-4-5", api_key="test")
    config = CompactionConfig(summary={"native": True})
    CompactionMiddleware(model=summarizer, flush_model=ScriptedModel(), config=config, storage=tmp_path)
    (line,) = _said(caplog)
    assert "summary.native: the model 'claude-sonnet-4-5' does not support" in line
    assert "use a newer Claude model as the summarizer" in line
    auto = CompactionConfig(summary={"native": "auto"})
    CompactionMiddleware(model=summarizer, flush_model=ScriptedModel(), config=auto, storage=tmp_path)
    assert len(_said(caplog)) == 1  # "auto" asks for no refusal: the package's summary is its answer
