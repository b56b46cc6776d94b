"""Background compaction's decisions, figure for figure: when a job starts, what it plans with, when it swaps in.

Tokens are characters here (``conftest.tokens``).
"""

from __future__ import annotations

import datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict

from langgraph_compaction.core.background import (
    covered,
    cut_index,
    kept_tokens,
    message_digest,
    new_pairing_problem,
    prepared_problem,
    record_problem,
    should_start,
    should_start_by_count,
    start_budget,
    swap_before_trigger,
    tail_tokens,
    turn_growth,
    turn_tokens,
    wait_limit,
)
from langgraph_compaction.core.config import MIN_KEEP_TOKENS
from langgraph_compaction.core.conversation import COMPACTION_MARKER
from langgraph_compaction.core.summary import build_summary_message

from .conftest import ai, budget, call, chat, counts, human, result, system

# --- when a job starts -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "turn", "turns_to_ready", "start"),
    [
        # at background.start (0.85) of a 10,000-token trigger at the latest
        (8_500, 0, 1, True),
        (8_499, 0, 1, False),
        (9_999, 0, 1, True),
        # never at or past the trigger: the gate compacts then
        (10_000, 0, 1, False),
        (10_001, 0, 1, False),
        # earlier when turns of the newest one's size would reach the trigger before the job is ready
        (6_000, 2_000, 1, True),  # 6,000 + 2,000 x (1 + 1) reaches 10,000
        (6_000, 1_999, 1, False),
        (6_000, 2_000, 0, False),  # ready at once: one more turn, 8,000
        (6_000, 1_600, 1.5, True),  # 6,000 + 1,600 x 2.5
        (6_000, 1_599, 1.5, False),
        # never before half the trigger: a summary of less would be made again soon
        (5_000, 5_000, 1, True),
        (4_999, 5_000, 1, False),
    ],
)
def test_a_job_starts_at_background_start_or_when_growth_would_reach_the_trigger_first(
    tokens, turn, turns_to_ready, start
):
    assert should_start(tokens, turn, budget(trigger_tokens=10_000), 0.85, turns_to_ready) is start


@pytest.mark.parametrize(
    ("conversation", "turn", "tokens", "turns_to_ready", "start"),
    [
        # at background.start (0.85) of a 50-message trigger at the latest: 42.5 messages
        (43, 0, 5_000, 1, True),
        (42, 0, 5_000, 1, False),
        (49, 0, 5_000, 1, True),
        # never at or past the trigger: the gate swaps or compacts then
        (50, 0, 5_000, 1, False),
        # earlier when turns of the newest one's size would reach the count before the job is ready
        (40, 5, 5_000, 1, True),  # 40 + 5 x (1 + 1) reaches 50
        (40, 4, 5_000, 1, False),
        (30, 5, 5_000, 3, True),  # 30 + 5 x 4
        (30, 5, 5_000, 2.9, False),
        # never under the trigger's floor of tokens, at background.start: 4,000 x 0.85
        (45, 0, 3_400, 1, True),
        (45, 0, 3_399, 1, False),
    ],
)
def test_a_job_starts_before_the_message_count_trigger_as_before_the_token_trigger(
    conversation, turn, tokens, turns_to_ready, start
):
    at = budget(trigger_messages=50, messages_min_tokens=4_000)
    assert should_start_by_count(conversation, turn, tokens, at, 0.85, turns_to_ready) is start


def test_no_job_starts_by_count_without_a_message_trigger():
    assert not should_start_by_count(49, 10, 9_000, budget(trigger_messages=0), 0.85, 1)


@pytest.mark.parametrize(("tokens", "start"), [(4_999, False), (5_000, True)])
def test_half_an_odd_trigger_rounds_down(tokens, start):
    assert should_start(tokens, 10_000, budget(trigger_tokens=10_001), 0.85, 1) is start


