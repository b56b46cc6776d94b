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
in front of the model call only when none is coming. A failure's retry is not
waited for while the request fits (up to ``core.background.wait_limit``): a
job makes a call that failed in passing (a 503) again itself, and a job lost
with its worker (killed, restarted) is started again. The message-count
trigger counts messages, not the window: there a job starts with the cut a
blocking compaction would make, and the agent goes on until it is ready. A summary is applied
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
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ..core.background import (
    covered,
    covers_enough,
    cut_index,
    prepared_problem,
    should_start,
    should_start_by_count,
    start_budget,
    swap_before_trigger,
    turn_growth,
    wait_limit,
)
from ..core.config import Budget
from ..core.conversation import leading_systems
from ..core.plan import CompactionPlan, plan_compaction
from .breaker import breaker_after, is_open
from .driver import Performer, adrive, drive
from .effects import StartJob, Steps, StorageCall, WaitJob
from .events import blocking_started, emit_event
from .jobs import BackgroundJobs, Job, Published, owner_gone
from .prepare import (
    MODEL_RETRIES,
    Read,
    job_key,
    lease_seconds,
    make_steps,
    prepare_steps,
    published_key,
    read_for_job,
    retrying,
)
from .run import Run
from .setup import Setup
from .state import Breaker, CompactionRecord, Lease, merge_compaction, read_breaker, read_compaction
from .swap import GateCall, Outcome, background_event, swap


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


def background_floor(gate: GateCall) -> int:
    """Return where the gate's own edits may start: after the cut of a summary being prepared (it must not change)."""
    job = gate.jobs.get(gate.key)
    record = gate.record
    lease = record["lease"] if _lease_held_elsewhere(record["lease"], gate.jobs, gate.run.storage) else None
    meta = record["prepared"] or (job.meta if job is not None else None) or lease
    if meta is None:
        return 0
    return cut_index(gate.messages, meta.get("cutoff_id")) or 0


def swap_coming(gate: GateCall, plan: CompactionPlan) -> bool:
    """Return True when a summary will replace the prefix soon: a job runs or is ready, or one starts now.

    Under prompt caching, layer 1-2 edits made only because they repay their
    cache break wait for that swap, which breaks the cache anyway: made now,
    they would break it twice, and a job started now would summarize messages
    the agent's cached prefix no longer holds.
    """
    if gate.record["prepared"] is not None or gate.jobs.get(gate.key) is not None:
        return True
    start, turns = gate.setup.config.background.start, gate.jobs.turns_to_ready
    return should_start(plan.tokens_before, turn_growth(gate.messages, gate.counts), gate.budget, start, turns)


