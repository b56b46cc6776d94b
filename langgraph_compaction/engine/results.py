"""What the offload, flush and summarize stages return, typed, and the one place they become graph updates.

A stage's generator returns one of these frozen results; ``update_of``
renders it into the state update a graph node writes (``messages`` and
``compaction``), and ``rendered`` wraps a stage's steps so a driver gets
that update. The events a result holds were already streamed and logged
(``events.emit_event``); the result keeps them for the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from .effects import Steps
from .state import Breaker

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

    def record(self) -> dict[str, Any]:
        """Return the ``compaction`` update of this flush."""
        if self.last_error is not None:
            return {"last_error": self.last_error, "events": list(self.events), **self.breakers}
        out: dict[str, Any] = dict(self.breakers)
        if self.flushed_ids is not None:
            out["flushed_ids"] = list(self.flushed_ids)
        if self.events:
            out["events"] = list(self.events)
        return out


@dataclass(frozen=True)
class Applied:
    """A summary put in place of the evicted messages: the history left, and what the record keeps of it."""

    #: The history after it (None in view mode: the state keeps every message, the record rebuilds the view).
    messages: tuple[BaseMessage, ...] | None
    summary_id: str | None
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
        """Return the ``compaction`` update of this summary."""
        view = {} if self.view is None else {"view": self.view, "view_edits": self.view_edits}
        return {
            **view,
            "summary_id": self.summary_id,
            "pins": self.pins,
            "cutoff_id": self.cutoff_id,
            "offload_path": self.offload_path,
            "counts": {self.kind: 1},
            "edited_messages": {self.kind: self.evicted},
            "events": [self.event],
            "cooldown_id": self.cooldown_id,
            "prepared": None,  # a summary prepared in the background covered what this one replaced
        }

    def update(self) -> dict[str, Any]:
        """Return the state update of this summary alone (the swap of a summary prepared in the background)."""
        rewrite = {} if self.messages is None else {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]}
        return {**rewrite, "compaction": self.record()}


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

    def update(self) -> dict[str, Any]:
        """Return the state update of this summarize step."""
        if not self.acted:
            return {}
        rewrite = self.applied.update() if self.applied is not None else {}
        return {**({"messages": rewrite["messages"]} if "messages" in rewrite else {}), "compaction": self.record()}


StageResult = OffloadResult | FlushResult | SummaryResult


def update_of(result: StageResult) -> dict[str, Any]:
    """Return the graph update of a stage's result."""
    if isinstance(result, SummaryResult):
        return result.update()
    record = result.record()
    if isinstance(result, FlushResult) and result.held is not None:
        held = {"text": result.held.text, "ids": list(result.held.ids), "marker": result.held.marker}
        return {"compaction": record, "flush_answer": held}
    return {"compaction": record} if record else {}


def rendered(steps: Steps[Any]) -> Steps[dict[str, Any]]:
    """Return ``steps`` (a stage's, returning its typed result) returning the graph update it renders to."""
    return update_of((yield from steps))
