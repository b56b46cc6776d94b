"""The gate's decision: which cheap edits to make, whether to summarize, and where to cut.

``plan_compaction`` is a pure function of the messages, the budget and the
settings. It never calls a model and never writes anything; the gate node
turns its plan into state updates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from .billing import CACHED_PRICE
from .config import SUMMARY_ALLOWANCE, Budget, CompactionConfig
from .conversation import is_injected, is_summary, latest_user_index, leading_systems, tool_rounds, unsafe_cut_points
from .layers import LayerEdits, settled_from, superseded_results
from .working_set import choose_working_set


@dataclass(frozen=True)
class Cut:
    """Where the conversation is cut: ``messages[:cutoff]`` is summarized, the rest kept.

    ``evict`` lists the indices that leave the state (never a leading
    system message, never the latest human message, which stays in front of the
    tail when the cut falls after it: ``kept_human``). ``working_set`` lists
    the indices before the cut kept for the agent's working set
    (``with_working_set``): they stay, right after the summary.
    """

    cutoff: int
    evict: tuple[int, ...]
    kept_human: int | None = None
    working_set: tuple[int, ...] = ()


def _candidate(counts: Sequence[int], system: Sequence[bool], keep_tokens: int, keep_messages: int) -> int:
    """Return the earliest index whose suffix (system messages aside) fits the keep budget."""
    total = 0
    kept = 0
    for i in range(len(counts) - 1, -1, -1):
        if system[i]:
            continue
        if keep_tokens > 0:
            if total + counts[i] > keep_tokens:
                return i + 1
            total += counts[i]
        else:
            if kept + 1 > keep_messages:
                return i + 1
            kept += 1
    return 0


def _safe_cutoff(messages: Sequence[BaseMessage], system: list[bool], safe: list[int], candidate: int) -> int | None:
    """Return the nearest safe cut at or before ``candidate`` that evicts something, else the nearest after it."""

    def evictable(cut: int) -> bool:  # a summary and the messages re-injected after it alone are no progress
        return any(not system[i] and not is_summary(messages[i]) and not is_injected(messages[i]) for i in range(cut))

    down = next((i for i in reversed(safe) if i <= candidate), None)
    if down is not None and evictable(down):
        return down
    return next((i for i in safe if i >= candidate and evictable(i)), None)


def find_cutoff(
    messages: Sequence[BaseMessage], counts: Sequence[int], keep_tokens: int, keep_messages: int
) -> Cut | None:
    """Return the safe cut that keeps about ``keep_tokens`` (or ``keep_messages``), or None.

    The earliest index whose suffix fits the budget (suffix sums: O(n)) is
    moved back to the nearest index that starts no tail with a tool result
    and splits no tool round (parallel, interleaved or mixed calls included);
    when that would leave nothing to summarize it moves forward instead, but
    never past the start of the newest round. None when nothing but system
    messages and an earlier summary would be removed. Only the leading
    system messages are pinned (``leading_systems``); later ones are conversation.
    """
    n = len(messages)
    lead = leading_systems(messages)
    system = [i < lead for i in range(n)]
    rounds = tool_rounds(messages)
    unsafe = unsafe_cut_points(messages, rounds)
    safe = [i for i in range(n) if not unsafe[i]]
    if not safe:
        return None
    newest_start = safe[-1]
    candidate = min(_candidate(counts, system, keep_tokens, keep_messages), newest_start)
    cutoff = _safe_cutoff(messages, system, safe, candidate)
    if cutoff is None:
        return None
    human = latest_user_index(messages)
    kept_human = human if human is not None and human < cutoff else None
    evict = tuple(i for i in range(cutoff) if not system[i] and i != kept_human)
    if not any(not is_summary(messages[i]) and not is_injected(messages[i]) for i in evict):
        return None
    return Cut(cutoff=cutoff, evict=evict, kept_human=kept_human)


@dataclass
class CompactionPlan:
    """What the gate decided for one model call.

    ``held`` says why a due summary was not asked for (``"cooldown"``:
    too little new conversation since the last one).
    """

    tokens_before: int
    tokens_after_layers: int
    edits: dict[int, BaseMessage] = field(default_factory=dict)
    layer_counts: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    cut: Cut | None = None
    held: str | None = None
    settled: int = 0

    @property
    def summarize(self) -> bool:
        """Return True when layer 3 must run (a reason and a safe cut exist)."""
        return self.reason is not None and self.cut is not None


def whole_history(config: CompactionConfig, *, keep_excluded: bool = True) -> CompactionConfig:
    """Return the settings with layers 1-2 reaching the whole history: no protected window, no batching.

    ``keep_excluded=False`` also prunes the results of ``excluded_tools``
    (their originals are in the transcript), for a request already over the window.
    """
    return config.model_copy(
        update={
            "truncate_args": config.truncate_args.model_copy(
                update={"trigger_messages": 0, "trigger_tokens": 0, "keep_messages": 0}
            ),
            "prune": config.prune.model_copy(
                update={
                    "protect_tokens": 0,
                    "minimum_tokens": 0,
                    **({} if keep_excluded else {"excluded_tools": frozenset()}),
                }
            ),
            "micro": config.micro.model_copy(update={"minimum_tokens": 0}),
        }
    )


def with_working_set(messages: Sequence[BaseMessage], counts: Sequence[int], cut: Cut, budget_tokens: int) -> Cut:
    """Return the cut with the working set's rounds before it kept, within the budget.

    ``working_set.choose_working_set`` chooses the rounds, each whole.

    The rounds stay in their order, so they come right after the summary with
    their tool-call pairing intact. A cut that would then summarize nothing
    but earlier summaries is returned unchanged.
    """
    if budget_tokens <= 0:
        return cut
    keep = choose_working_set(messages, counts, budget_tokens, cut.evict, clear=False).kept
    evict = tuple(i for i in cut.evict if i not in keep)
    if not keep or not any(not is_summary(messages[i]) for i in evict):
        return cut
    return replace(cut, evict=evict, working_set=tuple(sorted(keep)))


def _kept_tokens(sizes: Sequence[int], cut: Cut) -> int:
    evicted = set(cut.evict)
    return sum(s for i, s in enumerate(sizes) if i not in evicted)


def _decide(
    after: int,
    budget: Budget,
    conversation: int,
    *,
    overflow: bool,
    manual: bool,
    new_tokens: int | None,
) -> tuple[str | None, str | None]:
    """Return (reason to summarize, why a due summary is held) for ``after`` tokens once layers 1-2 ran."""
    reason: str | None = None
    if overflow:
        reason = "overflow"
    elif manual:
        reason = "manual"
    elif after >= budget.trigger_tokens:  # layer 3 only when layers 1-2 did not suffice
        reason = "tokens"
    elif budget.trigger_messages and conversation >= budget.trigger_messages and after >= budget.messages_min_tokens:
        reason = "messages"
    if (
        reason in ("tokens", "messages")
        and new_tokens is not None
        and new_tokens < budget.min_new_tokens
        and after < budget.hard_limit
    ):
        return None, "cooldown"
    return reason, None


def _folded(layers: LayerEdits, budget: Budget) -> int:
    """Return the tokens of conversation a summary would fold in now: what the cut evicts, earlier summaries aside."""
    cut = find_cutoff(layers.working, layers.sizes, budget.keep_tokens, budget.keep_messages)
    evicted = cut.evict if cut is not None else ()
    return sum(layers.sizes[i] for i in evicted if not is_summary(layers.working[i]))


def _left(layers: LayerEdits, cut: Cut | None) -> int:
    """Return the tokens the request keeps once the plan is carried out (the summary's allowance included)."""
    return sum(layers.sizes) if cut is None else _kept_tokens(layers.sizes, cut) + SUMMARY_ALLOWANCE


def _reach_target(
    layers: LayerEdits, config: CompactionConfig, budget: Budget, cut: Cut | None, reason: str | None
) -> Cut | None:
    """Return the cut once layers 1-2 ran over the whole history where the plan alone stays over.

    Still over the target once summarized (or over the trigger with no cut
    that helps): every edit that helps is made, the protected tail included;
    over the window, the excluded tools' results too (the model refuses it anyway).
    """

    def cut_now() -> Cut | None:
        return find_cutoff(layers.working, layers.sizes, budget.keep_tokens, budget.keep_messages) if reason else None

    left = _left(layers, cut)
    if left > budget.target_tokens if cut is not None else not may_wait(left, budget):
        layers.run(whole_history(config), 0)
        cut = cut_now()
    if _left(layers, cut) > budget.hard_limit:
        layers.run(whole_history(config, keep_excluded=False), 0)
        cut = cut_now()
    return cut


def plan_compaction(
    messages: Sequence[BaseMessage],
    counts: Sequence[int],
    budget: Budget,
    config: CompactionConfig,
    recount: Callable[[BaseMessage], int],
    *,
    manual: bool = False,
    new_tokens: int | None = None,
    overflow: bool = False,
    settled: int = 0,
    frozen: int = 0,
) -> CompactionPlan:
    """Return the plan for one model call: layer 1-2 edits, then whether and where to summarize.

    ``counts`` are the per-message token counts of ``messages``;
    ``recount(message)`` counts an edited message. Layers run in a fixed
    order (truncate arguments, prune or micro-compact results) and each sees
    the previous one's edits. Layer 3 is asked for when the tokens are still at
    or over the trigger after the layers, when
    there are ``trigger_messages`` messages holding at least
    ``messages_min_tokens``, or when the agent asked (``manual``). When the
    summary would still leave more than ``target_tokens``, or the request is
    at or over the trigger with no cut that helps, layers 1-2 run again over
    the whole history, tail included; still over the window, they prune the
    results of ``excluded_tools`` too. Under ``prompt_cache`` an edit that does
    not repay its cache break waits only while the request fits (``may_wait``).

    ``new_tokens`` (tokens that arrived since the last summary) holds a due
    summary back while under ``summary.min_new_tokens``, unless the window would
    overflow. At the message count, a summary is made only when its cut folds
    at least ``min_new_tokens`` of conversation in (earlier summaries aside):
    when the tail must keep a whole tool round of many messages, the few
    before it would make a summary call that shrinks nothing.
    ``overflow=True`` plans for a request the model refused as too long:
    layers 1-2 over the whole history and half the keep budget.

    ``frozen``: layers 1-2 edit no message before this index (a summary
    being prepared covers them, and must find them as it saw them).

    ``settled`` (from an earlier plan of the same thread) is where layers 1-2
    start looking.
    Nothing is copied unless a layer edits, so a call with nothing to do costs
    little more than the sum of the counts.
    """
    if overflow:
        config = whole_history(config, keep_excluded=False)
        budget = replace(budget, keep_tokens=budget.keep_tokens // 2, keep_messages=max(1, budget.keep_messages // 2))
    before = sum(counts)
    start = 0 if overflow else min(settled, len(messages))
    working_set_tokens = budget.working_set_tokens // 2 if overflow else budget.working_set_tokens
    layers = LayerEdits(messages, counts, recount, frozen, working_set_tokens)

    # Under prompt caching, superseded results wait for a summary (or a request that would not fit the window):
    # alone, each shortening breaks the cached prefix only to put the summary off by a few calls (the offline demo
    # billed 8 % more so). They are found only once a summary is due, so an idle call never looks for them.
    dedupe_waits = config.prompt_cache and not overflow and before < budget.hard_limit
    layers.run(config, start, dedupe=not dedupe_waits)
    conversation = len(layers.working) - leading_systems(layers.working)
    decide = partial(_decide, budget=budget, conversation=conversation, overflow=overflow, manual=manual)

    def due(tokens: int) -> tuple[str | None, str | None]:
        reason, held = decide(tokens, new_tokens=new_tokens)
        if reason == "messages" and budget.min_new_tokens and _folded(layers, budget) < budget.min_new_tokens:
            return None, None  # what the cut can fold (the tail holds a whole tool round) is not worth a summary
        return reason, held

    reason, held = due(sum(layers.sizes))
    if layers.edits and reason is None and config.prompt_cache and may_wait(before, budget):
        # layers 1-2 alone: made only when they repay their prompt-cache break, else a summary does the job; a
        # summary held back (cooldown) does not make them urgent while the request fits
        ahead = FORECAST_SHARE * calls_ahead(layers.working, layers.sizes, budget, conversation)
        if not cache_aware_edits(layers.edits, counts, layers.sizes, evict=None, calls_ahead=ahead):
            layers.undo()
            reason, held = due(before)
    cut = find_cutoff(layers.working, layers.sizes, budget.keep_tokens, budget.keep_messages) if reason else None
    if dedupe_waits and cut is not None and config.dedupe_results:
        # after the summary's cut is chosen: a shorter result would let the kept tail reach back to the start of
        # its tool round, and keep more than without it
        layers.apply("dedupe", superseded_results(layers.working))
    if not overflow:
        cut = _reach_target(layers, config, budget, cut, reason)
    if cut is not None:  # the working set, in what room the target leaves (never pushing the result over it)
        summary = SUMMARY_ALLOWANCE + config.fidelity.request_tokens  # the summary quotes requests besides its text
        room = budget.target_tokens - summary - _kept_tokens(layers.sizes, cut)
        cut = with_working_set(layers.working, layers.sizes, cut, min(working_set_tokens, room))
    if layers.edits and cut is not None and not overflow:
        # evicted messages leave with the summary: editing them first buys nothing
        layers.keep(cache_aware_edits(layers.edits, counts, layers.sizes, evict=cut.evict, calls_ahead=0))
    return CompactionPlan(
        tokens_before=before,
        tokens_after_layers=sum(layers.sizes),
        edits=layers.edits,
        layer_counts=layers.layer_counts,
        reason=reason,
        cut=cut,
        held=held,
        settled=settled_from(layers.working, start, config.truncate_args, config.prune, config.micro),
    )


#: An edit without a summary must repay within this share of the calls forecast before the next one: the
#: forecast (the newest turn's growth) is uncertain, a summary that comes sooner ends the saving, and the
#: break is paid at once.
FORECAST_SHARE = 0.5


def may_wait(tokens: int, budget: Budget) -> bool:
    """Return True when a request of ``tokens`` may go out without the edits a cost rule holds back.

    A cost rule (an edit that does not repay its prompt-cache break) may wait
    only while the request fits: at or over the trigger, and so always over
    the window, every edit that helps is made before the model is called.
    """
    return tokens < budget.trigger_tokens


def edit_repays(saved: int, suffix: int, calls_ahead: float) -> bool:
    """Return True when an edit saving ``saved`` tokens ahead of ``suffix`` tokens pays for its cache break.

    The edit changes an old message, so the next call bills everything from
    there on in full once: ``(1 - CACHED_PRICE) × suffix`` more than reading
    it from the cache. Each later call then sends ``saved`` fewer cached
    tokens: ``CACHED_PRICE × saved`` less. It repays after
    ``9 × suffix / saved`` calls; it is worth making when that many calls are
    ahead.
    """
    return saved > 0 and (1 - CACHED_PRICE) * suffix <= CACHED_PRICE * saved * calls_ahead


def calls_ahead(
    messages: Sequence[BaseMessage], counts: Sequence[int], budget: Budget, conversation: int | None = None
) -> float:
    """Return about how many model calls remain before a trigger fires, at the newest turn's growth.

    The newest turn is the last assistant message and what came after it.
    The token trigger counts; the message-count trigger too when
    ``conversation`` (the non-system messages) is given.
    """
    turn = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), 0)
    ahead = max(0, budget.trigger_tokens - sum(counts)) / max(1, sum(counts[turn:]))
    if budget.trigger_messages and conversation is not None:
        ahead = min(ahead, max(0, budget.trigger_messages - conversation) / max(1, len(messages) - turn))
    return ahead


