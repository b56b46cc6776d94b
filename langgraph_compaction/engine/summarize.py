"""Summarize: the join of flush and offload, replacing the evicted prefix by one structured summary.

It removes nothing whose offload is not durable, never applies a summary
that fails the checks (empty, placeholder, over the target, no shrink), and
falls back to the extractive summary when the model fails too often (the
breaker) or the request would not fit the window otherwise. With the agent's
own model it sends the agent's request up to the cut, so the provider's
prompt cache serves that prefix.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ..core.config import model_context_window
from ..core.conversation import is_injected
from ..core.fidelity import complete_summary
from ..core.hooks import CompactionInfo, before_summary_answer, injected_messages
from ..core.plan import compacted_view, over_budget_reason
from ..core.redact import redact_record, redact_secrets
from ..core.summary import (
    build_summary_message,
    chunk_for_window,
    compaction_note,
    extractive_summary,
    finish_summary,
    render_messages,
    summary_instruction,
    summary_problem,
    summary_prompt,
)
from ..core.tokens import estimate_text_tokens
from ..core.view import kept_edits, view_record
from ..core.working_set import working_set_note
from ..storage import message_records
from .breaker import breaker_after, read_breaker
from .effects import Run, Steps, state_value
from .errors import is_context_overflow, overflow_figures
from .events import describe_error, emit_event
from .state import read_compaction

SUMMARIZE = "compaction_summarize"

#: Tokens left free in the summarizer's window besides a reused prefix: the instruction and the answer.
PREFIX_ALLOWANCE = 4_000


class SummarizeStage:
    """The summarize node and the summarizer's request (mixed into ``CompactionNodes``)."""

    def summarize(self, state: Any, config: RunnableConfig) -> dict:
        """Replace the evicted prefix by one structured summary (the join of flush and offload)."""
        return self._guarded("summarize", state, self._summarize_steps, self._run(config, state))

    async def asummarize(self, state: Any, config: RunnableConfig) -> dict:
        return await self._aguarded("summarize", state, self._summarize_steps, self._run(config, state))

    def _cached_prefix(self, messages: Sequence[BaseMessage], pending: dict) -> list[BaseMessage] | None:
        """Return the agent's own request up to the cut (system prompt first), or None when it cannot be reused.

        It cannot after an overflow (the agent's request was refused as too
        long) or when it may not fit the summarizer's window.
        """
        if pending.get("reason") == "overflow":
            return None
        cutoff_id = pending.get("cutoff_id")
        end = (
            next((i for i, m in enumerate(messages) if m.id == cutoff_id), len(messages))
            if cutoff_id
            else len(messages)
        )
        prefix = [*self._head, *messages[:end]]
        if self.counter.total(prefix) + self.fixed_tokens + PREFIX_ALLOWANCE > self._summarizer_window():
            return None
        return prefix

    def _summarizer_window(self) -> int:
        return (
            self.config.summarizer_context_window
            or model_context_window(self.model)
            or self.budget.context_window
            or self.config.fallback_trigger_tokens
        )

    def _summarizer_budget(self) -> int:
        window = self._summarizer_window()
        return max(1_000, window - min(self.config.reserved, window // 2) - 1_500)

    def _summary_text(
        self,
        evicted: Sequence[BaseMessage],
        focus: str | None,
        budget: int | None = None,
        prefix: list[BaseMessage] | None = None,
        instructions: Sequence[str | None] = (),
    ) -> Steps:
        """Yield summarizer calls (split and merged when the prefix is over its window); return (text, problem).

        With ``prefix`` (the agent's own request up to the cut, see
        ``_cached_prefix``) one call sends it followed by the instruction.
        When the summarizer refuses a part as too long (its window is smaller
        than configured), the prefix is split again into parts half as large.
        ``instructions`` (the application's, this summary's) are added to the
        prompt (``summary_prompt`` when configured, else the built-in one).
        """
        prompt = {
            "prompt": self.config.summary_prompt,
            "instructions": [self.config.summary_instructions, *instructions],
        }
        if prefix is not None:
            try:
                answer = yield (
                    "model",
                    self._agent_model,
                    ([*prefix, HumanMessage(summary_instruction(focus, **prompt))],),
                )
            except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
                if is_context_overflow(exc):  # the rendered transcript shortens long results and can be split
                    return (yield from self._summary_text(evicted, focus, instructions=instructions))
                return None, f"the summarizer failed: {describe_error(exc)}"
            problem = summary_problem(answer)
            return (None, problem) if problem else (answer, None)
        budget = budget or self._summarizer_budget()
        text: str | None = None
        shown = self.config.summarizer_result_chars
        # the counts are known: only a prefix that may not fit is rendered and measured piece by piece
        fits = self.counter.total(evicted) * 1.2 + 500 < budget
        for chunk in [list(evicted)] if fits else chunk_for_window(evicted, budget, estimate_text_tokens, shown):
            inputs = ([build_summary_message(text)] if text else []) + list(chunk)
            try:
                answer = yield ("model", self.model, (summary_prompt(render_messages(inputs, shown), focus, **prompt),))
            except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
                window, _ = overflow_figures(exc)
                smaller = min(budget // 2, (window or budget) // 2)
                if is_context_overflow(exc) and smaller >= 250:
                    return (yield from self._summary_text(evicted, focus, smaller, instructions=instructions))
                return None, f"the summarizer failed: {describe_error(exc)}"
            problem = summary_problem(answer)
            if problem:
                return None, problem
            text = answer
        return text, None

    def _record_summary(self, summary: BaseMessage, run: Run, offload_on: bool) -> Steps:
        """Write the summary to the transcript now (it names what it covers, so recall can open it); return events.

        A failure is an event only: the summary stays in the state, and the
        next offload writes it.
        """
        if not offload_on:
            return []
        records = message_records([summary])
        if self.config.redact_transcripts:
            records = [redact_record(r, self.config.redactor or redact_secrets) for r in records]
        try:
            yield ("storage", "append_transcript", (run.thread_id, records))
        except Exception as exc:  # noqa: BLE001 - the summary is committed either way
            return [
                emit_event(
                    {
                        "stage": "summarize",
                        "error": f"the summary was not written to the transcript: {describe_error(exc)}",
                    }
                )
            ]
        return []

    def _summarize_steps(self, state: Any, run: Run) -> Steps:
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        pending = view.get("pending")
        if not pending:
            return {}
        evict_ids = set(pending.get("evict_ids") or [])
        # what an after_compaction hook placed after the last summary is replaced, not summarized again
        evicted = [m for m in messages if m.id in evict_ids and not is_injected(m)]
        done = {"pending": None, "manual": None}
        offload_on = self.config.offload_before_compact and run.storage is not None
        if not evicted:
            return {"compaction": done}
        if offload_on and not evict_ids.issubset(view["offloaded_ids"]):
            event = emit_event({"stage": "summarize", "error": "offload did not complete; nothing was removed"})
            return {"compaction": {**done, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}

        path = view.get("offload_path") if offload_on else None
        note = compaction_note(evicted, sum(self.counter.counts(evicted)), path)
        if run.budget.working_set_tokens:  # the files kept after the summary, and the ones it took
            note = "\n".join(filter(None, (note, working_set_note(messages, evict_ids))))

        covers = [m.id for m in evicted]

        def compose(body: str) -> tuple:
            """Return (text, pins, summary message, compacted messages, their tokens) for one summary body."""
            body, pins = complete_summary(
                body,
                evicted,
                pins=view["pins"],
                settings=self.config.fidelity,
                redactor=self.config.redactor or redact_secrets,
            )
            summary = build_summary_message(finish_summary(body, note), path, evicted=len(evicted), covers=covers)
            result = compacted_view(messages, evict_ids, summary)
            return body, pins, summary, result, self.counter.total(result)

        info = CompactionInfo(
            thread_id=run.thread_id,
            user_id=run.user_id,
            reason=pending.get("reason"),
            tokens_before=pending.get("tokens_before") or self.counter.total(messages),
            messages=list(evicted),
            transcript_path=path,
            focus=pending.get("focus"),
        )
        hook_events: list[dict] = []
        extra, skip = None, False
        if self.config.before_summary is not None:
            try:
                extra, skip = before_summary_answer((yield ("hook", self.config.before_summary, (info,))))
            except Exception as exc:  # noqa: BLE001 - a failing hook changes nothing: the summary is made as configured
                hook_events.append(
                    emit_event({"stage": "summarize", "hook": "before_summary", "error": describe_error(exc)})
                )
        breaker = read_breaker(view)
        breaker_events: list[dict] = []
        composed = None
        if skip:  # the application asked for no model call: the extractive summary, as when the summarizer fails
            text, problem, kind = extractive_summary(evicted), None, "extractive"
            hook_events.append(
                emit_event({"stage": "summarize", "hook": "before_summary", "note": "skipped the summarizer"})
            )
        elif self.model is None or breaker["open_until"] > time.time():
            # no summarizer, or it failed too often lately: the deterministic summary is the summary
            text, problem, kind = extractive_summary(evicted), None, "extractive"
        else:
            prefix = self._cached_prefix(messages, pending) if self._summary_shares_cache else None
            text, problem = yield from self._summary_text(
                evicted, pending.get("focus"), prefix=prefix, instructions=[extra]
            )
            kind = "summarize"
            if not problem:
                # a well-formed but endless answer fails too (invariant 3): it misses the target where the
                # extractive summary meets it, or it does not even shrink the context
                composed = compose(text)
                target = pending.get("target_tokens") or run.budget.target_tokens
                if composed[4] > target:
                    fallback = compose(extractive_summary(evicted))
                    if fallback[4] < composed[4] and (
                        fallback[4] <= target or composed[4] >= self.counter.total(messages)
                    ):
                        problem = f"the summary would leave {composed[4]:,} tokens, over the target of {target:,}"
                        composed, kind = fallback, "extractive"
            breaker = breaker_after(breaker, problem, self.config.breaker_failures, self.config.breaker_cooldown)
            if breaker["open_until"]:
                breaker_events.append(
                    emit_event(
                        {
                            "stage": "summarize",
                            "breaker": "open",
                            **breaker,
                            "error": f"{problem}; using extractive summaries",
                        }
                    )
                )
            done = {**done, "breaker": breaker}
        if problem and composed is None:  # the model gave no usable answer at all
            urgent = pending.get("reason") == "overflow" or breaker["open_until"]
            if not urgent and pending.get("tokens_after_layers", 0) < run.budget.hard_limit:
                event = emit_event(
                    {"stage": "summarize", "error": f"{problem}; history kept (it still fits the window)"}
                )
                return {
                    "compaction": {**done, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}
                }
            text, kind = extractive_summary(evicted), "extractive"
        text, pins, summary, result, after = composed or compose(text)
        injected: list[BaseMessage] = []
        if self.config.after_compaction is not None:
            made = dataclasses.replace(info, summary=text, summary_id=summary.id)
            try:
                injected = injected_messages((yield ("hook", self.config.after_compaction, (made,))), summary.id)
            except Exception as exc:  # noqa: BLE001 - a failing hook adds nothing; the summary stands
                hook_events.append(
                    emit_event({"stage": "summarize", "hook": "after_compaction", "error": describe_error(exc)})
                )
            if injected:  # counted like every message: a compaction that would not shrink with them is refused below
                result = compacted_view(messages, evict_ids, summary, injected)
                after = self.counter.total(result)
        before = self.counter.total(messages)
        if after >= before:  # no progress, whatever the reason (a manual request too): keep the history
            why = over_budget_reason(
                result, self.counter.counts(result), run.budget.trigger_tokens
            )  # invariant 3: say why
            note = f"the summary would not shrink the context ({before:,} -> {after:,} tokens); history kept"
            event = {"stage": "summarize", "note": note, "tokens_before": before, "tokens_after": before}
            event = emit_event({**event, **({"over_budget": why} if why else {})})
            return {"compaction": {**done, "events": [*hook_events, event], "cooldown_id": messages[-1].id}}
        applied = {"reason": pending.get("reason"), "usage": dict(run.usage)}
        if pending.get("reason") != "background":  # a background job's summary is applied later, by the gate
            applied = {"event": "compaction_applied", "mode": "blocking", **applied}
        update = self._summary_update(
            messages,
            view,
            evict_ids,
            pending.get("cutoff_id"),
            summary,
            pins,
            kind,
            path,
            run,
            event={**applied, **({"error": problem} if problem else {})},
            injected=injected,
        )
        # a background job's summary is written when the gate applies it (a discarded one replaced nothing)
        written = (
            [] if pending.get("reason") == "background" else (yield from self._record_summary(summary, run, offload_on))
        )
        update["compaction"] = {
            **done,
            **update["compaction"],
            "events": [*hook_events, *breaker_events, *written, *update["compaction"]["events"]],
            **({"last_error": problem} if problem else {}),
        }
        return update

    def _summary_update(
        self,
        messages: Sequence[BaseMessage],
        view: dict,
        evict_ids: set,
        cutoff_id: str | None,
        summary: BaseMessage,
        pins: list,
        kind: str,
        path: str | None,
        run: Run,
        event: dict,
        injected: Sequence[BaseMessage] = (),
    ) -> dict:
        """Return the state update that replaces the evicted messages by ``summary`` (rewrite) or records the view.

        ``event`` adds to the summarize event (what made the summary, and how); ``injected`` (an
        ``after_compaction`` hook's messages) follow the summary.
        """
        result = compacted_view(messages, evict_ids, summary, injected)
        counts = self.counter.counts(result)
        before, after = self.counter.total(messages), sum(counts)
        why = over_budget_reason(result, counts, run.budget.trigger_tokens)  # invariant 3: say why
        evicted = [m.id for m in messages if m.id in evict_ids]
        done: dict[str, Any] = {}
        if self.config.mode == "view":  # the state keeps every message; the record rebuilds the model's view
            done["view"] = view_record(messages, evict_ids, cutoff_id, summary, injected)
            done["view_edits"] = kept_edits(view.get("view_edits"), result)
        event = emit_event(
            {
                "stage": "summarize",
                "layer": kind,
                **event,
                "tokens_before": before,  # the state as summarize found it (the gate's edits may not have landed)
                "tokens_after": after,
                **({"over_budget": why} if why else {}),
                "cutoff_id": cutoff_id,
                "evicted": len(evicted),
                "evicted_ids": evicted,
                **({"injected": len(injected)} if injected else {}),
                "offload_path": path,
            }
        )
        return {
            **({} if self.config.mode == "view" else {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result]}),
            "compaction": {
                **done,
                "summary_id": summary.id,
                "pins": pins,
                "cutoff_id": cutoff_id,
                "offload_path": path,
                "counts": {kind: 1},
                "edited_messages": {kind: len(evicted)},
                "events": [event],
                "cooldown_id": result[-1].id,
                "prepared": None,  # a summary prepared in the background covered what this one replaced
            },
        }
