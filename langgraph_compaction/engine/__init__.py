"""One whole compaction pass over a state held in memory: the engine every front drives.

The graph front runs gate, flush, offload and summarize as four nodes and
lets LangGraph apply their updates (and runs this pass inside the model node
when something reached it past the gate). The middleware, the prebuilt hook
and ``compact_messages`` have one call to make instead: ``run_pass`` /
``arun_pass`` drive the same steps (``CompactionNodes``) in the same order —
the gate, then offload and flush side by side, then the summary — applying
each update in memory with the graph's reducers (``add_messages`` and
``merge_compaction``), and return one update equal to all of them.
"""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generator, Sequence

from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from .nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE, CompactionNodes, state_value, Run, advance
from .overflow import apply_update, update_delta

#: A stage to run: (name, the node's steps, the state it reads).
Stage = tuple
Pass = Generator[list[Stage], list[dict], tuple[list[dict], Any]]


@dataclass
class PassResult:
    """What one compaction pass did: ``update`` applies it, ``state`` is the state after it."""

    update: dict
    state: Any
    events: list[dict]

    @property
    def messages(self) -> list:
        """Return the state's messages after the pass (in view mode the whole history, not what the model is sent)."""
        return list(state_value(self.state, "messages") or [])


def _stages(nodes: CompactionNodes, state: Any) -> Pass:
    """Yield the stages to run, each batch side by side; return the updates in the order applied, and the state after."""
    updates = [(yield [(GATE, nodes._gate_steps, state)])[0]]
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


def _combined(updates: Sequence[dict]) -> dict:
    """Return one state update equal to applying ``updates`` in order."""
    update: dict[str, Any] = {}
    writes = [m for u in updates for m in (u.get("messages") or [])]
    if writes:
        # a rewrite (the summary) makes every earlier edit part of it: keep what follows the last one
        last = max((i for i, m in enumerate(writes) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES), default=0)
        update["messages"] = writes[last:]
    if any(u.get("compaction") for u in updates):  # {"pending": None} alone is a write too
        update["compaction"] = update_delta(updates)
    return update


def _result(updates: list[dict], state: Any) -> PassResult:
    update = _combined(updates)
    return PassResult(update=update, state=state, events=list((update.get("compaction") or {}).get("events") or []))


def _run_batch(nodes: CompactionNodes, batch: list[Stage], run: Run) -> list[dict]:
    if len(batch) == 1:  # the gate runs before every model call: no thread hop for it
        name, steps, state = batch[0]
        return [nodes._guarded(name, state, steps, run)]
    with ThreadPoolExecutor(max_workers=len(batch), thread_name_prefix="compaction") as pool:
        # each thread gets a copy of this context: the stream writer and the runtime travel with it
        futures = [pool.submit(contextvars.copy_context().run, nodes._guarded, name, st, steps, run) for name, steps, st in batch]
        return [f.result() for f in futures]


def run_pass(nodes: CompactionNodes, state: Any, run: Run) -> PassResult:
    """Run one compaction pass synchronously; offload and flush run side by side in two threads.

    Every failure inside a stage is recorded in the update (the stage's own
    guard), so this never raises and never drops a message.
    """
    stages = _stages(nodes, state)
    done, batch = advance(stages, None, None)
    while not done:
        done, batch = advance(stages, _run_batch(nodes, batch, run), None)
    return _result(*batch)


async def arun_pass(nodes: CompactionNodes, state: Any, run: Run) -> PassResult:
    """Run one compaction pass with ``await``; offload and flush run side by side (``asyncio.gather``)."""
    stages = _stages(nodes, state)
    done, batch = advance(stages, None, None)
    while not done:
        results = await asyncio.gather(*(nodes._aguarded(name, st, steps, run) for name, steps, st in batch))
        done, batch = advance(stages, list(results), None)
    return _result(*batch)
