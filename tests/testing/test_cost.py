"""The billed-cost measure: cached prefixes, breaks and both pricings, figured by hand."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_compaction.testing.agents import o200k_tokens
from langgraph_compaction.testing.ledger import CACHE_DEPTH, CacheLedger, message_key


def _tokens(*messages) -> int:
    return sum(o200k_tokens(message_key(m)) + 4 for m in messages)


SYSTEM = HumanMessage("You are a careful coding agent working in a Python repository.", id="u0")
CALL = AIMessage("", tool_calls=[{"name": "Bash", "args": {"command": "pytest -q"}, "id": "c1"}], id="a1")
RESULT = ToolMessage("3 passed in 0.12s", tool_call_id="c1", name="Bash", id="t1")


def test_a_request_that_extends_the_previous_one_reads_it_from_the_cache():
    ledger = CacheLedger()
    first = ledger.add("agent", [SYSTEM])
    second = ledger.add("agent", [SYSTEM, CALL, RESULT])
    assert (first.tokens, first.cached) == (_tokens(SYSTEM), 0)
    assert second.tokens == _tokens(SYSTEM, CALL, RESULT)
    assert second.cached == _tokens(SYSTEM)
    figures = ledger.figures()
    assert figures["breaks"] == 0
    uncached = first.tokens + second.tokens - second.cached
    assert figures["billed_openai"] == round(uncached + 0.1 * second.cached)
    assert figures["billed_anthropic"] == round(1.25 * uncached + 0.1 * second.cached)


def test_an_edited_old_message_breaks_the_cache_from_there_on():
    ledger = CacheLedger()
    ledger.add("agent", [SYSTEM, CALL, RESULT])
    edited = RESULT.model_copy(update={"content": "3 passed"})
    request = ledger.add("agent", [SYSTEM, CALL, edited])
    assert request.cached == _tokens(SYSTEM, CALL)
    assert ledger.figures()["breaks"] == 1


def test_a_side_request_starting_with_the_agent_prefix_is_cached_and_is_no_break():
    ledger = CacheLedger()
    ledger.add("agent", [SYSTEM, CALL, RESULT])
    side = ledger.add("side", [SYSTEM, CALL, RESULT, HumanMessage("Summarize the conversation above.")])
    assert side.cached == _tokens(SYSTEM, CALL, RESULT)
    figures = ledger.figures()
    assert figures["breaks"] == 0
    assert figures["side_cached"] == side.cached and figures["side_input"] == side.tokens


def test_the_cache_holds_only_the_last_requests():
    ledger = CacheLedger()
    ledger.add("agent", [SYSTEM])
    for i in range(CACHE_DEPTH):
        ledger.add("side", [HumanMessage(f"unrelated request {i}")])
    assert ledger.add("agent", [SYSTEM]).cached == 0


@pytest.mark.parametrize("field", ["content", "name", "tool_call_id"])
def test_the_message_key_changes_with_what_the_provider_sees(field):
    changed = RESULT.model_copy(update={field: "other"})
    assert message_key(changed) != message_key(RESULT)
    assert message_key(RESULT.model_copy(update={"id": "another-id"})) == message_key(RESULT)


def test_a_break_right_after_a_summarizer_call_is_counted_as_the_summarys():
    ledger = CacheLedger()
    ledger.add("agent", [SYSTEM, CALL, RESULT])
    ledger.add("side", [SYSTEM, CALL, RESULT, HumanMessage("Summarize the conversation above.")])
    summary = HumanMessage("## SESSION INTENT\nRun the tests.", id="s1")
    ledger.add("agent", [summary, RESULT])
    ledger.add("agent", [summary, RESULT.model_copy(update={"content": "3 passed"})])  # an edit, no summary
    figures = ledger.figures()
    assert (figures["breaks"], figures["summary_breaks"]) == (2, 1)
