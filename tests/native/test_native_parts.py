"""The pure parts of native compaction, and what the on-demand request leaves out or keeps elsewhere."""

from __future__ import annotations

import anthropic
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from support.anthropic_server import THREAD, native_agent
from support.fronts import request

from langgraph_compaction import is_summary, load_transcript
from langgraph_compaction.core.native import (
    billed,
    media_blocks,
    native_body,
    native_of,
    on_demand_refusal,
    readable_text,
    without_unanswered_calls,
)
from langgraph_compaction.core.sections import section
from langgraph_compaction.engine.native import anthropic_model, compact
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.testing.providers import AnthropicStandIn

CALL = AIMessage("", tool_calls=[{"name": "read", "args": {"path": "a.py"}, "id": "t1"}], id="ai-1")
HISTORY = [
    SystemMessage("Be careful."),
    HumanMessage("Read a.py", id="h1"),
    CALL,
    ToolMessage("x = 1", tool_call_id="t1"),
]


def test_billing_sums_every_iteration_and_the_context_is_the_last_message_entry():
    usage = {
        "input_tokens": 2_000,
        "output_tokens": 300,
        "iterations": [
            {"type": "compaction", "input_tokens": 150_000, "output_tokens": 4_000, "cache_read_input_tokens": 0},
            {"type": "message", "input_tokens": 2_000, "output_tokens": 300, "cache_read_input_tokens": 500},
        ],
    }
    bill = billed(usage)
    assert (bill.input_tokens, bill.output_tokens, bill.cache_read_tokens) == (152_000, 4_300, 500)
    assert bill.context_tokens == 2_500  # never the compaction entry's 150,000
    assert billed({"input_tokens": 70, "output_tokens": 5}).context_tokens == 70  # no iterations: top level


def test_a_trailing_unanswered_call_is_dropped_and_an_answered_one_kept():
    assert without_unanswered_calls(HISTORY) == HISTORY
    assert without_unanswered_calls(HISTORY[:3]) == HISTORY[:2]
    two = AIMessage("", tool_calls=[{"name": "a", "args": {}, "id": "c1"}, {"name": "b", "args": {}, "id": "c2"}])
    assert without_unanswered_calls([*HISTORY, two, ToolMessage("ok", tool_call_id="c1")]) == HISTORY


def test_the_api_refuses_an_unanswered_call_and_accepts_the_request_without_it():
    with AnthropicStandIn() as stand_in:
        chat = ChatAnthropic(model="claude-opus-4-7", base_url=stand_in.base_url, api_key="test", max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="tool_use without a tool_result"):
            compact(chat, [], HISTORY[:3], None)
        answer = compact(chat, [], without_unanswered_calls(HISTORY[:3]), "Keep the file names.")
    assert answer.content[0]["type"] == "compaction"
    assert stand_in.requests[-1]["compaction"] == {"type": "summarize", "instructions": "Keep the file names."}
    assert "context_management" not in stand_in.requests[-1]


def test_the_4_5_models_and_other_chat_models_are_refused_with_the_fix():
    refusal = on_demand_refusal("claude-sonnet-4-5-20250929")
    assert refusal is not None and "summary.native" in refusal and "'auto'" in refusal
    assert on_demand_refusal("claude-opus-4-7") is None
    chat = ChatAnthropic(model="claude-opus-4-7", api_key="test")
    assert anthropic_model(chat.bind_tools([])) is chat
    assert anthropic_model(HumanMessage("not a model")) is None


def test_the_providers_text_is_the_summary_section_and_a_failed_compaction_has_none():
    assert section(native_body("Fixed the flush race."), "SUMMARY") == "Fixed the flush race."
    assert readable_text({"type": "compaction", "content": None}) is None  # a failed compaction
    assert readable_text({"type": "compaction", "encrypted_content": "enc_x", "id": "cmp_1"}) is None  # opaque


def test_images_and_documents_are_counted():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    assert media_blocks([HumanMessage([{"type": "text", "text": "see"}, image, pdf]), *HISTORY]) == 2


def test_an_image_in_the_evicted_range_is_in_the_transcript_before_the_provider_summarizes(tmp_path):
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    screenshot = HumanMessage([{"type": "text", "text": "The failing page:"}, image], id="screenshot")
    with AnthropicStandIn() as stand_in:
        agent = native_agent(stand_in, tmp_path, background={"enabled": False})
        agent.invoke({"messages": [screenshot, request(0)]}, THREAD)
        for n in range(1, 8):
            agent.invoke({"messages": [request(n)]}, THREAD)
        state = agent.get_state(THREAD).values
    assert "screenshot" not in {m.id for m in state["messages"]}
    kept = next(m for m in load_transcript(tmp_path, "native") if m.id == "screenshot")
    assert kept.content == screenshot.content
    native = next(e for e in read_compaction(state["compaction"])["events"] if e.get("native") == "anthropic")
    assert native["media_in_transcript"] == 1


PACKAGE_SUMMARY = (
    "## SESSION INTENT\nCheck the modules.\n\n## SUMMARY\nThe package's own summary of the checks.\n\n"
    "## ARTIFACTS\nNone\n\n## NEXT STEPS\nGo on."
)


def test_a_failed_provider_compaction_falls_back_to_the_packages_summary(tmp_path):
    # a compaction block with null content: the provider's summary failed (the SDK's BetaCompactionBlock)
    with AnthropicStandIn(replies=[PACKAGE_SUMMARY], summarizer=lambda messages: None) as stand_in:
        agent = native_agent(stand_in, tmp_path, background={"enabled": False})
        for n in range(8):
            agent.invoke({"messages": [request(n)]}, THREAD)
        state = agent.get_state(THREAD).values
    assert [a["stop_reason"] for a in stand_in.answers][:2] == ["compaction", "end_turn"]
    summary = next(m for m in state["messages"] if is_summary(m))
    assert "The package's own summary of the checks." in summary.content and native_of(summary) is None
    failed = next(e for e in read_compaction(state["compaction"])["events"] if e.get("native") == "anthropic")
    assert "no readable summary" in failed["error"]
