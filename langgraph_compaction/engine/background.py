"""Background compaction: a summary prepared next to the agent, applied at the trigger, never a request over it.

Before the trigger, the gate cuts the history as it stands and starts a *job*
(``jobs``): offload, then the summary and the memory model side by side, while
the agent goes on. It starts early enough to be ready when the trigger comes
(``core.background.should_start``: at ``background.start`` of the trigger, or
sooner when the thread grows fast). The job publishes its result to the
storage, and the gate that finds it done writes it into the checkpointed
``compaction["prepared"]`` (``compaction_ready``): whichever worker serves the
thread next applies it.

At the trigger the gate applies a ready summary (``compaction_applied``),
waits for one still being prepared (here or by another worker), and compacts
in front of the model call only when none is coming. A summary is applied
while what it covers is unchanged and what it produces keeps every tool call
paired (else ``compaction_discarded``, with why); one whose tail outgrew the
target is applied all the same, and the gate compacts the rest at once if the
request is still over the trigger. The application's ``after_compaction``
hook runs when a summary is applied, and memory is written then, once.

One worker prepares a conversation's next summary at a time: the job's
*lease* in the checkpointed state names its worker until the job should be
done; the others wait for what it publishes, or take over once the lease lapses.
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
    covers_enough,
    cut_index,
    messages_start_due,
    new_pairing_problem,
    prepared_problem,
    record_problem,
    should_start,
    start_budget,
    swap_before_trigger,
    turn_messages,
    turn_tokens,
)
from ..core.config import Budget
from ..core.conversation import leading_systems
from ..core.hooks import CompactionInfo
from ..core.plan import CompactionPlan, compacted_view, plan_compaction
from ..memory.ledger import local_now
from .breaker import breaker_after
from .driver import Performer, adrive, drive, guarded
from .effects import Parallel, StartJob, Steps, StorageCall, WaitJob
from .events import describe_error, emit_event
from .flush import commit_flush, flush_steps, read_memory
from .jobs import BackgroundJobs, Job, Published, owner_gone
from .offload import offload_messages, offload_steps
from .run import Run
from .setup import Setup
from .state import CompactionRecord, Lease, merge_compaction, read_breaker, read_compaction
from .summarize import ask_after, record_summary, summarize_steps, summary_update


def job_key(run: Run, messages: Sequence[BaseMessage]) -> tuple:
    """Return the key of a conversation's job: its thread and its first message after the system prompt.

    An agent and its subagents share a thread but not their first message.
    """
    lead = leading_systems(messages)
    return run.thread_id, messages[lead].id if lead < len(messages) else None


def _published_key(key: tuple) -> str:
    """Return the name a conversation's prepared summary is published under in the storage."""
    return str(key[1] or "conversation")


@dataclass
class Outcome:
    """The background part of one gate call.

    ``applied`` says a prepared summary replaced its messages in this update
    (``messages``, the writes; ``after``, what the messages are now);
    ``blocked`` is None when the gate need not compact in front of the model
    call, otherwise why it compacts as without background.
    """

    compaction: dict[str, Any] = field(default_factory=dict)
    messages: list | None = None
    after: list[BaseMessage] | None = None
    applied: bool = False
    blocked: str | None = None


def _event(name: str, **fields: Any) -> dict:
    return emit_event({"stage": "background", "event": name, **fields})


# -- the job: what runs next to the agent


def prepare_steps(
    setup: Setup,
    meta: dict,
    key: tuple,
    messages: list[BaseMessage],
    record: CompactionRecord,
    run: Run,
    read: Read,
) -> Steps[dict]:
    """The job's steps: the summary and the memory model side by side; return the job's record.

    The job calls models only: the gate offloaded and read the memory before
    starting it (``read``), and writes what the job made when it applies it,
    so a job outliving its run never touches a store the application has
    closed. Nothing is removed before the swap, so the summary need not wait
    for the memory. A ready record is published to a storage the thread's
    other workers share, where they find it.
    """
    side, memory = read
    steps = [guarded("summarize", summarize_steps(setup, messages, record, run))]
    if memory is not None:
        steps.append(guarded("flush", flush_steps(setup, messages, record, run, commit=False, memory=memory)))
    summary, *flush = yield Parallel(tuple(steps))
    made = job_record(setup, meta, [*side, *flush], summary, run.usage)
    if run.storage is not None and getattr(run.storage, "shared", True) and made.get("status") == "ready":
        try:
            yield StorageCall("write_prepared", (run.thread_id, _published_key(key), made))
        except Exception as exc:  # noqa: BLE001 - this worker's own gate still finds the record in its job
            emit_event(
                {"stage": "background", "error": f"the prepared summary was not published: {describe_error(exc)}"}
            )
    return made


