"""The graph state: ``messages`` plus a JSON-native ``compaction`` record with its reducer.

Every key of the ``compaction`` record is declared here (``CompactionRecord``
and the records it holds: ``Pending``, ``Prepared``, ``Breaker``), read and
defaulted in one place (``read_compaction``), and written only through the
reducer (``merge_compaction``). Every value is a dict, list, str, int, float,
bool or None, so it survives every checkpointer's serializer and a state edit
in Studio; a value edited into the wrong type falls back to its default (and is
logged) instead of crashing the next run. A key the record does not declare is
dropped.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.channels.delta import DeltaChannel

from ..core.calibration import read_calibration
from ..core.fidelity import clean_pins, merge_pins
from .langgraph_internals import messages_delta_reducer

logger = logging.getLogger("langgraph_compaction")

#: How many past events the state keeps (the stream carries all of them).
MAX_EVENTS = 20

#: The keys whose values the reducer adds up (per layer), rather than replacing them: ``counts``, how many
#: compactions each layer made (and how many failed); ``edited_messages``, how many messages each layer touched
#: (shortened by layers 1-2, replaced by a summary), under the same names.
SUMMED_KEYS: tuple[Literal["counts", "edited_messages"], ...] = ("counts", "edited_messages")


class Pending(TypedDict):
    """A summary the gate asked for: what leaves the state, where the kept tail starts, and why."""

    reason: str
    evict_ids: list[str]
    cutoff_id: str | None
    tokens_before: int
    tokens_after_layers: int
    #: The target the summary must meet, in the estimator's units (calibrated like the gate's budget).
    target_tokens: int
    focus: str | None


class Breaker(TypedDict):
    """A compaction model's circuit breaker: consecutive failures, and when it closes again."""

    failures: int
    open_until: float
    reason: str | None


class Prepared(TypedDict):
    """A summary prepared in the background, ready for the gate to apply (see ``engine.background``)."""

    id: str
    #: ``[id, digest]`` of every message the summary replaces, in order (``core.background.covered``).
    covered: list[list[str]]
    evict_ids: list[str]
    cutoff_id: str | None
    tokens_before: int
    started_at: float
    ready_at: float
    #: The summary message and the messages kept in front of it (``message_to_dict``).
    summary: dict[str, Any]
    pins: list[dict[str, Any]]
    kind: str
    offload_path: str | None
    #: The memory model's answer, written to the ledger when the summary is applied (None: nothing to write).
    flush: dict[str, Any] | None
    tokens_after: int | None
    usage: dict[str, Any]
    #: Why the summarizer's summary was not used, when an extractive one stands in (None: the model's).
    fallback: str | None


class Lease(TypedDict):
    """Which worker prepares the conversation's next summary in the background, until when (or that it is applied)."""

    id: str
    owner: str
    until: float
    #: ``"preparing"`` while the job runs, ``"applied"`` once a worker applied its summary.
    state: str
    #: Where the kept tail of the summary being prepared starts (the messages before it must not change).
    cutoff_id: str | None


class CompactionRecord(TypedDict):
    """The ``compaction`` key of the state, every key present (what ``read_compaction`` returns)."""

    #: The summary the gate asked for, until summarize handles it.
    pending: Pending | None
    #: The agent's ``compact(focus)`` request, until the gate handles it.
    manual: dict[str, Any] | None
    #: Ids of the messages written to the transcript (checked before any is removed).
    offloaded_ids: list[str]
    #: Ids of the messages whose memories were extracted (each is flushed once).
    flushed_ids: list[str]
    #: The latest summary, where its kept tail started, and the newest message it saw.
    summary_id: str | None
    cutoff_id: str | None
    cooldown_id: str | None
    #: Where the transcript is, relative to the storage.
    offload_path: str | None
    last_error: str | None
    counts: dict[str, int]
    edited_messages: dict[str, int]
    events: list[dict[str, Any]]
    pins: list[dict[str, Any]]
    #: The transcript of a run without a thread id (see ``engine.run.run_thread_id``).
    run_thread: str | None
    #: How many messages the gate saw when it last wrote this record.
    seen_messages: int | None
    prepared: Prepared | None
    #: The worker preparing the next summary in the background (one per conversation across workers).
    lease: Lease | None
    calibration: dict[str, Any] | None
    breaker: Breaker | None
    flush_breaker: Breaker | None
    #: View mode: the latest compaction's view record, and layers 1-2's shortened copies by message id.
    view: dict[str, Any] | None
    view_edits: dict[str, dict[str, Any]]
    #: True once a gate ran in front of this agent's model (the compact and pin tools check it).
    wired: bool