def background_steps(gate: GateCall, memo: Any, plan: CompactionPlan, new_tokens: int | None) -> Steps[Outcome]:
    """Yield the background part of one gate call; return its ``Outcome`` (its events go to ``gate.events``)."""
    setup, jobs, messages, record, budget = gate.setup, gate.jobs, gate.messages, gate.record, gate.budget
    gate.edits = dict(plan.edits)
    job = jobs.get(gate.key)
    prepared: dict[str, Any] | None = record["prepared"]  # type: ignore[assignment]
    if job is not None and not job.done():
        job.calls += 1
    elif job is not None:
        prepared = _harvest(gate, job, prepared)
    if not plan.summarize:
        keep_max = max(setup.config.keep_tokens_max, budget.keep_tokens)
        if prepared is not None and swap_before_trigger(prepared, messages, gate.counts, keep_max):
            if (yield from swap(gate, prepared)):
                yield from _next_job(gate)
                return gate.out
            prepared = gate.out.compaction.get("prepared", prepared)  # None: discarded; else it waits
        if job is None and prepared is None and not _lease_held_elsewhere(record["lease"], jobs, gate.run.storage):
            yield from _maybe_start(gate, plan, memo, new_tokens)
        return gate.out
    if prepared is not None and (yield from swap(gate, prepared)):
        yield from _next_job(gate)
        return gate.out
    if prepared is not None and _swap_waits(gate, prepared, plan):
        return gate.out
    if plan.reason == "messages" and plan.tokens_after_layers < budget.trigger_tokens and not _count_set(setup):
        if (yield from _count_only(gate, plan, job)):
            return gate.out
    if _retry_coming(gate) and plan.tokens_after_layers < wait_limit(budget):
        return gate.out  # the last summary failed: the agent waits for no retry while the request fits the window
    waited = yield from _wait(gate, plan)
    if waited is _GOES_ON:
        return gate.out  # its job makes a failed call again: the agent waits for no retry while the request fits
    if waited is not None and (yield from swap(gate, waited)):
        yield from _next_job(gate)
        return gate.out
    if waited is not None and _swap_waits(gate, waited, plan):
        return gate.out
    if record["lease"] is not None:  # compacted now, the prefix goes: its job's summary is looked for no more
        _release(gate, record["lease"]["id"])
    blocked = gate.out.blocked or "no summary was prepared in time"
    if waited is None and gate.jobs.get(gate.key) is None and gate.may_prepare() and _after_a_failure(gate, job):
        if _prepare_again(gate, job) and plan.tokens_after_layers < wait_limit(budget):
            yield from _start(gate, plan)  # prepared again next to the agent, which goes on while the request fits
            if (again := gate.jobs.get(gate.key)) is not None:
                again.again = True  # a retry: not waited for while the request fits (``_retry_coming``)
                gate.out.blocked = None
                return gate.out
        made = yield from _compact_now(gate, plan, blocked)
        if made is not None and (yield from swap(gate, made)):
            yield from _next_job(gate)
            return gate.out
        if made is None or gate.out.compaction.get("prepared") is not None:
            # it failed as a blocking summary fails, or its swap waits for the transcript: the history stays for now
            gate.out.blocked = None
            if made is None and not is_open(read_breaker(gate.out.compaction.get("breaker") or record["breaker"])):
                yield from _start(gate, plan)  # its retry, made next to the agent (``_retry_coming``)
            return gate.out
    gate.out.blocked = blocked
    return gate.out


def _swap_waits(gate: GateCall, ready: dict[str, Any], plan: CompactionPlan) -> bool:
    """After a swap that was not applied: return True when the agent goes on and the next call tries it again.

    That is when the swap waits for the transcript (a write that failed, a
    database restarting) rather than was discarded, and the request fits
    (``core.background.wait_limit``): the summary stays ready, here or where
    its worker published it, and costs no summary call more. A request that
    no longer fits is compacted in the run.
    """
    postponed = gate.out.compaction.get("prepared", ready) is not None
    return postponed and plan.tokens_after_layers < wait_limit(gate.budget)


def _count_set(setup: Setup) -> bool:
    """Return True when the builder set the message trigger (``trigger_messages``, LangChain's ``("messages", n)``).

    A message trigger the builder set is met where it is set, as blocking
    compaction and LangChain's middleware meet it; the default one is a guard
    against very long lists, which the agent may pass while a job prepares.
    """
    return "trigger_messages" in setup.config.model_fields_set


def _count_only(gate: GateCall, plan: CompactionPlan, job: Job | None) -> Steps[bool]:
    """At the message trigger, the request under the token trigger: return True when the agent goes on meanwhile.

    The message trigger counts messages, not the window: the agent goes on
    while a job prepares the very summary a blocking compaction would make
    now (the plan's own cut, so as many messages go as without background),
    and the swap follows when it is ready. A job already being prepared, here
    or by another worker, is not waited for. A job that finished without a
    summary applied, or a last summary that failed (a summarizer that calls
    ``interrupt()`` needs the run): the gate makes the summary in front of
    the model call (``_compact_now``); with no way to make one (no
    summarizer, its breaker open) it compacts as blocking.
    """
    if job is not None:
        return not job.done()
    if _lease_held_elsewhere(gate.record["lease"], gate.jobs, gate.run.storage):
        return True
    if not gate.may_prepare() or _failed_lately(gate):
        return False
    yield from _start(gate, plan)
    return gate.jobs.get(gate.key) is not None


