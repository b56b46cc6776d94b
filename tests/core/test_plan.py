"""The cut and the plan, figure for figure: each table row is the input, the action and the figure expected.

Tokens are characters here (``conftest.tokens``): ``chat(10)`` is ten
messages of 100 tokens, 1,000 in all.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langgraph_compaction.core.config import SUMMARY_ALLOWANCE, CompactionConfig
from langgraph_compaction.core.conversation import COMPACTION_MARKER
from langgraph_compaction.core.layers import prune_preview
from langgraph_compaction.core.plan import (
    CompactionPlan,
    Cut,
    cache_aware_edits,
    calls_ahead,
    compacted_view,
    edit_repays,
    find_cutoff,
    may_wait,
    over_budget_reason,
    plan_compaction,
    tokens_since,
    whole_history,
    with_working_set,
)
from langgraph_compaction.core.summary import build_summary_message

from .conftest import ai, budget, call, chat, counts, human, result, system, tokens


def only(**settings: Any) -> CompactionConfig:
    """Return settings with layers 1-2 and the prompt-cache rule off, but for ``settings``."""
    off = {"truncate_args": {"enabled": False}, "prune": {"enabled": False}, "dedupe_results": False}
    return CompactionConfig(**{**off, "prompt_cache": False, **settings})


#: The plan is the trigger and the cut alone.
NO_LAYERS = only()
#: Pruning with its defaults (the newest 40,000 tokens protected, at least 20,000 freed at once).
PRUNE_PROTECTED = only(prune={})
#: Pruning everywhere: no protected window, no minimum.
PRUNE_ALL = only(prune={"protect_tokens": 0, "minimum_tokens": 0})
CACHED_PRUNE = only(prune={"protect_tokens": 0, "minimum_tokens": 0}, prompt_cache=True)
#: Layer 1 with its defaults (from 25 messages or 40,000 tokens, the newest 20 messages protected).
TRUNCATE_PROTECTED = only(truncate_args={})
#: Layer 1 from the first message, the newest message protected.
TRUNCATE_ALL = only(truncate_args={"trigger_messages": 0, "trigger_tokens": 0, "keep_messages": 1})
#: Micro-compaction of all but the newest result, no minimum.
MICRO_ALL = only(micro={"enabled": True, "keep_recent": 1, "minimum_tokens": 0})
#: Superseded results shortened, waiting for a summary under prompt caching.
CACHED_DEDUPE = only(dedupe_results=True, prompt_cache=True)
#: A window far over the trigger (without one, the trigger is the limit, and layers 1-2 prune excluded tools too).
WIDE = {"context_window": 100_000}


def plan(messages: list[BaseMessage], config: CompactionConfig = NO_LAYERS, **kwargs) -> CompactionPlan:
    """Plan one model call over ``messages``; ``kwargs`` are the budget's fields and plan_compaction's options."""
    options = {k: kwargs.pop(k) for k in ("manual", "new_tokens", "overflow", "settled", "frozen") if k in kwargs}
    return plan_compaction(messages, counts(messages), budget(**kwargs), config, tokens, **options)


def injected(id: str, size: int = 100) -> HumanMessage:
    """Return a message an after_compaction hook placed after a summary."""
    return HumanMessage("i" * size, id=id, additional_kwargs={COMPACTION_MARKER: {"kind": "injected"}})


def summary(size: int = 100) -> HumanMessage:
    """Return a summary message of a little over ``size`` tokens."""
    return build_summary_message("## SUMMARY\n" + "s" * size)


# --- the cut ---------------------------------------------------------------------------------------------------------

TOOL_ROUND = [human("h0"), ai("a1"), human("h2"), ai("a3", calls=[call("c")]), result("t4", "c"), ai("a5")]
FIRST_ROUND = [ai("a0", calls=[call("c")]), result("t1", "c"), ai("a2"), human("h3"), ai("a4")]
NEWEST_ROUND = [human("h0"), ai("a1"), human("h2"), ai("a3", calls=[call("c")]), result("t4", "c")]


@pytest.mark.parametrize(
    ("messages", "keep_tokens", "keep_messages", "cutoff", "evict", "kept_human"),
    [
        # the tail is the longest suffix of at most keep_tokens: a suffix of exactly the budget fits
        (chat(10), 300, 20, 7, range(7), None),
        (chat(10), 299, 20, 8, range(8), None),
        (chat(10), 301, 20, 7, range(7), None),
        # keep_tokens 0: the tail is kept by count
        (chat(10), 0, 3, 7, range(7), None),
        (chat(10), 0, 1, 9, [0, 1, 2, 3, 4, 5, 6, 7], 8),
        # a budget that keeps everything still summarizes the first message
        (chat(10), 0, 10, 1, [0], None),
        (chat(10), 5_000, 20, 1, [0], None),
        # leading system messages are neither counted in the tail nor evicted
        ([system("s", 500), *chat(6)], 300, 20, 4, [1, 2, 3], None),
        # the latest request stays when the cut falls after it
        ([human("h0"), ai("a1"), ai("a2"), ai("a3")], 200, 20, 2, [1], 0),
        # a cut on a tool result moves back to the call
        (TOOL_ROUND, 200, 20, 3, [0, 1], 2),
        # moving back would summarize nothing: it moves forward, past the round
        (FIRST_ROUND, 400, 20, 2, [0, 1], None),
        # a tail smaller than the newest round keeps the round whole
        (NEWEST_ROUND, 10, 20, 3, [0, 1], 2),
        (chat(10), 1, 20, 9, range(8), 8),
        # a summary (and the pinned system message) alone before the cut is no progress: it moves forward
        ([system("s"), summary(), *chat(4)], 400, 20, 3, [1, 2], None),
        # a history that opens with a tool result (no safe cut before it)
        ([result("t0", "x"), human("h1"), ai("a2")], 5_000, 20, 1, [0], None),
    ],
)
def test_the_cut_keeps_the_longest_tail_within_the_budget(
    messages, keep_tokens, keep_messages, cutoff, evict, kept_human
):
    cut = find_cutoff(messages, counts(messages), keep_tokens, keep_messages)
    assert cut == Cut(cutoff=cutoff, evict=tuple(evict), kept_human=kept_human)


@pytest.mark.parametrize(
    "messages",
    [
        [system("s"), summary(), human("h"), ai("a")],  # the summary and the latest request alone
        [system("s"), summary(), injected("i"), human("h"), ai("a")],  # and what a hook placed after it
        [system("s"), ai("a0", calls=[call("c")]), result("t1", "c")],  # one round, nothing before it
        [result("t0", "c"), result("t1", "c")],  # no safe cut at all
    ],
)
def test_no_cut_when_only_summaries_and_pinned_messages_would_go(messages):
    assert find_cutoff(messages, counts(messages), 10, 20) is None


# --- the trigger -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "fields", "reason"),
    [
        # layer 3 when the tokens are at or over the trigger after layers 1-2
        (chat(10), {"trigger_tokens": 1_000}, "tokens"),
        (chat(10), {"trigger_tokens": 1_001}, None),
        (chat(10), {"trigger_tokens": 999}, "tokens"),
        # or at trigger_messages messages holding at least messages_min_tokens
        (chat(10), {"trigger_messages": 10, "messages_min_tokens": 1_000}, "messages"),
        (chat(10), {"trigger_messages": 9, "messages_min_tokens": 999}, "messages"),
        (chat(10), {"trigger_messages": 11, "messages_min_tokens": 1_000}, None),
        (chat(10), {"trigger_messages": 10, "messages_min_tokens": 1_001}, None),
        (chat(10), {"trigger_messages": 0, "messages_min_tokens": 0}, None),  # 0: the message trigger is off
        # leading system messages are not conversation
        ([system("s"), *chat(9)], {"trigger_messages": 10}, None),
        ([system("s"), *chat(9)], {"trigger_messages": 9}, "messages"),
    ],
)
def test_the_trigger(messages, fields, reason):
    planned = plan(messages, keep_tokens=300, **fields)
    assert (planned.reason, planned.held, planned.summarize) == (reason, None, reason is not None)
    assert planned.tokens_before == planned.tokens_after_layers == sum(counts(messages))


WINDOW = {"context_window": 5_000}


@pytest.mark.parametrize(
    ("fields", "options", "reason", "held"),
    [
        # a due summary waits until min_new_tokens arrived since the last one
        ({**WINDOW, "trigger_tokens": 1_000, "min_new_tokens": 100}, {"new_tokens": 99}, None, "cooldown"),
        ({**WINDOW, "trigger_tokens": 1_000, "min_new_tokens": 100}, {"new_tokens": 100}, "tokens", None),
        ({**WINDOW, "trigger_tokens": 1_000, "min_new_tokens": 100}, {"new_tokens": None}, "tokens", None),
        ({"trigger_messages": 10, "min_new_tokens": 100}, {"new_tokens": 0}, None, "cooldown"),
        # unless the window would overflow (without a known window, the trigger is the limit)
        ({"trigger_tokens": 1_000, "min_new_tokens": 100}, {"new_tokens": 0}, "tokens", None),
        ({"trigger_tokens": 900, "min_new_tokens": 100, "context_window": 1_000}, {"new_tokens": 0}, "tokens", None),
        ({"trigger_tokens": 900, "min_new_tokens": 100, "context_window": 1_001}, {"new_tokens": 0}, None, "cooldown"),
        # an asked-for summary is never held
        ({"min_new_tokens": 100}, {"new_tokens": 0, "manual": True}, "manual", None),
        ({"min_new_tokens": 100}, {"new_tokens": 0, "overflow": True}, "overflow", None),
    ],
)
def test_the_cooldown(fields, options, reason, held):
    planned = plan(chat(10), keep_tokens=300, **fields, **options)
    assert (planned.reason, planned.held) == (reason, held)
    assert planned.summarize == (reason is not None) == (planned.cut is not None)


#: One large tool round in front of the tail: the cut can fold only the summary and the exchange before the round.
ROUND_IN_TAIL = [
    summary(400),
    human("h0", 30),
    ai("a1", 0),
    human("h2", 30),
    ai("a3", 10, calls=[call(f"c{k}") for k in range(30)]),
    *[result(f"t{k}", f"c{k}", 60) for k in range(30)],
]


@pytest.mark.parametrize(
    ("request_size", "min_new_tokens", "reason"),
    [
        # at the message count, a summary folds in at least min_new_tokens of conversation: the tool round stays
        # whole in the tail, so a 30-token exchange alone is not worth a summary call (it would not shrink anything)
        (30, 100, None),
        (99, 100, None),
        (100, 100, "messages"),
        (30, 0, "messages"),  # min_new_tokens 0 (LangChain's ("messages", n)): at the count, whatever it folds
    ],
)
def test_at_the_message_count_a_summary_folds_in_at_least_min_new_tokens(request_size, min_new_tokens, reason):
    messages = [ROUND_IN_TAIL[0], human("h0", request_size), *ROUND_IN_TAIL[2:]]
    fields = {"trigger_messages": 10, "messages_min_tokens": 1_000, "min_new_tokens": min_new_tokens}
    planned = plan(messages, keep_tokens=300, **fields)
    assert (planned.reason, planned.held, planned.summarize) == (reason, None, reason is not None)


def test_a_plan_without_a_cut_summarizes_nothing():
    assert not CompactionPlan(tokens_before=1, tokens_after_layers=1, reason="tokens").summarize
    assert not CompactionPlan(tokens_before=1, tokens_after_layers=1, cut=Cut(1, (0,))).summarize
    assert CompactionPlan(tokens_before=1, tokens_after_layers=1, reason="tokens", cut=Cut(1, (0,))).summarize


# --- overflow: half the tail, the whole history ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keep_tokens", "keep_messages", "cutoff", "overflow_cutoff"),
    [
        (400, 20, 6, 8),  # the token tail is halved
        (401, 20, 6, 8),
        (0, 4, 6, 8),  # the message tail is halved
        (0, 3, 7, 9),  # to at least one message
    ],
)
def test_an_overflow_halves_the_kept_tail(keep_tokens, keep_messages, cutoff, overflow_cutoff):
    fields = {"keep_tokens": keep_tokens, "keep_messages": keep_messages, "trigger_tokens": 1_000}
    assert plan(chat(10), **fields).cut.cutoff == cutoff
    overflowed = plan(chat(10), **fields, overflow=True)
    assert overflowed.reason == "overflow" and overflowed.cut.cutoff == overflow_cutoff


def _read_history(read_size: int = 3_000, tool: str = "read_file") -> list[BaseMessage]:
    """Return a request, a call of ``tool`` on a.py and its ``read_size``-token result, and a short exchange."""
    return [
        human("h0"),
        ai("a1", 0, calls=[call("c1", tool, path="a.py")]),
        result("t2", "c1", read_size, name=tool),
        human("h3"),
        ai("a4"),
    ]


def test_an_overflow_prunes_the_whole_history_excluded_tools_too():
    messages = _read_history()
    assert plan(messages, PRUNE_PROTECTED).edits == {}  # inside the protected 40,000 tokens, and read_file is excluded
    overflowed = plan(messages, PRUNE_PROTECTED, overflow=True, settled=5)  # from the start, whatever was settled
    assert overflowed.layer_counts == {"prune": 1}
    assert overflowed.edits[2].content == prune_preview("r" * 3_000, 2_000)
    assert overflowed.tokens_after_layers == sum(counts(messages)) - 3_000 + 2_029


def test_an_overflow_keeps_the_edits_of_evicted_messages_and_a_summary_drops_them():
    messages = [*_read_history(tool="bash"), human("h5"), ai("a6")]
    both = {"trigger_tokens": 1_000, "keep_tokens": 200}
    kept = plan(messages, PRUNE_ALL, **both, overflow=True)
    assert kept.cut.cutoff == 6 and list(kept.edits) == [2]
    dropped = plan(messages, PRUNE_ALL, **both)
    assert dropped.cut.cutoff == 5 and dropped.edits == {} and dropped.layer_counts == {}
    assert dropped.tokens_after_layers == sum(counts(messages))  # the summary reads the original


def test_an_overflow_halves_the_working_set():
    messages = [*_read_history(500), human("h5"), ai("a6")]
    read = tokens(messages[1]) + 500
    fields = {"trigger_tokens": 1_000, "keep_tokens": 400, "target_tokens": 10_000}
    assert plan(messages, **fields, working_set_tokens=read).cut.working_set == (1, 2)
    assert plan(messages, **fields, working_set_tokens=read, overflow=True).cut.working_set == ()
    assert plan(messages, **fields, working_set_tokens=2 * read, overflow=True).cut.working_set == (1, 2)


# --- the working set, in the room the target leaves ------------------------------------------------------------------

WORKING = [*_read_history(500), human("h5"), ai("a6")]
READ = tokens(WORKING[1]) + 500
#: The summary's allowance and the user's requests it quotes (fidelity.request_tokens), then the 200-token tail.
LEFT = SUMMARY_ALLOWANCE + NO_LAYERS.fidelity.request_tokens + 200


@pytest.mark.parametrize(
    ("working_set_tokens", "target_tokens", "working_set", "evict"),
    [
        (10_000, LEFT + READ, (1, 2), (0, 3, 4)),
        (10_000, LEFT + READ - 1, (), (0, 1, 2, 3, 4)),
        (READ, 10_000, (1, 2), (0, 3, 4)),
        (READ - 1, 10_000, (), (0, 1, 2, 3, 4)),
        (0, 10_000, (), (0, 1, 2, 3, 4)),
    ],
)
def test_the_working_set_stays_in_the_room_the_target_leaves(working_set_tokens, target_tokens, working_set, evict):
    planned = plan(
        WORKING,
        trigger_tokens=1_000,
        keep_tokens=200,
        working_set_tokens=working_set_tokens,
        target_tokens=target_tokens,
    )
    assert (planned.cut.cutoff, planned.cut.working_set, planned.cut.evict) == (5, working_set, evict)


def test_a_working_set_that_leaves_only_summaries_to_summarize_changes_nothing():
    messages = [summary(), *_read_history(500)[1:3], human("h3"), ai("a4")]
    cut = find_cutoff(messages, counts(messages), 200, 20)
    assert cut.evict == (0, 1, 2)
    assert with_working_set(messages, counts(messages), cut, 10_000) == cut
    assert with_working_set(WORKING, counts(WORKING), Cut(5, (0, 1, 2, 3, 4)), 0) == Cut(5, (0, 1, 2, 3, 4))


def _reads(between: list[BaseMessage] | None = None) -> list[BaseMessage]:
    """Return a read of a.py, then a read of b.py (``between`` its call and its result), then a short exchange."""
    return [
        human("h0"),
        ai("a1", 0, calls=[call("r1", "read_file", path="a.py")]),
        result("t2", "r1", 500, name="read_file"),
        human("h3"),
        ai("a4", 0, calls=[call("r2", "read_file", path="b.py")]),
        *(between or []),
        result("t5", "r2", 500, name="read_file"),
        human("h6"),
        ai("a7"),
    ]


def test_a_read_in_the_tail_costs_the_working_set_nothing():
    messages = _reads()
    read_a = sum(counts(messages)[1:3])
    cut = Cut(cutoff=4, evict=(0, 1, 2), kept_human=3)
    assert with_working_set(messages, counts(messages), cut, read_a) == Cut(4, (0,), 3, (1, 2))
    assert with_working_set(messages, counts(messages), cut, read_a - 1) == cut


def test_a_read_that_cannot_stay_alone_goes_with_the_summary():
    # a user note between b.py's call and its result: kept alone, the call would not be answered right after it
    messages = _reads(between=[human("note")])
    cut = Cut(cutoff=8, evict=(0, 1, 2, 3, 4, 5, 6), kept_human=None)
    assert with_working_set(messages, counts(messages), cut, 10_000) == Cut(8, (0, 3, 4, 5, 6), None, (1, 2))


def test_layers_1_2_never_shorten_what_the_working_set_keeps():
    messages = [*_read_history(3_000, tool="bash")[:1], ai("a1", 0, calls=[call("c1", command="cat a.py")])]
    messages += [result("t2", "c1", 3_000, name="bash"), human("h3"), ai("a4")]
    assert plan(messages, PRUNE_ALL, working_set_tokens=5_000).edits == {}
    assert list(plan(messages, PRUNE_ALL, working_set_tokens=0).edits) == [2]
    assert list(plan(messages, PRUNE_ALL, working_set_tokens=100).edits) == [2]  # over its budget: not kept


# --- layers 1-2 over the whole history when the summary is not enough -----------------------------------------------

BIG_TAIL = [human("h0"), ai("a1"), human("h2"), ai("a3", 0, calls=[call("c", cmd="make")])]
BIG_TAIL += [result("t4", "c", 3_000, name="bash"), human("h5"), ai("a6")]
BIG_KEPT = sum(counts(BIG_TAIL)[2:])  # the cut at 2 keeps h2 onwards


@pytest.mark.parametrize(
    ("target_tokens", "edits"),
    [
        (BIG_KEPT + SUMMARY_ALLOWANCE, []),  # the summary and the tail fit the target: the tail stays whole
        (BIG_KEPT + SUMMARY_ALLOWANCE - 1, [4]),  # else layers 1-2 reach into the protected tail
    ],
)
def test_a_summary_that_would_leave_more_than_the_target_prunes_the_tail(target_tokens, edits):
    planned = plan(
        BIG_TAIL, PRUNE_PROTECTED, trigger_tokens=1_000, keep_tokens=BIG_KEPT, target_tokens=target_tokens, **WIDE
    )
    assert planned.reason == "tokens" and list(planned.edits) == edits
    assert planned.cut.cutoff == (2 if not edits else 1)


def test_the_tail_kept_by_count_is_cut_again_after_layers_1_2_reach_into_it():
    fields = {"trigger_tokens": 1_000, "keep_tokens": 0, "keep_messages": 5, "target_tokens": 1_000, **WIDE}
    planned = plan(BIG_TAIL, PRUNE_PROTECTED, **fields)
    assert list(planned.edits) == [4] and planned.cut.cutoff == 2


def test_a_call_at_the_start_of_a_history_with_no_cut_is_shortened_too():
    messages = [ai("a0", 0, calls=[call("w", "write_file", content="x" * 3_000)]), result("t1", "w", 2)]
    assert plan(messages, TRUNCATE_PROTECTED, trigger_tokens=10_000, **WIDE).edits == {}  # 2 messages, protected
    planned = plan(messages, TRUNCATE_PROTECTED, trigger_tokens=1_000, **WIDE)
    assert planned.cut is None and list(planned.edits) == [0]


def test_over_the_window_a_history_that_opens_with_a_retrieval_result_is_pruned_from_its_first_message():
    messages = [result("t0", "c", 3_000, name="read_file")]
    planned = plan(messages, PRUNE_PROTECTED, trigger_tokens=1_000, context_window=2_000)
    assert planned.cut is None and list(planned.edits) == [0]


def test_a_trigger_set_above_the_window_still_keeps_requests_under_the_window():
    # under the trigger nothing is summarized, but the model refuses a request over its window: layers 1-2 prune it
    messages = _read_history(tool="bash")
    planned = plan(messages, PRUNE_PROTECTED, trigger_tokens=10_000, context_window=2_500)
    assert (planned.reason, planned.cut, list(planned.edits)) == (None, None, [2])
    assert planned.tokens_before > 2_500 > planned.tokens_after_layers


@pytest.mark.parametrize(("trigger_tokens", "edits"), [(10_000, []), (3_000, [3])])
def test_over_the_trigger_with_no_cut_that_helps_layers_1_2_reach_the_whole_history(trigger_tokens, edits):
    messages = [summary(), human("h1"), ai("a2", 0, calls=[call("c", cmd="make")]), result("t3", "c", 3_000)]
    planned = plan(messages, PRUNE_PROTECTED, trigger_tokens=trigger_tokens, keep_tokens=200, **WIDE)
    assert planned.cut is None and list(planned.edits) == edits


def test_over_the_window_once_summarized_the_excluded_tools_are_pruned_too():
    messages = _read_history()
    kept = sum(counts(messages)[1:])
    fields = {"trigger_tokens": 1_000, "keep_tokens": 3_300, "target_tokens": 10_000, "working_set_tokens": 0}
    assert plan(messages, PRUNE_PROTECTED, context_window=kept + SUMMARY_ALLOWANCE, **fields).edits == {}
    over = plan(messages, PRUNE_PROTECTED, context_window=kept + SUMMARY_ALLOWANCE - 1, **fields)
    assert list(over.edits) == [2] and over.layer_counts == {"prune": 1}


# --- the prompt-cache rule -------------------------------------------------------------------------------------------

#: Pruning t2 saves 2,971 tokens ahead of a 5,129-token suffix: it repays after 9 x 5,129 / 2,971 = 15.54 calls,
#: and half the calls forecast (FORECAST_SHARE) must reach that: (trigger - 5,248) / 100 / 2 >= 15.54 from 8,356.
REPAYING = [human("h0"), ai("a1", 0, calls=[call("c", cmd="make")]), result("t2", "c", 5_000, name="bash")]
REPAYING += [human("h3", 3_000), ai("a4")]


@pytest.mark.parametrize(
    ("fields", "edits", "reason"),
    [
        ({"trigger_tokens": 8_355}, [], None),
        ({"trigger_tokens": 8_356}, [2], None),
        # the message trigger shortens the forecast: (trigger_messages - 5 messages) / the newest turn's 1 message
        ({"trigger_tokens": 8_356, "trigger_messages": 37, "messages_min_tokens": 10_000}, [2], None),
        ({"trigger_tokens": 8_356, "trigger_messages": 36, "messages_min_tokens": 10_000}, [], None),
        # an edit that waits leaves the request as it was, and the message trigger counts its tokens
        ({"trigger_tokens": 8_356, "trigger_messages": 5, "messages_min_tokens": 6_000}, [], "messages"),
    ],
)
def test_under_prompt_caching_an_edit_alone_is_made_only_when_it_repays(fields, edits, reason):
    planned = plan(REPAYING, CACHED_PRUNE, **fields)
    assert (list(planned.edits), planned.reason) == (edits, reason)
    assert planned.layer_counts == ({"prune": 1} if edits else {})
    assert planned.tokens_after_layers == sum(counts(REPAYING)) - (2_971 if edits else 0)


def test_without_prompt_caching_an_edit_alone_is_always_made():
    planned = plan(REPAYING, PRUNE_ALL, trigger_tokens=8_300)
    assert list(planned.edits) == [2] and planned.reason is None


def test_at_the_trigger_every_edit_that_helps_is_made():
    # 8,219 tokens at a trigger of 8,000: the request may not wait for a cost rule, and the edit alone suffices
    planned = plan(REPAYING, CACHED_PRUNE, trigger_tokens=8_000, keep_tokens=8_000)
    assert planned.reason is None and list(planned.edits) == [2]


def _repeated_status(size: int = 500) -> list[BaseMessage]:
    """Return two rounds of ``git status`` (results of ``size`` tokens), each after a request, and a reply."""
    status = {"cmd": "git status"}
    return [
        human("h0"),
        ai("a1", 0, calls=[call("c1", **status)]),
        result("t2", "c1", size, name="bash"),
        human("h3"),
        ai("a4", 0, calls=[call("c2", **status)]),
        result("t5", "c2", size, name="bash"),
        human("h6"),
        ai("a7"),
    ]


@pytest.mark.parametrize(
    ("prompt_cache", "fields", "edits"),
    [
        (False, {"trigger_tokens": 10_000}, [2]),  # deduplicated whenever it is found
        (True, {"trigger_tokens": 10_000}, []),  # under caching, only with a summary
        (True, {"trigger_tokens": 1_000, "keep_tokens": 2_000}, [2]),  # over the window (the trigger, without one)
        (True, {"trigger_tokens": 1_000, "keep_tokens": 2_000, "context_window": 100_000}, [2]),
        (True, {"trigger_tokens": 1_000, "keep_tokens": 2_000, "context_window": 1_001}, [2]),
        (True, {"trigger_tokens": 1_000, "keep_tokens": 200}, []),  # the summary takes it anyway
    ],
)
def test_superseded_results_wait_for_a_summary_under_prompt_caching(prompt_cache, fields, edits):
    planned = plan(_repeated_status(), only(dedupe_results=True, prompt_cache=prompt_cache), **fields)
    assert list(planned.edits) == edits
    assert planned.layer_counts == ({"dedupe": 1} if edits else {})


@pytest.mark.parametrize(("context_window", "cutoff", "edits"), [(10_450, 1, [2]), (10_451, 3, [])])
def test_over_the_window_superseded_results_are_shortened_before_the_cut_is_chosen(context_window, cutoff, edits):
    # 10,450 tokens: at the window the older status is shortened first, and the kept tail reaches back to h0
    messages = _repeated_status(5_000)
    fields = {"trigger_tokens": 1_000, "keep_tokens": 5_600, "target_tokens": 20_000}
    planned = plan(messages, CACHED_DEDUPE, context_window=context_window, **fields)
    assert sum(counts(messages)) == 10_450
    assert (planned.cut.cutoff, list(planned.edits)) == (cutoff, edits)


@pytest.mark.parametrize(("trigger_tokens", "edits"), [(10_000, []), (500, [2])])
def test_with_no_cut_that_helps_superseded_results_are_shortened_anyway(trigger_tokens, edits):
    # one round calling git status twice: nothing before it to summarize
    status = {"cmd": "git status"}
    messages = [human("h0"), ai("a1", 0, calls=[call("c1", **status), call("c2", **status)])]
    messages += [result("t2", "c1", 500), result("t3", "c2", 500)]
    planned = plan(messages, CACHED_DEDUPE, trigger_tokens=trigger_tokens, **WIDE)
    assert planned.cut is None and list(planned.edits) == edits
    assert planned.layer_counts == ({"dedupe": 1} if edits else {})


# --- what layers 1-2 may touch: frozen and settled messages ---------------------------------------------------------

LONG_CALL = [ai("a0", 0, calls=[call("w", "write_file", content="x" * 3_000)]), result("t1", "w", 2), *chat(2)]


def _bash_round(n: int, size: int = 3_000) -> list[BaseMessage]:
    """Return the call ``a<n>`` of ``make <n>`` and its result ``t<n>`` of ``size`` tokens."""
    return [ai(f"a{n}", 0, calls=[call(f"c{n}", cmd=f"make {n}")]), result(f"t{n}", f"c{n}", size, name="bash")]


@pytest.mark.parametrize(
    ("messages", "config", "options", "layer_counts"),
    [
        (LONG_CALL, TRUNCATE_ALL, {}, {"truncate": 1}),  # from the very first message
        (LONG_CALL, TRUNCATE_ALL, {"settled": 1}, {}),
        (LONG_CALL, TRUNCATE_PROTECTED, {}, {}),  # 4 messages: inside the newest 20
        (LONG_CALL, TRUNCATE_PROTECTED, {"overflow": True, "settled": 4}, {"truncate": 1}),
        ([human("h0"), *_bash_round(1, 500), *_bash_round(2, 500), ai("end")], MICRO_ALL, {}, {"micro": 1}),
        ([human("h0"), *_bash_round(1, 500), *_bash_round(2, 500), ai("end")], MICRO_ALL, {"settled": 3}, {}),
    ],
)
def test_each_layer_counts_its_edits(messages, config, options, layer_counts):
    planned = plan(messages, config, **options)
    assert planned.layer_counts == layer_counts and len(planned.edits) == sum(layer_counts.values())


def test_a_layer_that_edits_in_both_passes_counts_both():
    # t1 is outside the protected 3,300 tokens; t2 is reached only once the summary is not enough
    messages = [human("h0"), *_bash_round(1), human("h3"), *_bash_round(2), human("h6"), ai("a7")]
    config = only(prune={"protect_tokens": 3_300, "minimum_tokens": 0})
    planned = plan(messages, config, trigger_tokens=1_000, keep_tokens=5_000, target_tokens=1_000, **WIDE)
    assert list(planned.edits) == [2, 5] and planned.layer_counts == {"prune": 2}


def test_the_edits_of_evicted_messages_leave_the_counts_too():
    # all three results are pruned (3,000 to 2,029 tokens); the cut at h3 evicts t1, so its edit is not made
    messages = [human("h0"), *_bash_round(1), human("h3"), *_bash_round(2), human("h6"), *_bash_round(3), ai("end")]
    planned = plan(messages, PRUNE_ALL, trigger_tokens=1_000, keep_tokens=4_400, target_tokens=20_000, **WIDE)
    assert planned.cut.evict == (0, 1, 2)
    assert [messages[i].id for i in planned.edits] == ["t2", "t3"] and planned.layer_counts == {"prune": 2}
    assert planned.tokens_after_layers == sum(counts(messages)) - 2 * (3_000 - 2_029)


@pytest.mark.parametrize(("frozen", "edits"), [(0, [2]), (2, [2]), (3, [])])
def test_a_summary_being_prepared_freezes_the_messages_it_covers(frozen, edits):
    assert list(plan(_read_history(tool="bash"), PRUNE_ALL, frozen=frozen).edits) == edits


@pytest.mark.parametrize(
    ("config", "settled", "edits", "settled_after"),
    [
        (PRUNE_ALL, 0, [2], 5),  # pruned: nothing left to edit
        (PRUNE_ALL, 2, [2], 5),
        (PRUNE_ALL, 3, [], 5),  # the scan starts where the last plan settled
        (PRUNE_PROTECTED, 0, [], 2),  # protected for now: the next plan looks again from there
        (PRUNE_PROTECTED, 9, [], 5),
    ],
)
def test_the_scan_starts_where_the_last_plan_settled(config, settled, edits, settled_after):
    planned = plan(_read_history(tool="bash"), config, settled=settled)
    assert (list(planned.edits), planned.settled) == (edits, settled_after)


# --- the prompt-cache rule's arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(("tokens_", "may"), [(9_999, True), (10_000, False), (10_001, False)])
def test_a_cost_rule_may_hold_an_edit_back_only_under_the_trigger(tokens_, may):
    assert may_wait(tokens_, budget(trigger_tokens=10_000)) is may


@pytest.mark.parametrize(
    ("saved", "suffix", "calls", "repays"),
    [
        # 0.9 x 10,000 re-billed once against 0.1 x 1,000 saved per later call: from 90 calls
        (1_000, 10_000, 90, True),
        (1_000, 10_000, 89.9, False),
        (1_000, 10_000, 1_000, True),
        (2_000, 10_000, 45, True),
        (2_000, 10_000, 44.9, False),
        (1, 0, 0, True),  # nothing after it: free
        (0, 0, 1_000, False),  # saves nothing: never
        (-5, 0, 1_000, False),
    ],
)
def test_an_edit_repays_after_nine_times_its_suffix_over_its_saving(saved, suffix, calls, repays):
    assert edit_repays(saved, suffix, calls) is repays


@pytest.mark.parametrize(
    ("messages", "fields", "conversation", "ahead"),
    [
        # (trigger - tokens) / the newest turn's tokens: the last assistant message and what follows it
        (chat(10), {"trigger_tokens": 2_000}, None, 1_000 / 100),
        ([*chat(9), result("t", "c", 300)], {"trigger_tokens": 2_000}, None, 800 / 500),
        ([*chat(10), human("h", 300)], {"trigger_tokens": 2_000}, None, 700 / 400),
        ([human("h", 500)], {"trigger_tokens": 2_000}, None, 1_500 / 500),  # no reply yet: all of it is the turn
        (chat(10), {"trigger_tokens": 900}, None, 0),  # past the trigger: none
        ([human("h", 0)], {"trigger_tokens": 2_000}, None, 2_000),  # an empty turn counts as one token
        ([], {"trigger_tokens": 2_000}, None, 2_000),
        ([human("h0"), ai("a1", 300), human("h2")], {"trigger_tokens": 2_000}, None, 1_500 / 400),
        # the message trigger too, at the newest turn's messages
        (chat(10), {"trigger_tokens": 2_000, "trigger_messages": 14}, 10, 4),
        (chat(10), {"trigger_tokens": 2_000, "trigger_messages": 40}, 10, 10),
        (chat(10), {"trigger_tokens": 2_000, "trigger_messages": 14}, None, 10),
        (chat(10), {"trigger_tokens": 2_000, "trigger_messages": 8}, 10, 0),
        ([*chat(10), human("h"), human("h")], {"trigger_tokens": 5_000, "trigger_messages": 18}, 12, 2),
    ],
)
def test_the_calls_ahead_are_the_room_left_at_the_newest_turns_growth(messages, fields, conversation, ahead):
    assert calls_ahead(messages, counts(messages), budget(**fields), conversation) == pytest.approx(ahead)


@pytest.mark.parametrize(
    ("evict", "original", "edited", "calls", "kept"),
    [
        # with a summary: the edits of what stays, whatever they cost
        ((0, 1, 2, 3, 4, 5), [10] * 12, [5] * 12, 0, [9]),
        ((), [10] * 12, [5] * 12, 0, [1, 5, 9]),
        # without one: all of them when together they repay (suffix from the first edited message), else none
        (None, [10] * 12, [10, 0, 10, 10, 10, 0, 10, 10, 10, 0, 10, 10], 9 * 80 / 30, [1, 5, 9]),
        (None, [10] * 12, [10, 0, 10, 10, 10, 0, 10, 10, 10, 0, 10, 10], 9 * 80 / 30 - 0.01, []),
    ],
)
def test_edits_worth_their_cache_break(evict, original, edited, calls, kept):
    edits = {i: HumanMessage("x", id=f"m{i}") for i in (1, 5, 9)}
    assert list(cache_aware_edits(edits, original, edited, evict=evict, calls_ahead=calls)) == kept


# --- after the plan --------------------------------------------------------------------------------------------------


def test_the_compacted_view_puts_the_summary_after_the_pinned_system_messages():
    messages = [system("s0"), system("s1"), human("h2"), ai("a3"), human("h4"), ai("a5")]
    new = summary()
    hook = injected("i")
    view = compacted_view(messages, {"h2", "a3"}, new, [hook])
    assert [m.id for m in view] == ["s0", "s1", new.id, "i", "h4", "a5"]
    assert [m.id for m in compacted_view(messages[2:], {"h2"}, new)] == [new.id, "a3", "h4", "a5"]


@pytest.mark.parametrize(
    ("last_id", "since"),
    [("m9", 0), ("m7", 200), ("m0", 900), ("gone", None), (None, None), ("", None)],
)
def test_the_tokens_since_the_last_summary(last_id, since):
    assert tokens_since(chat(10), counts(chat(10)), last_id) == since


def test_tokens_since_counts_from_the_newest_message_with_that_id():
    messages = [human("x", 100), ai("a", 200), human("x", 300), ai("b", 400)]
    assert tokens_since(messages, counts(messages), "x") == 400
    assert tokens_since([], [], "x") is None


def test_still_over_the_trigger_the_reason_names_each_part_and_the_largest_messages():
    messages = [
        system("s", 400),
        summary(1_000),
        ai("a", 50),
        SystemMessage("r" * 30, id="reminder"),
        human("h", 2_000),
        ai("b", 10),
    ]
    sizes = counts(messages)
    assert over_budget_reason(messages, sizes, sum(sizes)) is None
    reason = over_budget_reason(messages, sizes, 3_000)
    total = sum(sizes)
    assert reason == (
        f"{total:,} tokens after compaction, over the trigger of 3,000: what is kept cannot be cut further; by part: "
        f"the latest request 2,000 (1 message), the summary {sizes[1]:,} (1 message), pinned system messages 400 "
        f"(1 message), the kept tail 60 (2 messages), later system messages 30 (1 message); largest messages: "
        f"human h (2,000 tokens), human {messages[1].id} ({sizes[1]:,} tokens), system s (400 tokens)"
    )
    assert over_budget_reason(messages, sizes, total - 1).startswith(f"{total:,} tokens after compaction")


def test_whole_history_takes_away_the_protected_window_and_the_batching():
    config = CompactionConfig()
    whole = whole_history(config)
    assert whole.truncate_args.model_dump() == {
        **config.truncate_args.model_dump(),
        "trigger_messages": 0,
        "trigger_tokens": 0,
        "keep_messages": 0,
    }
    assert whole.prune.model_dump() == {**config.prune.model_dump(), "protect_tokens": 0, "minimum_tokens": 0}
    assert whole.micro.model_dump() == {**config.micro.model_dump(), "minimum_tokens": 0}
    assert whole_history(config, keep_excluded=False).prune.excluded_tools == frozenset()
    assert whole.model_dump(exclude={"truncate_args", "prune", "micro"}) == config.model_dump(
        exclude={"truncate_args", "prune", "micro"}
    )
