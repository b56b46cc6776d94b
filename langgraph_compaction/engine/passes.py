"""The order of one compaction pass, written once, and the state it leaves.

``pass_steps`` is the whole pass as one step: the gate; then the offload;
then the memory model's call beside the summary's (``Parallel``); each update applied
in memory with the graph's reducers (``add_messages`` and
``merge_compaction``). The whole-pass drivers (``CompactionEngine.run_pass``),
overflow recovery (a pass in overflow mode) and every front that compacts in
front of its model call run it, so they can never run the stages in different
orders. The graph of ``add_compaction`` runs the stages as its nodes instead
(flush and offload side by side, then summarize), each checkpointed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from langchain_core.messages import BaseMessage, MessageLikeRepresentation, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from ..storage import message_records
from ..storage.codec import encode, revision
from .driver import guarded
from .effects import Parallel, Steps
from .events import failed_update, stage_ended, stage_started
from .flush import FLUSH
from .offload import OFFLOAD
from .results import FlushResult, OffloadResult, SummaryResult, rendered
from .run import Run, state_value
from .state import GraphUpdate, merge_compaction


class Stages(Protocol):
    """What a pass needs of the engine: its stages over a state, the gate's router, and the messages it works on."""

    @property
    def before(self) -> str: ...

    @property
    def counter(self) -> Any: ...

    @property
    def fixed_tokens(self) -> int: ...

    def route(self, state: Any) -> list[str] | str: ...

    def messages_of(self, state: Any) -> list[BaseMessage]: ...

    def gate_steps(self, state: Any, run: Run, overflow: bool = False) -> Steps[GraphUpdate]: ...

    def offload_steps(self, state: Any, run: Run) -> Steps[OffloadResult]: ...

    def flush_steps(self, state: Any, run: Run) -> Steps[FlushResult]: ...

    def summarize_steps(self, state: Any, run: Run) -> Steps[SummaryResult]: ...


def replaced_state(state: Any, **values: Any) -> Any:
    """Return a copy of the state (a dict, a pydantic model or a dataclass) with some keys replaced."""
    if isinstance(state, dict):
        return {**state, **values}
    if hasattr(state, "model_copy"):
        return state.model_copy(update=values)
    return dataclasses.replace(state, **values)


def apply_update(state: Any, update: GraphUpdate) -> Any:
    """Return the state after a compaction node's update (the graph's reducers, applied in place of the graph)."""
    values = {}
    if update.get("messages"):
        writes: list[MessageLikeRepresentation] = list(update["messages"])
        values["messages"] = add_messages(list(state_value(state, "messages") or []), writes)
    if update.get("compaction"):
        values["compaction"] = merge_compaction(state_value(state, "compaction"), update["compaction"])
    return replaced_state(state, **values) if values else state


def stable_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the messages, each one without an id given one derived from the message before it and its content.

    ``msg-<hash>`` hashes the id of the message before it (given or derived)
    with the message's content, so an app that keeps its history without ids
    (OpenAI-style dicts) and passes it again at each call gets the same ids
    each time, and what was offloaded and summarized is recognized. An id is
    never given twice in a thread: a new message goes after the newest one,
    whose id no earlier message followed, so a request repeated word for word
    after a summary shortened the history is not merged into an older one.
    """
    out = []
    before = None
    for message in messages:
        if message.id is None:
            record = encode(message_records([message])[0])  # hashed as the transcript hashes it
            message = message.model_copy(update={"id": f"msg-{revision([before, record])}"})
        before = message.id
        out.append(message)
    return out


def with_message_ids(state: Any) -> tuple[Any, list[Any]]:
    """Return the state with an id on every message, and the writes that put those ids in the graph's state.

    A channel that adds no ids (deepagents' messages channel, given a
    ``("user", text)`` pair) hands the fronts id-less messages, which can be
    neither offloaded once nor removed. The writes (remove all, then the same
    messages with their ids) come before the pass's own, for ``add_messages``
    and deepagents' reducer alike; none when every message has an id.
    """
    messages = list(state_value(state, "messages") or [])
    if all(getattr(m, "id", None) is not None for m in messages):
        return state, []
    messages = stable_ids(messages)
    return replaced_state(state, messages=messages), [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]


def message_writes(writes: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return message writes equal to ``writes`` applied in order, as one list ``add_messages`` applies the same way.

    ``add_messages`` keeps what follows the last remove-all exactly as given,
    so edits by id written after a rewrite would stand twice in the history:
    they are folded into the rewrite here.
    """
    at = max(
        (i for i, m in enumerate(writes) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES), default=None
    )
    if at is None:
        return list(writes)
    return [writes[at], *added_messages(writes[at + 1 :])]


def added_messages(writes: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the history ``add_messages`` makes of ``writes`` alone (a later message replaces one of its id)."""
    given: list[MessageLikeRepresentation] = list(writes)
    # messages in, messages out; its annotation also allows dicts, strings and tuples, in and out
    return cast(list[BaseMessage], add_messages([], given))


def update_delta(updates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return one ``compaction`` update equal to applying ``updates`` in order (counts add, events append)."""
    out: dict[str, Any] = {"counts": {}, "edited_messages": {}, "events": []}
    for update in updates:
        for key, value in (update.get("compaction") or {}).items():
            if key in ("counts", "edited_messages"):
                for name, n in value.items():
                    out[key][name] = out[key].get(name, 0) + n
            elif key == "events":
                out["events"].extend(value)
            else:
                out[key] = value
    return out


def stage_name(node: str) -> str:
    """Return the stage a graph node runs (``compaction_flush`` -> ``flush``), as events name it."""
    return node.removeprefix("compaction_")


def pass_steps(engine: Stages, state: Any, run: Run, overflow: bool = False) -> Steps[tuple[list[GraphUpdate], Any]]:
    """The whole pass as one step; return the updates in the order applied, and the state after them.

    After the gate, the offload; then the memory model's call beside the
    summary's (``Parallel``): the agent waits one compaction-model call, not
    two. The summary reads what the offload wrote (it removes only messages
    the transcript holds) and nothing of the flush's; each update is applied
    when both have ended, the flush's first, so nothing is removed before the
    memories are written. ``overflow=True`` runs the gate in overflow mode (a
    request the model refused as too long).
    """
    updates = [(yield from guarded("gate", engine.gate_steps(state, run, overflow=overflow), failed_update))]
    state = apply_update(state, updates[0])
    targets = engine.route(state)
    if targets == engine.before:
        return updates, state
    if OFFLOAD in targets:
        updates.append((yield from guarded("offload", rendered(engine.offload_steps(state, run)), failed_update)))
        state = apply_update(state, updates[-1])
    started = stage_started("summarize")  # streamed around the flush beside it: its end ends the compaction
    summarize = guarded("summarize", rendered(engine.summarize_steps(state, run)), failed_update, lifecycle=False)
    if FLUSH in targets:  # both read the state after the offload and write disjoint keys, as in a graph superstep
        flushed, summarized = yield Parallel(
            (guarded("flush", rendered(engine.flush_steps(state, run)), failed_update), summarize)
        )
        updates.append(flushed)
        state = apply_update(state, flushed)
    else:
        summarized = yield from summarize
    updates.append(stage_ended("summarize", started, summarized))
    return updates, apply_update(state, updates[-1])
