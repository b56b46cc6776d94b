"""The compaction nodes: short adapters between LangGraph state and the pure core.

Each node is written once, as a generator that *yields* the effects it needs
(a model call, a storage call) and receives their results; one driver runs it
synchronously and another asynchronously (storage through
``asyncio.to_thread``), so ``invoke`` and ``ainvoke`` share every line of
logic. A failing model or disk is thrown back into the generator, which
records it and degrades; ``asyncio.CancelledError`` is not caught.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import operator
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import takewhile
from typing import Any, Generator, Optional, Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config

from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import get_runtime

from ..core.calibration import calibrated_budget, fixed_tokens, observe_usage, read_calibration, usage_event
from ..core.config import Budget, CompactionConfig, model_context_window
from ..core.conversation import content_text
from ..core.fidelity import complete_summary
from ..core.layers import PRUNED_MARK, MICRO_PLACEHOLDER  # the marks of layer 2's edits, to tell them from a user's
from ..memory.ledger import (
    MEMORY_FILE,
    flush_input,
    flush_marker,
    flush_problem,
    flush_instruction,
    flush_prompt,
    has_flush_marker,
    ledger_entry,
    ledger_relpath,
    local_now,
)
from ..core.plan import CompactionPlan, compacted_view, over_budget_reason, plan_compaction, tokens_since
from ..core.redact import redact_record, redact_secrets
from .errors import is_context_overflow, overflow_figures
from .state import read_compaction
from ..storage import (
    DEFAULT_USER,
    CompactionStorage,
    StoreStorage,
    message_records,
    open_storage,
    record_id,
    thread_key,
    unencodable_fields,
)
from ..core.summary import (
    build_summary_message,
    chunk_for_window,
    compaction_note,
    extractive_summary,
    finish_summary,
    render_messages,
    summary_problem,
    summary_instruction,
    summary_prompt,
)
from ..core.tokens import TokenCounter, fingerprint, estimate_text_tokens
from ..core.view import kept_edits, model_view, view_record

logger = logging.getLogger("langgraph_compaction")

#: Tokens left free in the summarizer's window besides a reused prefix: the instruction and the answer.
PREFIX_ALLOWANCE = 4_000

GATE = "compaction_gate"
FLUSH = "compaction_flush"
OFFLOAD = "compaction_offload"
SUMMARIZE = "compaction_summarize"

Effect = tuple
Steps = Generator[Effect, Any, dict]


@dataclass
class Run:
    """What one node run knows about where it runs."""

    thread_id: str
    user_id: str
    storage: Optional[CompactionStorage]
    budget: Budget


def state_value(state: Any, key: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def current_runtime() -> Any:
    if not var_child_runnable_config.get():  # outside a graph run: no runtime, and no exception raised to say so
        return None
    try:
        return get_runtime()
    except Exception:  # noqa: BLE001 - a runnable context that is not a graph run's
        return None


#: Fields of the run's context (``context_schema``) that override the configured thresholds for that run.
CONTEXT_THRESHOLDS = ("context_window", "trigger_tokens", "trigger_messages", "keep_tokens", "keep_messages")


def _context_value(runtime: Any, key: str) -> Any:
    context = getattr(runtime, "context", None)
    return context.get(key) if isinstance(context, dict) else getattr(context, key, None)


def run_user_id(runtime: Any, config: RunnableConfig) -> str:
    value = _context_value(runtime, "user_id") or (config.get("configurable") or {}).get("user_id")
    return str(value) if value else DEFAULT_USER


def emit_event(event: dict) -> dict:
    """Send a compaction event to ``stream_mode="custom"`` and the log; return it for the state."""
    event = {"type": "compaction", "time": time.time(), **event}
    log = logger.warning if event.get("error") else logger.info
    log("compaction %s: %s", event.get("stage"), {k: v for k, v in event.items() if k not in ("type", "evicted_ids")})
    try:
        get_stream_writer()(event)
    except Exception:  # noqa: BLE001 - no stream outside a graph run
        pass
    return {k: v for k, v in event.items() if k != "evicted_ids"}


#: The steps a UI shows while "compacting...". Their progress is streamed (``stream_mode="custom"``), not kept,
#: as ``stage="lifecycle"`` events, apart from each step's result event: the gate's ``phase="started"`` when it
#: asks for a summary, then ``phase="start"`` and ``phase="end"`` around each step; summarize's end ends it.
LIFECYCLE_STEPS = ("flush", "offload", "summarize")


def _stage_started(stage: str) -> Optional[float]:
    """Stream the start of a side step; return its start time (None for the gate, which runs on every call)."""
    stage = stage.removeprefix("compaction_")  # the engine names the steps by their graph node
    if stage not in LIFECYCLE_STEPS:
        return None
    emit_event({"stage": "lifecycle", "phase": "start", "step": stage})
    return time.monotonic()


def _stage_ended(stage: str, started: Optional[float], update: Any) -> Any:
    """Stream the end of a side step (how long it took, whether it recorded an error); return its update unchanged."""
    if started is not None:
        error = ((update or {}).get("compaction") or {}).get("last_error") if isinstance(update, dict) else None
        ms = round((time.monotonic() - started) * 1000, 1)
        emit_event({"stage": "lifecycle", "phase": "end", "step": stage.removeprefix("compaction_"), "ms": ms, "ok": not error})
    return update


def describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


#: How many threads the gate remembers (most recently used first kept).
MEMO_THREADS = 256


class _Memo:
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


def advance(steps: Steps, value: Any, error: Optional[Exception]) -> tuple[bool, Any]:
    """Advance a node's steps with an effect's result (or error); return (finished, next effect or update)."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(value))
    except StopIteration as stop:
        return True, stop.value


