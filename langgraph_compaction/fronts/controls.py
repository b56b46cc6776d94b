"""What an application does to a thread between its runs: compact it now, show how full it is, wait for its jobs.

- ``compact_thread(graph, config, focus=None)`` (``acompact_thread``): the
  user's ``/compact``: one compaction pass of the thread's checkpointed state
  as the agent's ``compact`` tool asks for it, written back with
  ``update_state``;
- ``context_usage(graph, config)``: the tokens the thread's next request
  takes, of the model's window, and what is left;
- ``wait_for_compaction(graph, thread_id=None, timeout=None)``
  (``await_compaction``): wait for the summaries being prepared in the
  background, so nothing writes into the storage afterwards.

``graph`` is the compiled agent: ``create_agent`` or ``create_deep_agent``
with ``CompactionMiddleware``, a graph built with ``add_compaction``,
``create_react_agent`` with ``make_pre_model_hook``; the middleware, the hook
or the engine itself is accepted too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from ..core.conversation import is_summary
from ..engine.jobs import BackgroundJobs, Job, every_registry
from ..engine.nodes import CompactionEngine, PassResult
from ..engine.run import state_value
from ..storage import thread_key

__all__ = [
    "ContextUsage",
    "ThreadCompaction",
    "acompact_thread",
    "await_compaction",
    "compact_thread",
    "compaction_engines",
    "context_usage",
    "wait_for_compaction",
]

_NO_COMPACTION = (
    "{what} has no compaction: pass a graph built with CompactionMiddleware (create_agent, create_deep_agent), "
    "add_compaction or make_pre_model_hook, or the middleware or hook itself"
)


def _engines_in(candidate: Any) -> list[CompactionEngine]:
    if isinstance(candidate, CompactionEngine):
        return [candidate]
    if callable(getattr(candidate, "engines", None)):  # CompactionMiddleware
        return list(candidate.engines())
    nodes = getattr(candidate, "nodes", None)  # the prebuilt hook and add_compaction's gate
    return [nodes] if isinstance(nodes, CompactionEngine) else []


def compaction_engines(target: Any) -> list[CompactionEngine]:
    """Return the compaction engines of a compiled graph, a middleware, a hook or an engine, the agent's first.

    Raises:
        ValueError: ``target`` has no compaction.
    """
    found = _engines_in(target)
    builder = getattr(target, "builder", None)
    for spec in getattr(builder, "nodes", {}).values():
        runnable = spec.runnable
        for part in (runnable, getattr(runnable, "func", None), getattr(runnable, "afunc", None)):
            found += _engines_in(getattr(part, "__self__", part))  # a middleware's hook is its bound method
    unique = list({id(engine): engine for engine in found}.values())
    if not unique:
        raise ValueError(_NO_COMPACTION.format(what=type(target).__name__))
    return unique


# --- the user's /compact ---------------------------------------------------------


@dataclass(frozen=True)
class ThreadCompaction:
    """What ``compact_thread`` did to a thread: whether a summary was made, the tokens before and after, the events."""

    summarized: bool
    tokens_before: int
    tokens_after: int
    events: list[dict]


def _thread(config: RunnableConfig) -> None:
    if (config.get("configurable") or {}).get("thread_id") is None:
        raise ValueError(
            "config names no thread: pass the thread's config, e.g. {'configurable': {'thread_id': 'user-42'}}"
        )


def _checked(snapshot: Any) -> dict:
    """Return the thread's values, refusing a thread paused in the middle of a run."""
    if snapshot.next:
        raise ValueError(
            f"the thread is paused before {list(snapshot.next)} (an interrupt, or a run that stopped): resume or "
            "finish that run first, then compact it"
        )
    return dict(snapshot.values or {})


def _requested(values: dict, focus: str | None) -> dict:
    """Return the thread's values with the compaction asked for, as the agent's ``compact(focus)`` tool asks."""
    if focus is not None and not isinstance(focus, str):
        raise TypeError(f"focus must be a string (what the summary must keep in detail) or None, not {focus!r}")
    record = state_value(values, "compaction")
    return {**values, "compaction": {**(record if isinstance(record, dict) else {}), "manual": {"focus": focus}}}


def _outcome(engine: CompactionEngine, values: dict, result: PassResult) -> ThreadCompaction:
    before: list[BaseMessage] = engine.messages_of(values)
    after: list[BaseMessage] = engine.messages_of(result.state)
    known = {m.id for m in before if is_summary(m)}
    return ThreadCompaction(
        summarized=any(is_summary(m) and m.id not in known for m in after),
        tokens_before=engine.counter.total(before),
        tokens_after=engine.counter.total(after),
        events=result.events,
    )


def _no_checkpointer(graph: Any) -> None:
    if getattr(graph, "checkpointer", None) is None and hasattr(graph, "get_state"):
        raise ValueError("compact_thread needs the graph compiled with a checkpointer, which keeps the thread")


