"""What the offload, flush and summarize stages return, typed, and the one place they become graph updates.

A stage's generator returns one of these frozen results; ``update_of``
renders it into the state update a graph node writes (``messages`` and
``compaction``), and ``rendered`` wraps a stage's steps so a driver gets
that update. The events a result holds were already streamed and logged
(``events.emit_event``); the result keeps them for the state.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage, message_to_dict
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from .effects import Steps
from .events import failure_event
from .state import Breaker, GraphUpdate

#: An event as ``emit_event`` returned it: what the state keeps of it.
Event = dict[str, Any]


@dataclass(frozen=True)
class OffloadResult:
    """What the offload did: the messages the transcript now holds and where, or why it holds none."""

    events: tuple[Event, ...]
    #: The ids the transcript vouches for (none after a failure); None when there is no storage to write to.
    offloaded_ids: tuple[str, ...] | None = None
    offload_path: str | None = None
    last_error: str | None = None

    def record(self) -> dict[str, Any]:
        """Return the ``compaction`` update of this offload."""
        out: dict[str, Any] = {}
        if self.offloaded_ids is not None:
            out["offloaded_ids"] = list(self.offloaded_ids)
            if self.last_error is None:
                out["offload_path"] = self.offload_path
        if self.last_error is not None:
            out["last_error"] = self.last_error
        out["events"] = list(self.events)
        return out


@dataclass(frozen=True)
class HeldFlush:
    """A memory model's answer held for the compaction that commits it: its text, the messages, the ledger marker."""

    text: str
    ids: tuple[str | None, ...]
    marker: str


@dataclass(frozen=True)
class FlushResult:
    """What the flush did: the messages it flushed, an answer held for later, the breaker it moved, its events."""

    events: tuple[Event, ...] = ()
    #: The flush cursor after a committed flush; None when it did not move.
    flushed_ids: tuple[str, ...] | None = None
    #: A background job's answer, written when its summary is applied (``flush.commit_flush``).
    held: HeldFlush | None = None
    #: The memory model's breaker, by its record key, when this flush moved it.
    breakers: Mapping[str, Breaker] = field(default_factory=dict)
    last_error: str | None = None

    def fields(self) -> dict[str, Any]:
        """Return the ``compaction`` update of this flush, but for its events."""
        out: dict[str, Any] = dict(self.breakers)
        if self.last_error is not None:
            out["last_error"] = self.last_error
        elif self.flushed_ids is not None:
            out["flushed_ids"] = list(self.flushed_ids)
        return out

    def record(self) -> dict[str, Any]:
        """Return the ``compaction`` update of this flush."""
        return {**self.fields(), **({"events": list(self.events)} if self.events else {})}


@dataclass(frozen=True)
class Applied:
    """A summary put in place of the evicted messages: the history left, and what the record keeps of it."""

    #: The history after it (None in view mode: the state keeps every message, the record rebuilds the view).
    messages: tuple[BaseMessage, ...] | None
    summary: BaseMessage
    pins: list[Any]
    cutoff_id: str | None
    offload_path: str | None
    #: The layer that made it (``summarize`` or ``extractive``), and how many messages it replaced.
    kind: str
    evicted: int
    event: Event
    cooldown_id: str | None
    #: View mode only: the view record and the layer 1-2 edits of what it keeps.
    view: dict[str, Any] | None = None
    view_edits: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """Return the ``compaction`` update of this summary, but for its event (``event``)."""
        view = {} if self.view is None else {"view": self.view, "view_edits": self.view_edits}
        return {
            **view,
            "summary_id": self.summary.id,
            "pins": self.pins,
            "cutoff_id": self.cutoff_id,
            "offload_path": self.offload_path,
            "counts": {self.kind: 1},
            "edited_messages": {self.kind: self.evicted},
            "cooldown_id": self.cooldown_id,
            "prepared": None,  # a summary prepared in the background covered what this one replaced
        }

    def writes(self) -> list[BaseMessage] | None:
        """Return the ``messages`` writes of this summary: the history rewritten (None in view mode)."""
        return None if self.messages is None else [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]


