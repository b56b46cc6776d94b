"""The agent's next call after a native compaction: its own Anthropic model reads the block, any other the text.

The agent is the real ``ChatAnthropic`` (or ``ChatOpenAI``) client over HTTP
to a local stand-in of its provider's API; the summarizer is ``ChatAnthropic``
with ``summary={"native": True}``. What the stand-in records is the request
body the provider would get.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from support.anthropic_server import MODEL, THREAD, WINDOW
from support.openai_server import StrictOpenAIServer

from langgraph_compaction import CompactionConfig, CompactionMiddleware, CompactionState, add_compaction, is_summary
from langgraph_compaction.core.native import native_of
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.providers import AnthropicStandIn

TURNS = 10
CONFIG = CompactionConfig(context_window=WINDOW, summary={"native": True}, background={"enabled": False})


@tool
def read_log(part: int) -> str:
    """Read one part of the server log."""
    return f"log part {part}: " + f"request {part} served in 12 ms\n" * 400


def _anthropic_replies() -> list:
    replies: list = []
    for n in range(TURNS):
        replies += [[{"type": "tool_use", "id": f"toolu_{n:02d}", "name": "read_log", "input": {"part": n}}]]
        replies += [f"Part {n} read."]
    return replies


def _chat(stand_in: AnthropicStandIn, model: str = MODEL) -> ChatAnthropic:
    return ChatAnthropic(model=model, base_url=stand_in.base_url, api_key="test", max_retries=0)


def _run(agent, turns: int = TURNS) -> dict:
    for n in range(turns):
        agent.invoke({"messages": [HumanMessage(f"Read part {n} of the log", id=f"request-{n}")]}, THREAD)
    return agent.get_state(THREAD).values


def _after_compaction(stand_in: AnthropicStandIn) -> list[dict]:
    """Return the agent's requests sent after the first on-demand compaction."""
    at = next(i for i, body in enumerate(stand_in.requests) if "compaction" in body)
    return [body for body in stand_in.requests[at + 1 :] if "compaction" not in body and body.get("tools")]


def _middleware_agent(stand_in: AnthropicStandIn, path, agent_model) -> object:
    middleware = CompactionMiddleware(model=_chat(stand_in), flush_model=ScriptedModel(), config=CONFIG, storage=path)
    return create_agent(agent_model, [read_log], middleware=[middleware], checkpointer=InMemorySaver())


def _graph_agent(stand_in: AnthropicStandIn, path, agent_model) -> object:
    bound = agent_model.bind_tools([read_log])
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([read_log]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(
        builder, before="agent", model=_chat(stand_in), flush_model=ScriptedModel(), agent_model=bound, config=CONFIG,
        storage=path,
    )  # fmt: skip
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("front", [_middleware_agent, _graph_agent], ids=["middleware", "add_compaction"])
def test_the_agents_next_call_carries_the_providers_block_in_the_summarys_place(tmp_path, front):
    with AnthropicStandIn(replies=_anthropic_replies()) as stand_in:
        state = _run(front(stand_in, tmp_path, _chat(stand_in)))
    assert stand_in.errors == []
    block = native_of(next(m for m in state["messages"] if is_summary(m)))["block"]
    after = _after_compaction(stand_in)
    assert after, "the agent made no call after the compaction"
    first = after[0]["messages"][0]
    # verbatim: the signed block, as the provider wrote it, in the summary's place (the first message)
    assert first["role"] == "assistant" and first["content"][0]["type"] == "compaction"
    assert first["content"][0]["signature"] == block["signature"]
    assert first["content"][0]["content"] == block["content"]
    assert all("## SUMMARY" not in str(m["content"]) for m in after[0]["messages"])


def test_another_claude_model_as_the_agent_reads_the_summarys_text(tmp_path):
    with AnthropicStandIn(replies=_anthropic_replies()) as stand_in:
        state = _run(_middleware_agent(stand_in, tmp_path, _chat(stand_in, "claude-haiku-4-7")))
    summary = next(m for m in state["messages"] if is_summary(m))
    assert native_of(summary)["model"] == MODEL
    sent = _after_compaction(stand_in)[0]["messages"]
    assert all(b.get("type") != "compaction" for m in sent if isinstance(m["content"], list) for b in m["content"])
    assert any("## SUMMARY" in str(m["content"]) for m in sent)


def _openai_replies() -> list:
    replies: list = []
    for n in range(TURNS):
        replies += [{"content": None, "tool_calls": [{"name": "read_log", "arguments": {"part": n}, "id": f"c{n}"}]}]
        replies += [f"Part {n} read."]
    return replies


def test_an_openai_agent_reads_the_summarys_text(tmp_path):
    with AnthropicStandIn() as stand_in, StrictOpenAIServer(responder=_openai_replies()) as openai:
        agent_model = ChatOpenAI(model="gpt-4o-mini", base_url=openai.base_url, api_key="test", max_retries=0)
        state = _run(_middleware_agent(stand_in, tmp_path, agent_model))
    assert openai.errors == []
    summary = next(m for m in state["messages"] if is_summary(m))
    block = native_of(summary)["block"]
    sent = [m for m in openai.requests[-1]["messages"] if block["content"] in str(m.get("content"))]
    assert [m["role"] for m in sent] == ["user"]  # the summary's readable text, as a user message
    assert "'type': 'compaction'" not in str(openai.requests[-1]["messages"])