_DEFAULTS: dict[str, Any] = {
    "pending": None,
    "manual": None,
    "offloaded_ids": [],
    "flushed_ids": [],
    "summary_id": None,
    "cutoff_id": None,
    "cooldown_id": None,
    "offload_path": None,
    "last_error": None,
    "counts": {},
    "edited_messages": {},
    "events": [],
    "pins": [],
    "run_thread": None,
    "seen_messages": None,
    "prepared": None,
    "lease": None,
    "calibration": None,
    "breaker": None,
    "flush_breaker": None,
    "view": None,
    "view_edits": {},
    "wired": False,
}
_TYPES: dict[str, type | tuple[type, ...]] = {
    "pending": dict,
    "manual": dict,
    "offloaded_ids": list,
    "flushed_ids": list,
    "summary_id": str,
    "cutoff_id": str,
    "cooldown_id": str,
    "offload_path": str,
    "last_error": str,
    "counts": dict,
    "edited_messages": dict,
    "events": list,
    "pins": list,
    "run_thread": str,
    "seen_messages": int,
    "prepared": dict,
    "lease": dict,
    "calibration": dict,
    "breaker": dict,
    "flush_breaker": dict,
    "view": dict,
    "view_edits": dict,
    "wired": bool,
}
assert set(_DEFAULTS) == set(_TYPES) == set(CompactionRecord.__annotations__)


def _strings(value: Any) -> list[str]:
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def read_breaker(raw: Any) -> Breaker:
    """Return a circuit breaker record with every key present (a closed breaker for anything else)."""
    raw = raw if isinstance(raw, dict) else {}
    failures, until = raw.get("failures"), raw.get("open_until")
    return {
        "failures": failures if isinstance(failures, int) and failures > 0 else 0,
        "open_until": float(until) if isinstance(until, (int, float)) and until > 0 else 0.0,
        "reason": raw.get("reason") if isinstance(raw.get("reason"), str) else None,
    }


def read_pending(raw: Any) -> Pending | None:
    """Return a pending summary request with every key present, or None when there is none (or it is unusable)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("reason"), str):
        return None
    focus = raw.get("focus")
    cutoff = raw.get("cutoff_id")
    return {
        "reason": raw["reason"],
        "evict_ids": _strings(raw.get("evict_ids")),
        "cutoff_id": cutoff if isinstance(cutoff, str) else None,
        "tokens_before": _int(raw.get("tokens_before")),
        "tokens_after_layers": _int(raw.get("tokens_after_layers")),
        "target_tokens": _int(raw.get("target_tokens")),
        "focus": focus if isinstance(focus, str) else None,
    }


def read_lease(raw: Any) -> Lease | None:
    """Return a lease with every key present, or None when there is none (or it is unusable)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("owner"), str):
        return None
    until = raw.get("until")
    stated = raw.get("state")
    state = stated if isinstance(stated, str) and stated in ("preparing", "applied") else "preparing"
    cutoff = raw.get("cutoff_id")
    return Lease(
        id=raw["id"],
        owner=raw["owner"],
        until=float(until) if isinstance(until, (int, float)) else 0.0,
        state=state,
        cutoff_id=cutoff if isinstance(cutoff, str) else None,
    )


def read_compaction(raw: Any) -> CompactionRecord:
    """Return the ``compaction`` value with every declared key present and of the right type.

    Wrong types (a Studio edit, a hand-written update) fall back to the
    default for that key and are logged, so the next run never crashes on
    them; keys the record does not declare are dropped.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        logger.warning("compaction state is %s, not a dict; starting from defaults", type(raw).__name__)
        raw = {}
    out: dict[str, Any] = {}
    for key, default in _DEFAULTS.items():
        value = raw.get(key, default)
        if value is not None and not isinstance(value, _TYPES[key]):
            logger.warning("compaction[%r] has type %s; using the default", key, type(value).__name__)
            value = default
        out[key] = list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
    out["offloaded_ids"] = _strings(out["offloaded_ids"])
    out["flushed_ids"] = _strings(out["flushed_ids"])
    for key in SUMMED_KEYS:
        out[key] = {k: v for k, v in out[key].items() if isinstance(v, int) and not isinstance(v, bool)}
    out["pins"] = clean_pins(out["pins"])
    out["pending"] = read_pending(out["pending"])
    out["lease"] = read_lease(out["lease"])
    if out["manual"] is not None:
        focus = out["manual"].get("focus")
        out["manual"] = {"focus": focus if isinstance(focus, str) else None}
    if out["calibration"] is not None:
        out["calibration"] = read_calibration(out["calibration"])
    for key in ("breaker", "flush_breaker"):
        if out[key] is not None:
            out[key] = read_breaker(out[key])
    out["view_edits"] = {k: v for k, v in out["view_edits"].items() if isinstance(k, str) and isinstance(v, dict)}
    return out  # type: ignore[return-value]


def merge_compaction(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Merge a node's ``compaction`` write into the state (the reducer).

    Keys are replaced, except ``counts`` and ``edited_messages`` (added up),
    ``events`` (appended, the last ``MAX_EVENTS`` kept), so the flush and
    offload branches can write in the same step without losing each other's
    figures, and ``pins`` (merged by id, so ``pin_constraint`` updates need
    not know the others).
    """
    base = read_compaction(left)
    if right is None:
        return dict(base)
    if not isinstance(right, dict):
        logger.warning("ignored a compaction update of type %s", type(right).__name__)
        return dict(base)
    merged: dict[str, Any] = {**base, **{k: v for k, v in right.items() if k not in (*SUMMED_KEYS, "events", "pins")}}
    merged["pins"] = merge_pins(base["pins"], right.get("pins"))
    for summed in SUMMED_KEYS:
        totals = dict(base[summed])
        added = right.get(summed)
        for key, value in (added if isinstance(added, dict) else {}).items():  # a hand edit may put anything here
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
        merged[summed] = totals
    events = right.get("events")
    merged["events"] = (base["events"] + list(events))[-MAX_EVENTS:] if isinstance(events, list) else base["events"]
    return dict(read_compaction(merged))


