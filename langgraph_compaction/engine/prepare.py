"""A compaction job, the part of background compaction that runs next to the agent.

The gate offloads what a job covers and reads the memory files before
starting it (``read_for_job``); the job then calls the models only: the
summary and the memory model's answer side by side (``prepare_steps``), and
returns a record the gate applies later (``job_record``). A ready record is
published to a storage the conversation's other workers share.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, message_to_dict

from ..core.conversation import leading_systems
from ..memory.ledger import local_now
from .driver import guarded
from .effects import Parallel, Steps, StorageCall
from .events import describe_error, emit_event
from .flush import flush_steps, read_memory
from .offload import offload_steps
from .run import Run
from .setup import Setup
from .state import CompactionRecord
from .summarize import summarize_steps


def job_key(run: Run, messages: Sequence[BaseMessage]) -> tuple:
    """Return the key of a conversation's job: its thread and its first message after the system prompt.

    An agent and its subagents share a thread but not their first message.
    """
    lead = leading_systems(messages)
    return run.thread_id, messages[lead].id if lead < len(messages) else None


def published_key(key: tuple) -> str:
    """Return the name a conversation's prepared summary is published under in the storage."""
    return str(key[1] or "conversation")


#: What the gate does with the storage for a job before starting it: the offload's update, and the memory read.
Read = tuple[list[dict], tuple[str, str, str] | None]


def read_for_job(setup: Setup, messages: list[BaseMessage], run: Run) -> Steps[Read]:
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
    if run.storage is not None and getattr(run.storage, "shared", True):
        try:
            yield StorageCall("write_prepared", (run.thread_id, published_key(key), published(setup, meta, made)))
        except Exception as exc:  # noqa: BLE001 - this worker's own gate still finds the record in its job
            emit_event(
                {"stage": "background", "error": f"the prepared summary was not published: {describe_error(exc)}"}
            )
    return made


def published(setup: Setup, meta: dict, made: dict) -> dict:
    """Return what a finished job publishes for the thread's other workers: its record, or that it failed and why.

    A failure is published too, so a worker waiting at the trigger for this
    summary stops waiting at once. Either expires once no worker can still be
    waiting for it (``expires_at``; the storage deletes it then).
    """
    record = made if made.get("status") == "ready" else {"id": meta["id"], "status": "failed", "error": made["error"]}
    return {**record, "expires_at": time.time() + 2 * lease_seconds(setup)}


def job_record(setup: Setup, meta: dict, side: list[dict], summary: dict, usage: dict) -> dict:
    """Return a finished job's record: the prepared summary ready to apply, or why there is none."""
    done = summary.get("compaction") or {}
    breakers = {k: v for u in [*side, summary] for k, v in (u.get("compaction") or {}).items() if k.endswith("breaker")}
    # what the memory model's side said went wrong (a failure, an open breaker): the gate streams it and keeps it
    notes = [
        e for u in side for e in (u.get("compaction") or {}).get("events") or () if e.get("note") or e.get("error")
    ]
    # what the provider's compaction said (its bill, what it had dropped): kept as a blocking compaction keeps it
    notes += [e for e in done.get("events") or () if e.get("native") or e.get("observed")]
    if not done.get("summary_id"):
        return {"error": _why_none(done), "breakers": breakers, "notes": notes, "usage": usage}
    events: list[dict] = done.get("events") or []
    event: dict = next((e for e in events if e.get("stage") == "summarize" and "tokens_after" in e), {})
    return {
        **meta,
        "status": "ready",
        "summary": _summary_of(setup, done, summary),
        "pins": done.get("pins") or [],
        "kind": next(iter(done.get("counts") or {"summarize": 1})),
        "offload_path": done.get("offload_path"),
        "flush": next((u["flush_answer"] for u in side if "flush_answer" in u), None),
        "tokens_after": event.get("tokens_after"),
        "fallback": event.get("error"),
        "usage": usage,
        "breakers": breakers,
        "notes": notes,
        "ready_at": time.time(),
    }


def _why_none(done: dict) -> str:
    """Return why a job made no summary: its error, else its first note."""
    notes = (e.get("note") for e in done.get("events") or [] if e.get("note"))
    return done.get("last_error") or next(notes, None) or "no summary was made"


def _summary_of(setup: Setup, done: dict, summary: dict) -> dict:
    """Return the summary message a job made, as a dict (the view's in view mode)."""
    if setup.config.mode == "view":
        return done["view"]["summary"]
    return next(message_to_dict(m) for m in summary["messages"] if getattr(m, "id", None) == done["summary_id"])


def lease_seconds(setup: Setup) -> float:
    """Return how long a worker's lease on a conversation's next summary holds: its job is done by then.

    Each of the job's model calls ends within ``summary.timeout``; the offload
    and the publishing take a little more.
    """
    return (setup.config.summary.timeout or 300.0) + 30.0
