"""``add_compaction``: put the compaction nodes in front of a node of the user's own graph."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Hashable, Optional, get_type_hints

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableLambda

from langgraph.graph import StateGraph
from langgraph.utils.runnable import RunnableCallable
from langgraph.types import Send

from .config import CompactionConfig
from .nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE, CompactionNodes
from .overflow import with_overflow_recovery
from .state import CompactionChannel


def _node(func: Any, afunc: Any, name: str) -> RunnableCallable:
    """Return a node runnable with a sync and an async body and no tracing layer of its own.

    A ``RunnableLambda`` would add a callback run around every call; the gate
    runs before every model call, so it is wrapped the way LangGraph wraps a
    plain function.
    """
    return RunnableCallable(func, afunc, name=name, trace=False)


def _redirect(target: Any, before: str) -> Any:
    """Return a branch result with ``before`` replaced by the gate (Send payloads are left alone)."""
    if isinstance(target, str):
        return GATE if target == before else target
    if isinstance(target, Send):
        return target
    if isinstance(target, (list, tuple)):
        return type(target)(_redirect(t, before) for t in target)
    return target


def add_compaction(
    builder: StateGraph,
    *,
    before: str,
    model: Any,
    config: Optional[CompactionConfig] = None,
    storage: Any = None,
    flush_model: Any = None,
    agent_model: Any = None,
    system_prompt: Any = None,
    overflow_recovery: bool = True,
) -> CompactionNodes:
    """Insert gate -> (flush | offload) -> summarize in front of ``before``; return the nodes.

    Call it after the graph's own nodes and edges exist: every edge that led
    to ``before`` (plain, waiting or conditional) leads to the gate instead.
    ``model`` is the summarizer; ``storage`` a directory path, a LangGraph
    ``BaseStore``, or None for the store the graph is compiled or served with.
    A ``compaction`` key is added to the state when the schema lacks one.

    ``agent_model`` (the model ``before`` calls, tools bound) and
    ``system_prompt`` (what ``before`` puts in front of the messages) are
    counted in every request. With ``overflow_recovery`` (the default)
    ``before`` is wrapped: when its model refuses the request as too long, the
    history is compacted at once and the call retried once (see ``overflow``).

    Raises ValueError when ``before`` is not a node of the graph or the state
    has no ``messages`` key.
    """
    if not isinstance(builder, StateGraph):
        raise TypeError(f"builder must be a langgraph StateGraph, not {type(builder).__name__}")
    if before not in builder.nodes:
        known = ", ".join(sorted(n for n in builder.nodes if not n.startswith("__"))) or "none"
        raise ValueError(f"before={before!r} is not a node of this graph (nodes: {known}); add it before add_compaction")
    if "messages" not in builder.channels:
        raise ValueError(
            "the graph's state has no 'messages' key; use CompactionState or add "
            "`messages: Annotated[list[AnyMessage], add_messages]` to your state"
        )
    taken = [n for n in (GATE, FLUSH, OFFLOAD, SUMMARIZE) if n in builder.nodes]
    if taken:
        raise ValueError(f"the graph already has node(s) {taken}; add_compaction can be called once per graph")
    input_schema = None
    if "compaction" not in builder.channels:
        # the nodes read the user's keys plus ``compaction``: a schema of both adds the channel
        hints = get_type_hints(builder.state_schema, include_extras=True)
        input_schema = TypedDict(f"{builder.state_schema.__name__}WithCompaction", {**hints, **CompactionChannel.__annotations__})

    nodes = CompactionNodes(
        before=before,
        model=model,
        config=config,
        storage=storage,
        flush_model=flush_model,
        agent_model=agent_model,
        system_prompt=system_prompt,
    )
    if overflow_recovery:
        spec = builder.nodes[before]
        builder.nodes[before] = replace(spec, runnable=with_overflow_recovery(spec.runnable, nodes, name=before))

    builder.edges = {(start, GATE if end == before else end) for start, end in builder.edges}
    builder.waiting_edges = {(starts, GATE if end == before else end) for starts, end in builder.waiting_edges}
    for branches in builder.branches.values():
        for name, spec in list(branches.items()):
            if spec.ends is not None:
                ends: dict[Hashable, str] = {k: GATE if v == before else v for k, v in spec.ends.items()}
                branches[name] = spec._replace(ends=ends)
            else:
                path = spec.path
                branches[name] = spec._replace(
                    path=RunnableLambda(
                        lambda state, config, _p=path: _redirect(_p.invoke(state, config), before),
                        afunc=lambda state, config, _p=path: _aredirect(_p, state, config, before),
                        name=getattr(path, "name", None) or "route",
                    )
                )

    builder.add_node(GATE, _node(nodes.gate, nodes.agate, GATE), input_schema=input_schema)
    builder.add_node(FLUSH, _node(nodes.flush, nodes.aflush, FLUSH), input_schema=input_schema)
    builder.add_node(OFFLOAD, _node(nodes.offload, nodes.aoffload, OFFLOAD), input_schema=input_schema)
    builder.add_node(
        SUMMARIZE,
        _node(nodes.summarize, nodes.asummarize, SUMMARIZE),
        defer=True,
        input_schema=input_schema,
    )
    builder.add_conditional_edges(GATE, nodes.route, [FLUSH, OFFLOAD, SUMMARIZE, before])
    builder.add_edge(FLUSH, SUMMARIZE)
    builder.add_edge(OFFLOAD, SUMMARIZE)
    builder.add_edge(SUMMARIZE, before)
    return nodes


async def _aredirect(path: Any, state: Any, config: Any, before: str) -> Any:
    return _redirect(await path.ainvoke(state, config), before)
