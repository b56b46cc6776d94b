"""Background compaction: a summary prepared next to the agent, swapped in at the trigger.

When the context passes ``background_start`` of the trigger, the gate cuts
the history as it stands and starts a *job*: offload, then the summary and
the memory model side by side (nothing is removed
before the swap, so the summary need not wait for the memory), in a thread
for a sync front or an asyncio task for an async one, while the model call
goes on. The next gate call that finds the job done writes its
result into the checkpointed ``compaction["prepared"]`` (``compaction_ready``),
where any worker can apply it. At the trigger the gate applies a ready,
still valid summary at once (``compaction_applied``); a job still running is
waited for only while the request stays under ``wait_limit``; a summary
whose messages changed is dropped (``compaction_discarded``, with why), and
the gate compacts as it would without background.

What the job does before the swap is durable (the transcript) or nothing
(the memory model's answer is held in the record and written to the ledger
when the summary is applied, so a discarded summary leaves no memory and
every message is flushed once). A job in progress lives in this process
only: lost with it, it is started again by the next gate that needs one.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from ..core.background import (
    covered,
    cut_index,
    kept_tokens,
    prepared_problem,
    start_budget,
    swap_before_trigger,
    wait_limit,
)
from ..core.conversation import is_injected, leading_systems
from ..core.plan import CompactionPlan
from .effects import Run, Steps, advance, state_value
from .events import emit_event
from .flush import FLUSH
from .offload import OFFLOAD
from .passes import apply_update, arun_batch, run_batch
from .state import read_compaction
from .summarize import SUMMARIZE

#: How many jobs this process keeps (the oldest are forgotten: their threads finish, nobody applies them).
MAX_JOBS = 256


class Job:
    """One compaction being prepared: the cut it was started with, and the thread or task preparing it."""

    def __init__(self, key: tuple, meta: dict, runner: Runner) -> None:
        self.key = key
        self.meta = meta
        self.runner = runner
        self.future: Future | None = None
        self.task: asyncio.Task | None = None

    def done(self) -> bool:
        return self.runner.is_done(self)

    def outcome(self) -> dict:
        """Return the job's record (``status == "ready"``) or ``{"error": ...}``; only once ``done()``."""
        work = self.future or self.task
        try:
            if self.task is not None and self.task.cancelled():
                return {"error": "the task preparing it was cancelled (its event loop ended)"}
            return work.result()
        except Exception as exc:  # noqa: BLE001 - a failed job is a discarded summary, never a failed agent
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}


