"""Background compaction: a summary prepared next to the agent, swapped in at the trigger.

When the context passes ``background_start`` of the trigger, the gate cuts
the history as it stands and starts a *job* (``jobs``): offload, then the
summary and the memory model side by side (nothing is removed before the
swap, so the summary need not wait for the memory), while the model call goes
on. The next gate call that finds the job done writes its result into the
checkpointed ``compaction["prepared"]`` (``compaction_ready``), where any
worker can apply it. At the trigger the gate applies a ready, still valid
summary at once (``compaction_applied``); a job still running is waited for
only while the request stays under ``wait_limit``; a summary whose messages
changed is dropped (``compaction_discarded``, with why), and the gate compacts
as it would without background.

What the job does before the swap is durable (the transcript) or nothing
(the memory model's answer is held in the record and written to the ledger
when the summary is applied, so a discarded summary leaves no memory and
every message is flushed once). A job in progress lives in this process
only: lost with it, it is started again by the next gate that needs one.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from ..core.background import (
    covered,
    cut_index,
    kept_tokens,
    prepared_problem,
    record_problem,
    start_budget,
    swap_before_trigger,
    wait_limit,
)
from ..core.config import Budget
from ..core.conversation import is_injected, leading_systems
from ..core.plan import CompactionPlan, plan_compaction
from .driver import Performer, adrive, drive, guarded
from .effects import Parallel, StartJob, Steps, WaitJob
from .events import emit_event
from .flush import commit_flush, flush_steps
from .jobs import BackgroundJobs, Job
from .offload import offload_steps
from .run import Run
from .setup import Setup
from .state import CompactionRecord, merge_compaction, read_compaction
from .summarize import record_summary, summarize_steps, summary_update


def job_key(run: Run, messages: Sequence[BaseMessage]) -> tuple:
    """Return the key of a conversation's job: its thread and its first message after the system prompt.

    An agent and its subagents share a thread but not their first message.
    """
    lead = leading_systems(messages)
    return run.thread_id, messages[lead].id if lead < len(messages) else None


@dataclass
class Outcome:
    """The background part of one gate call.

    ``applied`` says a prepared summary replaced its messages in this update
    (``messages``); ``blocked`` is None when the gate need not compact in front
    of the model call (nothing due, a summary applied, or one being prepared
    while the request fits), otherwise why it compacts as without background.
    """

    compaction: dict[str, Any] = field(default_factory=dict)
    messages: list | None = None
    applied: bool = False
    blocked: str | None = None


def _event(name: str, **fields: Any) -> dict:
    return emit_event({"stage": "background", "event": name, **fields})


# -- the job: what runs next to the agent


def prepare_steps(
    setup: Setup, meta: dict, messages: list[BaseMessage], record: CompactionRecord, run: Run
) -> Steps[dict]:
    """The job's steps: offload, then the summary and the memory model side by side; return the job's record.

    Offload comes first (summarize checks that what it covers is in the
    transcript); nothing is removed before the swap, so the summary need not
    wait for the memory.
    """
    side: list[dict] = []
    if run.storage is not None and setup.config.offload_before_compact:
        side.append((yield from guarded("offload", offload_steps(messages, run, setup.config))))
        record = read_compaction(merge_compaction(dict(record), side[-1].get("compaction")))
    steps = [guarded("summarize", summarize_steps(setup, messages, record, run))]
    if run.storage is not None and setup.config.flush_before_compact:
        steps.append(guarded("flush", flush_steps(setup, messages, record, run, commit=False)))
    summary, *flush = yield Parallel(tuple(steps))
    return job_record(setup, meta, [*side, *flush], summary, run.usage)


def job_record(setup: Setup, meta: dict, side: list[dict], summary: dict, usage: dict) -> dict:
    """Return a finished job's record: the prepared summary ready to apply, or why there is none."""
    done = summary.get("compaction") or {}
    breakers = {k: v for u in [*side, summary] for k, v in (u.get("compaction") or {}).items() if k.endswith("breaker")}
    flush = next((u["flush_answer"] for u in side if "flush_answer" in u), None)
    if not done.get("summary_id"):
        why = done.get("last_error") or next((e.get("note") for e in done.get("events") or [] if e.get("note")), None)
        return {"error": why or "no summary was made", "breakers": breakers, "usage": usage}
    if setup.config.mode == "view":
        made = done["view"]["summary"]
        injected = done["view"].get("after") or []
    else:
        made = next(message_to_dict(m) for m in summary["messages"] if getattr(m, "id", None) == done["summary_id"])
        injected = [message_to_dict(m) for m in summary["messages"] if is_injected(m)]  # an after_compaction hook's
    event = next((e for e in done.get("events") or [] if e.get("stage") == "summarize" and "tokens_after" in e), {})
    return {
        **meta,
        "status": "ready",
        "summary": made,
        "injected": injected,
        "pins": done.get("pins") or [],
        "kind": next(iter(done.get("counts") or {"summarize": 1})),
        "offload_path": done.get("offload_path"),
        "flush": flush,
        "tokens_after": event.get("tokens_after"),
        "usage": usage,
        "breakers": breakers,
        "ready_at": time.time(),
    }