@pytest.mark.parametrize(
    ("fields", "start", "planned"),
    [
        # the triggers at background.start of the real ones, the shortest tail a cut allows
        (
            {"trigger_tokens": 40_000, "trigger_messages": 50, "messages_min_tokens": 10_000, "keep_tokens": 2_000},
            0.85,
            {"trigger_tokens": 34_000, "trigger_messages": 43, "messages_min_tokens": 8_500, "keep_tokens": 250},
        ),
        (
            {"trigger_tokens": 40_001, "trigger_messages": 41, "messages_min_tokens": 10_001, "keep_tokens": 100},
            0.5,
            {"trigger_tokens": 20_000, "trigger_messages": 21, "messages_min_tokens": 5_000, "keep_tokens": 100},
        ),
        # the message trigger stays off; the tail kept by count stays so
        (
            {"trigger_tokens": 1, "trigger_messages": 0, "keep_tokens": 0},
            0.5,
            {"trigger_tokens": 1, "trigger_messages": 0, "messages_min_tokens": 0, "keep_tokens": 0},
        ),
        (
            {"trigger_tokens": 40_000, "trigger_messages": 50, "messages_min_tokens": 10_000, "keep_tokens": 1},
            0.85,
            {"trigger_tokens": 34_000, "trigger_messages": 43, "messages_min_tokens": 8_500, "keep_tokens": 1},
        ),
        (
            {"trigger_tokens": 40_000, "trigger_messages": 50, "messages_min_tokens": 10_000, "keep_tokens": 251},
            1.0,
            {"trigger_tokens": 40_000, "trigger_messages": 50, "messages_min_tokens": 10_000, "keep_tokens": 250},
        ),
    ],
)
def test_a_job_plans_with_early_triggers_and_the_shortest_tail(fields, start, planned):
    real = budget(context_window=60_000, working_set_tokens=3_000, min_new_tokens=4_000, keep_messages=7, **fields)
    early = start_budget(real, start)
    assert {name: getattr(early, name) for name in planned} == planned
    # the window, the target and everything else stay those of the real compaction
    unchanged = ("context_window", "target_tokens", "working_set_tokens", "min_new_tokens", "keep_messages")
    assert [getattr(early, name) for name in unchanged] == [getattr(real, name) for name in unchanged]


def test_the_start_budget_defaults_to_the_real_triggers():
    real = budget(trigger_tokens=40_000, trigger_messages=50, messages_min_tokens=10_000, keep_tokens=2_000)
    early = start_budget(real)
    assert (early.trigger_tokens, early.trigger_messages, early.messages_min_tokens) == (40_000, 50, 10_000)
    assert early.keep_tokens == MIN_KEEP_TOKENS == 250


@pytest.mark.parametrize(
    ("window", "limit"),
    [(60_000, 50_000), (40_002, 40_001), (40_001, 40_000), (40_000, 40_000), (30_000, 40_000), (None, 40_000)],
)
def test_the_agent_goes_on_up_to_halfway_from_the_trigger_to_the_window(window, limit):
    assert wait_limit(budget(context_window=window, trigger_tokens=40_000)) == limit


# --- what the tail and the newest turn hold --------------------------------------------------------------------------

HISTORY = [
    system("s", 50),
    human("h0", 100),
    ai("a1", 0, calls=[call("c", cmd="ls")]),
    result("t2", "c", 300),
    human("h3", 400),
    ai("a4", 500),
    human("h5", 600),
]


@pytest.mark.parametrize(
    ("cutoff_id", "index", "tail"),
    [("h3", 4, 1_500), ("h5", 6, 600), ("s", 0, sum(counts(HISTORY))), (None, 7, 0), ("gone", None, 0)],
)
def test_the_tail_is_what_arrived_after_the_cut(cutoff_id, index, tail):
    assert cut_index(HISTORY, cutoff_id) == index
    assert tail_tokens(HISTORY, counts(HISTORY), cutoff_id) == tail