def _failed(stage: str, exc: Exception) -> dict:
    """Return the update of a node that failed: nothing pending, the error recorded, messages untouched."""
    event = emit_event({"stage": stage, "error": describe_error(exc)})
    logger.debug("compaction %s failed", stage, exc_info=exc)
    return {"compaction": {"pending": None, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}


def _breaker(view: dict, key: str = "breaker") -> dict:
    """Return a circuit breaker of the thread (``key``): consecutive failures of its model and when it closes again."""
    raw = view.get(key) if isinstance(view.get(key), dict) else {}
    failures, until = raw.get("failures"), raw.get("open_until")
    return {
        "failures": failures if isinstance(failures, int) and failures > 0 else 0,
        "open_until": float(until) if isinstance(until, (int, float)) and until > 0 else 0.0,
        "reason": raw.get("reason") if isinstance(raw.get("reason"), str) else None,
    }


def _breaker_after(breaker: dict, problem: Optional[str], limit: int, cooldown: float) -> dict:
    """Return the breaker after one model attempt: reset on success, opened at ``limit`` failures in a row."""
    if not problem:
        return {"failures": 0, "open_until": 0.0, "reason": None}
    failures = breaker["failures"] + 1
    return {"failures": failures, "open_until": time.time() + cooldown if failures >= limit else 0.0, "reason": problem}


def _is_agent_model(model: Any, agent_model: Any) -> bool:
    """Return True when ``model`` is the agent's model: ``agent_model`` itself or the model it binds tools to."""
    while agent_model is not None and model is not None:
        if agent_model is model:
            return True
        agent_model = getattr(agent_model, "bound", None)
    return False


#: The offload event's note when a value could only be kept as a marked repr.
_UNENCODABLE = "some values could not be encoded: the transcript keeps a marked repr of each (listed)"


def _shortened_by_layers(message: BaseMessage, truncation_text: str) -> bool:
    """Return True for layers 1-2's own shortened copy of a message, which offload never writes as a new version."""
    if isinstance(message, ToolMessage):
        text = content_text(message.content)
        return bool(PRUNED_MARK.search(text)) or text.startswith(MICRO_PLACEHOLDER.split("`", 1)[0])
    return isinstance(message, AIMessage) and truncation_text in repr((message.tool_calls, message.content))


class CompactionNodes:
    """The four nodes (gate, flush, offload, summarize) and the gate's router, bound to one setup.

    ``before`` is the node compaction runs in front of (the agent's model
    node); ``model`` summarizes, ``flush_model`` (default: ``model``)
    extracts memories; ``storage`` is a directory, a ``BaseStore``, or None
    to use the store the graph runs with (``runtime.store``) when there is one.
    ``agent_model`` (tools bound) and ``system_prompt`` are what ``before``
    sends besides the messages; both are counted in every request.
    """

    def __init__(
        self,
        *,
        before: str,
        model: Any,
        config: Optional[CompactionConfig] = None,
        storage: Any = None,
        flush_model: Any = None,
        agent_model: Any = None,
        system_prompt: Any = None,
    ) -> None:
        self.before = before
        self.config = config or CompactionConfig()
        self.model = model
        self.flush_model = flush_model or model
        self.storage = open_storage(storage)
        self._window_model = agent_model if agent_model is not None else model
        self.budget: Budget = self.config.resolve(self._window_model)
        self.counter = TokenCounter(self.config.token_counter)
        self._memos: dict[str, _Memo] = {}
        self._memo_lock = threading.Lock()
        # what every request carries besides ``messages``: the node's system prompt and bound tool schemas
        self.fixed_tokens = fixed_tokens(agent_model, system_prompt)
        # A summarizer or flush model that is the agent's model is sent the agent's own request (system prompt,
        # tools, messages up to the cut, unchanged) plus an instruction: the provider's prompt cache serves that
        # prefix, where a re-rendered transcript is billed in full. Another model gets the rendered transcript.
        self._agent_model = agent_model
        self._head = [SystemMessage(system_prompt)] if isinstance(system_prompt, str) and system_prompt else (
            [system_prompt] if isinstance(system_prompt, SystemMessage) else []
        )
        self._summary_shares_cache = _is_agent_model(model, agent_model)
        self._flush_shares_cache = _is_agent_model(self.flush_model, agent_model)
        # one breaker per model: the flush shares the summarizer's when both call the same model
        same = self.flush_model is self.model or (self._flush_shares_cache and self._summary_shares_cache)
        self._flush_breaker = "breaker" if same else "flush_breaker"

    # -- where a run happens
    def _run(self, config: RunnableConfig) -> Run:
        runtime = current_runtime()
        storage = self.storage
        if storage is None and getattr(runtime, "store", None) is not None:
            storage = StoreStorage(runtime.store)
        thread = (config.get("configurable") or {}).get("thread_id")
        return Run(
            thread_id=thread_key(thread),
            user_id=run_user_id(runtime, config),
            storage=storage,
            budget=self._budget_for(runtime),
        )

    def _budget_for(self, runtime: Any) -> Budget:
        """Return the budget with the run context's thresholds applied (a bad value raises, naming the field)."""
        if getattr(runtime, "context", None) is None:
            return self.budget
        overrides = {k: v for k in CONTEXT_THRESHOLDS if (v := _context_value(runtime, k)) is not None}
        if not overrides:
            return self.budget
        return type(self.config).model_validate({**dict(self.config), **overrides}).resolve(self._window_model)

    # -- effect drivers
    def _call_sync(self, model: Any, prompt: str | list[BaseMessage]) -> str:
        """Call a compaction model with a prompt (one human message) or a whole request (a message list)."""
        runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
        request = [HumanMessage(prompt)] if isinstance(prompt, str) else prompt
        if self.config.summary_timeout is None:
            return content_text(runnable.invoke(request).content)
        pool = ThreadPoolExecutor(max_workers=1)
        try:
            future = pool.submit(contextvars.copy_context().run, runnable.invoke, request)
            return content_text(future.result(timeout=self.config.summary_timeout).content)
        finally:
            pool.shutdown(wait=False)

    async def _call_async(self, model: Any, prompt: str | list[BaseMessage]) -> str:
        runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
        request = [HumanMessage(prompt)] if isinstance(prompt, str) else prompt
        reply = await asyncio.wait_for(runnable.ainvoke(request), self.config.summary_timeout)
        return content_text(reply.content)

    def _cached_prefix(self, messages: Sequence[BaseMessage], pending: dict) -> Optional[list[BaseMessage]]:
        """Return the agent's own request up to the cut (system prompt first), or None when it cannot be reused.

        It cannot after an overflow (the agent's request was refused as too
        long) or when it may not fit the summarizer's window.
        """
        if pending.get("reason") == "overflow":
            return None
        cutoff_id = pending.get("cutoff_id")
        end = next((i for i, m in enumerate(messages) if m.id == cutoff_id), len(messages)) if cutoff_id else len(messages)
        prefix = [*self._head, *messages[:end]]
        if self.counter.total(prefix) + self.fixed_tokens + PREFIX_ALLOWANCE > self._summarizer_window():
            return None
        return prefix

    def _effect(self, effect: Effect, run: Run) -> Any:
        kind, target, args = effect
        if kind == "model":
            return self._call_sync(target, *args)
        return getattr(run.storage, target)(*args)

    async def _aeffect(self, effect: Effect, run: Run) -> Any:
        kind, target, args = effect
        if kind == "model":
            return await self._call_async(target, *args)
        return await getattr(run.storage, "a" + target)(*args)

    def _drive(self, steps: Steps, run: Run) -> dict:
        done, item = advance(steps, None, None)
        while not done:
            try:
                value, error = self._effect(item, run), None
            except GraphBubbleUp:  # LangGraph's control flow (an interrupt, a parent command) is never a failure
                raise
            except Exception as exc:  # noqa: BLE001 - handed to the node, which degrades
                value, error = None, exc
            done, item = advance(steps, value, error)
        return item

    async def _adrive(self, steps: Steps, run: Run) -> dict:
        done, item = advance(steps, None, None)
        while not done:
            try:
                value, error = await self._aeffect(item, run), None
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - handed to the node, which degrades
                value, error = None, exc
            done, item = advance(steps, value, error)
        return item

    def _guarded(self, stage: str, state: Any, make_steps, run: Run) -> Any:
        """Run a node's steps synchronously; any failure leaves the messages alone and is recorded."""
        started = _stage_started(stage)
        try:
            update = self._drive(make_steps(state, run), run)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
            update = _failed(stage, exc)
        return _stage_ended(stage, started, update)

    # -- node entry points (sync and async)
    def gate(self, state: Any, config: RunnableConfig) -> dict:
        """Layers 1-2 and the decision, before every model call (no LLM)."""
        run = self._run(config)
        return self._guarded("gate", state, self._gate_steps, run)

    async def agate(self, state: Any, config: RunnableConfig) -> dict:
        run = self._run(config)
        return await self._aguarded("gate", state, self._gate_steps, run)

    def offload(self, state: Any, config: RunnableConfig) -> dict:
        """Append every message not yet in the transcript (each message once per thread)."""
        return self._guarded("offload", state, self._offload_steps, self._run(config))

    async def aoffload(self, state: Any, config: RunnableConfig) -> dict:
        return await self._aguarded("offload", state, self._offload_steps, self._run(config))

    def flush(self, state: Any, config: RunnableConfig) -> dict:
        """Extract long-term memories from the evicted prefix into today's ledger."""
        return self._guarded("flush", state, self._flush_steps, self._run(config))

    async def aflush(self, state: Any, config: RunnableConfig) -> dict:
        return await self._aguarded("flush", state, self._flush_steps, self._run(config))

    def summarize(self, state: Any, config: RunnableConfig) -> dict:
        """Replace the evicted prefix by one structured summary (the join of flush and offload)."""
        return self._guarded("summarize", state, self._summarize_steps, self._run(config))

    async def asummarize(self, state: Any, config: RunnableConfig) -> dict:
        return await self._aguarded("summarize", state, self._summarize_steps, self._run(config))

    async def _aguarded(self, stage: str, state: Any, make_steps, run: Run) -> Any:
        started = _stage_started(stage)
        try:
            update = await self._adrive(make_steps(state, run), run)
        except asyncio.CancelledError:  # the caller's to handle; the log still says where it stopped
            emit_event({"stage": stage, "error": "cancelled; this step wrote no state update"})
            raise
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
            update = _failed(stage, exc)
        return _stage_ended(stage, started, update)

    def messages_of(self, state: Any, compaction: Optional[dict] = None) -> list[BaseMessage]:
        """Return the messages compaction works on and the model is sent: the state's, or in view mode their view."""
        messages = list(state_value(state, "messages") or [])
        if self.config.mode != "view":
            return messages
        compaction = compaction if compaction is not None else read_compaction(state_value(state, "compaction"))
        return model_view(messages, compaction.get("view"), compaction.get("view_edits"))

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
        budget: Optional[Budget] = None,
        new_tokens: Optional[int] = None,
        overflow: bool = False,
        memo: Optional["_Memo"] = None,
    ) -> CompactionPlan:
        """Return the gate's plan for these messages (layers 1-2, trigger, cutoff).

        With the thread's ``memo`` only what is new since the last call is
        counted and scanned.
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
            settled=memo.settled if memo is not None else 0,
        )

    def memo(self, thread_id: str, messages: Sequence[BaseMessage]) -> "_Memo":
        """Return the thread's memo brought up to date with ``messages`` (only new messages are counted)."""
        with self._memo_lock:
            memo = self._memos.pop(thread_id, None) or _Memo()
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
        self, messages: Sequence[BaseMessage], view: dict, budget: Budget, counts: Optional[Sequence[int]] = None
    ) -> tuple[Budget, Optional[dict]]:
        """Return the budget in estimator units for this thread, and the calibration when it just changed."""
        calibration = read_calibration(view.get("calibration"))
        observed = None
        if self.config.calibrate:
            counts = counts if counts is not None else self.counter.counts(messages)
            observed = observe_usage(calibration, messages, counts, self.fixed_tokens)
            calibration = observed or calibration
        return calibrated_budget(budget, calibration, self.fixed_tokens), observed

    # -- the steps of each node
    def _offload_update(self, messages: Sequence[BaseMessage], run: Run) -> Steps:
        """Append each message, or new version of one, the transcript lacks; return the ``compaction`` update (or raise).

        The whole transcript is read every time, whatever the state says was
        offloaded: a run forked from an older checkpoint (time travel) or
        another worker may have written it, and it may have been deleted. A
        message replaced by id (``update_state``) since it was written is
        appended again as a new version; layers 1-2's own shortened copies
        are not (their originals are there).
        """
        latest = {record_id(r): r for r in (yield ("storage", "read_transcript", (run.thread_id,)))}
        records = message_records(list(messages))
        if self.config.redact_transcripts:
            records = [redact_record(r, self.config.redactor or redact_secrets) for r in records]
        cut = self.config.truncate_args.truncation_text
        fresh = [
            r
            for m, r in zip(messages, records)
            if m.id not in latest or (r != latest[m.id] and not _shortened_by_layers(m, cut))
        ]
        path = yield ("storage", "append_transcript", (run.thread_id, fresh))
        update = {"offloaded_ids": [m.id for m in messages if m.id], "offload_path": path, "_fresh": len(fresh)}
        if marked := unencodable_fields(fresh):  # written as marked reprs; compaction goes on
            update["_unencodable"] = marked
        return update

    def _gate_steps(self, state: Any, run: Run, overflow: bool = False) -> Steps:
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        manual = view.get("manual")
        memo = self.memo(run.thread_id, messages)
        budget, calibration = self.calibrated(messages, view, run.budget, memo.counts)
        new_tokens = tokens_since(messages, memo.counts, view.get("cooldown_id"))
        plan = self.plan(messages, manual=bool(manual), budget=budget, new_tokens=new_tokens, overflow=overflow, memo=memo)
        update: dict[str, Any] = {}
        compaction: dict[str, Any] = {"calibration": calibration} if calibration else {}
        events: list[dict] = []
        if plan.held:  # streamed and logged, not kept: it can repeat on every call of a cooldown
            emit_event({"stage": "gate", "held": plan.held, "new_tokens": new_tokens, "tokens": plan.tokens_after_layers})
        if calibration and "usage" in calibration:  # the newest reply's usage, as its provider reported it (streamed)
            emit_event({"stage": "gate", "usage": usage_event(calibration)})
        if plan.edits:
            offloaded = True
            if self.config.offload_before_compact and run.storage is not None:
                try:
                    result = yield from self._offload_update(messages, run)
                    result.pop("_fresh")
                    if marked := result.pop("_unencodable", None):
                        events.append(emit_event({"stage": "offload", "note": _UNENCODABLE, "unencodable": marked}))
                    compaction.update(result)
                except Exception as exc:  # noqa: BLE001 - the originals must reach disk first
                    offloaded = False
                    events.append(emit_event({"stage": "gate", "error": f"offload before layer edits failed: {describe_error(exc)}"}))
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
        if not plan.edits or offloaded:
            memo.settled = plan.settled
        if not view.get("wired"):  # tells the compact tool that a gate runs in front of this agent's model
            compaction["wired"] = True
        if plan.summarize:
            cut = plan.cut
            # streamed, not kept: a UI shows "compacting..." until the summarize stage ends
            emit_event({"stage": "lifecycle", "phase": "started", "reason": plan.reason, "tokens_before": plan.tokens_before,
                   "tokens_after_layers": plan.tokens_after_layers, "evict": len(cut.evict)})
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
        if compaction:
            update["compaction"] = compaction
        return update

    def _offload_steps(self, state: Any, run: Run) -> Steps:
        if run.storage is None:
            return {"compaction": {"events": [emit_event({"stage": "offload", "note": "no storage configured"})]}}
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        try:
            result = yield from self._offload_update(messages, run)
        except Exception as exc:  # noqa: BLE001 - summarize sees the missing ids and keeps the history
            event = emit_event({"stage": "offload", "error": describe_error(exc)})
            # an earlier offload's ids would vouch for messages replaced by id since: none are vouched for now
            return {"compaction": {"offloaded_ids": [], "last_error": event["error"], "events": [event]}}
        fresh, marked = result.pop("_fresh"), result.pop("_unencodable", None)
        event = {"stage": "offload", "offloaded": fresh, "offload_path": result["offload_path"]}
        result["events"] = [emit_event({**event, **({"note": _UNENCODABLE, "unencodable": marked} if marked else {})})]
        return {"compaction": result}

    def _flush_steps(self, state: Any, run: Run) -> Steps:
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        pending = view.get("pending") or {}
        evict = set(pending.get("evict_ids") or [])
        todo = flush_input([m for m in messages if m.id in evict], view["flushed_ids"])
        if not todo or run.storage is None or self.flush_model is None:
            return {}
        breaker = _breaker(view, self._flush_breaker)
        if breaker["open_until"] > time.time():  # the model failed too often lately; the transcript keeps these messages
            return {"compaction": {"events": [emit_event({"stage": "flush", "note": "skipped: the memory model's breaker is open"})]}}
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
                if prefix is not None:  # the summary request shares this prefix: both read it from the cache
                    request: Any = [*prefix, HumanMessage(flush_instruction(memory_md, ledger, day))]
                    answer = yield ("model", self._agent_model, (request,))
                else:
                    request = flush_prompt(todo, memory_md, ledger, day, self.config.summarizer_result_chars)
                    answer = yield ("model", self.flush_model, (request,))
                if problem := flush_problem(answer):  # not marked flushed: the next compaction asks again
                    raise ValueError(problem)
                asking, tripped = False, {self._flush_breaker: _breaker_after(breaker, None, 0, 0)}  # a success closes it

                def compose(current: str) -> Optional[str]:
                    # the ledger as it is now, under the storage's lock: another thread's flush may have just written
                    if has_flush_marker(current, marker):
                        return None
                    return ledger_entry(answer, current, now, redact=self.config.redactor, marker=marker)

                _, entry = yield ("storage", "append_memory_entry", (run.user_id, ledger_relpath(day), compose))
        except Exception as exc:  # noqa: BLE001 - memory is best effort; summarizing goes on
            event = emit_event({"stage": "flush", "error": describe_error(exc)})
            if asking:
                tripped = {self._flush_breaker: _breaker_after(breaker, event["error"], self.config.breaker_failures, self.config.breaker_cooldown)}
            return {"compaction": {"last_error": event["error"], "events": [event], **tripped}}
        flushed = set(view["flushed_ids"]) | {m.id for m in todo}
        written = entry.count("\n- ") if entry else 0
        return {
            "compaction": {
                **tripped,
                "flushed_ids": [m.id for m in messages if m.id in flushed],
                "events": [emit_event({"stage": "flush", "flushed_messages": len(todo), "memories": written})],
            }
        }

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
        focus: Optional[str],
        budget: Optional[int] = None,
        prefix: Optional[list[BaseMessage]] = None,
    ) -> Steps:
        """Yield summarizer calls (split and merged when the prefix is over its window); return (text, problem).

        With ``prefix`` (the agent's own request up to the cut, see
        ``_cached_prefix``) one call sends it followed by the instruction.
        When the summarizer refuses a part as too long (its window is smaller
        than configured), the prefix is split again into parts half as large.
        """
        if prefix is not None:
            try:
                answer = yield ("model", self._agent_model, ([*prefix, HumanMessage(summary_instruction(focus))],))
            except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
                if is_context_overflow(exc):  # the rendered transcript shortens long results and can be split
                    return (yield from self._summary_text(evicted, focus))
                return None, f"the summarizer failed: {describe_error(exc)}"
            problem = summary_problem(answer)
            return (None, problem) if problem else (answer, None)
        budget = budget or self._summarizer_budget()
        text: Optional[str] = None
        shown = self.config.summarizer_result_chars
        # the counts are known: only a prefix that may not fit is rendered and measured piece by piece
        fits = self.counter.total(evicted) * 1.2 + 500 < budget
        for chunk in [list(evicted)] if fits else chunk_for_window(evicted, budget, estimate_text_tokens, shown):
            inputs = ([build_summary_message(text)] if text else []) + list(chunk)
            try:
                answer = yield ("model", self.model, (summary_prompt(render_messages(inputs, shown), focus),))
            except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
                window, _ = overflow_figures(exc)
                smaller = min(budget // 2, (window or budget) // 2)
                if is_context_overflow(exc) and smaller >= 250:
                    return (yield from self._summary_text(evicted, focus, smaller))
                return None, f"the summarizer failed: {describe_error(exc)}"
            problem = summary_problem(answer)
            if problem:
                return None, problem
            text = answer
        return text, None

    def _summarize_steps(self, state: Any, run: Run) -> Steps:
        view = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, view)
        pending = view.get("pending")
        if not pending:
            return {}
        evict_ids = set(pending.get("evict_ids") or [])
        evicted = [m for m in messages if m.id in evict_ids]
        done = {"pending": None, "manual": None}
        offload_on = self.config.offload_before_compact and run.storage is not None
        if not evicted:
            return {"compaction": done}
        if offload_on and not evict_ids.issubset(view["offloaded_ids"]):
            event = emit_event({"stage": "summarize", "error": "offload did not complete; nothing was removed"})
            return {"compaction": {**done, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}

        path = view.get("offload_path") if offload_on else None
        note = compaction_note(evicted, sum(self.counter.counts(evicted)), path)

        def compose(body: str) -> tuple:
            """Return (text, pins, summary message, compacted messages, their tokens) for one summary body."""
            body, pins = complete_summary(
                body, evicted, pins=view["pins"], settings=self.config.fidelity, redactor=self.config.redactor or redact_secrets
            )
            summary = build_summary_message(finish_summary(body, note), path, evicted=len(evicted))
            result = compacted_view(messages, evict_ids, summary)
            return body, pins, summary, result, self.counter.total(result)

        breaker = _breaker(view)
        breaker_events: list[dict] = []
        composed = None
        if self.model is None or breaker["open_until"] > time.time():
            # no summarizer, or it failed too often lately: the deterministic summary is the summary
            text, problem, kind = extractive_summary(evicted), None, "extractive"
        else:
            prefix = self._cached_prefix(messages, pending) if self._summary_shares_cache else None
            text, problem = yield from self._summary_text(evicted, pending.get("focus"), prefix=prefix)
            kind = "summarize"
            if not problem:
                # a well-formed but endless answer fails too (invariant 3): it misses the target where the
                # extractive summary meets it, or it does not even shrink the context
                composed = compose(text)
                target = pending.get("target_tokens") or run.budget.target_tokens
                if composed[4] > target:
                    fallback = compose(extractive_summary(evicted))
                    if fallback[4] < composed[4] and (fallback[4] <= target or composed[4] >= self.counter.total(messages)):
                        problem = f"the summary would leave {composed[4]:,} tokens, over the target of {target:,}"
                        composed, kind = fallback, "extractive"
            breaker = _breaker_after(breaker, problem, self.config.breaker_failures, self.config.breaker_cooldown)
            if breaker["open_until"]:
                breaker_events.append(
                    emit_event({"stage": "summarize", "breaker": "open", **breaker, "error": f"{problem}; using extractive summaries"})
                )
            done = {**done, "breaker": breaker}
        if problem and composed is None:  # the model gave no usable answer at all
            urgent = pending.get("reason") == "overflow" or breaker["open_until"]
            if not urgent and pending.get("tokens_after_layers", 0) < run.budget.hard_limit:
                event = emit_event({"stage": "summarize", "error": f"{problem}; history kept (it still fits the window)"})
                return {"compaction": {**done, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}
            text, kind = extractive_summary(evicted), "extractive"
        text, pins, summary, result, after = composed or compose(text)
        before = self.counter.total(messages)
        why = over_budget_reason(result, self.counter.counts(result), run.budget.trigger_tokens)  # invariant 3: say why
        if after >= before:  # no progress, whatever the reason (a manual request too): keep the history
            note = f"the summary would not shrink the context ({before:,} -> {after:,} tokens); history kept"
            event = {"stage": "summarize", "note": note, "tokens_before": before, "tokens_after": before}
            event = emit_event({**event, **({"over_budget": why} if why else {})})
            return {"compaction": {**done, "events": [event], "cooldown_id": messages[-1].id}}
        event = emit_event(
            {
                "stage": "summarize",
                "layer": kind,
                "reason": pending.get("reason"),
                "tokens_before": before,  # the state as summarize found it (the gate's edits may not have landed)
                "tokens_after": after,
                **({"over_budget": why} if why else {}),
                "cutoff_id": pending.get("cutoff_id"),
                "evicted": len(evicted),
                "evicted_ids": [m.id for m in evicted],
                "offload_path": path,
                **({"error": problem} if problem else {}),
            }
        )
        if self.config.mode == "view":  # the state keeps every message; the record rebuilds the model's view
            done["view"] = view_record(messages, evict_ids, pending.get("cutoff_id"), summary)
            done["view_edits"] = kept_edits(view.get("view_edits"), result)
        return {
            **({} if self.config.mode == "view" else {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result]}),
            "compaction": {
                **done,
                "summary_id": summary.id,
                "pins": pins,
                "cutoff_id": pending.get("cutoff_id"),
                "offload_path": path,
                "counts": {kind: 1},
                "edited_messages": {kind: len(evicted)},
                "events": [*breaker_events, event],
                "cooldown_id": result[-1].id,
                **({"last_error": problem} if problem else {}),
            },
        }

