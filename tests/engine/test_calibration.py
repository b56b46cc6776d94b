"""Calibrated counting: the provider's reported input size corrects the estimate, per thread."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from support.openai_server import count_text_tokens

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.calibration import (
    RATIO_MAX,
    bound_tools,
    calibrated_budget,
    calibrated_tokens,
    fixed_tokens,
    observe,
    observe_usage,
    read_calibration,
)
from langgraph_compaction.core.tokens import TokenCounter, estimate_text_tokens
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "t"}}
SYSTEM = "You are the billing assistant of ACME. Answer in two sentences. " * 20


@tool
def lookup_invoice(invoice_id: str, include_lines: bool = False) -> str:
    """Look up an invoice by id and return its status and, optionally, its lines."""
    return "paid"


def test_first_observation_sets_the_ratio_and_later_ones_decay_into_it():
    first = observe({}, reported=1_200, estimate=1_000)
    assert first["ratio"] == 1.2 and first["samples"] == 1
    second = observe(first, reported=1_000, estimate=1_000)
    assert second["ratio"] == 1.1  # half the old ratio, half the new sample
    assert observe(second, reported=50_000, estimate=1_000)["ratio"] <= RATIO_MAX  # one odd report is clamped


def test_a_broken_stored_calibration_falls_back_to_no_correction():
    assert read_calibration({"ratio": "x", "samples": -1, "window": True})["ratio"] == 1.0
    assert read_calibration(None) == read_calibration({"ratio": 99.0})


def test_usage_of_the_newest_reply_is_observed_once():
    messages = [
        HumanMessage("hi " * 100, id="h"),
        AIMessage("hello", id="a", usage_metadata={"input_tokens": 300, "output_tokens": 2, "total_tokens": 302}),
    ]
    counts = TokenCounter().counts(messages)
    seen = observe_usage({}, messages, counts, fixed=50)
    assert seen["last_id"] == "a" and seen["estimate"] == counts[0] + 50 and seen["reported"] == 300
    assert observe_usage(seen, messages, counts, fixed=50) is None


def test_bound_tool_schemas_and_the_system_prompt_are_counted():
    llm = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="test", model="gpt-4o-mini").bind_tools([lookup_invoice])
    tools = bound_tools(llm)
    assert [t["function"]["name"] for t in tools] == ["lookup_invoice"]
    schema_tokens = count_text_tokens(json.dumps(tools))
    assert abs(fixed_tokens(llm) - schema_tokens) <= 0.15 * schema_tokens
    assert fixed_tokens(None, SystemMessage(SYSTEM)) == fixed_tokens(None, SYSTEM) > estimate_text_tokens(SYSTEM)
    assert fixed_tokens(ScriptedModel()) == 0


def test_the_budget_in_estimator_units():
    budget = CompactionConfig(context_window=128_000).resolve()
    # the provider counts 25 % more than the estimate, and 2,000 tokens of system prompt and tools are sent too
    calibrated = calibrated_budget(budget, {"ratio": 1.25, "samples": 3}, fixed=2_000)
    assert calibrated.trigger_tokens == 108_000 * 4 // 5 - 2_000
    assert calibrated.keep_tokens == 2_000 * 4 // 5  # the derived tail under prompt caching, in estimator units
    assert calibrated_tokens(calibrated.trigger_tokens, {"ratio": 1.25}, 2_000) == 108_000


def test_a_smaller_window_reported_by_the_provider_lowers_trigger_and_keep():
    budget = CompactionConfig(context_window=128_000, prompt_cache=False).resolve()  # the design's 8k tail
    calibrated = calibrated_budget(budget, {"ratio": 1.0, "samples": 1, "window": 32_000})
    assert (calibrated.context_window, calibrated.trigger_tokens) == (32_000, 12_000)
    assert calibrated.keep_tokens == 3_000 and calibrated.target_tokens == 7_200


def _usage_agent(factor: float):
    """Return a model node whose 'provider' counts ``factor`` times the package's estimate of the request."""
    counter = TokenCounter()

    def agent(state):
        reported = int(factor * counter.total(state["messages"]))
        usage = {"input_tokens": reported, "output_tokens": 5, "total_tokens": reported + 5}
        return {"messages": [AIMessage("Noted: " + "details of the ledger entry " * 40, usage_metadata=usage)]}

    return agent


@pytest.mark.parametrize("factor", [1.0, 1.6])
def test_a_provider_that_counts_more_makes_compaction_fire_earlier(factor):
    builder = StateGraph(CompactionState)
    builder.add_node("agent", _usage_agent(factor))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    config = CompactionConfig(context_window=60_000, trigger_tokens=6_000, keep_tokens=1_000)
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config)
    graph = builder.compile(checkpointer=InMemorySaver())
    for t in range(40):
        graph.invoke({"messages": [HumanMessage(f"Entry {t}: " + "record the refund for order " * 10)]}, THREAD)
    compaction = graph.get_state(THREAD).values["compaction"]
    assert compaction["calibration"]["ratio"] == pytest.approx(factor, abs=0.02)
    fired_at = [e["tokens_before"] for e in compaction["events"] if e.get("layer") == "summarize"]
    assert len(fired_at) >= 2
    # tokens_before is the estimate: with a provider counting 1.6 x, the gate fires at about 6,000 / 1.6 = 3,750
    low = 6_000 / factor
    assert all(low * 0.98 <= tokens < low + 1_000 for tokens in fired_at)


