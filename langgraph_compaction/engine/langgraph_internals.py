"""Every use of LangGraph's private API, in one module.

LangGraph keeps these names private, so an upgrade may change them without
notice. The rest of the package reaches them only through this module, and
``tests/engine/test_langgraph_internals.py`` checks each one against the
installed LangGraph, naming the private name that changed.

- ``_messages_delta_reducer`` (``langgraph.graph.message``): the message
  reducer a ``DeltaChannel`` of messages takes.
- ``RunnableCallable`` (``langgraph._internal._runnable``): a node runnable
  with a sync and an async body and no tracing layer of its own.
- ``"__pregel_push"`` (``langgraph._internal._constants.PUSH``): the trigger
  of a task started by ``Send``.
- ``StateGraph._add_schema`` and the builder's ``input_schema``: a narrowed
  input schema, registered as ``StateGraph.__init__`` registers its own.
- The builder's ``nodes``, ``edges``, ``waiting_edges`` and ``branches``
  (``BranchSpec``), edited in place before the graph is compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import StateGraph
from langgraph.graph.message import _messages_delta_reducer

__all__ = [
    "PUSH_TRIGGER",
    "RunnableCallable",
    "messages_delta_reducer",
    "pushed",
    "redirect_to",
    "set_input_schema",
    "wrap_node",
]

#: The reducer of a ``DeltaChannel`` of messages (``add_messages`` semantics over a list of writes).
messages_delta_reducer = _messages_delta_reducer

#: The trigger of a task started by ``Send`` (its input is the payload, not the state).
PUSH_TRIGGER = "__pregel_push"


def pushed(config: RunnableConfig) -> bool:
    """Return whether the running task was started by a ``Send`` (from its ``langgraph_triggers`` metadata)."""
    return PUSH_TRIGGER in ((config.get("metadata") or {}).get("langgraph_triggers") or ())


def set_input_schema(builder: StateGraph[Any, Any, Any, Any], schema: type) -> None:
    """Make ``schema`` the graph's input schema and register its keys, as ``StateGraph.__init__`` does."""
    builder.input_schema = schema
    builder._add_schema(schema, allow_managed=False)


def wrap_node(builder: StateGraph[Any, Any, Any, Any], name: str, wrap: Callable[[Any], Any]) -> None:
    """Replace node ``name``'s runnable by ``wrap(runnable)``, keeping the rest of its spec."""
    spec = builder.nodes[name]
    builder.nodes[name] = replace(spec, runnable=wrap(spec.runnable))


def redirect_to(builder: StateGraph[Any, Any, Any, Any], old: str, new: str, retarget: Callable[[Any], Any]) -> None:
    """Send every edge, waiting edge and branch that led to ``old`` to ``new`` instead.

    A branch with a path map has its map's ends renamed; a branch without one
    has its path wrapped, each result passed through ``retarget``.
    """
    builder.edges = {(start, new if end == old else end) for start, end in builder.edges}
    builder.waiting_edges = {(starts, new if end == old else end) for starts, end in builder.waiting_edges}
    for branches in builder.branches.values():
        for name, branch in list(branches.items()):
            if branch.ends is not None:
                ends: dict[Hashable, str] = {k: new if v == old else v for k, v in branch.ends.items()}
                branches[name] = branch._replace(ends=ends)
            else:
                branches[name] = branch._replace(path=_retargeted(branch.path, retarget))


def _retargeted(path: Runnable[Any, Any], retarget: Callable[[Any], Any]) -> Runnable[Any, Any]:
    async def ainvoke(state: Any, config: RunnableConfig) -> Any:
        return retarget(await path.ainvoke(state, config))

    return RunnableLambda(
        lambda state, config: retarget(path.invoke(state, config)),
        afunc=ainvoke,
        name=getattr(path, "name", None) or "route",
    )
