"""The one driver pair: ``drive`` performs a step's effects synchronously, ``adrive`` with ``await``.

Every stage, the whole pass, overflow recovery and a background job are steps
(``effects``); these two loops are the only code that performs their effects.
A failing effect is thrown back into the step, which records it and degrades;
LangGraph's control flow (``GraphBubbleUp``: an interrupt, a parent command)
always passes through, and so does ``asyncio.CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from langchain_core.callbacks.base import BaseCallbackManager
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables.config import ensure_config, var_child_runnable_config
from langchain_core.tracers._streaming import _StreamingCallbackHandler, _V2StreamingCallbackHandler
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp

from ..core.conversation import content_text
from .effects import CallAgent, CallHook, CallModel, Effect, Parallel, StartJob, StorageCall, WaitJob, advance
from .errors import worth_retrying
from .events import emit_event, stage_ended, stage_started
from .run import Run

R = TypeVar("R")


@dataclass
class Performer:
    """What the driver performs effects with: the run (storage, usage), the model timeout, the agent's call."""

    run: Run
    timeout: float | None = None
    #: Performs ``CallAgent`` (overflow recovery): the front's call of the agent's model (sync, or a coroutine).
    call_agent: Callable[[Any], Any] | None = None
    #: How many times a compaction model's call that failed ``worth_retrying`` is made again (a background job's).
    retries: int = 0
    #: The models (``id``) whose calls were made again, once per retry: their breakers count each failed call.
    retried: list[int] = field(default_factory=list)
    #: The effect performed when a call is first made again (a job publishing it, for the workers waiting for it).
    announce: Effect | None = None


def add_reply_usage(total: dict[str, Any], reply: Any) -> None:
    """Add a model reply's ``usage_metadata`` (input, output and total tokens) to ``total``."""
    usage = getattr(reply, "usage_metadata", None) or {}
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if isinstance(usage.get(key), int):
            total[key] = total.get(key, 0) + usage[key]
    total["calls"] = total.get("calls", 0) + 1


def _streams(handler: Any) -> bool:
    """Return True for a handler that streams a model's tokens to the caller (``astream_events``, ``stream_mode``)."""
    return isinstance(handler, (_StreamingCallbackHandler, _V2StreamingCallbackHandler))


def _unstreamed(callbacks: Any) -> Any:
    """Return ``callbacks`` (a manager, a list or None) without the handlers that stream tokens."""
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        for handler in [*manager.handlers, *manager.inheritable_handlers]:
            if _streams(handler):
                manager.remove_handler(handler)
        return manager
    return [h for h in callbacks if not _streams(h)] if callbacks else callbacks


@contextmanager
def unstreamed() -> Iterator[None]:
    """Run what it wraps with the run's callbacks, less those that stream tokens to the caller.

    The summarizer and the memory model write text no one should read as the
    agent's: with the run's streaming handlers it would reach
    ``astream_events`` as ``on_chat_model_stream`` chunks of the agent's run.
    Tracing and every other handler still see the call (tagged ``nostream``,
    named ``compaction_model``), under the node that made it. The run's
    config is replaced, not passed: a bound model merges the run's config
    into its own, callbacks included.
    """
    config = ensure_config()
    token = var_child_runnable_config.set({**config, "callbacks": _unstreamed(config.get("callbacks"))})
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def _model_request(effect: CallModel) -> tuple[Any, list[BaseMessage]]:
    runnable = effect.model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_model")
    request: list[BaseMessage] = [HumanMessage(effect.request)] if isinstance(effect.request, str) else effect.request
    return runnable, request


def _call_model(effect: CallModel, performer: Performer) -> str:
    tries = 0
    while True:  # a failure worth retrying is tried again ``performer.retries`` times
        try:
            return _call_model_once(effect, performer)
        except Exception as exc:
            tries += 1
            if tries > performer.retries or not worth_retrying(exc):
                raise
            if not performer.retried and performer.announce is not None:
                _announce(performer.announce, performer)
            performer.retried.append(id(effect.model))


async def _acall_model(effect: CallModel, performer: Performer) -> str:
    tries = 0
    while True:  # a failure worth retrying is tried again ``performer.retries`` times
        try:
            return await _acall_model_once(effect, performer)
        except Exception as exc:
            tries += 1
            if tries > performer.retries or not worth_retrying(exc):
                raise
            if not performer.retried and performer.announce is not None:
                await _aannounce(performer.announce, performer)
            performer.retried.append(id(effect.model))


def _announce(effect: Effect, performer: Performer) -> None:
    try:
        perform(effect, performer)
    except Exception:  # noqa: BLE001 - unannounced, a waiting worker waits for the job as before
        pass


async def _aannounce(effect: Effect, performer: Performer) -> None:
    try:
        await aperform(effect, performer)
    except Exception:  # noqa: BLE001 - unannounced, a waiting worker waits for the job as before
        pass


def _call_model_once(effect: CallModel, performer: Performer) -> str:
    runnable, request = _model_request(effect)
    with unstreamed():
        if performer.timeout is None:
            reply = runnable.invoke(request)
        else:
            pool = ThreadPoolExecutor(max_workers=1)
            try:
                future = pool.submit(contextvars.copy_context().run, runnable.invoke, request)
                reply = future.result(timeout=performer.timeout)
            finally:
                pool.shutdown(wait=False)
    add_reply_usage(performer.run.usage, reply)
    return content_text(reply.content)


