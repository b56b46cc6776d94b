"""Where one step runs: its thread's transcript, its user, its storage and its budget (``Run``).

The thread comes from the run's ``configurable["thread_id"]`` (or, for a run
without one, a transcript of the run's own); the user from the run context's
``user_id`` or ``configurable["user_id"]``; the storage from the engine's
setup or the store the graph runs with.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import get_runtime

from ..core.config import Budget
from ..storage import DEFAULT_USER, CompactionStorage, thread_key
from .events import emit_event


@dataclass
class Run:
    """What one step knows about where it runs (``threadless``: the run has no thread id of its own)."""

    thread_id: str
    user_id: str
    storage: CompactionStorage | None
    budget: Budget
    threadless: bool = False
    #: What this run's compaction model calls used, as their providers reported it (``usage_metadata``), added up.
    usage: dict[str, Any] = field(default_factory=dict)


def state_value(state: Any, key: str, default: Any = None) -> Any:
    """Return ``state[key]`` of a dict state, or the attribute of a pydantic or dataclass state."""
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def current_runtime() -> Any:
    """Return the LangGraph runtime of the graph run this code is in, or None outside one."""
    if not var_child_runnable_config.get():  # outside a graph run: no runtime, and no exception raised to say so
        return None
    try:
        return get_runtime()
    except Exception:  # noqa: BLE001 - a runnable context that is not a graph run's
        return None


#: Fields of the run's context (``context_schema``) that override the configured thresholds for that run.
CONTEXT_THRESHOLDS = ("context_window", "trigger_tokens", "trigger_messages", "keep_tokens", "keep_messages")


def context_value(runtime: Any, key: str) -> Any:
    """Return a field of the run's context (a dict or an object), or None."""
    context = getattr(runtime, "context", None)
    return context.get(key) if isinstance(context, dict) else getattr(context, key, None)


def run_user_id(runtime: Any, config: RunnableConfig) -> str:
    """Return the run's user: the context's ``user_id``, else ``configurable["user_id"]``, else the default user."""
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
#: Signs the transcript names this process draws, so a name found in the state is used only if it was drawn here.
_NAME_KEY = os.urandom(32)


def _signed(name: str) -> str:
    return f"{name}.{hmac.new(_NAME_KEY, name.encode('utf-8'), hashlib.sha256).hexdigest()[:16]}"


def _drawn_here(value: str) -> bool:
    name, _, _ = value.rpartition(".")
    return bool(name) and hmac.compare_digest(_signed(name).encode("utf-8"), value.encode("utf-8"))


def run_thread_id(config: RunnableConfig, state: Any, user_id: str) -> tuple[str, bool]:
    """Return (the transcript key of a run, whether the run has no thread id).

    A run with a ``thread_id`` uses it. A run without one (a stateless
    service: no checkpointer) never shares a transcript: the first gate of the
    run draws ``no-thread:<user>:<random>`` and keeps it in the run's
    ``compaction`` state (``RUN_THREAD``), signed, where the later steps and
    the tools of the same run find it; the next run, starting from fresh
    state, draws its own. A name in the state that this process did not draw
    (written there by anyone else) is never used. The first such run of a
    process logs a warning and streams it as an event.
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is not None:
        return thread_key(thread), False
    raw = state_value(state, "compaction")
    known = raw.get(RUN_THREAD) if isinstance(raw, dict) else None
    if isinstance(known, str) and _drawn_here(known):
        return known, True
    with _WARNING_LOCK:  # two runs starting at once: still one warning
        first = not _THREADLESS_WARNED.is_set()
        _THREADLESS_WARNED.set()
    if first:
        emit_event({"stage": "storage", "warning": THREADLESS_WARNING})
    return _signed(f"no-thread:{user_id}:{uuid.uuid4().hex}"), True