def job_record(setup: Setup, meta: dict, side: list[dict], summary: dict, usage: dict) -> dict:
    """Return a finished job's record: the prepared summary ready to apply, or why there is none."""
    done = summary.get("compaction") or {}
    breakers = {k: v for u in [*side, summary] for k, v in (u.get("compaction") or {}).items() if k.endswith("breaker")}
    # what the memory model's side said went wrong (a failure, an open breaker): the gate streams it and keeps it
    notes = [e for u in side for e in (u.get("compaction") or {}).get("events") or () if e.get("note") or e.get("error")]
    flush = next((u["flush_answer"] for u in side if "flush_answer" in u), None)
    if not done.get("summary_id"):
        notes = (e.get("note") for e in done.get("events") or [] if e.get("note"))
        why = done.get("last_error") or next(notes, None)
        return {"error": why or "no summary was made", "breakers": breakers, "notes": notes, "usage": usage}
    if setup.config.mode == "view":
        made = done["view"]["summary"]
    else:
        made = next(message_to_dict(m) for m in summary["messages"] if getattr(m, "id", None) == done["summary_id"])
    event = next((e for e in done.get("events") or [] if e.get("stage") == "summarize" and "tokens_after" in e), {})
    return {
        **meta,
        "status": "ready",
        "summary": made,
        "pins": done.get("pins") or [],
        "kind": next(iter(done.get("counts") or {"summarize": 1})),
        "offload_path": done.get("offload_path"),
        "flush": flush,
        "tokens_after": event.get("tokens_after"),
        "fallback": event.get("error"),
        "usage": usage,
        "breakers": breakers,
        "notes": notes,
        "ready_at": time.time(),
    }


# -- the gate's part


def _lease_held_elsewhere(lease: Lease | None, jobs: BackgroundJobs, storage: Any) -> bool:
    """Return True while another worker (or engine) prepares the conversation's summary under an unexpired lease.

    Only a storage the workers share carries what that worker prepares: with
    none (or an in-process store) each engine prepares its own.
    """
    if lease is None or lease["state"] != "preparing" or lease["owner"] == jobs.owner:
        return False
    if storage is None or not getattr(storage, "shared", True):
        return False
    return lease["until"] > time.time() and not owner_gone(lease["owner"])


def background_floor(jobs: BackgroundJobs, run: Run, messages: Sequence[BaseMessage], record: CompactionRecord) -> int:
    """Return where the gate's own edits may start: after the cut of a summary being prepared (it must not change)."""
    job = jobs.get(job_key(run, messages))
    lease = record["lease"] if _lease_held_elsewhere(record["lease"], jobs, run.storage) else None
    meta = record["prepared"] or (job.meta if job is not None else None) or lease
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
    key: tuple
    #: The gate's own layer 1-2 edits of this call, by index: a job started now covers the messages as edited.
    edits: dict[int, BaseMessage] = field(default_factory=dict)
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


def swap_coming(
    setup: Setup,
    jobs: BackgroundJobs,
    messages: list[BaseMessage],
    counts: Sequence[int],
    record: CompactionRecord,
    plan: CompactionPlan,
    budget: Budget,
    run: Run,
) -> bool:
    """Return True when a summary will replace the prefix soon: a job runs or is ready, or one starts now.

    Under prompt caching, layer 1-2 edits made only because they repay their
    cache break wait for that swap, which breaks the cache anyway: made now,
    they would break it twice, and a job started now would summarize messages
    the agent's cached prefix no longer holds.
    """
    if record["prepared"] is not None or jobs.get(job_key(run, messages)) is not None:
        return True
    start, turns = setup.config.background.start, jobs.turns_to_ready
    return should_start(plan.tokens_before, turn_tokens(messages, counts), budget, start, turns)


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
    key = job_key(run, messages)
    gate = _Gate(setup, jobs, messages, memo.counts, record, budget, run, key, dict(plan.edits))
    job = jobs.get(key)
    prepared: dict | None = record["prepared"]  # type: ignore[assignment]
    if job is not None and not job.done():
        job.calls += 1
    elif job is not None:
        prepared = _harvest(gate, job, prepared)
    if not plan.summarize:
        keep_max = max(setup.config.keep_tokens_max, budget.keep_tokens)
        if prepared is not None and swap_before_trigger(prepared, messages, gate.counts, keep_max):
            if (yield from _swap(gate, prepared)):
                return gate.finish()
            prepared = None
        if job is None and prepared is None and not _lease_held_elsewhere(record["lease"], jobs, run.storage):
            yield from _maybe_start(gate, plan, memo, new_tokens)
        return gate.finish()
    if prepared is not None and (yield from _swap(gate, prepared)):
        yield from _next_job(gate)
        return gate.finish()
    waited = yield from _wait(gate, plan)
    if waited is not None and (yield from _swap(gate, waited)):
        yield from _next_job(gate)
        return gate.finish()
    gate.out.blocked = gate.out.blocked or "no summary was prepared in time"
    return gate.finish()