#: Every this many updates of ``messages`` a checkpoint stores the whole list; the others store only their writes.
MESSAGES_SNAPSHOT_EVERY = 100
#: Every this many updates of ``compaction`` a checkpoint stores its whole value (the events, the counts): a model
#: that reports usage updates it at every call, for the calibration.
COMPACTION_SNAPSHOT_EVERY = 10
#: When the gate has written no ``compaction`` update for this many new messages, it writes ``seen_messages``, so
#: that a read goes back no further for the value's snapshot than for the messages' (about 100 messages).
COMPACTION_REFRESH_MESSAGES = MESSAGES_SNAPSHOT_EVERY // COMPACTION_SNAPSHOT_EVERY


def merge_compaction_writes(value: dict[str, Any] | None, writes: Sequence[Any]) -> dict[str, Any]:
    """Fold a batch of ``compaction`` writes into the value in order: the ``DeltaChannel`` form of ``merge_compaction``.

    One at a time, so a replay of many steps' writes in one batch gives what the steps gave one by one.
    """
    return functools.reduce(merge_compaction, writes, value)  # type: ignore[arg-type]


class GraphUpdate(TypedDict, total=False):
    """What a compaction node writes to the graph's state: ``messages`` writes and the ``compaction`` delta.

    The ``compaction`` delta is a part of a ``CompactionRecord``, merged by
    ``merge_compaction`` (counts add up, events append).
    """

    messages: list[BaseMessage]
    compaction: dict[str, Any]


class CompactionState(TypedDict):
    """A ready-made state: ``messages`` and ``compaction`` (``merge_compaction``).

    Both keys are ``DeltaChannel``s, so a checkpoint stores what its step
    wrote, not the whole value again (SQLite keeps every other channel's value
    in each checkpoint row). ``messages`` uses LangGraph's message reducer
    (``add_messages`` semantics: by id, ``RemoveMessage``, remove-all; a
    removal of an unknown id is ignored), with a snapshot every
    ``MESSAGES_SNAPSHOT_EVERY`` updates to bound how many writes a read
    replays. ``compaction`` changes at a compaction or a calibration, with a
    snapshot every ``COMPACTION_SNAPSHOT_EVERY`` updates; the gate updates it
    at least every ``COMPACTION_REFRESH_MESSAGES`` messages, so a read goes
    no further back for it than for the messages.
    """

    messages: Annotated[
        list[AnyMessage], DeltaChannel(messages_delta_reducer, snapshot_frequency=MESSAGES_SNAPSHOT_EVERY)
    ]
    compaction: Annotated[
        dict[str, Any], DeltaChannel(merge_compaction_writes, snapshot_frequency=COMPACTION_SNAPSHOT_EVERY)
    ]


class CompactionInput(TypedDict):
    """What a compacting graph takes as input: messages only (``compaction`` is the graph's own, never the caller's)."""

    messages: Annotated[
        list[AnyMessage], DeltaChannel(messages_delta_reducer, snapshot_frequency=MESSAGES_SNAPSHOT_EVERY)
    ]


class CompactionChannel(TypedDict):
    """Just the ``compaction`` key, added to a user's graph that lacks it."""

    compaction: Annotated[dict[str, Any], merge_compaction]