def test_the_cut_point_is_the_newest_message_with_its_id():
    messages = [human("x"), ai("a"), human("x"), ai("b")]
    assert cut_index(messages, "x") == 2
    assert cut_index([], "x") is None and tail_tokens([], [], "x") == 0


@pytest.mark.parametrize(
    ("messages", "turn"),
    [
        (HISTORY, 500 + 600),  # the newest model reply and what came after it
        (HISTORY[:4], counts(HISTORY)[2] + 300),
        (HISTORY[:6], 500),
        ([human("h", 700)], 0),  # no reply yet
        ([ai("a0", 300), human("h1", 100)], 400),
        ([], 0),
    ],
)
def test_a_turn_is_the_newest_reply_and_what_followed(messages, turn):
    assert turn_tokens(messages, counts(messages)) == turn


# a tool round of 10,000 tokens, then the agent's answer and the next request: turns alternate large and small
ALTERNATING = [
    human("h0", 100),
    ai("a1", 0, calls=[call("c1", cmd="ls")]),
    result("t1", "c1", 10_000),
    ai("a2", 200),
    human("h2", 100),
]
ROUND = counts(ALTERNATING)[1] + 10_000


@pytest.mark.parametrize(
    ("messages", "tokens", "messages_added"),
    [
        (ALTERNATING, ROUND, 2),  # the tool round, not the newest turn (300 tokens)
        (ALTERNATING[:3], ROUND, 2),
        ([*ALTERNATING, ai("a3", 50), human("h3", 50)], ROUND, 2),  # three turns back
        ([*ALTERNATING, ai("a3", 50), human("h3", 50), ai("a4", 50)], 300, 2),  # four back: out of the forecast
        ([human("h", 700)], 0, 0),  # no reply yet
        ([], 0, 0),
    ],
)
def test_the_forecast_turn_is_the_largest_of_the_newest_three(messages, tokens, messages_added):
    assert turn_growth(messages, counts(messages)) == tokens
    assert turn_growth(messages) == messages_added


def test_a_thread_alternating_tool_rounds_and_answers_starts_its_job_before_a_small_turn_too():
    # two more tool rounds reach a 50,000-token trigger: a job taking one turn starts now, before the answer's turn
    at, tokens = budget(trigger_tokens=50_000), 50_000 - 2 * ROUND
    assert not should_start(tokens, turn_tokens(ALTERNATING, counts(ALTERNATING)), at, 0.85, 1)
    assert should_start(tokens, turn_growth(ALTERNATING, counts(ALTERNATING)), at, 0.85, 1)


@pytest.mark.parametrize(
    ("evict", "kept"),
    [
        ([], sum(counts(HISTORY)) - 50),  # the leading system message is not the summary's to keep
        (["h0", "a1", "t2"], 400 + 500 + 600),
        (["h0", "a1", "t2", "h3", "a4", "h5"], 0),
        (["s"], sum(counts(HISTORY)) - 50),
    ],
)
def test_the_tokens_a_summary_leaves_beside_itself(evict, kept):
    assert kept_tokens(HISTORY, counts(HISTORY), evict) == kept


def test_a_later_system_message_is_conversation():
    messages = [*HISTORY, system("reminder", 70)]
    assert kept_tokens(messages, counts(messages), ["h0", "a1", "t2", "h3", "a4", "h5"]) == 70


# --- swapping a ready summary in -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "cutoff_id", "keep_tokens_max", "swap"),
    [
        # applied before the trigger when one more turn would push its tail past keep_tokens_max
        (HISTORY, "h3", 1_500 + 1_100, False),
        (HISTORY, "h3", 1_500 + 1_100 - 1, True),
        (HISTORY, "h5", 600 + 1_100, False),
        (HISTORY, "h5", 600 + 1_099, True),
        # no reply yet: the tail alone
        ([human("h0", 100), human("h1", 200)], "h1", 200, False),
        ([human("h0", 100), human("h1", 200)], "h1", 199, True),
        # the newest reply is the last message
        (HISTORY[:6], "h3", 900 + 500, False),
        (HISTORY[:6], "h3", 900 + 499, True),
        ([ai("a0", 300), human("h1", 100)], "h1", 500, False),
        ([ai("a0", 300), human("h1", 100)], "h1", 499, True),
        ([], None, 0, False),
        # its cut point gone: the newest turn alone
        (HISTORY, "gone", 1_100, False),
        (HISTORY, "gone", 1_099, True),
    ],
)
def test_a_ready_summary_swaps_in_before_one_more_turn_would_outgrow_its_tail(
    messages, cutoff_id, keep_tokens_max, swap
):
    assert swap_before_trigger({"cutoff_id": cutoff_id}, messages, counts(messages), keep_tokens_max) is swap


