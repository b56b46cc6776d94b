"""The graph state: ``messages`` plus a JSON-native ``compaction`` key with its reducer.

Everything in ``compaction`` is a dict, list, str, int, float, bool or None,
so it survives every checkpointer's serializer and a state edit in Studio.
``read_compaction`` repairs a value edited into the wrong types instead of
crashing the next run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

from ..core.fidelity import clean_pins, merge_pins

logger = logging.getLogger("langgraph_compaction")

#: How many past events the state keeps (the stream carries all of them).
MAX_EVENTS = 20

#: ``counts``: how many compactions each layer made (and how many failed); ``edited_messages``: how many
#: messages each layer touched (shortened by layers 1-2, replaced by a summary), under the same names.
COUNT_KEYS = ("truncate", "prune", "micro", "summarize", "extractive", "failed")
#: The keys whose values the reducer adds up (per layer), rather than replacing them.
SUMMED_KEYS = ("counts", "edited_messages")

_DEFAULTS: dict[str, Any] = {
    "pending": None,
    "manual": None,
    "offloaded_ids": [],
    "flushed_ids": [],
    "summary_id": None,
    "summary_text": None,
    "cutoff_id": None,
    "offload_path": None,
    "last_error": None,
    "counts": {},
    "edited_messages": {},
    "events": [],
    "pins": [],
    "run_thread": None,
    "seen_messages": None,
    "prepared": None,
}
_TYPES: dict[str, type | tuple[type, ...]] = {
    "pending": dict,
    "manual": dict,
    "offloaded_ids": list,
    "flushed_ids": list,
    "summary_id": str,
    "summary_text": str,
    "cutoff_id": str,
    "offload_path": str,
    "last_error": str,
    "counts": dict,
    "edited_messages": dict,
    "events": list,
    "pins": list,
    "run_thread": str,
    "seen_messages": int,
    "prepared": dict,
}


def read_compaction(raw: Any) -> dict[str, Any]:
    """Return the ``compaction`` value with every known key present and of the right type.

    Wrong types (a Studio edit, a hand-written update) fall back to the
    default for that key and are logged, so the next run never crashes on them.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        logger.warning("compaction state is %s, not a dict; starting from defaults", type(raw).__name__)
        raw = {}
    out = dict(raw)
    for key, default in _DEFAULTS.items():
        value = raw.get(key, default)
        if value is not None and not isinstance(value, _TYPES[key]):
            logger.warning("compaction[%r] has type %s; using the default", key, type(value).__name__)
            value = default
        out[key] = list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
    out["offloaded_ids"] = [i for i in out["offloaded_ids"] if isinstance(i, str)]
    out["flushed_ids"] = [i for i in out["flushed_ids"] if isinstance(i, str)]
    for key in SUMMED_KEYS:
        out[key] = {k: v for k, v in out[key].items() if isinstance(v, int) and not isinstance(v, bool)}
    out["pins"] = clean_pins(out["pins"])
    return out


def merge_compaction(left: dict | None, right: dict | None) -> dict:
    """Merge a node's ``compaction`` write into the state (the reducer).

    Keys are replaced, except ``counts`` and ``edited_messages`` (added up), ``events`` (appended,
    the last ``MAX_EVENTS`` kept), so the flush and offload branches can write
    in the same step without losing each other's figures, and ``pins``
    (merged by id, so ``pin_constraint`` updates need not know the others).
    """
    base = read_compaction(left)
    if right is None:
        return base
    if not isinstance(right, dict):
        logger.warning("ignored a compaction update of type %s", type(right).__name__)
        return base
    merged = {**base, **{k: v for k, v in right.items() if k not in (*SUMMED_KEYS, "events", "pins")}}
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
    return read_compaction(merged)


#: Every this many updates of ``messages`` a checkpoint stores the whole list; the others store only their writes.
MESSAGES_SNAPSHOT_EVERY = 100
#: Every this many updates of ``compaction`` a checkpoint stores its whole value (the events, the counts): a model
#: that reports usage updates it at every call, for the calibration.
COMPACTION_SNAPSHOT_EVERY = 10
#: When the gate has written no ``compaction`` update for this many new messages, it writes ``seen_messages``, so
#: that a read goes back no further for the value's snapshot than for the messages' (about 100 messages).
COMPACTION_REFRESH_MESSAGES = MESSAGES_SNAPSHOT_EVERY // COMPACTION_SNAPSHOT_EVERY


def merge_compaction_writes(value: dict | None, writes: Sequence[Any]) -> dict:
    """Fold a batch of ``compaction`` writes into the value in order: the ``DeltaChannel`` form of ``merge_compaction``.

    One at a time, so a replay of many steps' writes in one batch gives what the steps gave one by one.
    """
    return functools.reduce(merge_compaction, writes, value)


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
        list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=MESSAGES_SNAPSHOT_EVERY)
    ]
    compaction: Annotated[dict, DeltaChannel(merge_compaction_writes, snapshot_frequency=COMPACTION_SNAPSHOT_EVERY)]


class CompactionChannel(TypedDict):
    """Just the ``compaction`` key, added to a user's graph that lacks it."""

    compaction: Annotated[dict, merge_compaction]
