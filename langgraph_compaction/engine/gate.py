"""The gate: layers 1-2 and the decision to summarize, before every model call (no LLM).

It counts only what is new since its last call on the thread (``Memo``),
writes the originals to the transcript before layers 1-2 shorten them, and
when the plan says summarize it records the cut as ``pending``; its router
then leads to flush and offload side by side, or straight to the model node.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage, message_to_dict
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ..core.calibration import calibrated_budget, observe_usage, read_calibration, usage_event
from ..core.config import Budget
from ..core.plan import CompactionPlan, plan_compaction, tokens_since
from ..core.tokens import TokenCounter, fingerprint
from ..core.view import kept_edits
from .background import background_floor, background_steps, swap_coming
from .effects import Steps
from .events import blocking_started, describe_error, emit_event
from .jobs import BackgroundJobs
from .offload import offload_messages
from .passes import message_writes
from .prepare import job_key
from .run import RUN_THREAD, Run
from .setup import Setup
from .state import COMPACTION_REFRESH_MESSAGES, CompactionRecord, GraphUpdate, Pending
from .swap import GateCall, Outcome

GATE = "compaction_gate"

#: How many threads the gate remembers (most recently used first kept), and as many thread-less histories.
MEMO_THREADS = 256
#: How many first messages name a history sent whole at every call (``history_key``).
HEAD_MESSAGES = 3


class Memo:
    """What the gate saw of one thread at its last call: each message's `fingerprint` and token count.

    A graph's next call sees the same messages plus new ones at the end, so
    only those are counted; a message changed in place (``update_state`` by
    id: other content, other tool calls, even of the same length) or removed
    ends the reused prefix there. ``settled`` is where layers 1-2 start their
    scan (see ``layers.settled_from``).
    """

    __slots__ = ("keys", "counts", "settled")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.counts: list[int] = []
        self.settled = 0

    def sync(self, messages: Sequence[BaseMessage], counter: TokenCounter) -> None:
        """Bring the memo up to date with ``messages``, counting only what is new or changed."""
        # the length of the prefix whose fingerprints match, without a Python loop over the history
        known = sum(takewhile(bool, map(operator.eq, map(fingerprint, messages), self.keys)))
        if known < len(self.keys):
            del self.keys[known:], self.counts[known:]
            self.settled = min(self.settled, known)
        if known < len(messages):
            fresh = messages[known:]
            self.keys.extend(map(fingerprint, fresh))
            self.counts.extend(counter.counts(fresh))

    def edited(self, edits: dict[int, BaseMessage], counter: TokenCounter) -> None:
        """Record the gate's own in-place edits, so the next call does not count those messages again."""
        for i, message in edits.items():
            self.keys[i] = fingerprint(message)
            self.counts[i] = counter.message(message)

    def copy(self) -> Memo:
        """Return a memo of its own holding the same keys, counts and settled index."""
        memo = Memo()
        memo.keys, memo.counts, memo.settled = list(self.keys), list(self.counts), self.settled
        return memo


def history_key(messages: Sequence[BaseMessage]) -> tuple[Any, ...] | None:
    """Return what names a conversation sent whole at every call: the ids of its first messages (None: no ids)."""
    ids = tuple(m.id for m in messages[:HEAD_MESSAGES])
    return ids if ids and None not in ids else None


class Memos:
    """The gate's memos of the threads it saw last (``MEMO_THREADS`` of them), shared by its threads.

    A run without a thread id (a stateless endpoint sends the whole history at
    every call) gets a thread of its own each time; its memo starts from a
    copy of the one the last such run of the same conversation (the same
    first messages) left, so only what changed since is counted and scanned
    (``Memo.sync`` checks every message's fingerprint: a different history
    reuses nothing it does not match).
    """

    def __init__(self) -> None:
        self._memos: OrderedDict[str, Memo] = OrderedDict()
        self._histories: OrderedDict[tuple[Any, ...], Memo] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, thread_id: str, messages: Sequence[BaseMessage], counter: TokenCounter, threadless: bool = False
    ) -> Memo:
        """Return the thread's memo brought up to date with ``messages`` (only new messages are counted)."""
        key = history_key(messages) if threadless else None
        with self._lock:
            memo = self._memos.pop(thread_id, None)
            if memo is None:
                seed = self._histories.get(key) if key is not None else None
                memo = seed.copy() if seed is not None else Memo()
            _keep(self._memos, thread_id, memo)
        memo.sync(messages, counter)
        return memo

    def keep_history(self, messages: Sequence[BaseMessage], memo: Memo) -> None:
        """Keep a copy of a thread-less run's memo, once its gate is done with it, for the next run of that history."""
        key = history_key(messages)
        if key is not None:
            copy = memo.copy()
            with self._lock:
                _keep(self._histories, key, copy)