def _maybe_start(gate: GateCall, plan: CompactionPlan, memo: Any, new_tokens: int | None) -> Steps[None]:
    """Start a job when the thread will reach the trigger before one started later would be ready."""
    tokens, budget = plan.tokens_after_layers, gate.budget
    start, turns = gate.setup.config.background.start, gate.jobs.turns_to_ready
    if not gate.may_prepare():
        return
    if plan.held is not None:  # due, held back until the thread adds min_new_tokens: ready when the hold ends
        turn = turn_growth(gate.messages, gate.counts)
        if new_tokens is not None and (
            new_tokens >= budget.min_new_tokens * start or new_tokens + turn * (turns + 1) >= budget.min_new_tokens
        ):
            planned = _plan(gate, start_budget(budget, start), memo, None)
            if planned.summarize:
                yield from _start(gate, planned)
        return
    if should_start(tokens, turn_growth(gate.messages, gate.counts), budget, start, turns):
        planned = _plan(gate, start_budget(budget, min(1.0, tokens / budget.trigger_tokens)), memo, new_tokens)
        if planned.summarize and covers_enough(_evicted_tokens(planned, gate.counts), budget):
            yield from _start(gate, planned)
            return
    if _count_set(gate.setup):  # met where the builder set it, as blocking meets it: with blocking's cut, there
        return
    if _failed_lately(gate):
        return
    conversation = len(gate.messages) - leading_systems(gate.messages)
    if should_start_by_count(conversation, turn_growth(gate.messages), tokens, budget, start, turns):
        # the cut a blocking compaction would make at the count, made now: the turns until the swap refill the tail
        at = dataclasses.replace(start_budget(budget, start), trigger_messages=conversation)
        planned = _plan(gate, at, memo, new_tokens)
        if planned.summarize and planned.reason == "messages":
            yield from _start(gate, planned)


def _retry_coming(gate: GateCall) -> bool:
    """Return True when a failure's retry is being prepared: the last summary failed and its retry is being
    prepared (here, or by another worker), this worker's job is making a failed call again, or it is a job
    started again after one failed in passing or was lost with its worker (``_prepare_again``).

    The agent does not wait for it while the request fits: the gate lets it
    go on up to halfway from the trigger into the window's reserve
    (``core.background.wait_limit``), as a blocking summary that failed
    leaves the history while it fits. A failed summary costs the agent one
    compaction call of wait, not one per attempt; a failed call its job makes
    again, none.
    """
    job = gate.jobs.get(gate.key)
    if job is not None and (job.retried or job.again) and not job.done():
        return True
    coming = job is not None or _lease_held_elsewhere(gate.record["lease"], gate.jobs, gate.run.storage)
    return coming and _failed_lately(gate)


def _after_a_failure(gate: GateCall, job: Job | None) -> bool:
    """Return True when the summary due now stands in for one that failed or was lost on the way.

    A job of this conversation that finished here without a summary applied,
    a lease whose job nobody will finish (its worker failed, died, or was
    restarted in place), or a last summary that failed. Then the gate makes
    the summary in the run with the memory model's call beside it
    (``_compact_now``), but for a failure that may pass or a lease lost with
    its worker while the request fits: that job is started again
    (``_prepare_again``). Otherwise (a young thread no job could cover, a
    turn past the trigger) it compacts as ``background=False`` does, through
    the graph's flush, offload and summarize steps.
    """
    lease = gate.record["lease"]
    lost = lease is not None and lease["state"] == "preparing"
    return (job is not None and job.done()) or lost or _failed_lately(gate)