class Runner:
    """Starts jobs in threads (sync fronts) or asyncio tasks (async fronts) and waits for them.

    A job runs in a fresh context: its events go to the log, not to the
    stream of the run that started it (that run may be over); the gate that
    applies it streams what happened.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="compaction-background")

    def is_done(self, job: Job) -> bool:
        work = job.future or job.task
        return work is not None and work.done()

    def start_sync(self, job: Job, work: Callable[[], dict], awork: Callable[[], Awaitable[dict]]) -> None:
        job.future = self._pool.submit(contextvars.Context().run, work)

    def start_async(self, job: Job, work: Callable[[], dict], awork: Callable[[], Awaitable[dict]]) -> None:
        job.task = asyncio.get_running_loop().create_task(awork(), context=contextvars.Context())

    def wait_sync(self, job: Job, timeout: float | None) -> bool:
        """Wait for a job from a sync front; return whether it is done (a task of an event loop cannot be waited for here)."""
        if job.future is not None:
            try:
                job.future.result(timeout)
            except Exception:  # noqa: BLE001 - a timeout or the job's own failure: outcome() says which
                pass
        return job.done()

    async def wait_async(self, job: Job, timeout: float | None) -> bool:
        try:
            if job.future is not None:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job.future)), timeout)
            elif job.task is not None and job.task.get_loop() is asyncio.get_running_loop():
                await asyncio.wait_for(asyncio.shield(job.task), timeout)
        except Exception:  # noqa: BLE001 - a timeout or the job's own failure: outcome() says which
            pass
        return job.done()


_runner = Runner()
_jobs: OrderedDict[tuple, Job] = OrderedDict()
_jobs_lock = threading.Lock()


@contextmanager
def use_runner(runner: Runner) -> Iterator[Runner]:
    """Run background jobs with ``runner`` inside the block (a benchmark's simulated clock, a test's)."""
    global _runner
    previous, _runner = _runner, runner
    try:
        yield runner
    finally:
        _runner = previous


def forget_jobs() -> None:
    """Forget every job of this process (as a restart would); their threads finish unheard."""
    with _jobs_lock:
        _jobs.clear()


class _Start:
    """The effect that starts a job: the driver picks a thread or a task."""

    def __init__(self, job: Job, work: Callable[[], dict], awork: Callable[[], Awaitable[dict]]) -> None:
        self.job, self.work, self.awork = job, work, awork

    def run_sync(self) -> None:
        self.job.runner.start_sync(self.job, self.work, self.awork)

    async def run_async(self) -> None:
        self.job.runner.start_async(self.job, self.work, self.awork)


class _Wait:
    """The effect that waits for a job (at most ``timeout`` seconds); its result says whether it is done."""

    def __init__(self, job: Job, timeout: float | None) -> None:
        self.job, self.timeout = job, timeout

    def run_sync(self) -> bool:
        return self.job.runner.wait_sync(self.job, self.timeout)

    async def run_async(self) -> bool:
        return await self.job.runner.wait_async(self.job, self.timeout)


def job_key(run: Run, messages: Sequence[BaseMessage]) -> tuple:
    """Return the key of a conversation's job: its thread and its first message after the system prompt.

    An agent and its subagents share a thread but not their first message.
    """
    lead = leading_systems(messages)
    return run.thread_id, messages[lead].id if lead < len(messages) else None


def _job(key: tuple) -> Job | None:
    with _jobs_lock:
        return _jobs.get(key)


def _drop(job: Job) -> None:
    with _jobs_lock:
        if _jobs.get(job.key) is job:
            del _jobs[job.key]


def _prepare_stages(nodes: Any, state: Any, run: Run):
    """Yield the job's batches; return the side updates and the summary's.

    Offload first (summarize checks that what it covers is in the
    transcript), then the memory model and the summary side by side: nothing
    is removed before the swap, so the summary need not wait for the memory.
    """
    updates: list[dict] = []
    if run.storage is not None and nodes.config.offload_before_compact:
        updates += yield [(OFFLOAD, nodes._offload_steps, state)]
        state = apply_update(state, updates[-1])
    batch = [(SUMMARIZE, nodes._summarize_steps, state)]
    if run.storage is not None and nodes.config.flush_before_compact:
        batch.append((FLUSH, lambda s, r: nodes._flush_steps(s, r, commit=False), state))
    summary, *flush = yield batch
    return [*updates, *flush], summary


def _record(nodes: Any, meta: dict, side: list[dict], summary: dict, usage: dict) -> dict:
    """Return a finished job's record: the prepared summary ready to apply, or why there is none."""
    done = summary.get("compaction") or {}
    breakers = {k: v for u in [*side, summary] for k, v in (u.get("compaction") or {}).items() if k.endswith("breaker")}
    flush = next((u["compaction"]["flush_answer"] for u in side if "flush_answer" in (u.get("compaction") or {})), None)
    if not done.get("summary_id"):
        why = done.get("last_error") or next((e.get("note") for e in done.get("events") or [] if e.get("note")), None)
        return {"error": why or "no summary was made", "breakers": breakers, "usage": usage}
    if nodes.config.mode == "view":
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


