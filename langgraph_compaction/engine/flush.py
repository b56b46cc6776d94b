"""Flush: long-term memories extracted from the evicted prefix into today's ledger, once per message.

A flushed message's id joins ``flushed_ids``; a re-run after a crash finds
its entry's marker in the ledger and writes nothing twice. Memory is best
effort: a failure is recorded and summarizing goes on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from ..memory.ledger import (
    MEMORY_FILE,
    flush_input,
    flush_instruction,
    flush_marker,
    flush_problem,
    flush_prompt,
    has_flush_marker,
    ledger_entry,
    ledger_relpath,
    local_now,
)
from .breaker import breaker_after, read_breaker
from .effects import Run, Steps, state_value
from .events import describe_error, emit_event
from .state import read_compaction

FLUSH = "compaction_flush"


class FlushStage:
    """The flush node (mixed into ``CompactionNodes``); with the agent's model it reuses the summary's cached prefix."""

    def flush(self, state: Any, config: RunnableConfig) -> dict:
        """Extract long-term memories from the evicted prefix into today's ledger."""
        return self._guarded("flush", state, self._flush_steps, self._run(config, state))

    async def aflush(self, state: Any, config: RunnableConfig) -> dict:
        return await self._aguarded("flush", state, self._flush_steps, self._run(config, state))

    def _flush_steps(self, state: Any, run: Run, commit: bool = True) -> Steps:
        """Yield the flush of the evicted prefix; return its update.

        ``commit=False`` (a compaction prepared in the background) asks the
        model but writes nothing: the answer is returned as ``flush_answer``
        and written by ``_commit_flush`` when the summary is applied, so a
        discarded summary leaves no memory behind and every message is
        flushed once, by the compaction that commits.
        """
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        pending = view.get("pending") or {}
        evict = set(pending.get("evict_ids") or [])
        todo = flush_input([m for m in messages if m.id in evict], view["flushed_ids"])
        if not todo or run.storage is None or self.flush_model is None:
            return {}
        breaker = read_breaker(view, self._flush_breaker)
        if (
            breaker["open_until"] > time.time()
        ):  # the model failed too often lately; the transcript keeps these messages
            return {
                "compaction": {
                    "events": [emit_event({"stage": "flush", "note": "skipped: the memory model's breaker is open"})]
                }
            }
        now = local_now(self.config.timezone)
        day = now.date().isoformat()
        marker = flush_marker(m.id for m in todo)
        asking = False  # True while a failure is the model's (its call or its answer), not the storage's
        tripped: dict[str, Any] = {}
        try:
            memory_md = (yield ("storage", "read_memory_file", (run.user_id, MEMORY_FILE))) or ""
            ledger = (yield ("storage", "read_memory_file", (run.user_id, ledger_relpath(day)))) or ""
            entry = None
            if not has_flush_marker(ledger, marker):  # else a re-run after a crash: the entry is there already
                prefix = self._cached_prefix(messages, pending) if self._flush_shares_cache else None
                asking = True
                prompt = {"prompt": self.config.memory_prompt, "instructions": [self.config.memory_instructions]}
                if prefix is not None:  # the summary request shares this prefix: both read it from the cache
                    request: Any = [*prefix, HumanMessage(flush_instruction(memory_md, ledger, day, **prompt))]
                    answer = yield ("model", self._agent_model, (request,))
                else:
                    request = flush_prompt(todo, memory_md, ledger, day, self.config.summarizer_result_chars, **prompt)
                    answer = yield ("model", self.flush_model, (request,))
                if problem := flush_problem(answer):  # not marked flushed: the next compaction asks again
                    raise ValueError(problem)
                asking, tripped = (
                    False,
                    {self._flush_breaker: breaker_after(breaker, None, 0, 0)},
                )  # a success closes it
                if not commit:
                    held = {"text": answer, "ids": [m.id for m in todo], "marker": marker}
                    return {"compaction": {**tripped, "flush_answer": held}}
                entry = yield from self._write_memory(run, answer, marker, now)
        except Exception as exc:  # noqa: BLE001 - memory is best effort; summarizing goes on
            event = emit_event({"stage": "flush", "error": describe_error(exc)})
            if asking:
                tripped = {
                    self._flush_breaker: breaker_after(
                        breaker, event["error"], self.config.breaker_failures, self.config.breaker_cooldown
                    )
                }
            return {"compaction": {"last_error": event["error"], "events": [event], **tripped}}
        return {"compaction": {**tripped, **self._flushed(messages, view, [m.id for m in todo], entry)}}

    def _write_memory(self, run: Run, answer: str, marker: str, now: Any) -> Steps:
        """Append the memory model's answer to the ledger of ``now``'s day once (its marker); return the entry, or None."""

        def compose(current: str) -> str | None:
            # the ledger as it is now, under the storage's lock: another thread's flush may have just written
            if has_flush_marker(current, marker):
                return None
            return ledger_entry(answer, current, now, redact=self.config.redactor, marker=marker)

        _, entry = yield (
            "storage",
            "append_memory_entry",
            (run.user_id, ledger_relpath(now.date().isoformat()), compose),
        )
        return entry

    def _flushed(self, messages: Sequence[BaseMessage], view: dict, ids: Sequence[str], entry: str | None) -> dict:
        """Return the ``compaction`` update of a committed flush: the cursor advanced over ``ids``, and its event."""
        flushed = set(view["flushed_ids"]) | set(ids)
        written = entry.count("\n- ") if entry else 0
        return {
            "flushed_ids": [m.id for m in messages if m.id in flushed],
            "events": [emit_event({"stage": "flush", "flushed_messages": len(ids), "memories": written})],
        }

    def _commit_flush(self, messages: Sequence[BaseMessage], view: dict, held: dict | None, run: Run) -> Steps:
        """Write a prepared flush answer (``held``) and advance the cursor; return the ``compaction`` update.

        Messages flushed since it was prepared are left out by advancing the
        cursor only; a failed write is recorded and the messages stay
        unflushed, so the next compaction asks again.
        """
        if not held or run.storage is None:
            return {}
        try:
            entry = yield from self._write_memory(run, held["text"], held["marker"], local_now(self.config.timezone))
        except Exception as exc:  # noqa: BLE001 - memory is best effort; the summary is applied all the same
            event = emit_event({"stage": "flush", "error": describe_error(exc)})
            return {"last_error": event["error"], "events": [event]}
        return self._flushed(messages, view, held["ids"], entry)
