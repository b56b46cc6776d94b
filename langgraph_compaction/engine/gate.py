"""The gate: layers 1-2 and the decision to summarize, before every model call (no LLM).

It counts only what is new since its last call on the thread (``Memo``),
writes the originals to the transcript before layers 1-2 shorten them, and
when the plan says summarize it records the cut as ``pending``; its router
then leads to flush and offload side by side, or straight to the model node.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import takewhile
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict
from langchain_core.runnables import RunnableConfig

from ..core.calibration import calibrated_budget, observe_usage, read_calibration, usage_event
from ..core.config import Budget
from ..core.plan import CompactionPlan, plan_compaction, tokens_since
from ..core.tokens import TokenCounter, fingerprint
from ..core.view import kept_edits
from .effects import RUN_THREAD, Run, Steps, current_runtime, state_value
from .events import describe_error, emit_event
from .flush import FLUSH
from .offload import OFFLOAD, UNENCODABLE_NOTE
from .state import COMPACTION_REFRESH_MESSAGES, read_compaction
from .summarize import SUMMARIZE

GATE = "compaction_gate"

#: How many threads the gate remembers (most recently used first kept).
MEMO_THREADS = 256


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


class GateStage:
    """The gate node, its router and its plan (mixed into ``CompactionNodes``)."""

    def gate(self, state: Any, config: RunnableConfig) -> dict:
        """Layers 1-2 and the decision, before every model call (no LLM)."""
        run = self._run(config, state)
        return self._guarded("gate", state, self._gate_steps, run)

    async def agate(self, state: Any, config: RunnableConfig) -> dict:
        run = self._run(config, state)
        return await self._aguarded("gate", state, self._gate_steps, run)

    def route(self, state: Any) -> list[str] | str:
        """Return where the gate leads: the side branches when compaction is pending, else the model node."""
        if not read_compaction(state_value(state, "compaction")).get("pending"):
            return self.before
        if self.storage is None and getattr(current_runtime(), "store", None) is None:
            return [SUMMARIZE]  # nowhere to write a transcript or a ledger: skip a step of no-ops
        targets = []
        if self.config.flush_before_compact:
            targets.append(FLUSH)
        if self.config.offload_before_compact:
            targets.append(OFFLOAD)
        return targets or [SUMMARIZE]

    # -- the plan
    def plan(
        self,
        messages: Sequence[BaseMessage],
        *,
        manual: bool = False,
        budget: Budget | None = None,
        new_tokens: int | None = None,
        overflow: bool = False,
        memo: Memo | None = None,
        floor: int = 0,
    ) -> CompactionPlan:
        """Return the gate's plan for these messages (layers 1-2, trigger, cutoff).

        With the thread's ``memo`` only what is new since the last call is
        counted and scanned. Layers 1-2 edit nothing before ``floor`` (the
        messages a summary being prepared covers).
        """
        return plan_compaction(
            messages,
            memo.counts if memo is not None else self.counter.counts(messages),
            budget or self.budget,
            self.config,
            self.counter.message,
            manual=manual,
            new_tokens=new_tokens,
            overflow=overflow,
            settled=max(memo.settled if memo is not None else 0, floor),
        )

    def memo(self, thread_id: str, messages: Sequence[BaseMessage]) -> Memo:
        """Return the thread's memo brought up to date with ``messages`` (only new messages are counted)."""
        with self._memo_lock:
            memo = self._memos.pop(thread_id, None) or Memo()
            self._memos[thread_id] = memo  # most recently used last
            if len(self._memos) > MEMO_THREADS:
                del self._memos[next(iter(self._memos))]
        memo.sync(messages, self.counter)
        return memo

    def forget(self, thread_id: str) -> None:
        """Drop what the gate remembers of a thread (its next call counts everything again)."""
        with self._memo_lock:
            self._memos.pop(thread_id, None)

    def calibrated(
        self, messages: Sequence[BaseMessage], view: dict, budget: Budget, counts: Sequence[int] | None = None
    ) -> tuple[Budget, dict | None]:
        """Return the budget in estimator units for this thread, and the calibration when it just changed."""
        calibration = read_calibration(view.get("calibration"))
        observed = None
        if self.config.calibrate:
            counts = counts if counts is not None else self.counter.counts(messages)
            observed = observe_usage(calibration, messages, counts, self.fixed_tokens)
            calibration = observed or calibration
        return calibrated_budget(budget, calibration, self.fixed_tokens), observed

    def _gate_steps(self, state: Any, run: Run, overflow: bool = False) -> Steps:
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        manual = view.get("manual")
        memo = self.memo(run.thread_id, messages)
        budget, calibration = self.calibrated(messages, view, run.budget, memo.counts)
        new_tokens = tokens_since(messages, memo.counts, view.get("cooldown_id"))
        background = self.config.background and not overflow and not manual
        floor = self._background_floor(run, messages, view) if background else 0
        plan = self.plan(
            messages,
            manual=bool(manual),
            budget=budget,
            new_tokens=new_tokens,
            overflow=overflow,
            memo=memo,
            floor=floor,
        )
        update: dict[str, Any] = {}
        compaction: dict[str, Any] = {"calibration": calibration} if calibration else {}
        events: list[dict] = []
        if plan.held:  # streamed and logged, not kept: it can repeat on every call of a cooldown
            emit_event(
                {"stage": "gate", "held": plan.held, "new_tokens": new_tokens, "tokens": plan.tokens_after_layers}
            )
        if calibration and "usage" in calibration:  # the newest reply's usage, as its provider reported it (streamed)
            emit_event({"stage": "gate", "usage": usage_event(calibration)})
        applied, blocked = False, None
        if background:
            prepared, written, applied, blocked = yield from self._background_steps(
                state, run, messages, memo, view, plan, budget, new_tokens
            )
            events.extend(prepared.pop("events", []))
            compaction.update(prepared)
            if written is not None:
                update["messages"] = written
        if plan.edits and not applied:  # a summary applied now replaces what the edits would shorten
            offloaded = True
            if self.config.offload_before_compact and run.storage is not None:
                try:
                    result = yield from self._offload_update(messages, run)
                    result.pop("_fresh")
                    if marked := result.pop("_unencodable", None):
                        events.append(emit_event({"stage": "offload", "note": UNENCODABLE_NOTE, "unencodable": marked}))
                    compaction.update(result)
                except Exception as exc:  # noqa: BLE001 - the originals must reach disk first
                    offloaded = False
                    events.append(
                        emit_event(
                            {"stage": "gate", "error": f"offload before layer edits failed: {describe_error(exc)}"}
                        )
                    )
            if offloaded:
                memo.edited(plan.edits, self.counter)
                if self.config.mode == "view":  # the model's copy is shortened; the state keeps the message as added
                    edited = {m.id: message_to_dict(m) for m in plan.edits.values()}
                    compaction["view_edits"] = {**kept_edits(view.get("view_edits"), messages), **edited}
                else:
                    update["messages"] = list(plan.edits.values())
                compaction["counts"] = {layer: 1 for layer in plan.layer_counts}
                compaction["edited_messages"] = dict(plan.layer_counts)
                events.append(
                    emit_event(
                        {
                            "stage": "gate",
                            "layer": "+".join(plan.layer_counts),
                            "edited": len(plan.edits),
                            "tokens_before": plan.tokens_before,
                            "tokens_after": plan.tokens_after_layers,
                        }
                    )
                )
        if not plan.edits or applied or offloaded:
            memo.settled = plan.settled
        if not view.get("wired"):  # tells the compact tool that a gate runs in front of this agent's model
            compaction["wired"] = True
        if run.threadless and view.get(RUN_THREAD) != run.thread_id:  # the run's later steps and tools use it too
            compaction[RUN_THREAD] = run.thread_id
        if plan.summarize and not applied and (not background or blocked):
            cut = plan.cut
            # streamed, not kept: a UI shows "compacting..." until the summarize stage ends (compaction_applied, kept)
            started = {
                "event": "compaction_started",
                "mode": "blocking",
                "usage": {},
                **({"why": blocked} if background else {}),
            }
            emit_event(
                {
                    "stage": "lifecycle",
                    "phase": "started",
                    "reason": plan.reason,
                    "tokens_before": plan.tokens_before,
                    "tokens_after_layers": plan.tokens_after_layers,
                    "evict": len(cut.evict),
                    **started,
                }
            )
            compaction["pending"] = {
                "reason": plan.reason,
                "evict_ids": [messages[i].id for i in cut.evict],
                "cutoff_id": messages[cut.cutoff].id if cut.cutoff < len(messages) else None,
                "tokens_before": plan.tokens_before,
                "tokens_after_layers": plan.tokens_after_layers,
                "target_tokens": budget.target_tokens,  # calibrated to estimator units, as summarize counts
                "focus": (manual or {}).get("focus"),
            }
        elif manual:
            compaction["manual"] = None
            events.append(emit_event({"stage": "gate", "layer": "manual", "note": "nothing to compact"}))
        if events:
            compaction["events"] = events
            compaction["last_error"] = next((e["error"] for e in events if e.get("error")), view.get("last_error"))
        seen = view.get("seen_messages")
        # a checkpoint stores the value only at a step that changed it (CompactionState): a thread with nothing
        # to compact writes it again now and then, or a load would read every checkpoint back to its first call
        if compaction or seen is None or not 0 <= len(messages) - seen < COMPACTION_REFRESH_MESSAGES:
            compaction["seen_messages"] = len(messages)
            update["compaction"] = compaction
        return update
