"""A compacting agent as a node of a parent graph: ``subgraph_node`` writes its compactions back; a direct node cannot.

Added directly as a node of a parent that shares its ``messages`` key, a
compiled agent's removals never reach the parent (its ``add_messages`` only
adds), so every turn sends the agent back what its compactions removed, with
each summary appended: the parent's history and counts grow without bound.
The agent cannot bound the parent from inside, so it stops with an error that
says how to add it. It tells the two apart at run time: ``subgraph_node``
marks the namespace it runs the agent in, and a direct node's input shows a
summary with the removed messages in front of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..core.conversation import summary_out_of_place
from .events import emit_event
from .run import state_value

#: The parent-graph namespace ``subgraph_node`` runs its agent in (None outside one).
_WRITTEN_BACK: ContextVar[str | None] = ContextVar("compaction_written_back", default=None)


class NestedAgentError(RuntimeError):
    """A compacting agent runs as a direct node of a parent graph that keeps re-sending what it removed."""


def _namespace(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


@contextmanager
def writing_back(config: RunnableConfig) -> Iterator[None]:
    """Mark the agent ``subgraph_node`` runs under this config as one whose compactions reach the parent."""
    token = _WRITTEN_BACK.set(_namespace(config))
    try:
        yield
    finally:
        _WRITTEN_BACK.reset(token)


def check_nesting(nodes: Any, state: Any, config: RunnableConfig) -> None:
    """Raise ``NestedAgentError`` when this agent is a parent's direct node that re-sent what a compaction removed.

    Only a run in rewrite mode (view mode keeps summaries out of the
    messages) inside a parent's namespace that ``subgraph_node`` did not
    start is checked: a top-level graph, or a subgraph called some other way
    (a tool that starts a subagent with messages of its own), never is.
    """
    graph = _namespace(config).rpartition("|")[0]
    if not graph or _WRITTEN_BACK.get() == graph or nodes.config.mode != "rewrite":
        return
    if not summary_out_of_place(state_value(state, "messages") or []):
        return
    node = graph.split("|")[-1].split(":")[0]
    message = (
        f"this compacting agent runs as the node {node!r} of a parent graph that shares its 'messages' key: the parent "
        "never sees the messages a compaction removes and sends them back every turn, so its history and counts grow "
        "without bound. Add the compiled agent with subgraph_node instead: "
        f"parent.add_node({node!r}, subgraph_node(agent))"
    )
    emit_event({"stage": "gate", "error": message})
    raise NestedAgentError(message)