def _keep(memos: OrderedDict[Any, Memo], key: Any, memo: Memo) -> None:
    """Put ``memo`` last (most recently used) in ``memos``, dropping the oldest past ``MEMO_THREADS``."""
    memos.pop(key, None)
    memos[key] = memo
    if len(memos) > MEMO_THREADS:
        memos.popitem(last=False)


def plan_for(
    setup: Setup,
    messages: Sequence[BaseMessage],
    *,
    budget: Budget | None = None,
    manual: bool = False,
    new_tokens: int | None = None,
    overflow: bool = False,
    memo: Memo | None = None,
    floor: int = 0,
) -> CompactionPlan:
    """Return the gate's plan for these messages (layers 1-2, trigger, cutoff).

    With the thread's ``memo`` only what is new since the last call is counted
    and scanned. Layers 1-2 edit nothing before ``floor`` (the messages a
    summary being prepared covers).
    """
    return plan_compaction(
        messages,
        memo.counts if memo is not None else setup.counter.counts(messages),
        budget or setup.budget,
        setup.config,
        setup.counter.message,
        manual=manual,
        new_tokens=new_tokens,
        overflow=overflow,
        settled=max(memo.settled if memo is not None else 0, floor),
        frozen=floor,
    )


def calibrated(
    setup: Setup, messages: Sequence[BaseMessage], record: CompactionRecord, budget: Budget, counts: Sequence[int]
) -> tuple[Budget, dict[str, Any] | None]:
    """Return the budget in estimator units for this thread, and the calibration when it just changed."""
    calibration = read_calibration(record["calibration"])
    observed = None
    if setup.config.guards.calibrate:
        observed = observe_usage(calibration, messages, counts, setup.fixed_tokens)
        calibration = observed or calibration
    return calibrated_budget(budget, calibration, setup.fixed_tokens), observed


def new_pending(
    plan: CompactionPlan, messages: Sequence[BaseMessage], budget: Budget, reason: str, focus: str | None = None
) -> Pending:
    """Return the pending summary request of a plan's cut (its target calibrated, as summarize counts)."""
    cut = plan.cut
    assert cut is not None
    return {
        "reason": reason,
        "evict_ids": [messages[i].id for i in cut.evict],  # type: ignore[misc]
        "cutoff_id": messages[cut.cutoff].id if cut.cutoff < len(messages) else None,
        "tokens_before": plan.tokens_before,
        "tokens_after_layers": plan.tokens_after_layers,
        "target_tokens": budget.target_tokens,
        "focus": focus,
    }


@dataclass
class GateUpdate:
    """What one gate call writes: messages, the ``compaction`` delta, and the events it keeps."""

    messages: list[Any] = field(default_factory=list)
    compaction: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)


def _layer_edits(
    call: GateCall, memo: Memo | None, plan: CompactionPlan, messages: Sequence[BaseMessage], out: GateUpdate
) -> Steps[bool]:
    """Yield the offload of the originals, then write layers 1-2's edits; return False when the offload failed."""
    setup, record, run = call.setup, call.record, call.run
    if setup.config.offload_before_compact and run.storage is not None:
        try:
            result = yield from offload_messages(messages, run, setup.config)
        except Exception as exc:  # noqa: BLE001 - the originals must reach disk first
            error = f"offload before layer edits failed: {describe_error(exc)}"
            out.events.append(emit_event({"stage": "gate", "error": error}))
            return False
        out.events.extend(emit_event(e) for e in result.events if "unencodable" in e)
        out.compaction.update(offloaded_ids=list(result.offloaded_ids or ()), offload_path=result.offload_path)
    if memo is not None:
        memo.edited(plan.edits, setup.counter)
    if setup.config.mode == "view":  # the model's copy is shortened; the state keeps the message as added
        edited = {m.id: message_to_dict(m) for m in plan.edits.values()}
        out.compaction["view_edits"] = {**kept_edits(record["view_edits"], messages), **edited}
    else:
        out.messages.extend(plan.edits.values())
    counts: dict[str, int] = out.compaction.setdefault("counts", {})
    touched: dict[str, int] = out.compaction.setdefault("edited_messages", {})
    for name, count in plan.layer_counts.items():  # added to what a swap in this call counted
        counts[name] = counts.get(name, 0) + 1
        touched[name] = touched.get(name, 0) + count
    figures = {"layer": "+".join(plan.layer_counts), "edited": len(plan.edits)}
    tokens = {"tokens_before": plan.tokens_before, "tokens_after": plan.tokens_after_layers}
    out.events.append(emit_event({"stage": "gate", **figures, **tokens}))
    return True