# -- the gate's part


def background_floor(jobs: BackgroundJobs, run: Run, messages: Sequence[BaseMessage], record: CompactionRecord) -> int:
    """Return where layers 1-2 may start editing: after the cut of a summary being prepared (its messages must not change)."""
    prepared = record["prepared"]
    job = jobs.get(job_key(run, messages))
    meta = prepared if prepared is not None else job.meta if job is not None else None
    if meta is None:
        return 0
    return cut_index(messages, meta.get("cutoff_id")) or 0


@dataclass
class _Gate:
    """One gate call's view of background compaction (what ``background_steps`` works with)."""

    setup: Setup
    jobs: BackgroundJobs
    messages: list[BaseMessage]
    counts: list[int]
    record: CompactionRecord
    budget: Budget
    run: Run
    out: Outcome = field(default_factory=Outcome)
    events: list[dict] = field(default_factory=list)

    def finish(self) -> Outcome:
        if self.events:
            self.out.compaction["events"] = self.events
        return self.out

    def may_prepare(self) -> bool:
        """Return False when a job would only fail: no summarizer, or its breaker is open (blocking has a fallback)."""
        breaker = self.record["breaker"] or {}
        return self.setup.model is not None and not (breaker.get("open_until") or 0) > time.time()


def background_steps(
    setup: Setup,
    jobs: BackgroundJobs,
    messages: list[BaseMessage],
    memo: Any,
    record: CompactionRecord,
    plan: CompactionPlan,
    budget: Budget,
    new_tokens: int | None,
    run: Run,
) -> Steps[Outcome]:
    """Yield the background part of one gate call; return its ``Outcome``."""
    gate = _Gate(setup, jobs, messages, memo.counts, record, budget, run)
    key = job_key(run, messages)
    job = jobs.get(key)
    prepared: dict | None = record["prepared"]  # type: ignore[assignment]
    if job is not None and job.done():
        prepared = _harvest(gate, job, prepared)
    keep_max = max(setup.config.keep_tokens_max, budget.keep_tokens)
    if not plan.summarize and prepared is not None and swap_before_trigger(prepared, messages, gate.counts, keep_max):
        if (yield from _swap(gate, prepared)):
            return gate.finish()
        prepared = None
    if not plan.summarize:
        if job is None:  # a job harvested just now is not followed by another in the same call
            yield from _maybe_start_early(gate, plan, prepared, key, memo, new_tokens)
        return gate.finish()
    if prepared is not None and (yield from _swap(gate, prepared)):
        return gate.finish()
    return (yield from _at_trigger(gate, plan, key, memo, new_tokens))


def _maybe_start_early(
    gate: _Gate, plan: CompactionPlan, prepared: dict | None, key: tuple, memo: Any, new_tokens: int | None
) -> Steps[None]:
    """Start a job once the context passes ``background_start`` of the trigger, if none is prepared."""
    early = start_budget(gate.budget, gate.setup.config.background_start)
    near = plan.tokens_after_layers >= early.trigger_tokens or (
        early.trigger_messages and len(gate.messages) >= early.trigger_messages
    )
    if near and prepared is None and plan.held is None and gate.may_prepare():
        planned = _plan(gate, early, memo, new_tokens)
        if planned.summarize:
            yield from _start(gate, planned)