def test_chatopenai_usage_calibrates_against_the_servers_o200k_count(openai_server):
    llm = ChatOpenAI(base_url=openai_server.base_url, api_key="test", model="gpt-4o-mini", max_retries=0)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [llm.invoke([SystemMessage(SYSTEM), *state["messages"]])]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    nodes = add_compaction(
        builder,
        before="agent",
        model=ScriptedModel(),
        system_prompt=SYSTEM,
        config=CompactionConfig(context_window=128_000),
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    for t in range(6):
        graph.invoke(
            {"messages": [HumanMessage(f"Invoice {t}: why was the total {t * 17}.40 EUR and not less?")]}, THREAD
        )
    values = graph.get_state(THREAD).values
    calibration = values["compaction"]["calibration"]
    assert calibration["samples"] == 5  # each reply is observed once, at the next gate
    # the calibrated estimate of the last request (system prompt + 11 messages) is the server's prompt_tokens, within 3 %
    reported = values["messages"][-1].usage_metadata["input_tokens"]
    estimate = calibrated_tokens(nodes.counter.total(values["messages"][:-1]), calibration, nodes.fixed_tokens)
    assert abs(estimate - reported) <= 0.03 * reported


def test_the_prompt_cache_figures_a_provider_reports_are_kept_with_the_calibration():
    reply = AIMessage(
        "done",
        id="r1",
        usage_metadata={
            "input_tokens": 1_200,
            "output_tokens": 5,
            "total_tokens": 1_205,
            "input_token_details": {"cache_read": 1_024, "cache_creation": 100},
        },
    )
    observed = observe_usage({}, [HumanMessage("hi", id="h1"), reply], [1_000, 5], 0)
    assert (observed["cache_read"], observed["cache_creation"]) == (1_024, 100)
    plain = reply.model_copy(
        update={"id": "r2", "usage_metadata": {"input_tokens": 1_200, "output_tokens": 5, "total_tokens": 1_205}}
    )
    assert "cache_read" not in observe_usage({}, [HumanMessage("hi", id="h1"), plain], [1_000, 5], 0)


def test_the_provider_reported_usage_adds_up_over_the_thread_into_a_billed_figure():
    from langgraph_compaction.core.calibration import billed_input

    def reply(i: int, read: int, write: int = 0) -> AIMessage:
        details = {"cache_read": read, "cache_creation": write}
        usage = {"input_tokens": 10_000, "output_tokens": 5, "total_tokens": 10_005, "input_token_details": details}
        return AIMessage("done", id=f"r{i}", usage_metadata=usage)

    calibration: dict = {}
    for i, (read, write) in enumerate([(0, 9_000), (9_000, 500), (9_500, 0)]):
        calibration = observe_usage(calibration, [HumanMessage("hi", id="h1"), reply(i, read, write)], [9_000, 5], 0)
    usage = read_calibration(calibration)["usage"]
    assert usage == {"calls": 3, "input": 30_000, "cache_read": 18_500, "cache_creation": 9_500}
    assert billed_input(usage) == 2_000 + 1_850 + 9_500  # OpenAI: no write surcharge
    assert billed_input(usage, write_price=1.25) == 2_000 + 1_850 + 11_875  # Anthropic
    # observing the same reply again adds nothing
    assert observe_usage(calibration, [HumanMessage("hi", id="h1"), reply(2, 9_500)], [9_000, 5], 0) is None


def test_the_gate_streams_each_replys_cache_figures_and_the_threads_billed_input():
    def agent(state):  # a provider whose cache served every earlier message of the request
        prompt = TokenCounter().total(state["messages"])
        details = {"cache_read": prompt - 10, "cache_creation": 0}
        usage = {"input_tokens": prompt, "output_tokens": 5, "total_tokens": prompt + 5, "input_token_details": details}
        return {"messages": [AIMessage("Noted.", usage_metadata=usage)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=ScriptedModel(), config=CompactionConfig(context_window=60_000))
    graph = builder.compile(checkpointer=InMemorySaver())
    events = []
    for t in range(3):
        chunks = graph.stream(
            {"messages": [HumanMessage(f"Entry {t}: record the refund")]}, THREAD, stream_mode="custom"
        )
        events += [c["usage"] for c in chunks if c.get("stage") == "gate" and "usage" in c]
    assert len(events) == 2  # the replies to the first two calls, each seen once at the next gate
    last = events[-1]
    assert last["cache_read"] == last["input_tokens"] - 10 and last["cache_creation"] == 0
    assert last["thread"]["calls"] == 2 and last["thread"]["input"] == sum(e["input_tokens"] for e in events)
    assert last["billed_input"] == round(2 * 10 + 0.1 * last["thread"]["cache_read"])
    assert "usage" not in str(graph.get_state(THREAD).values["compaction"].get("events", []))  # streamed, not kept
