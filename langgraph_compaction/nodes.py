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
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generator, Optional, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, messages_to_dict
from langchain_core.runnables import RunnableConfig

from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from .config import Budget, CompactionConfig, model_context_window
from .conversation import content_text, is_system
from .memory import MEMORY_FILE, flush_input, flush_prompt, ledger_entry, ledger_relpath, local_now
from .plan import CompactionPlan, plan_compaction
from .state import read_compaction
from .storage import DEFAULT_USER, CompactionStorage, StoreStorage, open_storage
from .summary import (
    build_summary_message,
    chunk_for_window,
    compaction_note,
    extractive_summary,
    finish_summary,
    render_messages,
    summary_problem,
    summary_prompt,
)
from .tokens import TokenCounter, estimate_text_tokens

logger = logging.getLogger("langgraph_compaction")

GATE = "compaction_gate"
FLUSH = "compaction_flush"
OFFLOAD = "compaction_offload"
SUMMARIZE = "compaction_summarize"

Effect = tuple
Steps = Generator[Effect, Any, dict]


@dataclass
class _Run:
    """What one node run knows about where it runs."""

    thread_id: str
    user_id: str
    storage: Optional[CompactionStorage]


def _get(state: Any, key: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def _runtime() -> Any:
    try:
        from langgraph.runtime import get_runtime

        return get_runtime()
    except Exception:  # noqa: BLE001 - outside a graph run there is no runtime
        return None


def _user_id(runtime: Any, config: RunnableConfig) -> str:
    context = getattr(runtime, "context", None)
    value = context.get("user_id") if isinstance(context, dict) else getattr(context, "user_id", None)
    value = value or (config.get("configurable") or {}).get("user_id")
    return str(value) if value else DEFAULT_USER


def _emit(event: dict) -> dict:
    """Send a compaction event to ``stream_mode="custom"`` and the log; return it for the state."""
    event = {"type": "compaction", "time": time.time(), **event}
    log = logger.warning if event.get("error") else logger.info
    log("compaction %s: %s", event.get("stage"), {k: v for k, v in event.items() if k not in ("type", "evicted_ids")})
    try:
        get_stream_writer()(event)
    except Exception:  # noqa: BLE001 - no stream outside a graph run
        pass
    return {k: v for k, v in event.items() if k != "evicted_ids"}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _failed(stage: str, exc: Exception) -> dict:
    """Return the update of a node that failed: nothing pending, the error recorded, messages untouched."""
    event = _emit({"stage": stage, "error": _describe(exc)})
    logger.debug("compaction %s failed", stage, exc_info=exc)
    return {"compaction": {"pending": None, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}


class CompactionNodes:
    """The four nodes (gate, flush, offload, summarize) and the gate's router, bound to one setup.

    ``before`` is the node compaction runs in front of (the agent's model
    node); ``model`` summarizes, ``flush_model`` (default: ``model``)
    extracts memories; ``storage`` is a directory, a ``BaseStore``, or None
    to use the store the graph runs with (``runtime.store``) when there is one.
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
    ) -> None:
        self.before = before
        self.config = config or CompactionConfig()
        self.model = model
        self.flush_model = flush_model or model
        self.storage = open_storage(storage)
        self.budget: Budget = self.config.resolve(agent_model if agent_model is not None else model)
        self.counter = TokenCounter(self.config.token_counter)

    # -- where a run happens
    def _run(self, config: RunnableConfig) -> _Run:
        runtime = _runtime()
        storage = self.storage
        if storage is None and getattr(runtime, "store", None) is not None:
            storage = StoreStorage(runtime.store)
        thread = (config.get("configurable") or {}).get("thread_id")
        return _Run(thread_id=str(thread) if thread else "default", user_id=_user_id(runtime, config), storage=storage)

    # -- effect drivers
    def _call_sync(self, model: Any, prompt: str) -> str:
        runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
        if self.config.summary_timeout is None:
            return content_text(runnable.invoke([HumanMessage(prompt)]).content)
        pool = ThreadPoolExecutor(max_workers=1)
        try:
            future = pool.submit(contextvars.copy_context().run, runnable.invoke, [HumanMessage(prompt)])
            return content_text(future.result(timeout=self.config.summary_timeout).content)
        finally:
            pool.shutdown(wait=False)

    async def _call_async(self, model: Any, prompt: str) -> str:
        runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
        reply = await asyncio.wait_for(runnable.ainvoke([HumanMessage(prompt)]), self.config.summary_timeout)
        return content_text(reply.content)

    def _drive(self, steps: Steps, run: _Run) -> dict:
        value: Any = None
        error: Optional[Exception] = None
        while True:
            try:
                effect = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                kind, target, args = effect
                if kind == "model":
                    value = self._call_sync(target, *args)
                else:
                    value = getattr(run.storage, target)(*args)
            except Exception as exc:  # noqa: BLE001 - handed to the node, which degrades
                error = exc

    async def _adrive(self, steps: Steps, run: _Run) -> dict:
        value: Any = None
        error: Optional[Exception] = None
        while True:
            try:
                effect = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                kind, target, args = effect
                if kind == "model":
                    value = await self._call_async(target, *args)
                else:
                    value = await getattr(run.storage, "a" + target)(*args)
            except Exception as exc:  # noqa: BLE001 - handed to the node, which degrades
                error = exc

    def _guarded(self, stage: str, state: Any, make_steps, run: _Run) -> Any:
        """Run a node's steps synchronously; any failure leaves the messages alone and is recorded."""
        try:
            return self._drive(make_steps(state, run), run)
        except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
            return _failed(stage, exc)

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

    async def _aguarded(self, stage: str, state: Any, make_steps, run: _Run) -> Any:
        try:
            return await self._adrive(make_steps(state, run), run)
        except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
            return _failed(stage, exc)

    def route(self, state: Any) -> list[str] | str:
        """Return where the gate leads: the side branches when compaction is pending, else the model node."""
        if not read_compaction(_get(state, "compaction")).get("pending"):
            return self.before
        targets = []
        if self.config.flush_before_compact:
            targets.append(FLUSH)
        if self.config.offload_before_compact:
            targets.append(OFFLOAD)
        return targets or [SUMMARIZE]

    # -- the plan
    def plan(self, messages: Sequence[BaseMessage], *, manual: bool = False) -> CompactionPlan:
        """Return the gate's plan for these messages (layers 1-2, trigger, cutoff)."""
        return plan_compaction(
            messages, self.counter.counts(messages), self.budget, self.config, self.counter.message, manual=manual
        )

    # -- the steps of each node
    def _offload_update(self, messages: Sequence[BaseMessage], state_view: dict, run: _Run) -> Steps:
        """Append what is new to the transcript; return the ``compaction`` update (or raise)."""
        done = set(state_view["offloaded_ids"])
        fresh = [m for m in messages if m.id not in done]
        path = yield ("storage", "append_transcript", (run.thread_id, messages_to_dict(fresh)))
        return {"offloaded_ids": [m.id for m in messages if m.id], "offload_path": path, "_fresh": len(fresh)}

    def _gate_steps(self, state: Any, run: _Run) -> Steps:
        messages = list(_get(state, "messages") or [])
        view = read_compaction(_get(state, "compaction"))
        manual = view.get("manual")
        plan = self.plan(messages, manual=bool(manual))
        update: dict[str, Any] = {}
        compaction: dict[str, Any] = {}
        events: list[dict] = []
        if plan.edits:
            offloaded = True
            if self.config.offload_before_compact and run.storage is not None:
                try:
                    result = yield from self._offload_update(messages, view, run)
                    result.pop("_fresh")
                    compaction.update(result)
                except Exception as exc:  # noqa: BLE001 - the originals must reach disk first
                    offloaded = False
                    events.append(_emit({"stage": "gate", "error": f"offload before layer edits failed: {_describe(exc)}"}))
            if offloaded:
                update["messages"] = list(plan.edits.values())
                compaction["counts"] = dict(plan.layer_counts)
                events.append(
                    _emit(
                        {
                            "stage": "gate",
                            "layer": "+".join(plan.layer_counts),
                            "edited": len(plan.edits),
                            "tokens_before": plan.tokens_before,
                            "tokens_after": plan.tokens_after_layers,
                        }
                    )
                )
        if plan.summarize:
            cut = plan.cut
            compaction["pending"] = {
                "reason": plan.reason,
                "evict_ids": [messages[i].id for i in cut.evict],
                "cutoff_id": messages[cut.cutoff].id if cut.cutoff < len(messages) else None,
                "tokens_before": plan.tokens_before,
                "tokens_after_layers": plan.tokens_after_layers,
                "focus": (manual or {}).get("focus"),
            }
        elif manual:
            compaction["manual"] = None
            events.append(_emit({"stage": "gate", "layer": "manual", "note": "nothing to compact"}))
        if events:
            compaction["events"] = events
            compaction["last_error"] = next((e["error"] for e in events if e.get("error")), view.get("last_error"))
        if compaction:
            update["compaction"] = compaction
        return update

    def _offload_steps(self, state: Any, run: _Run) -> Steps:
        if run.storage is None:
            return {"compaction": {"events": [_emit({"stage": "offload", "note": "no storage configured"})]}}
        messages = list(_get(state, "messages") or [])
        view = read_compaction(_get(state, "compaction"))
        try:
            result = yield from self._offload_update(messages, view, run)
        except Exception as exc:  # noqa: BLE001 - summarize sees the missing ids and keeps the history
            event = _emit({"stage": "offload", "error": _describe(exc)})
            return {"compaction": {"last_error": event["error"], "events": [event]}}
        fresh = result.pop("_fresh")
        result["events"] = [_emit({"stage": "offload", "offloaded": fresh, "offload_path": result["offload_path"]})]
        return {"compaction": result}

    def _flush_steps(self, state: Any, run: _Run) -> Steps:
        messages = list(_get(state, "messages") or [])
        view = read_compaction(_get(state, "compaction"))
        pending = view.get("pending") or {}
        evict = set(pending.get("evict_ids") or [])
        todo = flush_input([m for m in messages if m.id in evict], view["flushed_ids"])
        if not todo or run.storage is None or self.flush_model is None:
            return {}
        now = local_now(self.config.timezone)
        day = now.date().isoformat()
        try:
            memory_md = (yield ("storage", "read_memory_file", (run.user_id, MEMORY_FILE))) or ""
            ledger = (yield ("storage", "read_memory_file", (run.user_id, ledger_relpath(day)))) or ""
            answer = yield ("model", self.flush_model, (flush_prompt(todo, memory_md, ledger, day),))
            entry = ledger_entry(answer, ledger, now)
            if entry:
                yield ("storage", "append_memory_file", (run.user_id, ledger_relpath(day), entry))
        except Exception as exc:  # noqa: BLE001 - memory is best effort; summarizing goes on
            event = _emit({"stage": "flush", "error": _describe(exc)})
            return {"compaction": {"last_error": event["error"], "events": [event]}}
        flushed = set(view["flushed_ids"]) | {m.id for m in todo}
        written = entry.count("\n- ") if entry else 0
        return {
            "compaction": {
                "flushed_ids": [m.id for m in messages if m.id in flushed],
                "events": [_emit({"stage": "flush", "flushed_messages": len(todo), "memories": written})],
            }
        }

    def _summarizer_budget(self) -> int:
        window = (
            self.config.summarizer_context_window
            or model_context_window(self.model)
            or self.budget.context_window
            or self.config.fallback_trigger_tokens
        )
        return max(1_000, window - min(self.config.reserved, window // 2) - 1_500)

    def _summary_text(self, evicted: Sequence[BaseMessage], focus: Optional[str]) -> Steps:
        """Yield summarizer calls (split and merged when the prefix is over its window); return (text, problem)."""
        text: Optional[str] = None
        for chunk in chunk_for_window(evicted, self._summarizer_budget(), estimate_text_tokens):
            inputs = ([build_summary_message(text)] if text else []) + list(chunk)
            try:
                answer = yield ("model", self.model, (summary_prompt(render_messages(inputs), focus),))
            except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
                return None, f"the summarizer failed: {_describe(exc)}"
            problem = summary_problem(answer)
            if problem:
                return None, problem
            text = answer
        return text, None

    def _summarize_steps(self, state: Any, run: _Run) -> Steps:
        messages = list(_get(state, "messages") or [])
        view = read_compaction(_get(state, "compaction"))
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
            event = _emit({"stage": "summarize", "error": "offload did not complete; nothing was removed"})
            return {"compaction": {**done, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}

        if self.model is None:  # no summarizer: the deterministic summary is the summary
            text, problem, kind = extractive_summary(evicted), None, "extractive"
        else:
            text, problem = yield from self._summary_text(evicted, pending.get("focus"))
            kind = "summarize"
        if problem:
            if pending.get("tokens_after_layers", 0) < self.budget.hard_limit:
                event = _emit({"stage": "summarize", "error": f"{problem}; history kept (it still fits the window)"})
                return {"compaction": {**done, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}
            text, kind = extractive_summary(evicted), "extractive"

        path = view.get("offload_path") if offload_on else None
        evicted_tokens = sum(self.counter.counts(evicted))
        summary = build_summary_message(finish_summary(text, compaction_note(evicted, evicted_tokens, path)), path)
        kept = [m for m in messages if m.id not in evict_ids]
        at = next((i for i, m in enumerate(kept) if not is_system(m)), len(kept))
        result = kept[:at] + [summary] + kept[at:]
        event = _emit(
            {
                "stage": "summarize",
                "layer": kind,
                "reason": pending.get("reason"),
                "tokens_before": pending.get("tokens_before"),
                "tokens_after": self.counter.total(result),
                "cutoff_id": pending.get("cutoff_id"),
                "evicted": len(evicted),
                "evicted_ids": [m.id for m in evicted],
                "offload_path": path,
                **({"error": problem} if problem else {}),
            }
        )
        return {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result],
            "compaction": {
                **done,
                "summary_id": summary.id,
                "summary_text": text,
                "cutoff_id": pending.get("cutoff_id"),
                "offload_path": path,
                "counts": {kind: 1},
                "events": [event],
                **({"last_error": problem} if problem else {}),
            },
        }

