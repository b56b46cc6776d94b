"""Flush: long-term memories extracted from the evicted prefix into today's ledger, once per message.

A flushed message's id joins ``flushed_ids``, and its entry's marker names
it by content (``memory.ledger.content_key``): a flush run again (a crash, a
client's retry whose tools ran again under new ids, another worker) finds in
the ledger the messages it came from and asks the model only about the
others. Memory is best effort: a failure is recorded and summarizing goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from ..core.conversation import is_user_turn, text_of
from ..memory.ledger import (
    MEMORY_FILE,
    content_key,
    flush_input,
    flush_instruction,
    flush_marker,
    flush_prompt,
    flushed_keys,
    ledger_entry,
    ledger_relpath,
    local_now,
    memory_answer,
)
from .breaker import breaker_after, is_open
from .effects import CallModel, Steps, StorageCall
from .events import describe_error, emit_event
from .results import FlushResult, HeldFlush
from .run import Run
from .setup import Setup
from .state import Breaker, CompactionRecord, Pending, read_breaker
from .summary_request import cached_prefix

FLUSH = "compaction_flush"


def _ask(
    setup: Setup,
    messages: Sequence[BaseMessage],
    todo: list[BaseMessage],
    record: CompactionRecord,
    memory_md: str,
    ledger: str,
    day: str,
) -> Steps[str]:
    """Ask the memory model for the memories of ``todo``; return its answer."""
    memory = setup.config.memory
    pending: Pending | dict[str, Any] = record["pending"] or {}
    prefix = cached_prefix(setup, messages, pending) if setup.flush_shares_cache else None
    if prefix is not None:  # the summary request shares this prefix: both read it from the cache
        instruction = flush_instruction(
            memory_md, ledger, day, prompt=memory.prompt, instructions=[memory.instructions]
        )
        request = [*prefix, HumanMessage(instruction)]
        shared: str = yield CallModel(setup.agent_model, request)
        return shared
    text = flush_prompt(
        todo,
        memory_md,
        ledger,
        day,
        setup.config.summary.result_chars,
        prompt=memory.prompt,
        instructions=[memory.instructions],
    )
    answer: str = yield CallModel(setup.flush_model, text)
    return answer


def read_memory(run: Run, now: Any) -> Steps[tuple[str, str, str]]:
    """Read what a flush reads: ``MEMORY.md``, and the ledgers of ``now``'s day and the day before."""
    memory_md = (yield StorageCall("read_memory_file", (run.user_id, MEMORY_FILE))) or ""
    ledger = (yield StorageCall("read_memory_file", (run.user_id, ledger_relpath(now.date().isoformat())))) or ""
    # a retry just after midnight finds the first attempt's entry in yesterday's ledger
    yesterday = (yield StorageCall("read_memory_file", (run.user_id, _day_before(now)))) or ""
    return memory_md, ledger, yesterday


