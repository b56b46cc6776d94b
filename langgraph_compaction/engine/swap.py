"""Applying a summary prepared in the background: the gate call's view of it, the checks, the swap.

``swap`` replaces what a ready summary covers with it, when what it covers is
unchanged, what it produces keeps every tool call paired, and the context
shrinks; ``after_compaction`` runs then, and the kept messages reach the
transcript before the summary does (the order of first appearance).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

from ..core.background import new_pairing_problem, prepared_problem, record_problem
from ..core.config import Budget
from ..core.hooks import CompactionInfo
from ..core.plan import compacted_view, plan_compaction, whole_history
from .effects import Steps, StorageCall
from .events import describe_error, emit_event
from .flush import commit_flush
from .jobs import BackgroundJobs
from .offload import offload_messages
from .prepare import published_key
from .run import Run
from .setup import Setup
from .state import CompactionRecord
from .summarize import Replacement, applied_summary, ask_after, record_summary


@dataclass
class Outcome:
    """The background part of one gate call.

    ``applied`` says a prepared summary replaced its messages in this update
    (``messages``, the writes; ``after``, what the messages are now);
    ``blocked`` is None when the gate need not compact in front of the model
    call, otherwise why it compacts as without background.
    """

    compaction: dict[str, Any] = field(default_factory=dict)
    messages: list[BaseMessage] | None = None
    after: list[BaseMessage] | None = None
    applied: bool = False
    blocked: str | None = None


def background_event(name: str, **fields: Any) -> dict[str, Any]:
    return emit_event({"stage": "background", "event": name, **fields})


@dataclass
class GateCall:
    """One gate call: what it works on, built once per pass (``gate.gate_steps``), and its background part.

    ``events`` is the list the call's update keeps: every step of the call
    appends to it.
    """

    setup: Setup
    jobs: BackgroundJobs
    messages: list[BaseMessage]
    counts: list[int]
    record: CompactionRecord
    budget: Budget
    run: Run
    key: tuple[str, str | None]
    #: The gate's own layer 1-2 edits of this call, by index: a job started now covers the messages as edited.
    edits: dict[int, BaseMessage] = field(default_factory=dict)
    out: Outcome = field(default_factory=Outcome)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: Another worker's job this call waited for failed after making a failed call again (its failure may pass).
    foreign_retried: bool = False

    def may_prepare(self) -> bool:
        """Return False when a job would only fail: no summarizer, or its breaker is open (blocking has a fallback)."""
        breaker: dict[str, Any] = dict(self.record["breaker"] or {})
        return self.setup.model is not None and not (breaker.get("open_until") or 0) > time.time()


def swap(gate: GateCall, prepared: dict[str, Any]) -> Steps[bool]:
    """Yield the swap of a ready summary; return True when it was applied.

    False: it was discarded (``compaction["prepared"]`` is None in the
    update), or it waits for a later call (the transcript could not take
    what is kept after it first).
    """
    applied = yield from _apply(gate, prepared)
    if applied is _LATER:
        return False
    if applied is None:
        gate.out.compaction["prepared"] = None
        return False
    compaction, written, after = applied
    gate.out.compaction.update(compaction)
    gate.out.messages, gate.out.after, gate.out.applied, gate.out.blocked = written, after, True, None
    return True


def _check(gate: GateCall, prepared: dict[str, Any]) -> tuple[BaseMessage | None, str | None]:
    """Return (the summary message, None) when a prepared summary may replace what it covers now, else (None, why)."""
    problem = record_problem(prepared) or prepared_problem(prepared, gate.messages)
    if problem is not None:
        return None, problem
    (summary,) = messages_from_dict([prepared["summary"]])
    result = compacted_view(gate.messages, set(prepared["evict_ids"]), summary)
    return summary, new_pairing_problem(gate.messages, result)


def _hook_messages(
    gate: GateCall, prepared: dict[str, Any], summary: BaseMessage, evict_ids: set[Any]
) -> Steps[list[BaseMessage]]:
    """Call ``after_compaction`` for a summary being applied; return its messages, unless they undo the shrink."""
    setup, messages, counts, run = gate.setup, gate.messages, gate.counts, gate.run
    info = CompactionInfo(
        thread_id=run.thread_id,
        user_id=run.user_id,
        reason="background",
        tokens_before=sum(counts),
        messages=[m for m in messages if m.id in evict_ids],
        transcript_path=prepared.get("offload_path"),
        summary=str(summary.content),
        summary_id=summary.id,
    )
    injected = yield from ask_after(setup, info, gate.events)
    after = setup.counter.total(compacted_view(messages, evict_ids, summary, injected))
    if injected and after >= sum(counts):
        error = f"its messages were refused: with them the context would not shrink ({sum(counts):,} -> {after:,})"
        gate.events.append(emit_event({"stage": "summarize", "hook": "after_compaction", "error": error}))
        return []
    return injected


#: What ``_apply`` returns for a summary that waits for a later call (the transcript failed).
_LATER: tuple[dict[str, Any], list[Any] | None, list[BaseMessage]] = ({}, None, [])


def _apply(
    gate: GateCall, prepared: dict[str, Any]
) -> Steps[tuple[dict[str, Any], list[Any] | None, list[BaseMessage]] | None]:
    """Yield the application of a ready summary (its hook, the transcript, the ledger); return its update, or None.

    The summary may replace what it covers when that is unchanged and what it
    produces keeps every tool call paired and is smaller than what it
    replaces; how far under the trigger it ends is the gate's business after.
    The messages kept after it are written to the transcript first: when that
    fails, it waits for a later call (``_LATER``), rather than be written
    before them.
    """
    setup, messages, counts, run = gate.setup, gate.messages, gate.counts, gate.run
    usage = prepared.get("usage") or {}
    tokens = {"prepared_id": prepared.get("id"), "tokens_before": sum(counts), "usage": usage}
    summary, problem = _check(gate, prepared)
    evict_ids = set(prepared.get("evict_ids") or [])
    injected: list[BaseMessage] = []
    if summary is not None and problem is None:
        after = setup.counter.total(compacted_view(messages, evict_ids, summary))
        if after >= sum(counts):
            problem = f"it would not shrink the context ({sum(counts):,} -> {after:,} tokens)"
    if summary is None or problem is not None:
        gate.events.append(background_event("compaction_discarded", why=problem, **tokens))
        return None
    offload_on = run.storage is not None and setup.config.offload_before_compact
    if offload_on:  # what is kept after the summary goes to the transcript before it: the order of first appearance
        try:
            yield from offload_messages(messages, run, setup.config)
        except Exception as exc:  # noqa: BLE001 - written after them later, the summary would come first
            error = describe_error(exc)
            gate.events.append(emit_event({"stage": "offload", "error": error}))
            why = f"the transcript failed: {error}"
            gate.events.append(background_event("compaction_postponed", why=why, **tokens))
            return _LATER
    # over the trigger even so, the gate summarizes again at once (chained): what a hook would add goes with it
    injected = (
        [] if after >= gate.budget.trigger_tokens else (yield from _hook_messages(gate, prepared, summary, evict_ids))
    )
    # the memory model was shown the memory of the user whose run started the job: its answer is that user's
    reader = prepared.get("user_id") or run.user_id
    flush_run = run if reader == run.user_id else dataclasses.replace(run, user_id=reader)
    flushed = yield from commit_flush(setup, messages, gate.record, prepared.get("flush"), flush_run)
    event = {
        "event": "compaction_applied",
        "mode": prepared.get("mode") or "background",  # "blocking": made in the run, the agent waiting
        "reason": prepared.get("reason") or "background",
        "prepared_id": prepared.get("id"),
        "usage": usage,
        **({"error": prepared["fallback"]} if prepared.get("fallback") else {}),
    }
    result = compacted_view(messages, evict_ids, summary, injected)
    edits = tail_edits(setup, result, gate.budget) if offload_on else {}
    replacement = Replacement(
        evict_ids,
        prepared.get("cutoff_id"),
        summary,
        prepared.get("pins") or [],
        prepared.get("kind") or "summarize",
        prepared.get("offload_path"),
        event,
        injected,
        edits,
    )
    applied = applied_summary(setup, messages, gate.record, run, replacement)
    # written to the transcript now that it replaces what it covers (so recall can open it)
    recorded = yield from record_summary(setup, summary, run, offload_on)
    if run.storage is not None:
        try:  # applied: no worker is to apply it again
            yield StorageCall("write_prepared", (run.thread_id, published_key(gate.key), None))
        except Exception:  # noqa: BLE001 - a later worker finds its messages gone and drops it
            pass
    compaction = {**applied.record(), **flushed.fields(), "pending": None}
    lease = gate.record["lease"]
    if lease is not None and lease["id"] == prepared.get("id"):
        compaction["lease"] = {**lease, "state": "applied"}
    gate.events.extend([*flushed.events, *recorded, applied.event])
    return compaction, applied.writes(), [edits.get(m.id, m) for m in result]  # type: ignore[arg-type]


def tail_edits(setup: Setup, result: list[BaseMessage], budget: Budget) -> dict[str, BaseMessage]:
    """Return layer 1-2 edits (by id) of what a swap keeps after the summary, beyond the tail blocking keeps.

    A job's summary covers the history up to the cut made when it started;
    what the agent added while it was made follows it, where a blocking
    compaction would have kept only its tail (``keep_tokens``). Its tool
    results are shortened as layers 1-2 shorten older ones (their originals
    are in the transcript, written just before), so the context the swap
    leaves, and carries until the next compaction, is about blocking's. The
    swap breaks the prompt cache anyway: the edits cost no break of their own.

    The working set the job's cut kept is weighed again with the reads made
    since, within one budget, newest touched first, as a blocking compaction
    there would weigh them: kept besides the newer reads, it left up to twice
    the budget after each swap. A file touched least recently may lose its
    read so (shortened like the others) though the summary names it as kept.
    """
    whole = whole_history(setup.config)
    config = whole.model_copy(
        update={"prompt_cache": False, "prune": whole.prune.model_copy(update={"protect_tokens": budget.keep_tokens})}
    )
    plan = plan_compaction(result, setup.counter.counts(result), budget, config, setup.counter.message)
    return {result[i].id: m for i, m in plan.edits.items() if result[i].id is not None}  # type: ignore[misc]