def _prepare_again(gate: GateCall, job: Job | None) -> bool:
    """Return True when the summary due now is prepared again as a job rather than made in the run.

    That is when its job's failure may pass (the job made a failed call
    again: a 503, a rate limit; here or on another worker) or its lease was
    lost with its worker (``_lease_lost``). Any other failure (a refusal, a
    bug, a summarizer that calls ``interrupt()`` and so needs the run) is
    made in the run (``_compact_now``).
    """
    failed_in_passing = job is not None and job.done() and bool(job.retried)
    return failed_in_passing or gate.foreign_retried or _lease_lost(gate.record["lease"], gate.jobs)


def _lease_lost(lease: Lease | None, jobs: BackgroundJobs) -> bool:
    """Return True for another worker's lease whose job nobody will finish: that worker is gone (killed, or
    restarted in place) or its lease ran out.

    Its summary did not fail: it is prepared again next to the agent, as the
    retry of a failed one is (``_retry_coming``).
    """
    if lease is None or lease["state"] != "preparing" or lease["owner"] == jobs.owner:
        return False
    return owner_gone(lease["owner"]) or lease["until"] <= time.time()


def _failed_lately(gate: GateCall) -> bool:
    """Return True when the last summary failed: then the message count is met in the run, no job before it.

    A 503, or a summarizer that calls ``interrupt()`` and so needs the run:
    the gate makes the summary in front of the model call at the count
    (``_compact_now``), not in one job after another before it. The decision reads the
    checkpointed breaker only, so a run resumed after an interrupt takes the
    same path again.
    """
    breaker = gate.record["breaker"]
    return breaker is not None and bool(breaker["failures"])


def _evicted_tokens(plan: CompactionPlan, counts: Sequence[int]) -> int:
    return sum(counts[i] for i in plan.cut.evict) if plan.cut is not None else 0


def _next_job(gate: GateCall) -> Steps[None]:
    """After a swap, start the next job at once if the thread grows fast enough to need it.

    The swap left the tail that grew while its summary was made; with turns
    as large as the newest few (``turn_growth``), the trigger comes again
    before a job started at the next call would be ready.
    """
    after = gate.out.after or []
    counts = gate.setup.counter.counts(after)
    tokens, budget = sum(counts), gate.budget
    if tokens >= budget.trigger_tokens or not gate.may_prepare():
        return
    start, turns = gate.setup.config.background.start, gate.jobs.turns_to_ready
    if not should_start(tokens, turn_growth(after, counts), budget, start, turns):
        return
    at = start_budget(budget, min(1.0, tokens / budget.trigger_tokens))
    key = job_key(gate.run, after)
    post = GateCall(gate.setup, gate.jobs, after, counts, gate.record, budget, gate.run, key, events=gate.events)
    planned = plan_compaction(after, counts, at, gate.setup.config, gate.setup.counter.message)
    if planned.summarize and covers_enough(_evicted_tokens(planned, counts), budget):
        yield from _start(post, planned)
        gate.out.compaction.update(post.out.compaction)


def _plan(gate: GateCall, budget: Budget, memo: Any, new_tokens: int | None) -> CompactionPlan:
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