def _maybe_start(gate: _Gate, plan: CompactionPlan, memo: Any, new_tokens: int | None) -> Steps[None]:
    """Start a job when the thread will reach the trigger before one started later would be ready."""
    tokens, budget = plan.tokens_after_layers, gate.budget
    start, turns = gate.setup.config.background.start, gate.jobs.turns_to_ready
    if not gate.may_prepare():
        return
    if plan.held is not None:  # due, held back until the thread adds min_new_tokens: ready when the hold ends
        turn = turn_tokens(gate.messages, gate.counts)
        if new_tokens is not None and (
            new_tokens >= budget.min_new_tokens * start or new_tokens + turn * (turns + 1) >= budget.min_new_tokens
        ):
            planned = _plan(gate, start_budget(budget, start), memo, None)
            if planned.summarize:
                yield from _start(gate, planned)
        return
    if should_start(tokens, turn_tokens(gate.messages, gate.counts), budget, start, turns):
        planned = _plan(gate, start_budget(budget, min(1.0, tokens / budget.trigger_tokens)), memo, new_tokens)
        if planned.summarize and covers_enough(_evicted_tokens(planned, gate.counts), budget):
            yield from _start(gate, planned)
    elif messages_start_due(
        len(gate.messages) - leading_systems(gate.messages), turn_messages(gate.messages), tokens, budget, start, turns
    ):
        planned = _plan(gate, start_budget(budget, start), memo, new_tokens)
        if planned.summarize:
            yield from _start(gate, planned)


def _evicted_tokens(plan: CompactionPlan, counts: Sequence[int]) -> int:
    return sum(counts[i] for i in plan.cut.evict) if plan.cut is not None else 0


def _next_job(gate: _Gate) -> Steps[None]:
    """After a swap at the trigger, start the next job at once if the thread grows fast enough to need it.

    The swap left the tail that grew while its summary was made; with turns
    as large as the newest one, the trigger comes again before a job started
    at the next call would be ready.
    """
    after = gate.out.after or []
    counts = gate.setup.counter.counts(after)
    tokens, budget = sum(counts), gate.budget
    if tokens >= budget.trigger_tokens or not gate.may_prepare():
        return
    start, turns = gate.setup.config.background.start, gate.jobs.turns_to_ready
    if not should_start(tokens, turn_tokens(after, counts), budget, start, turns):
        return
    post = _Gate(gate.setup, gate.jobs, after, counts, gate.record, budget, gate.run, job_key(gate.run, after))
    settings = gate.setup
    planned = plan_compaction(
        after,
        counts,
        start_budget(budget, min(1.0, tokens / budget.trigger_tokens)),
        settings.config,
        settings.counter.message,
    )
    if planned.summarize and covers_enough(_evicted_tokens(planned, counts), budget):
        yield from _start(post, planned)
        gate.out.compaction.update(post.out.compaction)
        gate.events.extend(post.events)


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


