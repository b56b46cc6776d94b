"""Observe mode: the agent's own model compacts on the provider's side; the package offloads what it dropped.

The agent is ``ChatAnthropic`` with Anthropic's threshold compaction
(``compact_20260112``) turned on by the application, against the local
stand-in of the Messages API: once a request reaches the trigger, the answer
starts with a ``compaction`` block and the provider no longer reads what came
before it. At the package's next compaction those messages are in the
transcript, and the summarizer reads the provider's summary in their place.
"""

from __future__ import annotations

import json

import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_compaction import CompactionConfig, CompactionMiddleware, load_transcript
from langgraph_compaction.core.native import compaction_block, threshold_refusal
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.providers import AnthropicStandIn, ResponsesStandIn

PART_LINES = 2_000  # 52,000 characters: 13,000 tokens to the stand-in
THREAD = {"configurable": {"thread_id": "observe"}}
THRESHOLD = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}]}


@tool
def read_log(part: int) -> str:
    """Read one part of the server log."""
    return f"log part {part}: " + f"request {part} served in 12 ms\n" * PART_LINES


def _replies(turns: int) -> list:
    replies: list = []
    for n in range(turns):
        replies += [[{"type": "tool_use", "id": f"toolu_{n:02d}", "name": "read_log", "input": {"part": n}}]]
        replies += [f"Part {n} read: no errors."]
    return replies


def _anthropic(stand_in) -> ChatAnthropic:
    return ChatAnthropic(
        model="claude-opus-4-7",
        base_url=stand_in.base_url,
        api_key="test",
        max_retries=0,
        betas=["compact-2026-01-12"],
        context_management=THRESHOLD,
    )


def _responses(stand_in) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-5.2",
        base_url=stand_in.base_url + "/v1",
        api_key="test",
        max_retries=0,
        use_responses_api=True,
        context_management=[{"type": "compaction", "compact_threshold": 50_000}],
    )


def _calls(turns: int) -> list:
    replies: list = []
    for n in range(turns):
        call = {"type": "function_call", "id": f"fc_{n:02d}", "call_id": f"call_{n:02d}", "name": "read_log"}
        replies += [[{**call, "arguments": json.dumps({"part": n}), "status": "completed"}]]
        replies += [f"Part {n} read: no errors."]
    return replies


def _run(
    stand_in, path, turns: int, summarizer: ScriptedModel, model=_anthropic, background: bool = False, trigger=60_000
):
    agent_model = model(stand_in)
    layers = {"prune": {"enabled": False}, "micro": {"enabled": False}}
    config = CompactionConfig(
        context_window=200_000, trigger_tokens=trigger, background={"enabled": background}, **layers
    )
    middleware = CompactionMiddleware(model=summarizer, config=config, storage=path)
    agent = create_agent(agent_model, [read_log], middleware=[middleware], checkpointer=InMemorySaver())
    for n in range(turns):
        agent.invoke({"messages": [HumanMessage(f"Read part {n} of the log", id=f"request-{n}")]}, THREAD)
    return agent.get_state(THREAD).values


def test_what_the_provider_dropped_is_offloaded_and_not_summarized_again(tmp_path):
    summarizer = ScriptedModel()
    with AnthropicStandIn(replies=_replies(8)) as stand_in:
        state = _run(stand_in, tmp_path, 8, summarizer)

    assert stand_in.errors == []
    compacted = [i for i, a in enumerate(stand_in.answers) if a["content"][0]["type"] == "compaction"]
    assert compacted, "the provider never compacted"
    events = read_compaction(state["compaction"])["events"]
    observed = next(e for e in events if e.get("observed"))
    assert observed["observed"] == "anthropic" and observed["provider_dropped"] > 0
    # the transcript holds what the provider dropped, whole
    transcript = {m.id: m for m in load_transcript(tmp_path, "observe")}
    assert "request-0" in transcript and "request-0" not in {m.id for m in state["messages"]}
    first_result = next(m for m in transcript.values() if getattr(m, "tool_call_id", None) == "toolu_00")
    assert first_result.content == read_log.invoke({"part": 0})
    # the summarizer read the provider's summary instead of the dropped parts
    prompts = [str(c) for c in summarizer.calls if "log part 0" in str(c) or "[summary of earlier" in str(c)]
    summary_prompts = [p for p in prompts if "[summary of earlier conversation]" in p]
    assert summary_prompts and all("log part 0: request 0" not in p for p in summary_prompts)


