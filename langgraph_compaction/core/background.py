"""Background compaction's decisions: when to start preparing a summary, and whether a prepared one still applies.

A summary prepared in the background covers the messages before its cut as
they were when it started. It may replace them only if they are unchanged
(same ids, same content, same order: ``message_digest`` is stable across
processes, so another worker can check it), the latest request is not among
them. What arrived after the cut (the tail) may have outgrown
``keep_tokens_max`` while the summary was made: the summary is still applied
(its work is not wasted), as long as the result is within the target; the
next compaction, chained on it, takes the tail. Pure functions; nothing here
imports langgraph.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, message_to_dict, messages_from_dict

from .config import MIN_KEEP_TOKENS, SUMMARY_ALLOWANCE, Budget
from .conversation import is_injected, is_summary, latest_user_index, leading_systems
from .hooks import pairing_problem
from .validation import broken_tool_ids


def _canonical(value: Any) -> Any:
    """Return a value JSON can write with sorted keys: every key a string saying its type (``1`` and ``"1"`` differ)."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else f"<{type(k).__name__}>{k!r}"): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def message_digest(message: BaseMessage) -> str:
    """Return a digest of all a message carries (type, id, content, tool calls, metadata), the same in every process.

    Artifacts may hold dicts with keys of several types (``{1: ..., "a": ...}``): the digest covers them too.
    """
    text = json.dumps(_canonical(message_to_dict(message)), sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def start_budget(budget: Budget, start: float = 1.0) -> Budget:
    """Return the budget a background compaction is planned with: triggers at ``start`` of the real ones, a short tail.

    The window and the target stay those of the real compaction. The kept
    tail is the smallest a cut allows (``MIN_KEEP_TOKENS``; a cut never
    splits the newest tool round and keeps the latest request): what the
    agent adds while the summary is prepared refills it, so the tail at the
    swap is about the one a blocking compaction keeps, not that plus the
    growth (see ``swap_before_trigger``).
    """
    return replace(
        budget,
        trigger_tokens=max(1, int(budget.trigger_tokens * start)),
        trigger_messages=math.ceil(budget.trigger_messages * start) if budget.trigger_messages else 0,
        messages_min_tokens=int(budget.messages_min_tokens * start),
        keep_tokens=min(budget.keep_tokens, MIN_KEEP_TOKENS) if budget.keep_tokens > 0 else 0,
    )


def wait_limit(budget: Budget) -> int:
    """Return the request size up to which the agent goes on while the retry of a failed summary is prepared.

    Halfway from the trigger to the window: the other half of the reserve is
    left to the reply. Without a known window, the trigger itself (the retry
    is waited for there).
    """
    reserve = max(0, (budget.context_window or 0) - budget.trigger_tokens)
    return budget.trigger_tokens + reserve // 2


def covered(messages: Sequence[BaseMessage], evict_ids: Sequence[str]) -> list[list[str]]:
    """Return ``[id, digest]`` of each message a summary will replace, in order."""
    chosen = set(evict_ids)
    return [[m.id, message_digest(m)] for m in messages if m.id in chosen]


def cut_index(messages: Sequence[BaseMessage], cutoff_id: str | None) -> int | None:
    """Return the index of the first kept message (``len(messages)`` without a cutoff id; None when it is gone)."""
    if cutoff_id is None:
        return len(messages)
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == cutoff_id:
            return i
    return None


def kept_tokens(messages: Sequence[BaseMessage], counts: Sequence[int], evict_ids: Sequence[str]) -> int:
    """Return the tokens a summary leaves beside itself: the messages it does not replace, leading systems aside."""
    gone = set(evict_ids)
    lead = leading_systems(messages)
    return sum(c for i, (m, c) in enumerate(zip(messages, counts, strict=True)) if i >= lead and m.id not in gone)


def tail_tokens(messages: Sequence[BaseMessage], counts: Sequence[int], cutoff_id: str | None) -> int:
    """Return the tokens of the tail: what arrived after a summary's cut (0 when the cut point is gone)."""
    end = cut_index(messages, cutoff_id)
    return sum(counts[end:]) if end is not None else 0


def newest_turn(messages: Sequence[BaseMessage]) -> int:
    """Return where the newest turn starts: the newest model reply (``len(messages)`` when there is none)."""
    return next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), len(messages))


def turn_tokens(messages: Sequence[BaseMessage], counts: Sequence[int]) -> int:
    """Return the tokens the newest turn added: the newest model reply and all after it (tool results, a request)."""
    return sum(counts[newest_turn(messages) :])


#: How many of the newest turns a forecast of the thread's growth looks at; it expects the largest of them. An agent
#: asked again between tool rounds alternates a small turn (its answer and the request) with a large one (a tool
#: round): the newest turn alone would forecast the small one every other call and start a job a turn too late.
FORECAST_TURNS = 3


def turn_growth(messages: Sequence[BaseMessage], counts: Sequence[int] | None = None) -> int:
    """Return the most one of the newest ``FORECAST_TURNS`` turns added: tokens with ``counts``, else messages.

    A turn is a model reply and all after it up to the next reply (tool
    results, a request); 0 before the first reply.
    """
    end, most, seen = len(messages), 0, 0
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            most = max(most, sum(counts[i:end]) if counts is not None else end - i)
            end, seen = i, seen + 1
            if seen == FORECAST_TURNS:
                break
    return most


