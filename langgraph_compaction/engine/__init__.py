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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from .effects import Run, advance, state_value
from .nodes import CompactionNodes
from .passes import arun_batch, pass_stages, run_batch, update_delta


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


def _combined(updates: Sequence[dict]) -> dict:
    """Return one state update equal to applying ``updates`` in order."""
    update: dict[str, Any] = {}
    writes = [m for u in updates for m in (u.get("messages") or [])]
    if writes:
        # a rewrite (the summary) makes every earlier edit part of it: keep what follows the last one
        last = max(
            (i for i, m in enumerate(writes) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES), default=0
        )
        update["messages"] = writes[last:]
    if any(u.get("compaction") for u in updates):  # {"pending": None} alone is a write too
        update["compaction"] = update_delta(updates)
    return update


def _result(updates: list[dict], state: Any) -> PassResult:
    update = _combined(updates)
    return PassResult(update=update, state=state, events=list((update.get("compaction") or {}).get("events") or []))


def run_pass(nodes: CompactionNodes, state: Any, run: Run) -> PassResult:
    """Run one compaction pass synchronously; offload and flush run side by side in two threads.

    Every failure inside a stage is recorded in the update (the stage's own
    guard), so this never raises and never drops a message.
    """
    stages = pass_stages(nodes, state)
    done, batch = advance(stages, None, None)
    while not done:
        done, batch = advance(stages, run_batch(nodes, batch, run), None)
    return _result(*batch)


async def arun_pass(nodes: CompactionNodes, state: Any, run: Run) -> PassResult:
    """Run one compaction pass with ``await``; offload and flush run side by side (``asyncio.gather``)."""
    stages = pass_stages(nodes, state)
    done, batch = advance(stages, None, None)
    while not done:
        done, batch = advance(stages, await arun_batch(nodes, batch, run), None)
    return _result(*batch)