def _record(covered_messages, cutoff_id):
    return {"covered": covered(covered_messages, [m.id for m in covered_messages]), "cutoff_id": cutoff_id}


def test_a_record_covers_its_messages_in_their_order_with_their_digests():
    assert covered(HISTORY, ["t2", "h0", "missing"]) == [
        ["h0", message_digest(HISTORY[1])],
        ["t2", message_digest(HISTORY[3])],
    ]


@pytest.mark.parametrize(
    ("record", "messages", "problem"),
    [
        (_record(HISTORY[1:4], "h3"), HISTORY, None),
        (_record(HISTORY[1:4], "a4"), HISTORY, None),
        # a grown tail is no reason
        (_record(HISTORY[1:4], "h3"), [*HISTORY, ai("a6", 9_000)], None),
        ({"covered": [], "cutoff_id": "h3"}, HISTORY, "it covers no message"),
        ({"cutoff_id": "h3"}, HISTORY, "it covers no message"),
        (_record(HISTORY[1:4], "h3"), [HISTORY[0], *HISTORY[2:]], "message h0 it covers is no longer in the history"),
        (
            _record(HISTORY[1:4], "h3"),
            [HISTORY[0], HISTORY[2], HISTORY[3], HISTORY[1], *HISTORY[4:]],
            "message a1 it covers has moved",
        ),
        (
            _record(HISTORY[1:4], "h3"),
            [*HISTORY[:3], HISTORY[3].model_copy(update={"content": "y"}), *HISTORY[4:]],
            "message t2 it covers has changed",
        ),
        # its cut point gone, or not after what it covers
        (_record(HISTORY[1:4], "gone"), HISTORY, "its cut point gone is no longer after the messages it covers"),
        (_record(HISTORY[1:4], "t2"), HISTORY, "its cut point t2 is no longer after the messages it covers"),
        (_record(HISTORY[1:4], "a1"), HISTORY, "its cut point a1 is no longer after the messages it covers"),
        (_record(HISTORY[1:4], None), HISTORY, None),
        # the latest request must reach the model word for word
        (_record(HISTORY[1:6], "h5"), HISTORY, None),
        (_record(HISTORY[1:7], None), HISTORY, "the latest request is among the messages it covers"),
        (_record(HISTORY[1:5], "a4"), HISTORY[:6], "the latest request is among the messages it covers"),
    ],
)
def test_a_prepared_summary_applies_only_while_what_it_covers_is_unchanged(record, messages, problem):
    assert prepared_problem(record, messages) == problem


def test_a_summary_may_cover_the_first_message():
    messages = [human("h0"), ai("a1"), human("h2"), ai("a3")]
    assert prepared_problem(_record(messages[:2], "h2"), messages) is None


def test_without_a_request_a_prepared_summary_still_applies():
    messages = [system("s"), ai("a0"), ai("a1"), ai("a2")]
    assert prepared_problem(_record(messages[1:3], "a2"), messages) is None


def _injected(message):
    return message.model_copy(update={"additional_kwargs": {COMPACTION_MARKER: {"kind": "injected"}}})


