"""Summarize: the join of flush and offload, replacing the evicted prefix by one structured summary.

It removes nothing whose offload is not durable, never applies a summary
that fails the checks (empty, placeholder, over the target, no shrink), and
falls back to the extractive summary when the model fails too often (the
breaker) or the request would not fit the window otherwise. The request
itself is built in ``summary_request``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict

from ..core.config import Budget
from ..core.conversation import is_injected
from ..core.fidelity import complete_summary
from ..core.hooks import CompactionInfo, before_summary_answer, injected_messages, pairing_problem
from ..core.plan import compacted_view, over_budget_reason, plan_compaction
from ..core.redact import redact_secrets
from ..core.summary import build_summary_message, compaction_note, extractive_summary, finish_summary, own_summary
from ..core.view import kept_edits, view_record
from ..core.working_set import working_set_note
from .breaker import breaker_after, is_open
from .effects import CallHook, Steps, StorageCall
from .events import describe_error, emit_event
from .native import native_answer, observed
from .offload import transcript_records
from .results import Applied, SummaryResult
from .run import Run
from .setup import Setup
from .state import Breaker, CompactionRecord, Pending, read_breaker
from .summary_request import cached_prefix, summary_text

SUMMARIZE = "compaction_summarize"


@dataclass(frozen=True)
class Composed:
    """One summary made from a body: its text, the pins it keeps, the message, the compacted messages, their tokens."""

    text: str
    pins: list[Any]
    summary: BaseMessage
    result: list[BaseMessage]
    tokens: int


@dataclass
class Draft:
    """What a summary of one pending request is made of: the messages it replaces and the note it ends with."""

    setup: Setup
    messages: list[BaseMessage]
    evict_ids: set[str]
    evicted: list[BaseMessage]
    pins: list[Any]
    path: str | None
    note: str
    #: The agent's context window: it sets the pins' budget (``core.pins``).
    window: int | None = None

    def compose(self, body: str, injected: Sequence[BaseMessage] = ()) -> Composed:
        """Return the summary of ``body`` (its deterministic parts completed) and what the context becomes with it."""
        config = self.setup.config
        redactor = config.guards.redactor or redact_secrets
        text, pins = complete_summary(
            body, self.evicted, pins=self.pins, settings=config.fidelity, redactor=redactor, window=self.window
        )
        covers = [m.id for m in self.evicted if m.id is not None]  # all of them: they were picked by id
        summary = build_summary_message(
            finish_summary(text, self.note), self.path, evicted=len(self.evicted), covers=covers
        )
        result = compacted_view(self.messages, self.evict_ids, summary, injected)
        return Composed(text, pins, summary, result, self.setup.counter.total(result))


def draft_of(
    setup: Setup, messages: list[BaseMessage], record: CompactionRecord, pending: Pending, run: Run, offload_on: bool
) -> Draft:
    """Return the draft of the summary ``pending`` asks for."""
    evict_ids = set(pending["evict_ids"])
    # what an after_compaction hook placed after the last summary is replaced, not summarized again
    evicted = [m for m in messages if m.id in evict_ids and not is_injected(m)]
    path = record["offload_path"] if offload_on else None
    note = compaction_note(evicted, sum(setup.counter.counts(evicted)), path)
    if run.budget.working_set_tokens:  # the files kept after the summary, and the ones it took
        note = "\n".join(filter(None, (note, working_set_note(messages, evict_ids))))
    return Draft(setup, messages, evict_ids, evicted, record["pins"], path, note, run.budget.context_window)


def _failed(breaker: Breaker | None, error: str) -> SummaryResult:
    event = emit_event({"stage": "summarize", "error": error})
    return SummaryResult(events=(event,), last_error=event["error"], failed=True, breaker=breaker)


def _ask_before(setup: Setup, info: CompactionInfo, events: list[dict[str, Any]]) -> Steps[tuple[str | None, bool]]:
    """Call ``before_summary``; return (extra instructions for this summary, skip the summarizer)."""
    if setup.config.summary.before_summary is None:
        return None, False
    try:
        return before_summary_answer((yield CallHook(setup.config.summary.before_summary, (info,))))
    except Exception as exc:  # noqa: BLE001 - a failing hook changes nothing: the summary is made as configured
        events.append(emit_event({"stage": "summarize", "hook": "before_summary", "error": describe_error(exc)}))
        return None, False


@dataclass
class Made:
    """What the summarizer made of a draft: a composed summary, or a body still to compose, and how."""

    kind: str
    body: str | None = None
    composed: Composed | None = None
    problem: str | None = None
    breaker: Breaker | None = None


def _checked(draft: Draft, text: str, target: int) -> tuple[Composed, str | None, str]:
    """Return (the summary to use, why the model's was refused, its kind) for a model's well-formed answer.

    A well-formed but endless answer fails too: it misses the target where the
    extractive summary meets it, or it does not even shrink the context.
    """
    composed = draft.compose(text)
    if composed.tokens > target:
        fallback = draft.compose(extractive_summary(draft.evicted))
        no_shrink = composed.tokens >= draft.setup.counter.total(draft.messages)
        if fallback.tokens < composed.tokens and (fallback.tokens <= target or no_shrink):
            return (
                fallback,
                f"the summary would leave {composed.tokens:,} tokens, over the target of {target:,}",
                "extractive",
            )
    return composed, None, "summarize"


def _make(
    setup: Setup,
    draft: Draft,
    record: CompactionRecord,
    pending: Pending,
    run: Run,
    extra: str | None,
    skip: bool,
    events: list[dict[str, Any]],
) -> Steps[Made]:
    """Yield the summarizer's calls (or none) and return what was made."""
    breaker = read_breaker(record["breaker"])
    if skip:  # the application asked for no model call: the extractive summary, as when the summarizer fails
        events.append(emit_event({"stage": "summarize", "hook": "before_summary", "note": "skipped the summarizer"}))
        return Made("extractive", body=extractive_summary(draft.evicted))
    if setup.model is None or is_open(breaker):
        # no summarizer, or it failed too often lately: the deterministic summary is the summary
        return Made("extractive", body=extractive_summary(draft.evicted))
    native = yield from native_answer(setup, draft.evicted, pending["focus"], [extra], run, events)
    text: str | None = native.text if native is not None else None  # the provider wrote it (summary.native)
    problem: str | None = None
    if native is None:
        prefix = cached_prefix(setup, draft.messages, pending) if setup.summary_shares_cache else None
        read = observed(draft.evicted, events)  # what a provider compacted itself is not summarized again
        text, problem = yield from summary_text(setup, read, pending["focus"], prefix=prefix, instructions=[extra])
    made = Made("summarize", problem=problem)
    if text is not None and not problem:
        text, dropped = own_summary(text, setup.config.summary.prompt)  # a looped tail, the prompt's lines
        if dropped:
            events.append(emit_event({"stage": "summarize", "note": dropped}))
        made.composed, made.problem, made.kind = _checked(
            draft, text, pending["target_tokens"] or run.budget.target_tokens
        )
        if native is not None and made.kind == "summarize":
            made.composed = native.kept_in(made.composed)
    cfg = setup.config
    made.breaker = breaker_after(breaker, made.problem, cfg.guards.breaker_failures, cfg.guards.breaker_cooldown)
    if made.breaker["open_until"]:
        error = f"{made.problem}; using extractive summaries"
        events.append(emit_event({"stage": "summarize", "breaker": "open", **made.breaker, "error": error}))
    return made


def ask_after(setup: Setup, info: CompactionInfo, events: list[dict[str, Any]]) -> Steps[list[BaseMessage]]:
    """Call ``after_compaction`` for the summary ``info`` names; return the messages it places right after it.

    Messages that would break tool-call pairing (a bare result, a call
    without its result) are refused, with an event.
    """
    if setup.config.summary.after_compaction is None or info.summary_id is None:
        return []
    try:
        answer = yield CallHook(setup.config.summary.after_compaction, (info,))
        injected = injected_messages(answer, info.summary_id)
    except Exception as exc:  # noqa: BLE001 - a failing hook adds nothing; the summary stands
        events.append(emit_event({"stage": "summarize", "hook": "after_compaction", "error": describe_error(exc)}))
        return []
    if problem := pairing_problem(injected):  # an orphan result or an unanswered call would be in every request
        error = f"its messages were refused, they would break tool-call pairing: {problem}"
        events.append(emit_event({"stage": "summarize", "hook": "after_compaction", "error": error}))
        return []
    return injected


def record_summary(setup: Setup, summary: BaseMessage, run: Run, offload_on: bool) -> Steps[list[dict[str, Any]]]:
    """Write the summary to the transcript now (it names what it covers, so recall can open it); return events.

    A failure is an event only: the summary stays in the state, and the next
    offload writes it.
    """
    if not offload_on:
        return []
    try:
        yield StorageCall("append_transcript", (run.thread_id, transcript_records([summary], setup.config)))
    except Exception as exc:  # noqa: BLE001 - the summary is committed either way
        error = f"the summary was not written to the transcript: {describe_error(exc)}"
        return [emit_event({"stage": "summarize", "error": error})]
    return []


def _no_progress(
    setup: Setup,
    messages: list[BaseMessage],
    made: Made,
    result: list[BaseMessage],
    run: Run,
    events: list[dict[str, Any]],
) -> SummaryResult:
    """Return the result of a summary that would not shrink the context: the history is kept, and why."""
    before, after = setup.counter.total(messages), setup.counter.total(result)
    why = over_budget_reason(result, setup.counter.counts(result), run.budget.trigger_tokens)  # invariant 3: say why
    note = f"the summary would not shrink the context ({before:,} -> {after:,} tokens); history kept"
    event = {"stage": "summarize", "note": note, "tokens_before": before, "tokens_after": before}
    event = emit_event({**event, **({"over_budget": why} if why else {})})
    return SummaryResult(events=(*events, event), breaker=made.breaker, cooldown_id=messages[-1].id)


def _info(setup: Setup, messages: list[BaseMessage], draft: Draft, pending: Pending, run: Run) -> CompactionInfo:
    """Return what the hooks are told about this compaction (before its summary is made)."""
    return CompactionInfo(
        thread_id=run.thread_id,
        user_id=run.user_id,
        reason=pending["reason"],
        tokens_before=pending["tokens_before"] or setup.counter.total(messages),
        messages=list(draft.evicted),
        transcript_path=draft.path,
        focus=pending["focus"],
    )


def _history_may_stay(made: Made, pending: Pending, run: Run) -> bool:
    """Return True when, without a usable answer, the history may stay as it is: nothing urgent, it fits the window."""
    urgent = pending["reason"] == "overflow" or (made.breaker and made.breaker["open_until"])
    return not urgent and pending["tokens_after_layers"] < run.budget.hard_limit


def _with_injected(
    setup: Setup, draft: Draft, composed: Composed, info: CompactionInfo, events: list[dict[str, Any]]
) -> Steps[tuple[Composed, list[BaseMessage]]]:
    """Call ``after_compaction``; return the summary with the messages it places after it, and those messages."""
    made_info = dataclasses.replace(info, summary=composed.text, summary_id=composed.summary.id)
    injected = yield from ask_after(setup, made_info, events)
    if injected:  # counted like every message: a compaction that would not shrink with them is refused
        result = compacted_view(draft.messages, draft.evict_ids, composed.summary, injected)
        composed = dataclasses.replace(composed, result=result, tokens=setup.counter.total(result))
    return composed, injected


def _applied_event(pending: Pending, run: Run, background: bool, problem: str | None) -> dict[str, Any]:
    """Return the fields of the event that says the summary was applied (a background one: prepared)."""
    applied: dict[str, Any] = {"reason": pending["reason"], "usage": dict(run.usage)}
    if not background:  # a background job's summary is applied later, by the gate
        applied = {"event": "compaction_applied", "mode": "blocking", **applied}
    if problem:
        applied["error"] = problem
    return applied


def summary_result(
    setup: Setup, messages: list[BaseMessage], record: CompactionRecord, run: Run
) -> Steps[SummaryResult]:
    """The summarize node's steps: replace the pending request's evicted messages by a summary; return what it did."""
    pending = record["pending"]
    if not pending:
        return SummaryResult(acted=False)
    offload_on = setup.config.offload_before_compact and run.storage is not None
    draft = draft_of(setup, messages, record, pending, run, offload_on)
    if not draft.evicted:
        return SummaryResult()
    if offload_on and not draft.evict_ids.issubset(record["offloaded_ids"]):
        return _failed(None, "offload did not complete; nothing was removed")
    info = _info(setup, messages, draft, pending, run)
    events: list[dict[str, Any]] = []
    extra, skip = yield from _ask_before(setup, info, events)
    made = yield from _make(setup, draft, record, pending, run, extra, skip, events)
    if made.problem and made.composed is None:  # the model gave no usable answer at all
        if _history_may_stay(made, pending, run):
            return _failed(made.breaker, f"{made.problem}; history kept (it still fits the window)")
        made.body, made.kind = extractive_summary(draft.evicted), "extractive"
    composed = made.composed or draft.compose(made.body or "")
    background = pending["reason"] == "background"
    injected: list[BaseMessage] = []
    if not background:  # a summary prepared in the background has its hook called when it is applied
        composed, injected = yield from _with_injected(setup, draft, composed, info, events)
    if composed.tokens >= setup.counter.total(messages):  # no progress, whatever the reason (a manual request too)
        return _no_progress(setup, messages, made, composed.result, run, events)
    replacement = Replacement(
        draft.evict_ids,
        pending["cutoff_id"],
        composed.summary,
        composed.pins,
        made.kind,
        draft.path,
        event=_applied_event(pending, run, background, made.problem),
        injected=injected,
        edits=window_edits(setup, composed.result, run.budget) if offload_on else {},
    )
    applied = applied_summary(setup, messages, record, run, replacement)
    # a background job's summary is written when the gate applies it (a discarded one replaced nothing)
    written = [] if background else (yield from record_summary(setup, composed.summary, run, offload_on))
    return SummaryResult(applied=applied, events=(*events, *written), last_error=made.problem, breaker=made.breaker)


def window_edits(setup: Setup, result: list[BaseMessage], budget: Budget) -> dict[str, BaseMessage]:
    """Return layer 1-2 edits (by message id) of what a summary keeps, when the request is still over the window.

    The summary quotes the user's requests and the kept tail holds the newest
    tool round whole; when that is more than the model accepts, layers 1-2 over
    everything kept (the tools whose results they usually leave alone too)
    bring it under, before the model refuses it. Their originals are in the
    transcript: offload ran before the summary.
    """
    counts = setup.counter.counts(result)
    if sum(counts) <= budget.hard_limit:
        return {}
    plan = plan_compaction(result, counts, budget, setup.config, setup.counter.message, overflow=True)
    return {result[i].id: m for i, m in plan.edits.items() if result[i].id is not None}  # type: ignore[misc]


@dataclass(frozen=True)
class Replacement:
    """A summary ready to replace the evicted messages, and what the summarize event says of it.

    ``event`` adds to the summarize event (what made the summary, and how); ``injected`` (an
    ``after_compaction`` hook's messages) follow the summary; ``edits`` (by message id) are layer 1-2 edits of
    what it keeps (``window_edits``).
    """

    evict_ids: set[str]
    cutoff_id: str | None
    summary: BaseMessage
    pins: list[Any]
    kind: str
    path: str | None
    event: dict[str, Any]
    injected: Sequence[BaseMessage] = ()
    edits: dict[str, BaseMessage] | None = None


def applied_summary(
    setup: Setup, messages: Sequence[BaseMessage], record: CompactionRecord, run: Run, new: Replacement
) -> Applied:
    """Return the summary applied: the evicted messages replaced by ``new`` (rewrite), or its view (view mode)."""
    result = compacted_view(messages, new.evict_ids, new.summary, new.injected)
    if new.edits:
        result = [new.edits.get(m.id, m) for m in result]  # type: ignore[arg-type]
    counts = setup.counter.counts(result)
    before, after = setup.counter.total(messages), sum(counts)
    why = over_budget_reason(result, counts, run.budget.trigger_tokens)  # invariant 3: say why
    evicted = [m.id for m in messages if m.id in new.evict_ids]
    view = view_edits = None
    view_mode = setup.config.mode == "view"
    if view_mode:  # the state keeps every message; the record rebuilds the model's view
        view = view_record(messages, new.evict_ids, new.cutoff_id, new.summary, new.injected)
        shortened = {i: message_to_dict(m) for i, m in (new.edits or {}).items()}
        view_edits = {**kept_edits(record["view_edits"], result), **shortened}
    emitted = emit_event(
        {
            "stage": "summarize",
            "layer": new.kind,
            **new.event,
            "tokens_before": before,  # the state as summarize found it (the gate's edits may not have landed)
            "tokens_after": after,
            **({"over_budget": why} if why else {}),
            "cutoff_id": new.cutoff_id,
            "evicted": len(evicted),
            "evicted_ids": evicted,
            **({"injected": len(new.injected)} if new.injected else {}),
            "offload_path": new.path,
        },
        stream="event" in new.event,  # a summary prepared for later (no ``event`` yet) streams when it is applied
    )
    return Applied(
        messages=None if view_mode else tuple(result),
        summary=new.summary,
        pins=new.pins,
        cutoff_id=new.cutoff_id,
        offload_path=new.path,
        kind=new.kind,
        evicted=len(evicted),
        event=emitted,
        cooldown_id=result[-1].id,
        view=view,
        view_edits=view_edits,
    )