def _wait(gate: GateCall, plan: CompactionPlan) -> Steps[dict[str, Any] | None]:
    """Wait for the summary being prepared (here, or by the lease's worker); return it, or None when none comes.

    The request is at or over the trigger, which is the user's budget: rather
    than send it, the gate waits for what remains of the job, which is less
    than a summary made now would take.
    """
    job = gate.jobs.get(gate.key)
    timeout = gate.setup.config.summary.timeout
    lease = gate.record["lease"]
    fits = plan.tokens_after_layers < wait_limit(gate.budget)
    if job is None and _lease_held_elsewhere(lease, gate.jobs, gate.run.storage):
        assert lease is not None
        runner = Published(gate.run.storage, gate.run.thread_id, published_key(gate.key))
        job = Job(gate.key, {"id": lease["id"], "tokens_before": plan.tokens_after_layers}, runner)
        # at most what its lease has left, and never longer than a summary call may take
        timeout = min(lease["until"] - time.time(), timeout or FOREIGN_WAIT_SECONDS)
        done = yield from _wait_for(job, max(0.0, timeout), lambda: fits and bool(job.retried))
        if done and job.outcome().get("status") != "failed":
            return job.outcome()
        if fits and job.retried and not done:
            return _GOES_ON  # its worker makes a failed call again; the lease stays, the next call looks again
        failed = job.outcome().get("error") if job.done() else None
        gate.foreign_retried = bool(failed and job.outcome().get("tried_again"))
        why = f"the worker preparing it failed: {failed}" if failed else "not ready before the wait ran out"
        gate.events.append(_discarded(why, job.meta, plan.tokens_after_layers))
        _release(gate, lease["id"])
        gate.out.blocked = "the summary another worker prepares " + ("failed" if failed else "was not ready in time")
        return None
    if job is None:
        return None
    if (yield from _wait_for(job, timeout, lambda: fits and bool(job.retried))):
        return _harvest(gate, job, None)
    if fits and job.retried:
        return _GOES_ON
    gate.jobs.drop(job)
    gate.events.append(_discarded("not ready before the wait ran out", job.meta, plan.tokens_after_layers))
    _release(gate, job.meta["id"])
    gate.out.blocked = "the prepared summary was not ready before the wait ran out"
    return None


#: What ``_wait`` returns when it stopped waiting for a job that makes a failed call again (``_retry_coming``).
_GOES_ON: dict[str, Any] = {}
#: How often a gate waiting for this worker's job looks whether the job is trying a failed call again.
LOOK_SECONDS = 0.05


def _wait_for(job: Job, timeout: float | None, stop: Callable[[], bool]) -> Steps[bool]:
    """Wait for a job at most ``timeout`` seconds, or until ``stop()``; return whether it is done."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        look = LOOK_SECONDS if left is None else min(left, LOOK_SECONDS)
        if (yield WaitJob(job, look)):
            return True
        if stop() or (left is not None and left <= LOOK_SECONDS):
            return False


def _release(gate: GateCall, prepared_id: str) -> None:
    """Release the conversation's lease held for this job (failed, discarded or abandoned): nobody waits for it."""
    lease = gate.record["lease"]
    if lease is not None and lease["id"] == prepared_id and lease["state"] == "preparing":
        gate.out.compaction["lease"] = None


#: How long a gate waits at most for a summary another worker prepares, when summary calls have no timeout.
FOREIGN_WAIT_SECONDS = 60.0


def _discarded(why: str, meta: dict[str, Any], tokens_before: int) -> dict[str, Any]:
    return background_event(
        "compaction_discarded", why=why, prepared_id=meta["id"], tokens_before=tokens_before, usage={}
    )


#: What a job works on: its meta (the cut), the messages, the record it reads, its run, what the gate read for it.
JobInputs = tuple[dict[str, Any], list[BaseMessage], CompactionRecord, Run, Read]