def _prepare(nodes: Any, meta: dict, state: Any, run: Run) -> dict:
    stages = _prepare_stages(nodes, state, run)
    finished, batch = advance(stages, None, None)
    while not finished:
        finished, batch = advance(stages, run_batch(nodes, batch, run), None)
    return _record(nodes, meta, *batch, run.usage)


async def _aprepare(nodes: Any, meta: dict, state: Any, run: Run) -> dict:
    stages = _prepare_stages(nodes, state, run)
    finished, batch = advance(stages, None, None)
    while not finished:
        finished, batch = advance(stages, await arun_batch(nodes, batch, run), None)
    return _record(nodes, meta, *batch, run.usage)


def _event(name: str, **fields: Any) -> dict:
    return emit_event({"stage": "background", "event": name, **fields})


class BackgroundStage:
    """The gate's part of background compaction (mixed into ``CompactionNodes``)."""

    def _background_floor(self, run: Run, messages: Sequence[BaseMessage], view: dict) -> int:
        """Return where layers 1-2 may start editing: after the cut of a summary being prepared (its messages must not change)."""
        if not self.config.background:
            return 0
        record = view.get("prepared")
        job = _job(job_key(run, messages))
        meta = record if isinstance(record, dict) else job.meta if job is not None else None
        if meta is None:
            return 0
        return cut_index(messages, meta.get("cutoff_id")) or 0

    def _background_steps(
        self,
        state: Any,
        run: Run,
        messages: Sequence[BaseMessage],
        memo: Any,
        view: dict,
        plan: CompactionPlan,
        budget: Any,
        new_tokens: int | None,
    ) -> Steps:
        """Yield the background part of one gate call; return (``compaction`` update, messages update, applied, blocked).

        ``applied`` says a prepared summary replaced its messages in this
        update; ``blocked`` is None when the gate need not compact in front of
        the model call (nothing due, a summary applied, or one being prepared
        while the request fits), otherwise why it compacts as without background.
        """
        counts = memo.counts
        key = job_key(run, messages)
        job = _job(key)
        update: dict[str, Any] = {}
        events: list[dict] = []
        record = view.get("prepared") if isinstance(view.get("prepared"), dict) else None
        if job is not None and job.done():
            record, harvested = self._harvest(job, record, messages, events)
            update.update(harvested)
        keep_max = max(self.config.keep_tokens_max, budget.keep_tokens)
        swap = lambda record: self._swap(record, messages, counts, view, run, budget, update, events)  # noqa: E731
        if not plan.summarize and record is not None and swap_before_trigger(record, messages, counts, keep_max):
            if swapped := (yield from swap(record)):
                return swapped
            record = None
        if not plan.summarize:
            early_budget = start_budget(budget, self.config.background_start)
            near = plan.tokens_after_layers >= early_budget.trigger_tokens or (
                early_budget.trigger_messages and len(messages) >= early_budget.trigger_messages
            )
            if near and record is None and job is None and plan.held is None and self._may_prepare(view):
                early = self.plan(messages, budget=early_budget, new_tokens=new_tokens, memo=memo)
                if early.summarize:
                    yield from self._start(state, run, messages, early, budget, events)
            return self._finish(update, events), None, False, None
        if record is not None:
            if swapped := (yield from swap(record)):
                return swapped
        fits = plan.tokens_after_layers < wait_limit(budget)
        job = _job(key)
        problem = prepared_problem(job.meta, messages) if job is not None and not job.done() else None
        if (
            problem is not None
        ):  # what it covers changed: it could not be applied once ready; start again from here, or compact now
            _drop(job)
            events.append(
                _event(
                    "compaction_discarded",
                    why=problem,
                    prepared_id=job.meta["id"],
                    tokens_before=plan.tokens_after_layers,
                    usage={},
                )
            )
        elif job is not None and not job.done():
            if fits:
                emit_event({"stage": "gate", "held": "background", "tokens": plan.tokens_after_layers})
                return self._finish(update, events), None, False, None
            if (yield ("background", _Wait(job, self.config.summary_timeout), ())):
                record, harvested = self._harvest(job, None, messages, events)
                update.update(harvested)
                if record is not None and (swapped := (yield from swap(record))):
                    return swapped
                return self._finish(update, events), None, False, "the prepared summary could not be applied"
            _drop(job)
            why = "not ready before the request outgrew the wait"
            events.append(
                _event(
                    "compaction_discarded",
                    why=why,
                    prepared_id=job.meta["id"],
                    tokens_before=plan.tokens_after_layers,
                    usage={},
                )
            )
            return self._finish(update, events), None, False, f"the prepared summary was {why}"
        if fits and plan.reason in ("tokens", "messages") and self._may_prepare(view):
            now = self.plan(messages, budget=start_budget(budget), new_tokens=new_tokens, memo=memo)
            yield from self._start(state, run, messages, now if now.summarize else plan, budget, events)
            return self._finish(update, events), None, False, None
        why = (
            "a summary cannot be prepared now (no summarizer, or its breaker is open)"
            if fits
            else "the request is over the wait limit"
        )
        if problem is not None:
            why = f"the summary being prepared cannot apply ({problem}) and {why}"
        return self._finish(update, events), None, False, why

    @staticmethod
    def _finish(update: dict, events: list[dict]) -> dict:
        return {**update, "events": events} if events else update

    def _may_prepare(self, view: dict) -> bool:
        """Return False when a job would only fail: no summarizer, or its breaker is open (the blocking path has a fallback)."""
        breaker = view.get("breaker") if isinstance(view.get("breaker"), dict) else {}
        return self.model is not None and not (breaker.get("open_until") or 0) > time.time()

    def _start(
        self,
        state: Any,
        run: Run,
        messages: Sequence[BaseMessage],
        plan: CompactionPlan,
        budget: Any,
        events: list[dict],
    ) -> Steps:
        """Yield the effect that starts a job for the plan's cut of ``messages``."""
        cut = plan.cut
        evict_ids = [messages[i].id for i in cut.evict]
        meta = {
            "id": uuid.uuid4().hex[:12],  # names it in every event, from started to applied or discarded
            "covered": covered(messages, evict_ids),
            "evict_ids": evict_ids,
            "cutoff_id": messages[cut.cutoff].id if cut.cutoff < len(messages) else None,
            "tokens_before": plan.tokens_after_layers,
            "started_at": time.time(),
        }
        view = read_compaction(state_value(state, "compaction"))
        pending = {
            "reason": "background",
            "evict_ids": evict_ids,
            "cutoff_id": meta["cutoff_id"],
            "tokens_before": plan.tokens_before,
            "tokens_after_layers": plan.tokens_after_layers,
            "target_tokens": budget.target_tokens,  # calibrated to estimator units, as summarize counts
            "focus": None,
        }
        snapshot = {"messages": list(state_value(state, "messages") or []), "compaction": {**view, "pending": pending}}
        job_run = dataclasses.replace(run, usage={})  # its own account of the compaction model's usage
        job = Job(job_key(run, messages), meta, _runner)
        with _jobs_lock:
            _jobs.pop(job.key, None)
            _jobs[job.key] = job
            while len(_jobs) > MAX_JOBS:
                _jobs.popitem(last=False)
        work = lambda: _prepare(self, meta, snapshot, job_run)  # noqa: E731
        awork = lambda: _aprepare(self, meta, snapshot, job_run)  # noqa: E731
        try:
            yield ("background", _Start(job, work, awork), ())
        except Exception as exc:  # noqa: BLE001 - no thread or loop to spare: the trigger compacts blocking
            _drop(job)
            why = f"it could not be started: {exc}"
            events.append(
                _event(
                    "compaction_discarded",
                    why=why,
                    prepared_id=meta["id"],
                    tokens_before=plan.tokens_after_layers,
                    usage={},
                )
            )
            return
        started = {
            "prepared_id": meta["id"],
            "tokens_before": plan.tokens_after_layers,
            "evict": len(evict_ids),
            "usage": {},
        }
        events.append(_event("compaction_started", mode="background", **started))

    def _harvest(self, job: Job, record: dict | None, messages, events: list[dict]) -> tuple[dict | None, dict]:
        """Return the ready record (the state's or the job's) and the ``compaction`` update of a finished job."""
        _drop(job)
        outcome = job.outcome()
        update: dict[str, Any] = dict(outcome.get("breakers") or {})  # the breakers count background failures too
        usage = outcome.get("usage") or {}
        tokens = {
            "prepared_id": job.meta["id"],
            "tokens_before": job.meta["tokens_before"],
            "tokens_after": outcome.get("tokens_after"),
            "usage": usage,
        }
        if "error" in outcome:
            events.append(_event("compaction_discarded", why=outcome["error"], **tokens))
            return record, update
        problem = prepared_problem(outcome, messages)
        if problem is None and record is not None and prepared_problem(record, messages) is None:
            problem = "a summary prepared elsewhere is ready already"
        if problem is not None:
            events.append(_event("compaction_discarded", why=problem, **tokens))
            return record, update
        update["prepared"] = {k: v for k, v in outcome.items() if k != "breakers"}
        events.append(_event("compaction_ready", evict=len(outcome["evict_ids"]), **tokens))
        return outcome, update

    def _swap(
        self, record: dict, messages, counts, view, run: Run, budget: Any, update: dict, events: list[dict]
    ) -> Steps:
        """Yield the swap of a ready summary; return the gate's (update, messages, applied, blocked), or None (it was discarded)."""
        applied = yield from self._apply(record, messages, counts, view, run, budget, events)
        if applied is None:
            update["prepared"] = None
            return None
        compaction, written = applied
        return self._finish({**update, **compaction}, events), written, True, None

    def _apply(self, record: dict, messages, counts, view: dict, run: Run, budget: Any, events: list[dict]) -> Steps:
        """Yield the ledger write of a ready summary and return its (``compaction``, messages) update, or None when it may not apply."""
        tokens = {"prepared_id": record.get("id"), "tokens_before": sum(counts), "usage": record.get("usage") or {}}
        problem = prepared_problem(record, messages)
        if problem is None:
            (summary,) = messages_from_dict([record["summary"]])
            injected = messages_from_dict(record.get("injected") or [])
            evict_ids = set(record["evict_ids"])
            after = self.counter.total([*messages[: leading_systems(messages)], summary, *injected]) + kept_tokens(
                messages, counts, record["evict_ids"]
            )
            if after >= sum(counts):
                problem = f"it would not shrink the context ({sum(counts):,} -> {after:,} tokens)"
            elif after > budget.target_tokens:
                problem = f"it would leave {after:,} tokens, over the target of {budget.target_tokens:,}"
        if problem is not None:
            events.append(_event("compaction_discarded", why=problem, **tokens))
            return None
        flushed = yield from self._commit_flush(messages, view, record.get("flush"), run)
        written = self._summary_update(
            messages,
            view,
            evict_ids,
            record.get("cutoff_id"),
            summary,
            record.get("pins") or [],
            record.get("kind") or "summarize",
            record.get("offload_path"),
            run,
            event={
                "event": "compaction_applied",
                "mode": "background",
                "reason": "background",
                "prepared_id": record.get("id"),
                "usage": tokens["usage"],
            },
            injected=injected,
        )
        # written to the transcript now that it replaces what it covers (so recall can open it)
        recorded = yield from self._record_summary(
            summary, run, run.storage is not None and self.config.offload_before_compact
        )
        compaction = {**written["compaction"], **{k: v for k, v in flushed.items() if k != "events"}, "pending": None}
        events.extend([*flushed.get("events", []), *recorded, *compaction.pop("events")])
        return compaction, written.get("messages")