def test_in_background_mode_the_observed_event_reaches_the_state(tmp_path):
    # a trigger well past the provider's threshold (50k): the job starting ahead of it covers the provider's block
    with AnthropicStandIn(replies=_replies(14)) as stand_in:
        state = _run(stand_in, tmp_path, 14, ScriptedModel(), background=True, trigger=90_000)
    events = read_compaction(state["compaction"])["events"]
    assert any(e.get("event") == "compaction_applied" for e in events), "no background compaction was applied"
    observed = next(e for e in events if e.get("observed"))
    assert observed["observed"] == "anthropic" and observed["provider_dropped"] > 0


def test_the_block_stays_in_the_answer_the_agent_model_returned(tmp_path):
    with AnthropicStandIn(replies=_replies(5)) as stand_in:
        state = _run(stand_in, tmp_path, 5, ScriptedModel())
    blocks = [compaction_block(m) for m in state["messages"] if compaction_block(m)]
    assert blocks and blocks[0]["content"].startswith("The user asked: Read part 0 of the log")
    # the next request sent it back verbatim, and the provider read from it on
    resent = stand_in.requests[-1]["messages"]
    assert any(b.get("type") == "compaction" for m in resent for b in m["content"] if isinstance(b, dict))


@pytest.mark.parametrize("value", [1_000, 49_999])
def test_a_trigger_below_the_providers_minimum_is_refused_clearly(value):
    edits = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": value}}]}
    refusal = threshold_refusal(edits)
    assert refusal is not None and "at least 50,000" in refusal and "trigger.value" in refusal
    assert threshold_refusal(THRESHOLD) is None


def test_an_opaque_responses_compaction_is_offloaded_and_read_as_a_note(tmp_path):
    summarizer = ScriptedModel()
    with ResponsesStandIn(replies=_calls(8)) as stand_in:
        state = _run(stand_in, tmp_path, 8, summarizer, model=_responses)

    assert stand_in.errors == []
    assert any(a["output"][0]["type"] == "compaction" for a in stand_in.answers)
    observed = next(e for e in read_compaction(state["compaction"])["events"] if e.get("observed"))
    assert observed["observed"] == "openai" and observed["provider_dropped"] > 0
    transcript = load_transcript(tmp_path, "observe")
    first_result = next(m for m in transcript if getattr(m, "tool_call_id", None) == "call_00")
    assert first_result.content == read_log.invoke({"part": 0})
    prompts = [str(c) for c in summarizer.calls if "[summary of earlier conversation]" in str(c)]
    assert prompts and all("opaque item" in p and "log part 0: request 0" not in p for p in prompts)


def test_the_calibration_counts_what_the_provider_reads_after_its_compaction(tmp_path):
    with AnthropicStandIn(replies=_replies(4)) as stand_in:
        before = _run(stand_in, tmp_path / "a", 4, ScriptedModel())["compaction"]["calibration"]["ratio"]
    with AnthropicStandIn(replies=_replies(7)) as stand_in:
        after = _run(stand_in, tmp_path / "b", 7, ScriptedModel())["compaction"]["calibration"]["ratio"]
    assert any(a["content"][0]["type"] == "compaction" for a in stand_in.answers)
    # the provider reads from its block on: the ratio of its figure to the estimate does not collapse
    assert after == pytest.approx(before, rel=0.1)