@dataclass(frozen=True)
class SummaryResult:
    """What summarize did with the pending request: the summary it applied, or why none, and what it recorded."""

    #: False when nothing was pending: the stage writes nothing.
    acted: bool = True
    applied: Applied | None = None
    #: The stage's own events (hooks, breaker, transcript), before the applied summary's.
    events: tuple[Event, ...] = ()
    last_error: str | None = None
    #: True when the stage failed (counted as ``failed``).
    failed: bool = False
    breaker: Breaker | None = None
    #: The newest message when the summary would not shrink the context: no new attempt before the next one.
    cooldown_id: str | None = None

    def record(self) -> dict[str, Any]:
        """Return the ``compaction`` update of this summarize step."""
        out: dict[str, Any] = {"pending": None, "manual": None}
        if self.breaker is not None:
            out["breaker"] = self.breaker
        if self.applied is not None:
            out.update(self.applied.record())
            out["events"] = [*self.events, self.applied.event]
        if self.failed:
            out.update(last_error=self.last_error, events=list(self.events), counts={"failed": 1})
        elif self.cooldown_id is not None:
            out.update(events=list(self.events), cooldown_id=self.cooldown_id)
        if self.applied is not None and self.last_error:
            out["last_error"] = self.last_error
        return out

    def update(self) -> GraphUpdate:
        """Return the state update of this summarize step."""
        if not self.acted:
            return {}
        writes = self.applied.writes() if self.applied is not None else None
        return {**({"messages": writes} if writes is not None else {}), "compaction": self.record()}


StageResult = OffloadResult | FlushResult | SummaryResult


def failed_result(stage: str, exc: Exception) -> Any:
    """Return the typed result of a stage that raised: it changed nothing and recorded the error (for ``guarded``)."""
    event = failure_event(stage, exc)
    if stage == "summarize":
        return SummaryResult(events=(event,), last_error=event["error"], failed=True)
    if stage == "flush":
        return FlushResult(events=(event,), last_error=event["error"])
    return OffloadResult(events=(event,), offloaded_ids=(), last_error=event["error"])


@dataclass(frozen=True)
class JobResult:
    """What a background job made of the stages it ran: the summary ready to apply, or why there is none.

    ``record`` renders it once, as the job keeps it, the state holds it
    (``compaction["prepared"]``) and the storage publishes it to the
    thread's other workers.
    """

    #: The cut the job started with (``id``, ``covered``, ``evict_ids``, ``cutoff_id``, ``tokens_before``, ...).
    meta: Mapping[str, Any]
    summary: SummaryResult
    offload: OffloadResult | None = None
    flush: FlushResult | None = None
    #: The compaction model's usage over the job's calls.
    usage: Mapping[str, Any] = field(default_factory=dict)

    def breakers(self) -> dict[str, Breaker]:
        """Return the breakers the job's model calls moved, by their record key."""
        out: dict[str, Breaker] = dict(self.flush.breakers) if self.flush is not None else {}
        if self.summary.breaker is not None:
            out["breaker"] = self.summary.breaker
        return out

    def notes(self) -> list[Event]:
        """Return what the gate streams and keeps when it takes the job's outcome.

        What the offload and the memory model said went wrong (a failure, an
        open breaker), the summarizer's breaker opening, and what a
        provider's own compaction said (its bill, what it had dropped), kept
        as a blocking compaction keeps it.
        """
        side = [r for r in (self.offload, self.flush) if r is not None]
        notes = [e for r in side for e in r.events if e.get("note") or e.get("error")]
        return notes + [e for e in self.summary.events if e.get("native") or e.get("observed") or e.get("breaker")]

    def events(self) -> list[Event]:
        """Return every event the stages emitted: kept as they are when the summary was made in the run."""
        side = [r for r in (self.offload, self.flush) if r is not None]
        return [e for r in side for e in r.events] + list(self.summary.events)

    def record(self) -> dict[str, Any]:
        """Return the job's record: the prepared summary ready to apply (``status == "ready"``), or its error."""
        applied, usage = self.summary.applied, dict(self.usage)
        common = {"usage": usage, "breakers": self.breakers(), "notes": self.notes()}
        if applied is None:
            return {"error": self._why_none(), **common}
        held = self.flush.held if self.flush is not None else None
        return {
            **self.meta,
            "status": "ready",
            "summary": message_to_dict(applied.summary),
            "pins": applied.pins,
            "kind": applied.kind,
            "offload_path": applied.offload_path,
            "flush": None if held is None else {"text": held.text, "ids": list(held.ids), "marker": held.marker},
            "tokens_after": applied.event.get("tokens_after"),
            "fallback": self.summary.last_error,
            **common,
            "ready_at": time.time(),
        }

    def _why_none(self) -> str:
        """Return why the job made no summary: its error, else its first note."""
        notes = (e["note"] for e in self.summary.events if e.get("note"))
        return self.summary.last_error or next(notes, None) or "no summary was made"


def update_of(result: StageResult) -> GraphUpdate:
    """Return the graph update of a stage's result."""
    if isinstance(result, SummaryResult):
        return result.update()
    record = result.record()
    return {"compaction": record} if record else {}


def rendered(steps: Steps[Any]) -> Steps[GraphUpdate]:
    """Return ``steps`` (a stage's, returning its typed result) returning the graph update it renders to."""
    return update_of((yield from steps))