def cache_aware_edits(
    edits: dict[int, BaseMessage],
    original: Sequence[int],
    edited: Sequence[int],
    *,
    evict: Sequence[int] | None,
    calls_ahead: float,
) -> dict[int, BaseMessage]:
    """Return the layer 1-2 edits worth their prompt-cache break; the others wait.

    - With a summary (``evict``: the indices it removes) the cache breaks
      anyway: the edits of messages that stay are free and kept; edits of
      evicted messages are dropped (the summarizer reads the originals from
      the cache, and they leave the state).
    - Without one they are kept only when they repay within ``calls_ahead``
      calls (``edit_repays``), the suffix counted from the first edited message.
    ``original`` and ``edited`` are the token counts without and with the edits.
    """
    if evict is not None:
        gone = set(evict)
        return {i: m for i, m in edits.items() if i not in gone}
    first = min(edits)
    saved = sum(original[i] - edited[i] for i in edits)
    return edits if edit_repays(saved, sum(edited[first:]), calls_ahead) else {}


def compacted_view(
    messages: Sequence[BaseMessage], evict_ids: set[Any], summary: BaseMessage, after: Sequence[BaseMessage] = ()
) -> list[BaseMessage]:
    """Return the messages after a compaction: what is kept, with the summary right after the leading system messages.

    ``after`` (an ``after_compaction`` hook's messages) follow the summary.
    """
    kept = [m for m in messages if m.id not in evict_ids]
    at = leading_systems(messages)  # never evicted, so they are the first ``at`` kept messages
    return kept[:at] + [summary, *after] + kept[at:]