def compact_thread(graph: Any, config: RunnableConfig, focus: str | None = None) -> ThreadCompaction:
    """Compact a thread now, between two runs, as an application's ``/compact`` command does.

    The thread's state is read from the checkpointer, compacted as when the
    agent calls its ``compact(focus)`` tool (the transcript offloaded, the
    memory flushed, the earlier messages replaced by one summary, the recent
    tail kept) and written back with ``graph.update_state``; no model of the
    agent's is called, the summarizer is.

    Args:
        graph: The compiled agent (see the module), with a checkpointer.
        config: The thread's config (``{"configurable": {"thread_id": ...}}``).
        focus: What the summary must keep in detail (optional).

    Raises:
        ValueError: no compaction in ``graph``, no checkpointer, no thread id, or a thread paused in a run.
    """
    engine = compaction_engines(graph)[0]
    _thread(config)
    _no_checkpointer(graph)
    values = _checked(graph.get_state(config))
    state = _requested(values, focus)
    result = engine.run_pass(state, engine.where(config, state, getattr(graph, "store", None)))
    if result.update:
        graph.update_state(config, result.update)
    return _outcome(engine, values, result)


async def acompact_thread(graph: Any, config: RunnableConfig, focus: str | None = None) -> ThreadCompaction:
    """Return ``compact_thread``'s result, calling the summarizer and the checkpointer with ``await``.

    Args:
        graph: See ``compact_thread``.
        config: See ``compact_thread``.
        focus: See ``compact_thread``.
    """
    engine = compaction_engines(graph)[0]
    _thread(config)
    _no_checkpointer(graph)
    values = _checked(await graph.aget_state(config))
    state = _requested(values, focus)
    result = await engine.arun_pass(state, engine.where(config, state, getattr(graph, "store", None)))
    if result.update:
        await graph.aupdate_state(config, result.update)
    return _outcome(engine, values, result)


# --- what a user sees --------------------------------------------------------------


@dataclass(frozen=True)
class ContextUsage:
    """How full a thread's context is: ``used`` of ``window`` tokens, ``left`` free; compaction starts at ``trigger``.

    ``used`` counts what the next request carries: the messages the model is
    sent (the compacted view in view mode) and, once the agent has made a
    call in this process, its system prompt and tool schemas. ``window`` is
    the model's context window (the trigger when it is unknown).
    """

    used: int
    window: int
    trigger: int

    @property
    def left(self) -> int:
        """Return the tokens still free in the window."""
        return max(0, self.window - self.used)

    @property
    def percent(self) -> int:
        """Return the share of the window used, in whole percent."""
        return 100 * self.used // max(self.window, 1)


def usage_of(engine: CompactionEngine, values: Any) -> ContextUsage:
    """Return the context usage of a thread's values (the graph's state) under ``engine``'s budget."""
    used = engine.counter.total(engine.messages_of(values or {})) + engine.fixed_tokens
    return ContextUsage(used=used, window=engine.budget.hard_limit, trigger=engine.budget.trigger_tokens)


def context_usage(graph: Any, config: RunnableConfig) -> ContextUsage:
    """Return how full a thread's context is (``used``, ``left``, ``window``), from its checkpointed state.

    Args:
        graph: The compiled agent (see the module), with a checkpointer.
        config: The thread's config (``{"configurable": {"thread_id": ...}}``).
    """
    engine = compaction_engines(graph)[0]
    _thread(config)
    _no_checkpointer(graph)
    return usage_of(engine, graph.get_state(config).values)


# --- the jobs in the background ---------------------------------------------------------


def _registries(target: Any) -> list[BackgroundJobs]:
    if target is None:
        return every_registry()
    return list({id(e.jobs): e.jobs for e in compaction_engines(target)}.values())


def _running(registries: Iterable[BackgroundJobs], thread_id: Any) -> list[Job]:
    key = None if thread_id is None else thread_key(thread_id)
    return [job for registry in registries for job in registry.running(key)]


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def wait_for_compaction(target: Any = None, thread_id: Any = None, timeout: float | None = None) -> bool:
    """Wait until no summary is being prepared in the background; return True when none is left running.

    With ``background`` on (the default) a summary is prepared in a thread
    next to the agent and written to the storage; call this before closing
    or deleting that storage (a temporary folder), or before the process
    ends. Jobs started by ``ainvoke`` run on their event loop: wait for them
    with ``await await_compaction(...)``.

    Args:
        target: The compiled agent, its middleware, hook or engine; None: every compaction of this process
            (``compact_messages`` too).
        thread_id: Only this thread's jobs; None: every thread's.
        timeout: Seconds to wait at most; None: until they end. ``0`` only asks whether any runs.
    """
    registries = _registries(target)
    deadline = None if timeout is None else time.monotonic() + timeout
    for job in _running(registries, thread_id):
        job.runner.wait_sync(job, _left(deadline))
    return not _running(registries, thread_id)


async def await_compaction(target: Any = None, thread_id: Any = None, timeout: float | None = None) -> bool:
    """Return ``wait_for_compaction``'s answer, awaiting the jobs (those of ``ainvoke`` too) without blocking the loop.

    Args:
        target: See ``wait_for_compaction``.
        thread_id: See ``wait_for_compaction``.
        timeout: See ``wait_for_compaction``.
    """
    registries = _registries(target)
    deadline = None if timeout is None else time.monotonic() + timeout
    for job in _running(registries, thread_id):
        await job.runner.wait_async(job, _left(deadline))
    return not _running(registries, thread_id)
