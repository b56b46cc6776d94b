"""Compaction events: streamed on ``stream_mode="custom"``, logged, and returned for the state.

Every stage reports what it did (or why it did nothing) through
``emit_event``; the side steps also stream their start and end
(``stage="lifecycle"``) so a UI can show "compacting..." while they run.
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypeVar

from langgraph.config import get_stream_writer

from .state import GraphUpdate

logger = logging.getLogger("langgraph_compaction")
R = TypeVar("R")


class _Fields(dict[str, Any]):
    """An event's fields in a log record: a dict to read back, one readable line when printed."""

    def __str__(self) -> str:
        said = self.get("error") or self.get("warning")
        if not said:
            return ", ".join(f"{k}={v}" for k, v in self.items() if k != "time")
        tags = ", ".join(f"{k}={self[k]}" for k in ("event", "layer", "breaker") if k in self)
        return f"{said} [{tags}]" if tags else str(said)


def emit_event(event: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    """Send a compaction event to ``stream_mode="custom"`` and the log (one line); return it for the state.

    ``stream=False``: to the log only (a summary prepared for later streams when it is applied).
    """
    event = {"type": "compaction", "time": time.time(), **event}
    log = logger.warning if event.get("error") or event.get("warning") else logger.info
    fields = _Fields((k, v) for k, v in event.items() if k not in ("type", "evicted_ids"))
    log("compaction %s: %s", event.get("stage"), fields)
    try:
        if stream:
            get_stream_writer()(event)
    except Exception:  # noqa: BLE001 - no stream outside a graph run
        pass
    return {k: v for k, v in event.items() if k != "evicted_ids"}


#: The steps a UI shows while "compacting...". Their progress is streamed (``stream_mode="custom"``), not kept,
#: as ``stage="lifecycle"`` events, apart from each step's result event: the gate's ``phase="started"`` when it
#: asks for a summary, then ``phase="start"`` and ``phase="end"`` around each step; summarize's end ends it.
LIFECYCLE_STEPS = ("flush", "offload", "summarize")


def blocking_started(
    reason: str, tokens_before: int, tokens_after_layers: int, evict: int, why: str | None, **fields: Any
) -> None:
    """Stream that the gate compacts in front of the model call (``compaction_started``, ``mode="blocking"``).

    Streamed and logged, not kept: a UI shows "compacting..." until the
    summarize step ends (``compaction_applied``, kept). ``why`` says why it
    blocks when background compaction is on.
    """
    started = {"event": "compaction_started", "mode": "blocking", "usage": {}, **({"why": why} if why else {})}
    emit_event(
        {
            "stage": "lifecycle",
            "phase": "started",
            "reason": reason,
            "tokens_before": tokens_before,
            "tokens_after_layers": tokens_after_layers,
            "evict": evict,
            **started,
            **fields,
        }
    )


def stage_started(stage: str) -> float | None:
    """Stream the start of a side step; return its start time (None for the gate, which runs on every call)."""
    stage = stage.removeprefix("compaction_")  # the engine names the steps by their graph node
    if stage not in LIFECYCLE_STEPS:
        return None
    emit_event({"stage": "lifecycle", "phase": "start", "step": stage})
    return time.monotonic()


def stage_ended(stage: str, started: float | None, result: R) -> R:
    """Stream the end of a side step (how long it took, whether it recorded an error); return its result unchanged.

    ``result`` is a node update or a typed stage result (``results``): either says its error as ``last_error``.
    """
    if started is not None:
        if isinstance(result, dict):
            error = (result.get("compaction") or {}).get("last_error")
        else:
            error = getattr(result, "last_error", None)
        ms = round((time.monotonic() - started) * 1000, 1)
        emit_event(
            {"stage": "lifecycle", "phase": "end", "step": stage.removeprefix("compaction_"), "ms": ms, "ok": not error}
        )
    return result


def describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def failure_event(stage: str, exc: Exception) -> dict[str, Any]:
    """Stream and log a stage's failure (its traceback at debug level); return its event."""
    event = emit_event({"stage": stage, "error": describe_error(exc)})
    logger.debug("compaction %s failed", stage, exc_info=exc)
    return event


def failed_update(stage: str, exc: Exception) -> GraphUpdate:
    """Return the update of a node that failed: nothing pending, the error recorded, messages untouched."""
    event = failure_event(stage, exc)
    return {"compaction": {"pending": None, "last_error": event["error"], "events": [event], "counts": {"failed": 1}}}