def _job_inputs(gate: GateCall, plan: CompactionPlan) -> Steps[JobInputs]:
    """Yield the offload and the memory read of the plan's cut; return what a job for it works on."""
    setup, run = gate.setup, gate.run
    # the messages as the state holds them once this call's update lands: the gate's layer edits made
    messages = [gate.edits.get(i, m) for i, m in enumerate(gate.messages)] if gate.edits else gate.messages
    cut = plan.cut
    assert cut is not None
    evict_ids = [messages[i].id for i in cut.evict]
    meta: dict[str, Any] = {
        "id": uuid.uuid4().hex[:12],  # names it in every event, from started to applied or discarded
        "covered": covered(messages, evict_ids),  # type: ignore[arg-type]
        "evict_ids": evict_ids,
        "cutoff_id": messages[cut.cutoff].id if cut.cutoff < len(messages) else None,
        "tokens_before": plan.tokens_after_layers,
        "started_at": time.time(),
        "user_id": run.user_id,  # whose memory the job read: its answer goes to that user's ledger
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
    # the breakers as this call leaves them (a job just harvested, a summary that just failed here)
    moved = {k: gate.out.compaction[k] for k in ("breaker", "flush_breaker") if k in gate.out.compaction}
    record = read_compaction({**gate.record, **moved, "pending": pending})
    snapshot = list(messages)
    read = yield from read_for_job(setup, gate.messages, run)  # the originals: layer 1-2 copies are never written
    if read[0] is not None:
        record = read_compaction(merge_compaction(dict(record), read[0].record()))
    job_run = dataclasses.replace(run, usage={})  # its own account of the compaction model's usage
    return meta, snapshot, record, job_run, read


def _start(gate: GateCall, plan: CompactionPlan) -> Steps[None]:
    """Yield the effect that starts a job for the plan's cut of the messages, and take the conversation's lease."""
    setup, key = gate.setup, gate.key
    meta, snapshot, record, job_run, read = yield from _job_inputs(gate, plan)
    offloaded = read[0]
    if offloaded is not None and offloaded.last_error is not None:
        # its summary would cover what the transcript does not hold, and be refused: the next call starts it
        gate.events.extend(offloaded.events)
        return
    retried: list[int] = []  # the job's and its driver's: the gate sees a job that is trying a call again
    performer = Performer(job_run, setup.config.summary.timeout, retries=_retries(setup, record), retried=retried)
    if job_run.storage is not None and getattr(job_run.storage, "shared", True):  # for the workers waiting for it
        announced = (job_run.thread_id, published_key(key), retrying(setup, meta))
        performer.announce = StorageCall("write_prepared", announced)

    def work() -> dict[str, Any]:
        made = drive(prepare_steps(setup, meta, key, snapshot, record, job_run, read, retried), performer)
        return {**made, "retried": _retried(setup, performer)}

    async def awork() -> dict[str, Any]:
        made = await adrive(prepare_steps(setup, meta, key, snapshot, record, job_run, read, retried), performer)
        return {**made, "retried": _retried(setup, performer)}

    job = Job(key, meta, gate.jobs.runner(), work=work, awork=awork)
    job.retried = retried
    gate.jobs.add(job)
    try:
        yield StartJob(job)
    except Exception as exc:  # noqa: BLE001 - no thread or loop to spare: the trigger compacts blocking
        gate.jobs.drop(job)
        gate.events.append(_discarded(f"it could not be started: {exc}", meta, plan.tokens_after_layers))
        return
    until = meta["started_at"] + lease_seconds(setup)
    lease: Lease = {
        "id": meta["id"],
        "owner": gate.jobs.owner,
        "until": until,
        "state": "preparing",
        "cutoff_id": meta["cutoff_id"],
    }
    gate.out.compaction["lease"] = lease
    started = {"prepared_id": meta["id"], "tokens_before": meta["tokens_before"], "evict": len(meta["evict_ids"])}
    gate.events.append(background_event("compaction_started", mode="background", usage={}, **started))


def _retries(setup: Setup, record: CompactionRecord) -> int:
    """Return how many times a job makes a model call again after a passing failure (a 503).

    Every failed call counts towards the model's breaker, so a provider that
    is down is called no more often than without retries: a job's tries end
    where the breaker would open.
    """
    failures = max(read_breaker(record[key])["failures"] for key in ("breaker", "flush_breaker"))
    return max(0, min(MODEL_RETRIES, setup.config.guards.breaker_failures - 1 - failures))


def _retried(setup: Setup, performer: Performer) -> dict[str, int]:
    """Return the failed calls a job made again, by the record key of their model's breaker."""
    models = {"breaker": {id(setup.model)}}
    models.setdefault(setup.flush_breaker, set()).add(id(setup.flush_model))  # one breaker when they share it
    return {key: sum(performer.retried.count(model) for model in ids) for key, ids in models.items()}


def _compact_now(gate: GateCall, plan: CompactionPlan, why: str) -> Steps[dict[str, Any] | None]:
    """At the trigger, after a failed or lost job, make the plan's summary in the run; return it (None: it failed).

    The agent waits for the summary a blocking compaction would make, with
    the memory model's call beside the summary's (as a job makes them), not
    before it: one compaction call of wait, not two. In the run, so a
    summarizer that calls ``interrupt()`` pauses it. A failure is a blocking
    summary's: while the history fits the window it stays; the caller starts
    its retry as a job (``_retry_coming``).
    """
    assert plan.cut is not None and plan.reason is not None
    blocking_started(plan.reason, plan.tokens_before, plan.tokens_after_layers, len(plan.cut.evict), why)
    meta, snapshot, record, job_run, read = yield from _job_inputs(gate, plan)
    meta.update(mode="blocking", reason=plan.reason)
    result = yield from make_steps(gate.setup, meta, snapshot, record, job_run, read)
    gate.out.compaction.update(_breakers(gate, dict(result.breakers())))
    gate.events.extend(result.events())  # emitted in the run already: kept as a blocking compaction keeps them
    made = result.record()
    if "error" not in made:
        gate.out.compaction["prepared"] = _ready(made)  # applied now, or by a later call if the swap must wait
        return made
    if result.summary.failed:
        counts: dict[str, int] = gate.out.compaction.setdefault("counts", {})
        counts["failed"] = counts.get("failed", 0) + 1
    return None


def _harvest(gate: GateCall, job: Job, prepared: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return the ready record (the state's or the job's), recording a finished job's outcome in the update."""
    gate.jobs.drop(job)
    gate.jobs.observe(job)
    outcome = job.outcome()
    # background failures count too, each failed call of the job's
    gate.out.compaction.update(_breakers(gate, outcome.get("breakers") or {}, outcome.get("retried") or {}))
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
    problem = outcome.get("error") or prepared_problem(outcome, gate.messages)
    if problem is None and prepared is not None and prepared_problem(prepared, gate.messages) is None:
        problem = "a summary prepared elsewhere is ready already"
    if problem is not None:
        gate.events.append(background_event("compaction_discarded", why=problem, **tokens))
        _release(gate, job.meta["id"])
        return prepared
    gate.out.compaction["prepared"] = _ready(outcome)
    gate.events.append(background_event("compaction_ready", evict=len(outcome["evict_ids"]), **tokens))
    return outcome


def _ready(outcome: dict[str, Any]) -> dict[str, Any]:
    """Return a ready job record as the state keeps it (``compaction["prepared"]``)."""
    return {k: v for k, v in outcome.items() if k not in ("breakers", "notes", "retried")}


def _breakers(gate: GateCall, reported: dict[str, Any], retried: dict[str, int] | None = None) -> dict[str, Breaker]:
    """Return the breakers after a job's model calls: each one's success or failure applied to the breaker as it is now.

    The job saw the breakers as they were when it started; what failed since
    (a blocking summary, another job) still counts. ``retried``: the failed
    calls the job made again, by breaker.
    """
    cfg = gate.setup.config
    out: dict[str, Breaker] = {}
    for key, seen in reported.items():
        if key not in ("breaker", "flush_breaker") or not isinstance(seen, dict):
            continue
        now = read_breaker(gate.out.compaction.get(key) or gate.record[key])  # type: ignore[literal-required]
        problem = seen.get("reason") if seen.get("failures") else None
        attempts = 1 + (retried or {}).get(key, 0)
        out[key] = breaker_after(now, problem, cfg.guards.breaker_failures, cfg.guards.breaker_cooldown, attempts)
    return out
