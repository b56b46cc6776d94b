"""The gate's decision: which cheap edits to make, whether to summarize, and where to cut.

``plan_compaction`` is a pure function of the messages, the budget and the
settings. It never calls a model and never writes anything; the gate node
turns its plan into state updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from langchain_core.messages import BaseMessage

from .config import Budget, CompactionConfig
from .conversation import is_summary, is_system, latest_user_index, tool_rounds, unsafe_cut_points
from .layers import micro_compact, prune_tool_results, truncate_arguments


@dataclass(frozen=True)
class Cut:
    """Where the conversation is cut: ``messages[:cutoff]`` is summarized, the rest kept.

    ``evict`` lists the indices that leave the state (never a system
    message, never the latest human message, which stays in front of the
    tail when the cut falls after it: ``kept_human``).
    """

    cutoff: int
    evict: tuple[int, ...]
    kept_human: Optional[int] = None


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


def find_cutoff(
    messages: Sequence[BaseMessage], counts: Sequence[int], keep_tokens: int, keep_messages: int
) -> Optional[Cut]:
    """Return the safe cut that keeps about ``keep_tokens`` (or ``keep_messages``), or None.

    The earliest index whose suffix fits the budget (suffix sums: O(n)) is
    moved back to the nearest index that starts no tail with a tool result
    and splits no tool round (parallel, interleaved or mixed calls included);
    when that would leave nothing to summarize it moves forward instead, but
    never past the start of the newest round. None when nothing but system
    messages and an earlier summary would be removed.
    """
    n = len(messages)
    system = [is_system(m) for m in messages]
    rounds = tool_rounds(messages)
    unsafe = unsafe_cut_points(messages, rounds)
    safe = [i for i in range(n) if not unsafe[i]]
    if not safe:
        return None
    newest_start = safe[-1]
    candidate = min(_candidate(counts, system, keep_tokens, keep_messages), newest_start)

    def evictable(cut: int) -> bool:
        return any(not system[i] and not is_summary(messages[i]) for i in range(cut))

    down = next((i for i in reversed(safe) if i <= candidate), None)
    if down is not None and evictable(down):
        cutoff = down
    else:
        cutoff = next((i for i in safe if i >= candidate and evictable(i)), None)
        if cutoff is None:
            return None
    human = latest_user_index(messages)
    kept_human = human if human is not None and human < cutoff else None
    evict = tuple(i for i in range(cutoff) if not system[i] and i != kept_human)
    if not any(not is_summary(messages[i]) for i in evict):
        return None
    return Cut(cutoff=cutoff, evict=evict, kept_human=kept_human)


@dataclass
class CompactionPlan:
    """What the gate decided for one model call."""

    tokens_before: int
    tokens_after_layers: int
    edits: dict[int, BaseMessage] = field(default_factory=dict)
    layer_counts: dict[str, int] = field(default_factory=dict)
    reason: Optional[str] = None
    cut: Optional[Cut] = None

    @property
    def summarize(self) -> bool:
        """Return True when layer 3 must run (a reason and a safe cut exist)."""
        return self.reason is not None and self.cut is not None


def plan_compaction(
    messages: Sequence[BaseMessage],
    counts: Sequence[int],
    budget: Budget,
    config: CompactionConfig,
    recount: "callable",
    *,
    manual: bool = False,
) -> CompactionPlan:
    """Return the plan for one model call: layer 1-2 edits, then whether and where to summarize.

    ``counts`` are the per-message token counts of ``messages``;
    ``recount(message)`` counts an edited message. Layers run in the design's
    order (truncate arguments, prune or micro-compact results) and each sees
    the previous one's edits; layer 3 is asked for only when the context is
    still over a trigger after them, or when the agent asked (``manual``).
    """
    working = list(messages)
    sizes = list(counts)
    before = sum(sizes)
    edits: dict[int, BaseMessage] = {}
    layer_counts: dict[str, int] = {}

    def apply(name: str, changed: dict[int, BaseMessage]) -> None:
        if changed:
            layer_counts[name] = len(changed)
        for i, m in changed.items():
            working[i] = m
            sizes[i] = recount(m)
            edits[i] = m

    apply("truncate", truncate_arguments(working, sum(sizes), config.truncate_args))
    apply("prune", prune_tool_results(working, sizes, config.prune))
    apply("micro", micro_compact(working, sizes, config.micro, config.prune.excluded_tools))
    after = sum(sizes)

    conversation = sum(1 for m in working if not is_system(m))
    reason: Optional[str] = None
    if manual:
        reason = "manual"
    elif after >= budget.trigger_tokens:
        reason = "tokens"
    elif budget.trigger_messages and conversation >= budget.trigger_messages:
        reason = "messages"
    cut = find_cutoff(working, sizes, budget.keep_tokens, budget.keep_messages) if reason else None
    return CompactionPlan(
        tokens_before=before,
        tokens_after_layers=after,
        edits=edits,
        layer_counts=layer_counts,
        reason=reason,
        cut=cut,
    )