def _write_repair(repaired: Sequence[BaseMessage], added: Sequence[ToolMessage], out: GateUpdate) -> None:
    """Write the history with its unanswered calls answered, in place of the state's, and say which were.

    Results that all go after the last message (the newest turn's calls) are
    appended; one placed earlier rewrites the history.
    """
    at_end = all(a is b for a, b in zip(repaired[len(repaired) - len(added) :], added, strict=True))
    out.messages.extend(added if at_end else [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired])
    calls = [m.tool_call_id for m in added]
    note = f"answered {len(calls)} tool call(s) that had no result (not run): a crash or a refused approval left them"
    out.events.append(emit_event({"stage": "gate", "repaired": calls, "note": note}))


def _after_swap(call: GateCall, after: list[BaseMessage], out: GateUpdate) -> Steps[None]:
    """Bring a request a swapped-in summary left over the trigger under it: layers 1-2, then a summary now.

    The prefix changed with the swap, so edits cost no extra cache break. The
    summary made now chains on the one just applied.
    """
    plan = plan_for(call.setup, after, budget=call.budget)
    if plan.reason != "tokens":
        return
    if plan.edits and call.setup.config.mode != "view":
        yield from _layer_edits(call, None, plan, after, out)
    if plan.summarize:
        _ask_for_summary(plan, after, call.budget, None, "the applied summary left the request over the trigger", out)


def _ask_for_summary(
    plan: CompactionPlan,
    messages: Sequence[BaseMessage],
    budget: Budget,
    manual: dict[str, Any] | None,
    blocked: str | None,
    out: GateUpdate,
) -> None:
    """Record the summary the plan asks for as ``pending`` and stream that compaction started (blocking)."""
    assert plan.cut is not None and plan.reason is not None
    blocking_started(plan.reason, plan.tokens_before, plan.tokens_after_layers, len(plan.cut.evict), blocked)
    out.compaction["pending"] = new_pending(plan, messages, budget, plan.reason, (manual or {}).get("focus"))


def gate_steps(
    setup: Setup,
    memos: Memos,
    jobs: BackgroundJobs,
    messages: list[BaseMessage],
    record: CompactionRecord,
    run: Run,
    overflow: bool = False,
    repair: tuple[Sequence[BaseMessage], Sequence[ToolMessage]] | None = None,
) -> Steps[GraphUpdate]:
    """The gate's steps over the messages compaction works on; return the node's update.

    ``repair`` is the state's history with its unanswered tool calls answered
    and the results added (``core.repair.answer_unanswered``), when some were:
    the history is written first, in place of the state's, and ``messages``
    are already taken from it.
    """
    manual = record["manual"]
    memo = memos.get(run.thread_id, messages, setup.counter, run.threadless)
    budget, calibration = calibrated(setup, messages, record, run.budget, memo.counts)
    new_tokens = tokens_since(messages, memo.counts, record["cooldown_id"])
    out = GateUpdate(compaction={"calibration": calibration} if calibration else {})
    call = GateCall(setup, jobs, messages, memo.counts, record, budget, run, job_key(run, messages), events=out.events)
    background = setup.config.background.enabled and not overflow and not manual
    floor = background_floor(call) if background else 0
    plan = plan_for(
        setup,
        messages,
        manual=bool(manual),
        budget=budget,
        new_tokens=new_tokens,
        overflow=overflow,
        memo=memo,
        floor=floor,
    )
    deferred = background and _defer_edits(call, plan)
    if deferred:  # the swap makes them at no extra break (see swap_coming)
        plan = dataclasses.replace(plan, edits={}, layer_counts={}, tokens_after_layers=plan.tokens_before)
    if repair is not None:
        _write_repair(*repair, out)
    _announce(plan, calibration, new_tokens)
    outcome = None
    if background:
        outcome = yield from background_steps(call, memo, plan, new_tokens)
        out.compaction.update(outcome.compaction)
        out.messages.extend(outcome.messages or [])
    applied = outcome is not None and outcome.applied
    settled = not plan.edits or applied
    if plan.edits and not applied:  # a summary applied now replaces what the edits would shorten
        settled = yield from _layer_edits(call, memo, plan, messages, out)
    if outcome is not None and outcome.applied and outcome.after is not None:
        yield from _after_swap(call, outcome.after, out)
    if settled and not deferred:
        memo.settled = plan.settled
    if run.threadless:
        memos.keep_history(messages, memo)
    _mark_run(record, run, out)
    _summary_request(plan, messages, budget, manual, outcome, out)
    return _finish(out, record, messages)


