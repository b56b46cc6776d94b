"""The effects a compaction step may ask for: the closed set every stage, the recovery and a background job use.

A step is a generator: it *yields* an effect, the driver (``engine.driver``)
performs it, synchronously or with ``await``, and sends the result back (or
throws the failure in, for the step to record and degrade). So every line of
a stage's logic is written once for ``invoke`` and ``ainvoke``, and what a
stage may touch is exactly what it yields:

- ``CallModel``: a compaction model (summarizer, memory model) with a prompt or a whole request;
- ``CallHook``: an application hook (``before_summary``, ``after_compaction``), sync or async;
- ``StorageCall``: one method of the storage protocol (its ``a``-twin when async);
- ``CallAgent``: the agent's own model call, which overflow recovery retries once;
- ``Parallel``: other steps, side by side (threads, or ``asyncio.gather``), with their results in order;
- ``StartJob`` / ``WaitJob``: start a background job, or wait for it at most ``timeout`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.messages import BaseMessage

if TYPE_CHECKING:
    from .jobs import Job

T = TypeVar("T")

#: The storage protocol's operations a step may ask for (``storage.CompactionStorage``).
StorageOp = Literal[
    "read_transcript", "append_transcript", "read_memory_file", "append_memory_entry", "read_prepared", "write_prepared"
]


@dataclass(frozen=True)
class CallModel:
    """Call a compaction model: ``request`` is a prompt (sent as one human message) or a whole message list."""

    model: Any
    request: str | list[BaseMessage]


@dataclass(frozen=True)
class CallHook:
    """Call an application hook with ``args``; an ``async`` hook is awaited."""

    hook: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True)
class StorageCall:
    """Call ``op`` on the run's storage with ``args`` (``"a" + op`` from an async driver)."""

    op: StorageOp
    args: tuple[Any, ...]


@dataclass(frozen=True)
class CallAgent:
    """Call the agent's own model on ``state`` (the driver's ``call_agent``); its output is the result."""

    state: Any


@dataclass(frozen=True)
class Parallel:
    """Run these steps side by side; the result is the list of their results, in order."""

    steps: tuple[Generator[Any, Any, Any], ...]


@dataclass(frozen=True)
class StartJob:
    """Start a background job (a thread for a sync driver, a task of the running loop for an async one)."""

    job: Job


@dataclass(frozen=True)
class WaitJob:
    """Wait for a background job at most ``timeout`` seconds; the result says whether it is done."""

    job: Job
    timeout: float | None


Effect = CallModel | CallHook | StorageCall | CallAgent | Parallel | StartJob | WaitJob
#: A step: yields effects, receives their results, returns its own result.
Steps = Generator[Effect, Any, T]


def advance(steps: Generator[Any, Any, Any], value: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Advance a step with an effect's result (or error); return (finished, the next effect or the step's result)."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(value))
    except StopIteration as stop:
        return True, stop.value