def _plan(gate: _Gate, budget: Budget, memo: Any, new_tokens: int | None) -> CompactionPlan:
    setup = gate.setup
    return plan_compaction(
        gate.messages,
        gate.counts,
        budget,
        setup.config,
        setup.counter.message,
        new_tokens=new_tokens,
        settled=memo.settled,
    )


def _at_trigger(gate: _Gate, plan: CompactionPlan, key: tuple, memo: Any, new_tokens: int | None) -> Steps[Outcome]:
    """Yield what the gate does at the trigger with no ready summary: wait for a job, start one, or block."""
    fits = plan.tokens_after_layers < wait_limit(gate.budget)
    job = gate.jobs.get(key)
    problem = prepared_problem(job.meta, gate.messages) if job is not None and not job.done() else None
    if job is not None and problem is not None:
        # what it covers changed: it could not be applied once ready; start again from here, or compact now
        gate.jobs.drop(job)
        gate.events.append(_discarded(problem, job.meta, plan.tokens_after_layers))
    elif job is not None and not job.done():
        if fits:
            emit_event({"stage": "gate", "held": "background", "tokens": plan.tokens_after_layers})
            return gate.finish()
        if (yield WaitJob(job, gate.setup.config.summary_timeout)):
            prepared = _harvest(gate, job, None)
            if prepared is not None and (yield from _swap(gate, prepared)):
                return gate.finish()
            gate.out.blocked = "the prepared summary could not be applied"
            return gate.finish()
        gate.jobs.drop(job)
        why = "not ready before the request outgrew the wait"
        gate.events.append(_discarded(why, job.meta, plan.tokens_after_layers))
        gate.out.blocked = f"the prepared summary was {why}"
        return gate.finish()
    if fits and plan.reason in ("tokens", "messages") and gate.may_prepare():
        now = _plan(gate, start_budget(gate.budget), memo, new_tokens)
        yield from _start(gate, now if now.summarize else plan)
        return gate.finish()
    why = (
        "a summary cannot be prepared now (no summarizer, or its breaker is open)"
        if fits
        else ("the request is over the wait limit")
    )
    if problem is not None:
        why = f"the summary being prepared cannot apply ({problem}) and {why}"
    gate.out.blocked = why
    return gate.finish()


def _discarded(why: str, meta: dict, tokens_before: int) -> dict:
    return _event("compaction_discarded", why=why, prepared_id=meta["id"], tokens_before=tokens_before, usage={})


def _start(gate: _Gate, plan: CompactionPlan) -> Steps[None]:
    """Yield the effect that starts a job for the plan's cut of the messages."""
    setup, messages, run = gate.setup, gate.messages, gate.run
    cut = plan.cut
    assert cut is not None
    evict_ids = [messages[i].id for i in cut.evict]
    meta = {
        "id": uuid.uuid4().hex[:12],  # names it in every event, from started to applied or discarded
        "covered": covered(messages, evict_ids),  # type: ignore[arg-type]
        "evict_ids": evict_ids,
        "cutoff_id": messages[cut.cutoff].id if cut.cutoff < len(messages) else None,
        "tokens_before": plan.tokens_after_layers,
        "started_at": time.time(),
    }
    pending = {
        "reason": "background",
        "evict_ids": evict_ids,
        "cutoff_id": meta["cutoff_id"],
        "tokens_before": plan.tokens_before,
        "tokens_after_layers": plan.tokens_after_layers,
        "target_tokens": gate.budget.target_tokens,  # calibrated to estimator units, as summarize counts
        "focus": None,
    }
    record = read_compaction({**gate.record, "pending": pending})
    job_run = dataclasses.replace(run, usage={})  # its own account of the compaction model's usage
    snapshot = list(messages)
    performer = Performer(job_run, setup.config.summary_timeout)
    job = Job(
        job_key(run, messages),
        meta,
        gate.jobs.runner(),
        work=lambda: drive(prepare_steps(setup, meta, snapshot, record, job_run), performer),
        awork=lambda: adrive(prepare_steps(setup, meta, snapshot, record, job_run), performer),
    )
    gate.jobs.add(job)
    try:
        yield StartJob(job)
    except Exception as exc:  # noqa: BLE001 - no thread or loop to spare: the trigger compacts blocking
        gate.jobs.drop(job)
        gate.events.append(_discarded(f"it could not be started: {exc}", meta, plan.tokens_after_layers))
        return
    started = {
        "prepared_id": meta["id"],
        "tokens_before": plan.tokens_after_layers,
        "evict": len(evict_ids),
        "usage": {},
    }
    gate.events.append(_event("compaction_started", mode="background", **started))


