"""Provider-native compaction through the real ``ChatAnthropic`` client, against a local stand-in of its API.

The stand-in (``langgraph_compaction.testing.providers``) answers with the
shapes of the anthropic SDK's types: an on-demand compaction request (beta
``compact-2026-09-04``) gets one signed ``compaction`` block whose cost is in
``usage.iterations``. The agent is a scripted tool-calling model; the
summarizer is ``ChatAnthropic`` over HTTP.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from support.anthropic_server import MODEL, THREAD, WINDOW, native_agent, provider_summary, run_session
from support.fronts import request

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction, is_summary, make_compaction_tools
from langgraph_compaction.core.native import native_of, provider_request
from langgraph_compaction.core.sections import section
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.testing.providers import AnthropicStandIn


def _session_search(path, query: str, messages) -> str:
    builder = StateGraph(CompactionState)
    builder.add_node("tools", ToolNode(make_compaction_tools(path)))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    call = AIMessage("", tool_calls=[{"name": "session_search", "args": {"query": query}, "id": "call-search"}])
    state = builder.compile().invoke({"messages": [*messages, call]}, THREAD)
    answer = state["messages"][-1]
    assert isinstance(answer, ToolMessage)
    return answer.content


def test_a_native_summary_commits_the_providers_text_and_keeps_evicted_results_searchable(tmp_path):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        state = run_session(native_agent(stand_in, tmp_path))

    compactions = [b for b, h in zip(stand_in.requests, stand_in.headers, strict=True) if "compaction" in b]
    assert compactions, "no on-demand compaction was requested"
    assert all("compact-2026-09-04" in h["anthropic-beta"] for h in stand_in.headers)
    assert stand_in.errors == []
    summary = next(m for m in state["messages"] if is_summary(m))
    native = native_of(summary)
    assert native is not None and native["provider"] == "anthropic" and native["model"] == MODEL
    block = native["block"]
    assert block["type"] == "compaction" and block["signature"].startswith("sig_")
    assert block["content"].startswith("Provider summary: checked")
    # the provider's text is the SUMMARY section; the deterministic sections are the package's
    assert section(summary.content, "SUMMARY").startswith(block["content"])
    assert "Task 0: please check module0" in section(summary.content, "SESSION INTENT")
    # an evicted tool result is still found in the transcript
    in_state = {m.id for m in state["messages"]}
    assert "task0-tests-0" not in {getattr(m, "tool_call_id", None) for m in state["messages"]}
    found = _session_search(tmp_path, "pytest task0-0", state["messages"])
    assert "evicted" in found and "task0" in found
    assert "request-0" not in in_state


@contextmanager
def _savers(kind: str, path, dsn: str):
    """Yield two checkpointers of one database: the run's, and a fresh one that reads it back."""
    if kind == "sqlite":
        yield [SqliteSaver(sqlite3.connect(path / "checkpoints.sqlite", check_same_thread=False)) for _ in range(2)]
        return
    with PostgresSaver.from_conn_string(dsn) as first, PostgresSaver.from_conn_string(dsn) as second:
        first.setup()
        yield [first, second]


@pytest.mark.parametrize("checkpointer", ["sqlite", "postgres"])
def test_the_providers_block_survives_a_checkpoint_round_trip(tmp_path, postgres_for, checkpointer):
    with _savers(checkpointer, tmp_path, postgres_for(checkpointer)) as (first, second):
        with AnthropicStandIn(summarizer=provider_summary) as stand_in:
            before = run_session(native_agent(stand_in, tmp_path, saver=first))
            after = native_agent(stand_in, tmp_path, saver=second).get_state(THREAD).values
    kept = [native_of(m) for m in after["messages"] if is_summary(m)]
    assert kept and kept == [native_of(m) for m in before["messages"] if is_summary(m)]
    assert kept[0]["block"]["signature"].startswith("sig_")


@pytest.mark.parametrize("background", [False, True], ids=["blocking", "background"])
def test_the_compaction_is_billed_from_usage_iterations(tmp_path, background):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        state = run_session(native_agent(stand_in, tmp_path, background={"enabled": background}))
    answer = next(a for a in stand_in.answers if a["stop_reason"] == "compaction")
    assert answer["usage"]["input_tokens"] == answer["usage"]["output_tokens"] == 0  # the cost is in iterations
    (iteration,) = answer["usage"]["iterations"]
    events = read_compaction(state["compaction"])["events"]
    billed = next(e for e in events if e.get("native") == "anthropic")["billed"]
    assert (billed["input_tokens"], billed["output_tokens"], billed["cache_read_tokens"]) == (
        iteration["input_tokens"],
        iteration["output_tokens"],
        iteration["cache_read_input_tokens"],
    )
    applied = next(e for e in events if e.get("event") == "compaction_applied")
    assert applied["usage"]["output_tokens"] >= iteration["output_tokens"] > 0