async def _acall_model_once(effect: CallModel, performer: Performer) -> str:
    runnable, request = _model_request(effect)
    with unstreamed():
        reply = await asyncio.wait_for(runnable.ainvoke(request), performer.timeout)
    add_reply_usage(performer.run.usage, reply)
    return content_text(reply.content)


def _call_hook(effect: CallHook) -> Any:
    """Call an application hook; an ``async`` one runs to its end on an event loop of its own thread."""
    result = effect.hook(*effect.args)
    if not inspect.isawaitable(result):
        return result

    async def wait() -> Any:
        return await result

    with ThreadPoolExecutor(max_workers=1) as pool:  # this thread may already run a loop (sync code called from one)
        return pool.submit(contextvars.copy_context().run, asyncio.run, wait()).result()


async def _acall_hook(effect: CallHook) -> Any:
    """Await an ``async`` hook; a plain one runs in a worker thread, so a slow one does not block the loop."""
    hook = effect.hook
    if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(getattr(hook, "__call__", None)):  # noqa: B004
        return await hook(*effect.args)
    result = await asyncio.to_thread(hook, *effect.args)
    return await result if inspect.isawaitable(result) else result


def perform(effect: Effect, performer: Performer) -> Any:
    """Perform one effect synchronously and return its result (or raise its failure)."""
    match effect:
        case CallModel():
            return _call_model(effect, performer)
        case StorageCall(op=op, args=args):
            return getattr(performer.run.storage, op)(*args)
        case CallHook():
            return _call_hook(effect)
        case CallAgent(state=state):
            assert performer.call_agent is not None, "a CallAgent effect needs the front's call_agent"
            return performer.call_agent(state)
        case Parallel(steps=steps):
            if len(steps) == 1:
                return [drive(steps[0], performer)]
            with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="compaction") as pool:
                # each thread gets a copy of this context: the stream writer and the runtime travel with it
                ctx = contextvars.copy_context
                futures = [pool.submit(ctx().run, drive, s, performer) for s in steps]
                return [f.result() for f in futures]
        case StartJob(job=job):
            assert job.work is not None and job.awork is not None, "a started job needs its work"
            return job.runner.start_sync(job, job.work, job.awork)
        case WaitJob(job=job, timeout=timeout):
            return job.runner.wait_sync(job, timeout)
    raise TypeError(f"not a compaction effect: {effect!r}")


async def aperform(effect: Effect, performer: Performer) -> Any:
    """Perform one effect with ``await`` and return its result (or raise its failure)."""
    match effect:
        case CallModel():
            return await _acall_model(effect, performer)
        case StorageCall(op=op, args=args):
            return await getattr(performer.run.storage, "a" + op)(*args)
        case CallHook():
            return await _acall_hook(effect)
        case CallAgent(state=state):
            assert performer.call_agent is not None, "a CallAgent effect needs the front's call_agent"
            return await performer.call_agent(state)
        case Parallel(steps=steps):
            return list(await asyncio.gather(*(adrive(s, performer) for s in steps)))
        case StartJob(job=job):
            assert job.work is not None and job.awork is not None, "a started job needs its work"
            return job.runner.start_async(job, job.work, job.awork)
        case WaitJob(job=job, timeout=timeout):
            return await job.runner.wait_async(job, timeout)
    raise TypeError(f"not a compaction effect: {effect!r}")


def drive(steps: Generator[Effect, Any, R], performer: Performer) -> R:
    """Run a step to its end, performing each effect synchronously; return the step's result."""
    done, item = advance(steps, None, None)
    while not done:
        try:
            value, error = perform(item, performer), None
        except GraphBubbleUp:  # LangGraph's control flow is never a failure
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the step, which decides
            value, error = None, exc
        done, item = advance(steps, value, error)
    return cast(R, item)  # done: the step's return value


async def adrive(steps: Generator[Effect, Any, R], performer: Performer) -> R:
    """Run a step to its end, awaiting each effect; return the step's result."""
    done, item = advance(steps, None, None)
    while not done:
        try:
            value, error = await aperform(item, performer), None
        except GraphBubbleUp:
            raise
        except asyncio.CancelledError as cancelled:  # the caller's to handle; the step may say where it stopped
            advance(steps, None, cancelled)
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the step, which decides
            value, error = None, exc
        done, item = advance(steps, value, error)
    return cast(R, item)  # done: the step's return value


def guarded(
    stage: str, steps: Generator[Effect, Any, R], failed: Callable[[str, Exception], R], lifecycle: bool = True
) -> Generator[Effect, Any, R]:
    """Return a stage's steps that never fail: a failure leaves the messages alone and is recorded in its result.

    ``failed`` makes the result of a failed stage (its node update, ``events.failed_update``, or its
    typed result, ``results.failed_result``). The
    side steps (flush, offload, summarize) also stream their start and end
    (``events.stage_started``), so a UI can show "compacting..."; ``lifecycle=False``: the caller streams them.
    """
    started = stage_started(stage) if lifecycle else None
    try:
        result = yield from steps
    except GraphBubbleUp:
        raise
    except asyncio.CancelledError:
        emit_event({"stage": stage, "error": "cancelled; this step wrote no state update"})
        raise
    except Exception as exc:  # noqa: BLE001 - compaction must never stop the agent
        result = failed(stage, exc)
    return stage_ended(stage, started, result)