def _harvest(gate: _Gate, job: Job, prepared: dict | None) -> dict | None:
    """Return the ready record (the state's or the job's), recording a finished job's outcome in the update."""
    gate.jobs.drop(job)
    outcome = job.outcome()
    gate.out.compaction.update(outcome.get("breakers") or {})  # the breakers count background failures too
    usage = outcome.get("usage") or {}
    tokens = {
        "prepared_id": job.meta["id"],
        "tokens_before": job.meta["tokens_before"],
        "tokens_after": outcome.get("tokens_after"),
        "usage": usage,
    }
    if "error" in outcome:
        gate.events.append(_event("compaction_discarded", why=outcome["error"], **tokens))
        return prepared
    problem = prepared_problem(outcome, gate.messages)
    if problem is None and prepared is not None and prepared_problem(prepared, gate.messages) is None:
        problem = "a summary prepared elsewhere is ready already"
    if problem is not None:
        gate.events.append(_event("compaction_discarded", why=problem, **tokens))
        return prepared
    gate.out.compaction["prepared"] = {k: v for k, v in outcome.items() if k != "breakers"}
    gate.events.append(_event("compaction_ready", evict=len(outcome["evict_ids"]), **tokens))
    return outcome


def _swap(gate: _Gate, prepared: dict) -> Steps[bool]:
    """Yield the swap of a ready summary; return True when it was applied (False: it was discarded)."""
    applied = yield from _apply(gate, prepared)
    if applied is None:
        gate.out.compaction["prepared"] = None
        return False
    compaction, written = applied
    gate.out.compaction.update(compaction)
    gate.out.messages, gate.out.applied, gate.out.blocked = written, True, None
    return True


def _apply(gate: _Gate, prepared: dict) -> Steps[tuple[dict, list | None] | None]:
    """Yield the ledger write of a ready summary; return its (``compaction``, messages) update, or None."""
    setup, messages, counts, run = gate.setup, gate.messages, gate.counts, gate.run
    usage = prepared.get("usage") or {}
    tokens = {"prepared_id": prepared.get("id"), "tokens_before": sum(counts), "usage": usage}
    problem = record_problem(prepared) or prepared_problem(prepared, messages)
    if problem is None:
        (summary,) = messages_from_dict([prepared["summary"]])
        injected = messages_from_dict(prepared.get("injected") or [])
        evict_ids = set(prepared["evict_ids"])
        kept = kept_tokens(messages, counts, prepared["evict_ids"])
        after = setup.counter.total([*messages[: leading_systems(messages)], summary, *injected]) + kept
        if after >= sum(counts):
            problem = f"it would not shrink the context ({sum(counts):,} -> {after:,} tokens)"
        elif after > gate.budget.target_tokens:
            problem = f"it would leave {after:,} tokens, over the target of {gate.budget.target_tokens:,}"
    if problem is not None:
        gate.events.append(_event("compaction_discarded", why=problem, **tokens))
        return None
    flushed = yield from commit_flush(setup, messages, gate.record, prepared.get("flush"), run)
    event = {
        "event": "compaction_applied",
        "mode": "background",
        "reason": "background",
        "prepared_id": prepared.get("id"),
        "usage": usage,
    }
    written = summary_update(
        setup,
        messages,
        gate.record,
        evict_ids,
        prepared.get("cutoff_id"),
        summary,
        prepared.get("pins") or [],
        prepared.get("kind") or "summarize",
        prepared.get("offload_path"),
        run,
        event=event,
        injected=injected,
    )
    # written to the transcript now that it replaces what it covers (so recall can open it)
    offload_on = run.storage is not None and setup.config.offload_before_compact
    recorded = yield from record_summary(setup, summary, run, offload_on)
    compaction = {**written["compaction"], **{k: v for k, v in flushed.items() if k != "events"}, "pending": None}
    gate.events.extend([*flushed.get("events", []), *recorded, *compaction.pop("events")])
    return compaction, written.get("messages")