def _summary_request(
    plan: CompactionPlan,
    messages: Sequence[BaseMessage],
    budget: Budget,
    manual: dict[str, Any] | None,
    outcome: Outcome | None,
    out: GateUpdate,
) -> None:
    """Ask the summarize node for a summary when one is due and none was applied; ``outcome`` None: blocking mode."""
    blocked = outcome.blocked if outcome is not None else None
    due = plan.summarize and (outcome is None or (not outcome.applied and bool(blocked)))
    if due:
        _ask_for_summary(plan, messages, budget, manual, blocked, out)
    elif manual:
        out.compaction["manual"] = None
        out.events.append(emit_event({"stage": "gate", "layer": "manual", "note": "nothing to compact"}))


def _defer_edits(call: GateCall, plan: CompactionPlan) -> bool:
    """Return True when the plan's layer 1-2 edits should wait for a coming swap (see ``swap_coming``)."""
    return (
        call.setup.config.prompt_cache
        and bool(plan.edits)
        and plan.reason in (None, "messages")
        and plan.tokens_before < call.budget.trigger_tokens
        and swap_coming(call, plan)
    )


def _announce(plan: CompactionPlan, calibration: dict[str, Any] | None, new_tokens: int | None) -> None:
    """Stream (and log, not keep) why a due summary is held, and the newest reply's usage."""
    if plan.held:  # it can repeat on every call of a cooldown
        emit_event({"stage": "gate", "held": plan.held, "new_tokens": new_tokens, "tokens": plan.tokens_after_layers})
    if calibration and "usage" in calibration:  # as its provider reported it
        emit_event({"stage": "gate", "usage": usage_event(calibration)})


def _mark_run(record: CompactionRecord, run: Run, out: GateUpdate) -> None:
    """Record that a gate runs in front of this agent's model, and the run's thread when it has no thread id."""
    if not record["wired"]:  # tells the compact tool that a gate runs in front of this agent's model
        out.compaction["wired"] = True
    if run.threadless and record["run_thread"] != run.thread_id:  # the run's later steps and tools use it too
        out.compaction[RUN_THREAD] = run.thread_id


def _finish(out: GateUpdate, record: CompactionRecord, messages: Sequence[BaseMessage]) -> GraphUpdate:
    """Return the gate's node update, with ``seen_messages`` refreshed when the record is due to be written."""
    update: GraphUpdate = {"messages": message_writes(out.messages)} if out.messages else {}
    compaction = out.compaction
    if out.events:
        compaction["events"] = out.events
        compaction["last_error"] = next((e["error"] for e in out.events if e.get("error")), record["last_error"])
    seen = record["seen_messages"]
    # a checkpoint stores the value only at a step that changed it (CompactionState): a thread with nothing
    # to compact writes it again now and then, or a load would read every checkpoint back to its first call
    if compaction or seen is None or not 0 <= len(messages) - seen < COMPACTION_REFRESH_MESSAGES:
        compaction["seen_messages"] = len(messages)
        update["compaction"] = compaction
    return update