def _wait(gate: _Gate, plan: CompactionPlan) -> Steps[dict | None]:
    """Wait for the summary being prepared (here, or by the lease's worker); return it, or None when none comes.

    The request is at or over the trigger, which is the user's budget: rather
    than send it, the gate waits for what remains of the job, which is less
    than a summary made now would take.
    """
    job = gate.jobs.get(gate.key)
    timeout = gate.setup.config.summary.timeout
    lease = gate.record["lease"]
    if job is None and _lease_held_elsewhere(lease, gate.jobs, gate.run.storage):
        assert lease is not None
        runner = Published(gate.run.storage, gate.run.thread_id, _published_key(gate.key))
        job = Job(gate.key, {"id": lease["id"], "tokens_before": plan.tokens_after_layers}, runner)
        # at most what its lease has left, and never longer than a summary call may take
        timeout = min(lease["until"] - time.time(), timeout or FOREIGN_WAIT_SECONDS)
        if (yield WaitJob(job, max(0.0, timeout))):
            return job.outcome()
        gate.out.blocked = "the summary another worker prepares was not ready in time"
        return None
    if job is None:
        return None
    if (yield WaitJob(job, timeout)):
        return _harvest(gate, job, None)
    gate.jobs.drop(job)
    gate.events.append(_discarded("not ready before the wait ran out", job.meta, plan.tokens_after_layers))
    gate.out.blocked = "the prepared summary was not ready before the wait ran out"
    return None


#: What the gate does with the storage for a job before starting it: the offload's update, and the memory read.
Read = tuple[list[dict], tuple[str, str, str] | None]


def _read_for_job(setup: Setup, messages: list[BaseMessage], run: Run) -> Steps[Read]:
    """Offload the job's messages and read what its flush reads, in the run (summarize checks that what it covers
    is in the transcript)."""
    if run.storage is None:
        return [], None
    side: list[dict] = []
    if setup.config.offload_before_compact:
        side.append((yield from guarded("offload", offload_steps(messages, run, setup.config))))
    memory = None
    if setup.config.flush_before_compact and setup.flush_model is not None:
        try:
            memory = yield from read_memory(run, local_now(setup.config.memory.timezone))
        except Exception as exc:  # noqa: BLE001 - no memory this time; the summary goes on
            emit_event({"stage": "flush", "error": describe_error(exc)})
    return side, memory


#: How long a gate waits at most for a summary another worker prepares, when summary calls have no timeout.
FOREIGN_WAIT_SECONDS = 60.0


def _discarded(why: str, meta: dict, tokens_before: int) -> dict:
    return _event("compaction_discarded", why=why, prepared_id=meta["id"], tokens_before=tokens_before, usage={})


def lease_seconds(setup: Setup) -> float:
    """Return how long a worker's lease on a conversation's next summary holds: its job is done by then.

    Each of the job's model calls ends within ``summary.timeout``; the offload
    and the publishing take a little more.
    """
    return (setup.config.summary.timeout or 300.0) + 30.0


def _start(gate: _Gate, plan: CompactionPlan) -> Steps[None]:
    """Yield the effect that starts a job for the plan's cut of the messages, and take the conversation's lease."""
    setup, run = gate.setup, gate.run
    # the messages as the state holds them once this call's update lands: the gate's layer edits made
    messages = [gate.edits.get(i, m) for i, m in enumerate(gate.messages)] if gate.edits else gate.messages
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
    snapshot = list(messages)
    read = yield from _read_for_job(setup, snapshot, run)
    if read[0]:
        record = read_compaction(merge_compaction(dict(record), read[0][0].get("compaction")))
    job_run = dataclasses.replace(run, usage={})  # its own account of the compaction model's usage
    performer = Performer(job_run, setup.config.summary.timeout)
    key = gate.key
    job = Job(
        key,
        meta,
        gate.jobs.runner(),
        work=lambda: drive(prepare_steps(setup, meta, key, snapshot, record, job_run, read), performer),
        awork=lambda: adrive(prepare_steps(setup, meta, key, snapshot, record, job_run, read), performer),
    )
    gate.jobs.add(job)
    try:
        yield StartJob(job)
    except Exception as exc:  # noqa: BLE001 - no thread or loop to spare: the trigger compacts blocking
        gate.jobs.drop(job)
        gate.events.append(_discarded(f"it could not be started: {exc}", meta, plan.tokens_after_layers))
        return
    until = meta["started_at"] + lease_seconds(setup)
    lease = {
        "id": meta["id"],
        "owner": gate.jobs.owner,
        "until": until,
        "state": "preparing",
        "cutoff_id": meta["cutoff_id"],
    }
    gate.out.compaction["lease"] = lease
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
    gate.jobs.observe(job)
    outcome = job.outcome()
    gate.out.compaction.update(_breakers(gate, outcome.get("breakers") or {}))  # background failures count too
    gate.events.extend(emit_event({k: v for k, v in e.items() if k != "time"}) for e in outcome.get("notes") or ())
    lease = gate.record["lease"]
    if lease is not None and lease["id"] == job.meta["id"] and lease["state"] == "applied":
        return prepared  # another worker applied what this job published
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
    gate.out.compaction["prepared"] = {k: v for k, v in outcome.items() if k not in ("breakers", "notes")}
    gate.events.append(_event("compaction_ready", evict=len(outcome["evict_ids"]), **tokens))
    return outcome


