"""The order of one compaction pass, written once, and the state it leaves.

``pass_stages`` yields the stages of a pass in batches (the gate; offload and
flush side by side; the summary) and applies each update with the graph's
reducers; ``run_batch`` / ``arun_batch`` run one batch. The whole-pass
driver (``run_pass``) and overflow recovery (a pass in overflow mode) both
drive it, so the fronts and the recovery can never run the steps in
different orders.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from ..storage import message_records
from ..storage.codec import encode, revision
from .effects import Run, state_value
from .flush import FLUSH
from .gate import GATE
from .offload import OFFLOAD
from .state import merge_compaction
from .summarize import SUMMARIZE

#: A stage to run: (name, the node's steps, the state it reads).
Stage = tuple
Pass = Generator[list[Stage], list[dict], tuple[list[dict], Any]]


def replaced_state(state: Any, **values: Any) -> Any:
    """Return a copy of the state (a dict, a pydantic model or a dataclass) with some keys replaced."""
    if isinstance(state, dict):
        return {**state, **values}
    if hasattr(state, "model_copy"):
        return state.model_copy(update=values)
    return dataclasses.replace(state, **values)


def apply_update(state: Any, update: dict) -> Any:
    """Return the state after a compaction node's update (the graph's reducers, applied in place of the graph)."""
    values = {}
    if update.get("messages"):
        values["messages"] = add_messages(list(state_value(state, "messages") or []), update["messages"])
    if update.get("compaction"):
        values["compaction"] = merge_compaction(state_value(state, "compaction"), update["compaction"])
    return replaced_state(state, **values) if values else state


def stable_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the messages, each one without an id given one derived from its place and its content.

    An app that keeps its history without ids (OpenAI-style dicts) and passes
    it again at each call gets the same ids each time, so what was offloaded
    and summarized is recognized: ``msg-<index>-<hash of the message>``.
    """
    out = []
    for i, message in enumerate(messages):
        if message.id is None:
            digest = revision(encode(message_records([message])[0]))  # the transcript's own content hash
            message = message.model_copy(update={"id": f"msg-{i}-{digest}"})
        out.append(message)
    return out


def with_message_ids(state: Any) -> tuple[Any, list]:
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


def update_delta(updates: list[dict]) -> dict:
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


def pass_stages(nodes: Any, state: Any, overflow: bool = False) -> Pass:
    """Yield the stages to run, each batch side by side; return the updates in the order applied, and the state after.

    ``overflow=True`` runs the gate in overflow mode (a request the model refused as too long).
    """
    gate = (lambda s, r: nodes._gate_steps(s, r, overflow=True)) if overflow else nodes._gate_steps
    updates = [(yield [(GATE, gate, state)])[0]]
    state = apply_update(state, updates[0])
    targets = nodes.route(state)
    if targets == nodes.before:
        return updates, state
    branches = ((FLUSH, nodes._flush_steps), (OFFLOAD, nodes._offload_steps))
    side = [(name, steps, state) for name, steps in branches if name in targets]
    if side:  # both read the gate's state and write disjoint keys, as in the graph's superstep
        for update in (yield side):
            updates.append(update)
            state = apply_update(state, update)
    updates.append((yield [(SUMMARIZE, nodes._summarize_steps, state)])[0])
    return updates, apply_update(state, updates[-1])


def run_batch(nodes: Any, batch: list[Stage], run: Run) -> list[dict]:
    """Run one batch of stages (side by side in threads when there are several); return their updates."""
    if len(batch) == 1:  # the gate runs before every model call: no thread hop for it
        name, steps, state = batch[0]
        return [nodes._guarded(name, state, steps, run)]
    with ThreadPoolExecutor(max_workers=len(batch), thread_name_prefix="compaction") as pool:
        # each thread gets a copy of this context: the stream writer and the runtime travel with it
        futures = [
            pool.submit(contextvars.copy_context().run, nodes._guarded, name, st, steps, run)
            for name, steps, st in batch
        ]
        return [f.result() for f in futures]


async def arun_batch(nodes: Any, batch: list[Stage], run: Run) -> list[dict]:
    """Run one batch of stages with ``await`` (``asyncio.gather``); return their updates."""
    return list(await asyncio.gather(*(nodes._aguarded(name, st, steps, run) for name, steps, st in batch)))