def flush_result(
    setup: Setup,
    messages: Sequence[BaseMessage],
    record: CompactionRecord,
    run: Run,
    commit: bool = True,
    memory: tuple[str, str, str] | None = None,
) -> Steps[FlushResult]:
    """Yield the flush of the evicted prefix; return what it did.

    ``commit=False`` (a compaction prepared in the background) asks the model
    but writes nothing: the answer is held (``FlushResult.held``) and written
    by ``commit_flush`` when the summary is applied, so a discarded summary
    leaves no memory behind and every message is flushed once, by the
    compaction that commits. ``memory`` is what ``read_memory`` read, when
    the caller read it (a background job touches no storage of its own).
    """
    pending = record["pending"]
    evict = set(pending["evict_ids"]) if pending else set()
    todo = flush_input([m for m in messages if m.id in evict], record["flushed_ids"])
    if not todo or run.storage is None or setup.flush_model is None:
        return FlushResult()
    key = setup.flush_breaker
    breaker = read_breaker(record[key])  # type: ignore[literal-required]
    if is_open(breaker):  # the model failed too often lately; the transcript keeps these messages
        return FlushResult(
            events=(emit_event({"stage": "flush", "note": "skipped: the memory model's breaker is open"}),)
        )
    now = local_now(setup.config.memory.timezone)
    day = now.date().isoformat()
    asking = False  # True while a failure is the model's (its call or its answer), not the storage's
    tripped: dict[str, Breaker] = {}
    try:
        memory_md, ledger, yesterday = memory if memory is not None else (yield from read_memory(run, now))
        known = flushed_keys(ledger, yesterday)
        asked = [
            m for m in todo if content_key(m, run.thread_id) not in known
        ]  # the others' memories are in the ledger already
        entry = None
        if asked:
            asking = True
            read = memory_answer(
                (yield from _ask(setup, messages, asked, record, memory_md, ledger, day)),
                requests=[text_of(m) for m in messages if is_user_turn(m)],
                prompt=setup.config.memory.prompt,
            )
            if read.problem:  # not marked flushed: the next compaction asks again
                raise ValueError(read.problem)
            answer, asking = read.text, False
            if key == "flush_breaker":  # a success closes the memory model's own breaker; a shared one is the
                tripped = {key: breaker_after(breaker, None, 0, 0)}  # summarizer's answers to close
            marker = flush_marker(asked, run.thread_id)
            if not commit:
                return FlushResult(held=HeldFlush(answer, tuple(m.id for m in todo), marker), breakers=tripped)
            entry = yield from write_memory(setup, run, answer, marker, now)
    except Exception as exc:  # noqa: BLE001 - memory is best effort; summarizing goes on
        event = emit_event({"stage": "flush", "error": describe_error(exc)})
        if asking:
            cfg = setup.config
            tripped = {
                key: breaker_after(breaker, event["error"], cfg.guards.breaker_failures, cfg.guards.breaker_cooldown)
            }
        return FlushResult(events=(event,), breakers=tripped, last_error=event["error"])
    ids = [m.id for m in todo if m.id is not None]  # all of them: they were picked by id
    return dataclasses.replace(flushed(messages, record, ids, entry), breakers=tripped)


def write_memory(setup: Setup, run: Run, answer: str, marker: str, now: Any) -> Steps[str | None]:
    """Append the memory model's answer to the ledger of ``now``'s day once (its marker); return the entry, or None."""

    def compose(current: str) -> str | None:
        # the ledger as it is now, under the storage's lock: another flush may have just written one of these
        # messages' memories (a retry's first attempt, another worker)
        if flushed_keys(current) & flushed_keys(marker):
            return None
        return ledger_entry(answer, current, now, redact=setup.config.guards.redactor, marker=marker)

    relpath = ledger_relpath(now.date().isoformat())
    written: tuple[str, str | None] = yield StorageCall("append_memory_entry", (run.user_id, relpath, compose))
    return written[1]


def _day_before(now: Any) -> str:
    return ledger_relpath((now - timedelta(days=1)).date().isoformat())


def flushed(
    messages: Sequence[BaseMessage], record: CompactionRecord, ids: Sequence[str], entry: str | None
) -> FlushResult:
    """Return the result of a committed flush: the cursor advanced over ``ids``, and its event."""
    done = set(record["flushed_ids"]) | set(ids)
    written = entry.count("\n- ") if entry else 0
    event = emit_event({"stage": "flush", "flushed_messages": len(ids), "memories": written})
    return FlushResult(events=(event,), flushed_ids=tuple(m.id for m in messages if m.id in done))


def commit_flush(
    setup: Setup, messages: Sequence[BaseMessage], record: CompactionRecord, held: dict[str, Any] | None, run: Run
) -> Steps[FlushResult]:
    """Write a prepared flush answer (``held``) and advance the cursor; return what it did.

    Messages flushed since it was prepared are left out by advancing the
    cursor only; a failed write is recorded and the messages stay unflushed,
    so the next compaction asks again.
    """
    if not held or run.storage is None:
        return FlushResult()
    try:
        now = local_now(setup.config.memory.timezone)
        entry = yield from write_memory(setup, run, held["text"], held["marker"], now)
    except Exception as exc:  # noqa: BLE001 - memory is best effort; the summary is applied all the same
        event = emit_event({"stage": "flush", "error": describe_error(exc)})
        return FlushResult(events=(event,), last_error=event["error"])
    return flushed(messages, record, held["ids"], entry)
