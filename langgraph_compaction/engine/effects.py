"""How a stage runs: its effects (a model call, a storage call) and the drivers that perform them.

Each stage is written once, as a generator that *yields* the effects it
needs and receives their results; ``EffectDriver`` runs it synchronously or
asynchronously (storage through the storage's ``a*`` methods), so
``invoke`` and ``ainvoke`` share every line of logic. A failing model or
disk is thrown back into the generator, which records it and degrades;
``asyncio.CancelledError`` is not caught.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import uuid
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime

from ..core.config import Budget
from ..core.conversation import content_text
from ..storage import DEFAULT_USER, CompactionStorage, thread_key
from .events import emit_event, failed_update, stage_ended, stage_started

Effect = tuple
Steps = Generator[Effect, Any, dict]


@dataclass
class Run:
    """What one node run knows about where it runs (``threadless``: the run has no thread id of its own)."""

    thread_id: str
    user_id: str
    storage: CompactionStorage | None
    budget: Budget
    threadless: bool = False
    #: What this run's compaction model calls used, as their providers reported it (``usage_metadata``), added up.
    usage: dict = field(default_factory=dict)


def add_usage(total: dict, reply: Any) -> None:
    """Add a model reply's ``usage_metadata`` (input, output and total tokens) to ``total``."""
    usage = getattr(reply, "usage_metadata", None) or {}
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if isinstance(usage.get(key), int):
            total[key] = total.get(key, 0) + usage[key]
    total["calls"] = total.get("calls", 0) + 1


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


def context_value(runtime: Any, key: str) -> Any:
    context = getattr(runtime, "context", None)
    return context.get(key) if isinstance(context, dict) else getattr(context, key, None)


def run_user_id(runtime: Any, config: RunnableConfig) -> str:
    value = context_value(runtime, "user_id") or (config.get("configurable") or {}).get("user_id")
    return str(value) if value else DEFAULT_USER


#: The ``compaction`` key naming the transcript of a run without a thread id (see ``run_thread_id``).
RUN_THREAD = "run_thread"
THREADLESS_WARNING = (
    "a run with no thread id (no checkpointer, or no configurable.thread_id): its transcript is its own, "
    "named for this run and its user, and no later run reads it; pass a thread_id (with a checkpointer) "
    "so that a conversation keeps its transcript across requests"
)
_THREADLESS_WARNED = threading.Event()  # the warning is given once per process
_WARNING_LOCK = threading.Lock()


def run_thread_id(config: RunnableConfig, state: Any, user_id: str) -> tuple[str, bool]:
    """Return (the transcript key of a run, whether the run has no thread id).

    A run with a ``thread_id`` uses it. A run without one (a stateless
    service: no checkpointer) never shares a transcript: the first gate of the
    run draws ``no-thread:<user>:<random>`` and keeps it in the run's
    ``compaction`` state (``RUN_THREAD``), where the later steps and the
    tools of the same run find it; the next run, starting from fresh state,
    draws its own. The first such run of a process logs a warning and streams
    it as an event.
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is not None:
        return thread_key(thread), False
    raw = state_value(state, "compaction")
    known = raw.get(RUN_THREAD) if isinstance(raw, dict) else None
    if isinstance(known, str) and known:
        return known, True
    with _WARNING_LOCK:  # two runs starting at once: still one warning
        first = not _THREADLESS_WARNED.is_set()
        _THREADLESS_WARNED.set()
    if first:
        emit_event({"stage": "storage", "warning": THREADLESS_WARNING})
    return f"no-thread:{user_id}:{uuid.uuid4().hex}", True


def advance(steps: Steps, value: Any, error: Exception | None) -> tuple[bool, Any]:
    """Advance a node's steps with an effect's result (or error); return (finished, next effect or update)."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(value))
    except StopIteration as stop:
        return True, stop.value


class EffectDriver:
    """Runs a stage's steps, performing each effect it yields (mixed into ``CompactionNodes``).

    Model calls are tagged ``TAG_NOSTREAM`` so their tokens never stream into
    the chat, and bounded by ``config.summary_timeout``.
    """

    def _call_sync(self, model: Any, prompt: str | list[BaseMessage], usage: dict | None = None) -> str:
        """Call a compaction model with a prompt (one human message) or a whole request (a message list)."""
        runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
        request = [HumanMessage(prompt)] if isinstance(prompt, str) else prompt
        if self.config.summary_timeout is None:
            reply = runnable.invoke(request)
        else:
            pool = ThreadPoolExecutor(max_workers=1)
            try:
                future = pool.submit(contextvars.copy_context().run, runnable.invoke, request)
                reply = future.result(timeout=self.config.summary_timeout)
            finally:
                pool.shutdown(wait=False)
        if usage is not None:
            add_usage(usage, reply)
        return content_text(reply.content)

    async def _call_async(self, model: Any, prompt: str | list[BaseMessage], usage: dict | None = None) -> str:
        runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
        request = [HumanMessage(prompt)] if isinstance(prompt, str) else prompt
        reply = await asyncio.wait_for(runnable.ainvoke(request), self.config.summary_timeout)
        if usage is not None:
            add_usage(usage, reply)
        return content_text(reply.content)

    @staticmethod
    def _hook_sync(hook: Any, *args: Any) -> Any:
        """Call an application hook; an ``async`` one runs to its end on an event loop of its own thread."""
        result = hook(*args)
        if not inspect.isawaitable(result):
            return result

        async def wait() -> Any:
            return await result

        with ThreadPoolExecutor(
            max_workers=1
        ) as pool:  # this thread may already run a loop (sync code called from one)
            return pool.submit(contextvars.copy_context().run, asyncio.run, wait()).result()

    @staticmethod
    async def _hook_async(hook: Any, *args: Any) -> Any:
        """Await an ``async`` hook; a plain one runs in a worker thread, so a slow one does not block the loop."""
        if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(getattr(hook, "__call__", None)):
            return await hook(*args)
        result = await asyncio.to_thread(hook, *args)
        return await result if inspect.isawaitable(result) else result

    def _effect(self, effect: Effect, run: Run) -> Any:
        kind, target, args = effect
        if kind == "model":
            return self._call_sync(target, *args, usage=run.usage)
        if kind == "background":  # start or wait for a compaction prepared next to the agent (``background``)
            return target.run_sync(*args)
        if kind == "hook":
            return self._hook_sync(target, *args)
        return getattr(run.storage, target)(*args)

    async def _aeffect(self, effect: Effect, run: Run) -> Any:
        kind, target, args = effect
        if kind == "model":
            return await self._call_async(target, *args, usage=run.usage)
        if kind == "background":
            return await target.run_async(*args)
        if kind == "hook":
            return await self._hook_async(target, *args)
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
        started = stage_started(stage)
        try:
            update = self._drive(make_steps(state, run), run)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
            update = failed_update(stage, exc)
        return stage_ended(stage, started, update)

    async def _aguarded(self, stage: str, state: Any, make_steps, run: Run) -> Any:
        started = stage_started(stage)
        try:
            update = await self._adrive(make_steps(state, run), run)
        except asyncio.CancelledError:  # the caller's to handle; the log still says where it stopped
            emit_event({"stage": stage, "error": "cancelled; this step wrote no state update"})
            raise
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
            update = failed_update(stage, exc)
        return stage_ended(stage, started, update)