def tokens_since(messages: Sequence[BaseMessage], counts: Sequence[int], last_id: str | None) -> int | None:
    """Return the tokens of the messages after the one with id ``last_id`` (None when it is not there)."""
    if not last_id:
        return None
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == last_id:
            return sum(counts[i + 1 :])
    return None


def over_budget_reason(messages: Sequence[BaseMessage], counts: Sequence[int], trigger_tokens: int) -> str | None:
    """Return why compacted messages are still over the trigger, naming the largest ones (None when they fit)."""
    total = sum(counts)
    if total <= trigger_tokens:
        return None
    lead, latest = leading_systems(messages), latest_user_index(messages)
    parts: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        part = (
            "pinned system messages"
            if i < lead
            else "the summary"
            if is_summary(m)
            else "the latest request"
            if i == latest
            else "later system messages"
            if isinstance(m, SystemMessage)
            else "the kept tail"
        )
        parts.setdefault(part, [0, 0])
        parts[part][0] += 1
        parts[part][1] += counts[i]
    shares = ", ".join(
        f"{name} {size:,} ({n} message{'s' if n != 1 else ''})"
        for name, (n, size) in sorted(parts.items(), key=lambda p: -p[1][1])
    )
    largest = sorted(range(len(messages)), key=lambda i: -counts[i])[:3]
    named = ", ".join(f"{messages[i].type} {messages[i].id} ({counts[i]:,} tokens)" for i in largest)
    return (
        f"{total:,} tokens after compaction, over the trigger of {trigger_tokens:,}: what is kept cannot be cut "
        f"further; by part: {shares}; largest messages: {named}"
    )