def _breakers(gate: _Gate, reported: dict) -> dict:
    """Return the breakers after a job's model calls: each one's success or failure applied to the breaker as it is now.

    The job saw the breakers as they were when it started; what failed since
    (a blocking summary, another job) still counts.
    """
    cfg = gate.setup.config
    out = {}
    for key, seen in reported.items():
        if key not in ("breaker", "flush_breaker") or not isinstance(seen, dict):
            continue
        now = read_breaker(gate.out.compaction.get(key) or gate.record[key])  # type: ignore[literal-required]
        problem = seen.get("reason") if seen.get("failures") else None
        out[key] = breaker_after(now, problem, cfg.guards.breaker_failures, cfg.guards.breaker_cooldown)
    return out


def _swap(gate: _Gate, prepared: dict) -> Steps[bool]:
    """Yield the swap of a ready summary; return True when it was applied (False: it was discarded)."""
    applied = yield from _apply(gate, prepared)
    if applied is None:
        gate.out.compaction["prepared"] = None
        return False
    compaction, written, after = applied
    gate.out.compaction.update(compaction)
    gate.out.messages, gate.out.after, gate.out.applied, gate.out.blocked = written, after, True, None
    return True


def _check(gate: _Gate, prepared: dict) -> tuple[BaseMessage | None, str | None]:
    """Return (the summary message, None) when a prepared summary may replace what it covers now, else (None, why)."""
    problem = record_problem(prepared) or prepared_problem(prepared, gate.messages)
    if problem is not None:
        return None, problem
    (summary,) = messages_from_dict([prepared["summary"]])
    result = compacted_view(gate.messages, set(prepared["evict_ids"]), summary)
    return summary, new_pairing_problem(gate.messages, result)


def _hook_messages(gate: _Gate, prepared: dict, summary: BaseMessage, evict_ids: set) -> Steps[list[BaseMessage]]:
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


def _apply(gate: _Gate, prepared: dict) -> Steps[tuple[dict, list | None, list[BaseMessage]] | None]:
    """Yield the application of a ready summary (its hook, the transcript, the ledger); return its update, or None.

    The summary may replace what it covers when that is unchanged and what it
    produces keeps every tool call paired and is smaller than what it
    replaces; how far under the trigger it ends is the gate's business after.
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
        gate.events.append(_event("compaction_discarded", why=problem, **tokens))
        return None
    # over the trigger even so, the gate summarizes again at once (chained): what a hook would add goes with it
    injected = (
        [] if after >= gate.budget.trigger_tokens else (yield from _hook_messages(gate, prepared, summary, evict_ids))
    )
    offload_on = run.storage is not None and setup.config.offload_before_compact
    if offload_on:  # what is kept after the summary goes to the transcript before it: the order of first appearance
        try:
            yield from offload_messages(messages, run, setup.config)
        except Exception as exc:  # noqa: BLE001 - what the summary covers is there already (the job wrote it)
            gate.events.append(emit_event({"stage": "offload", "error": describe_error(exc)}))
    flushed = yield from commit_flush(setup, messages, gate.record, prepared.get("flush"), run)
    event = {
        "event": "compaction_applied",
        "mode": "background",
        "reason": "background",
        "prepared_id": prepared.get("id"),
        "usage": usage,
        **({"error": prepared["fallback"]} if prepared.get("fallback") else {}),
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
    recorded = yield from record_summary(setup, summary, run, offload_on)
    if run.storage is not None:
        try:  # applied: no worker is to apply it again
            yield StorageCall("write_prepared", (run.thread_id, _published_key(gate.key), None))
        except Exception:  # noqa: BLE001 - a later worker finds its messages gone and drops it
            pass
    compaction = {**written["compaction"], **{k: v for k, v in flushed.items() if k != "events"}, "pending": None}
    lease = gate.record["lease"]
    if lease is not None and lease["id"] == prepared.get("id"):
        compaction["lease"] = {**lease, "state": "applied"}
    gate.events.extend([*flushed.get("events", []), *recorded, *compaction.pop("events")])
    return compaction, written.get("messages"), compacted_view(messages, evict_ids, summary, injected)
