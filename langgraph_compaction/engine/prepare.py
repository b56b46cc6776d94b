"""A compaction job, the part of background compaction that runs next to the agent.

The gate offloads what a job covers and reads the memory files before
starting it (``read_for_job``); the job then calls the models only: the
summary and the memory model's answer side by side (``prepare_steps``), and
returns a record the gate applies later (``results.JobResult``). A ready record is
published to a storage the conversation's other workers share.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ..core.conversation import leading_systems
from ..memory.ledger import local_now
from .driver import guarded
from .effects import Parallel, Steps, StorageCall
from .events import describe_error, emit_event
from .flush import flush_result, read_memory
from .jobs import RETRYING
from .offload import offload_result
from .results import JobResult, OffloadResult, failed_result
from .run import Run
from .setup import Setup
from .state import CompactionRecord
from .summarize import summary_result


def job_key(run: Run, messages: Sequence[BaseMessage]) -> tuple[str, str | None]:
    """Return the key of a conversation's job: its thread and its first message after the system prompt.

    An agent and its subagents share a thread but not their first message.
    """
    lead = leading_systems(messages)
    return run.thread_id, messages[lead].id if lead < len(messages) else None


def published_key(key: tuple[str, str | None]) -> str:
    """Return the name a conversation's prepared summary is published under in the storage."""
    return str(key[1] or "conversation")


#: What the gate does with the storage for a job before starting it: the offload's result, and the memory read.
Read = tuple[OffloadResult | None, tuple[str, str, str] | None]


def read_for_job(setup: Setup, messages: list[BaseMessage], run: Run) -> Steps[Read]:
    """Offload the job's messages and read what its flush reads, in the run (summarize checks that what it covers
    is in the transcript)."""
    if run.storage is None:
        return None, None
    offloaded = None
    if setup.config.offload_before_compact:
        offloaded = yield from guarded("offload", offload_result(messages, run, setup.config), failed_result)
    memory = None
    if setup.config.flush_before_compact and setup.flush_model is not None:
        try:
            memory = yield from read_memory(run, local_now(setup.config.memory.timezone))
        except Exception as exc:  # noqa: BLE001 - no memory this time; the summary goes on
            emit_event({"stage": "flush", "error": describe_error(exc)})
    return offloaded, memory


def prepare_steps(
    setup: Setup,
    meta: dict[str, Any],
    key: tuple[str, str | None],
    messages: list[BaseMessage],
    record: CompactionRecord,
    run: Run,
    read: Read,
    retried: Sequence[int] = (),
) -> Steps[dict[str, Any]]:
    """The job's steps: the summary and the memory model side by side; return the job's record.

    The job calls models only: the gate offloaded and read the memory before
    starting it (``read``), and writes what the job made when it applies it,
    so a job outliving its run never touches a store the application has
    closed. Nothing is removed before the swap, so the summary need not wait
    for the memory. A ready record is published to a storage the thread's
    other workers share, where they find it. ``retried`` is the driver's
    list of the failed calls it made again (``Performer.retried``).
    """
    made = (yield from make_steps(setup, meta, messages, record, run, read)).record()
    if run.storage is not None and getattr(run.storage, "shared", True):
        shared = published(setup, meta, made, bool(retried))
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):  # a worker waiting for it finds nothing else: it would time out
            try:
                yield StorageCall("write_prepared", (run.thread_id, published_key(key), shared))
                break
            except Exception as exc:  # noqa: BLE001 - this worker's own gate still finds the record in its job
                if attempt == PUBLISH_ATTEMPTS:
                    error = f"the prepared summary was not published: {describe_error(exc)}"
                    emit_event({"stage": "background", "error": error})
    return made


def make_steps(
    setup: Setup, meta: dict[str, Any], messages: list[BaseMessage], record: CompactionRecord, run: Run, read: Read
) -> Steps[JobResult]:
    """Yield the summary and the memory model's calls side by side; return what they made.

    A job runs these in the background (``prepare_steps``); the gate runs
    them in the run when a summary is due now and none is ready or coming.
    """
    offloaded, memory = read
    steps: list[Steps[Any]] = [guarded("summarize", summary_result(setup, messages, record, run), failed_result)]
    if memory is not None:
        flush = flush_result(setup, messages, record, run, commit=False, memory=memory)
        steps.append(guarded("flush", flush, failed_result))
    summary, *flushed = yield Parallel(tuple(steps))
    return JobResult(meta, summary, offloaded, flushed[0] if flushed else None, run.usage)


#: How many times a job makes a failed model call again when the failure may pass (``errors.worth_retrying``: a
#: 503, a rate limit), before its summary fails: the agent waits for none of them, and a summary failed at the
#: trigger would hold it for a compaction call in front of its own.
MODEL_RETRIES = 2
#: How many times a job tries to publish what it made (the storage may be restarting) before giving up.
PUBLISH_ATTEMPTS = 3


def published(setup: Setup, meta: dict[str, Any], made: dict[str, Any], retried: bool = False) -> dict[str, Any]:
    """Return what a finished job publishes for the thread's other workers: its record, or that it failed and why.

    A failure is published too, so a worker waiting at the trigger for this
    summary stops waiting at once, with whether the job made a failed call
    again (``tried_again``: its failure may pass, and another job may succeed).
    Either expires once no worker can still be waiting for it
    (``expires_at``; the storage deletes it then).
    """
    if made.get("status") == "ready":
        record = made
    else:
        record = {"id": meta["id"], "status": "failed", "error": made["error"], "tried_again": retried}
    return {**record, "expires_at": _expiry(setup)}


def retrying(setup: Setup, meta: dict[str, Any]) -> dict[str, Any]:
    """Return what a job publishes when it first makes a failed call again: a worker waiting for it goes on meanwhile.

    Its record (``published``) replaces it when the job ends.
    """
    return {"id": meta["id"], "status": RETRYING, "expires_at": _expiry(setup)}


def _expiry(setup: Setup) -> float:
    """Return when a record published now expires: no worker can still be waiting for it then (twice the lease)."""
    return time.time() + 2 * lease_seconds(setup)


def lease_seconds(setup: Setup) -> float:
    """Return how long a worker's lease on a conversation's next summary holds: its job is done by then.

    Each of the job's model calls ends within ``summary.timeout``; the offload
    and the publishing take a little more.
    """
    return (setup.config.summary.timeout or 300.0) + 30.0