SUMMARY = build_summary_message("## SUMMARY\nDone so far.")
NOTE = _injected(HumanMessage("AGENTS.md: run the tests.", id="note"))
CALL = _injected(AIMessage("", id="ac", tool_calls=[call("c", cmd="ls")]))
ANSWER = _injected(ToolMessage("a.py", tool_call_id="c", id="tc"))


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"summary": message_to_dict(SUMMARY)}, None),
        ({"summary": message_to_dict(SUMMARY), "injected": None}, None),
        ({"summary": message_to_dict(SUMMARY), "injected": [message_to_dict(m) for m in (NOTE, CALL, ANSWER)]}, None),
        ({}, "it is not a prepared summary (KeyError: 'summary')"),
        ({"summary": 5}, "it is not a prepared summary (TypeError: 'int' object is not subscriptable)"),
        (
            {"summary": {"type": "nope", "data": {}}},
            "it is not a prepared summary (ValueError: Got unexpected message type: nope)",
        ),
        ({"summary": message_to_dict(ai("a"))}, "what it would place is a ai message, not a summary"),
        ({"summary": message_to_dict(human("h"))}, "what it would place is a human message, not a summary"),
        (
            {"summary": message_to_dict(SUMMARY), "injected": [message_to_dict(NOTE), message_to_dict(human("h"))]},
            "a message it would place after the summary is not one a hook gave",
        ),
        (
            {"summary": message_to_dict(SUMMARY), "injected": [message_to_dict(CALL)]},
            "the messages it would place after the summary break tool-call pairing: "
            "message 0: tool calls ['c'] are never answered",
        ),
    ],
)
def test_a_ready_record_is_checked_before_it_is_applied(record, problem):
    assert record_problem(record) == problem


@pytest.mark.parametrize(
    ("before", "after", "problem"),
    [
        (HISTORY, HISTORY, None),
        (HISTORY, [HISTORY[0], *HISTORY[3:]], "tool call 'c' would be orphan"),
        (HISTORY, HISTORY[:3], "tool call 'c' would be unanswered"),
        (HISTORY[:3], HISTORY[:3], None),  # already broken before: not this change's doing
        (
            [],
            [result(f"t{n}", f"c{n}") for n in range(7)],
            "; ".join(f"tool call 'c{n}' would be orphan" for n in range(5)),
        ),
    ],
)
def test_a_change_that_breaks_tool_call_pairing_says_which_calls(before, after, problem):
    assert new_pairing_problem(before, after) == problem


# --- the digest ------------------------------------------------------------------------------------------------------


def test_the_digest_is_the_same_in_every_process():
    # written by an earlier process (and another worker's): 24 hex characters of SHA-256 over the UTF-8 dict form
    assert message_digest(HumanMessage("café", id="h")) == "b3ce286a9b921699b76c8651"


@pytest.mark.parametrize(
    "other",
    [
        AIMessage("x", id="b"),
        AIMessage("y", id="a"),
        HumanMessage("x", id="a"),
        AIMessage("x", id="a", name="n"),
        AIMessage("x", id="a", additional_kwargs={"k": 1}),
        AIMessage("x", id="a", response_metadata={"model": "m"}),
        AIMessage("x", id="a", tool_calls=[call("c")]),
    ],
)
def test_the_digest_sees_every_field(other):
    assert message_digest(AIMessage("x", id="a")) != message_digest(other)
    assert message_digest(AIMessage("x", id="a")) == message_digest(AIMessage("x", id="a"))


def test_the_digest_takes_any_content():
    ordered = AIMessage("x", id="a", additional_kwargs={"k": 1, "j": 2})
    assert message_digest(ordered) == message_digest(AIMessage("x", id="a", additional_kwargs={"j": 2, "k": 1}))
    dated = AIMessage("x", id="a", response_metadata={"at": datetime.datetime(2026, 1, 1)})
    assert len(message_digest(dated)) == 24
    assert len(message_digest(HumanMessage("half a pair \ud800", id="h"))) == 24


def test_chat_messages_have_digests_of_their_own():
    assert len({message_digest(m) for m in chat(10)}) == 10