def test_a_next_call_of_the_same_model_reads_the_block_and_another_model_reads_the_text(tmp_path):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        state = run_session(native_agent(stand_in, tmp_path))
        summary = next(m for m in state["messages"] if is_summary(m))
        same = provider_request(state["messages"], "anthropic", MODEL)
        other = provider_request(state["messages"], "anthropic", "claude-haiku-4-7")
        chat = ChatAnthropic(model=MODEL, base_url=stand_in.base_url, api_key="test", max_retries=0)
        chat.invoke([*same, HumanMessage("go on")])
        sent = stand_in.requests[-1]["messages"]
    assert sent[0]["role"] == "assistant" and sent[0]["content"][0]["type"] == "compaction"
    assert sent[0]["content"][0]["signature"] == native_of(summary)["block"]["signature"]
    assert other[0] is summary  # a model switch falls back to the readable text


@pytest.mark.parametrize("native", [True, "auto"])
def test_an_unsupported_model_gets_the_packages_summary(tmp_path, native):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        state = run_session(
            native_agent(stand_in, tmp_path, native=native, model="claude-sonnet-4-5", background={"enabled": False})
        )
    assert all("compaction" not in b for b in stand_in.requests)
    summary = next(m for m in state["messages"] if is_summary(m))
    assert native_of(summary) is None
    refused = [e for e in read_compaction(state["compaction"])["events"] if e.get("native") == "refused"]
    if native is True:
        assert refused and "does not support Anthropic's on-demand compaction" in refused[0]["error"]
    else:
        assert refused == []


@tool
def read_log(part: int) -> str:
    """Read one part of the server log."""
    return f"log part {part}: " + f"request {part} served in 12 ms\n" * 400


def _agent_graph(stand_in, path):
    """A StateGraph whose agent is ChatAnthropic with tools, the same model summarizing (``agent_model``)."""
    chat = ChatAnthropic(model=MODEL, base_url=stand_in.base_url, api_key="test", max_retries=0)
    bound = chat.bind_tools([read_log])
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([read_log]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    config = CompactionConfig(context_window=WINDOW, summary={"native": True}, background={"enabled": False})
    add_compaction(builder, before="agent", model=chat, agent_model=bound, config=config, storage=path)
    return builder.compile(checkpointer=InMemorySaver())


def test_with_the_agents_own_model_the_compaction_request_reads_the_agents_prefix_from_the_cache(tmp_path):
    replies = []
    for n in range(10):
        replies += [[{"type": "tool_use", "id": f"toolu_{n:02d}", "name": "read_log", "input": {"part": n}}]]
        replies += [f"Part {n} read."]
    with AnthropicStandIn(replies=replies) as stand_in:
        graph = _agent_graph(stand_in, tmp_path)
        for n in range(10):
            graph.invoke({"messages": [HumanMessage(f"Read part {n} of the log", id=f"request-{n}")]}, THREAD)
    assert stand_in.errors == []
    at = next(i for i, b in enumerate(stand_in.requests) if "compaction" in b)
    request, answer = stand_in.requests[at], stand_in.answers[at]
    agent_requests = [b for b in stand_in.requests[:at] if b.get("tools") and "compaction" not in b]
    assert request["tools"] == agent_requests[-1]["tools"]  # the agent's tools: its cached prefix
    assert request["messages"] == agent_requests[-1]["messages"][: len(request["messages"])]
    (iteration,) = answer["usage"]["iterations"]
    assert iteration["cache_read_input_tokens"] > 4 * iteration["input_tokens"]
    assert native_of(next(m for m in graph.get_state(THREAD).values["messages"] if is_summary(m)))


async def test_an_async_run_commits_the_providers_summary_too(tmp_path):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        agent = native_agent(stand_in, tmp_path, saver=InMemorySaver(), background={"enabled": False})
        for n in range(8):
            await agent.ainvoke({"messages": [request(n)]}, THREAD)
        state = (await agent.aget_state(THREAD)).values
    assert any("compaction" in body for body in stand_in.requests)
    summary = next(m for m in state["messages"] if is_summary(m))
    assert native_of(summary)["block"]["content"].startswith("Provider summary: checked")


def test_the_next_compaction_sends_the_previous_block_in_place_of_its_summary(tmp_path):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        run_session(native_agent(stand_in, tmp_path, background={"enabled": False}), requests=16)
    first, second = [a for a in stand_in.answers if a["stop_reason"] == "compaction"][:2]
    request = [b for b in stand_in.requests if "compaction" in b][1]
    assert request["messages"][0] == {"role": "assistant", "content": [{**first["content"][0], "tool_changes": None}]}
    assert second["content"][0]["signature"] != first["content"][0]["signature"]


def test_auto_is_native_where_the_summarizer_supports_it(tmp_path):
    with AnthropicStandIn(summarizer=provider_summary) as stand_in:
        state = run_session(native_agent(stand_in, tmp_path, native="auto", background={"enabled": False}))
    summary = next(m for m in state["messages"] if is_summary(m))
    assert native_of(summary)["block"]["content"].startswith("Provider summary: checked")