def should_start(tokens: int, turn: int, budget: Budget, start: float, turns_to_ready: float) -> bool:
    """Return True when a summary should start being prepared now, before the trigger.

    At ``start`` of the trigger at the latest; earlier when the thread grows
    fast: a job takes about ``turns_to_ready`` turns, and if turns of ``turn``
    tokens (the largest of the newest few: ``turn_growth``) would reach the
    trigger before it is ready, it starts now, so that it is ready when the
    trigger comes. Never before half the trigger: a summary of less would be
    made again soon.
    """
    trigger = budget.trigger_tokens
    if tokens >= trigger or tokens < trigger // 2:
        return False
    return tokens >= trigger * start or tokens + turn * (turns_to_ready + 1) >= trigger


def should_start_by_count(
    conversation: int, turn: int, tokens: int, budget: Budget, start: float, turns_to_ready: float
) -> bool:
    """Return True when the message-count trigger will fire before a summary started later would be ready.

    ``conversation`` is the messages the trigger counts, ``turn`` how many
    the largest of the newest turns added (``turn_growth``). As
    ``should_start`` for tokens: at ``start`` of the trigger at the latest,
    earlier when turns that size would reach it first; never under the
    trigger's floor of tokens (``messages_min_tokens``, at ``start``). A job
    ready at the trigger is swapped in there, where a blocking compaction
    would summarize; started at the trigger, the agent would go on with the
    whole history meanwhile.
    """
    trigger = budget.trigger_messages
    if not trigger or conversation >= trigger or tokens < budget.messages_min_tokens * start:
        return False
    return conversation >= trigger * start or conversation + turn * (turns_to_ready + 1) >= trigger


def covers_enough(evicted_tokens: int, budget: Budget) -> bool:
    """Return True when a summary of ``evicted_tokens`` brings a request at the trigger under the target.

    A job started too early covers little (all but the kept tail of a short
    thread); applied at the trigger, it would leave the request over the
    target and a blocking compaction would follow it: two compactions where
    one does. Such a job is not started; a later one is, or the trigger
    compacts as it would without background.
    """
    return evicted_tokens - SUMMARY_ALLOWANCE >= budget.trigger_tokens - budget.target_tokens


def new_pairing_problem(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> str | None:
    """Return how ``after`` breaks tool-call pairing where ``before`` did not (None: it adds no broken pair)."""
    added = sorted(broken_tool_ids(after) - broken_tool_ids(before))
    if not added:
        return None
    return "; ".join(f"tool call {tid!r} would be {kind}" for kind, tid in added[:5])


def swap_before_trigger(
    record: dict[str, Any], messages: Sequence[BaseMessage], counts: Sequence[int], keep_tokens_max: int
) -> bool:
    """Return True when a ready summary should be applied now, before the trigger.

    That is when one more turn would push its tail past ``keep_tokens_max``.
    A turn is what the newest model call added (its reply and the tool
    results after it); applying later would only lengthen the tail it
    leaves (a tail already past it: applied as soon as it is ready).
    """
    return tail_tokens(messages, counts, record.get("cutoff_id")) + turn_tokens(messages, counts) > keep_tokens_max


def record_problem(record: dict[str, Any]) -> str | None:
    """Return why a ready record is not one a compaction job makes (None: it is).

    A job makes a summary message and, after it, only messages a hook gave
    that keep every tool call paired; a record written by anyone else (a
    forged state) may hold anything.
    """
    try:
        (summary,) = messages_from_dict([record["summary"]])
        injected = messages_from_dict(list(record.get("injected") or []))
    except (KeyError, TypeError, ValueError) as exc:
        return f"it is not a prepared summary ({type(exc).__name__}: {exc})"
    if not is_summary(summary):
        return f"what it would place is a {summary.type} message, not a summary"
    if any(not is_injected(m) for m in injected):
        return "a message it would place after the summary is not one a hook gave"
    if problem := pairing_problem(injected):
        return f"the messages it would place after the summary break tool-call pairing: {problem}"
    return None


def prepared_problem(record: dict[str, Any], messages: Sequence[BaseMessage]) -> str | None:
    """Return why a prepared summary may not replace its messages now (None: it may).

    It may not when a message it covers is gone, changed or moved
    (``update_state``, time travel, a fork, another worker's compaction), when
    its cut point is gone, or when the latest request is among them. A tail
    grown past ``keep_tokens_max`` is no reason: the summary of what it covers
    is as good as it was, and the swap's target check bounds the result.
    """
    entries = record.get("covered") or []
    if not entries:
        return "it covers no message"
    index = {m.id: i for i, m in enumerate(messages)}
    last = -1
    for message_id, digest in entries:
        i = index.get(message_id)
        if i is None:
            return f"message {message_id} it covers is no longer in the history"
        if i < last:
            return f"message {message_id} it covers has moved"
        if message_digest(messages[i]) != digest:
            return f"message {message_id} it covers has changed"
        last = i
    end = cut_index(messages, record.get("cutoff_id"))
    if end is None or end <= last:
        return f"its cut point {record.get('cutoff_id')} is no longer after the messages it covers"
    latest = latest_user_index(messages)
    ids = {message_id for message_id, _ in entries}
    if latest is not None and messages[latest].id in ids:
        return "the latest request is among the messages it covers"
    return None
