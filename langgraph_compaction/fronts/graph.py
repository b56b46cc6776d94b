"""``add_compaction``: put the compaction nodes in front of a node of the user's own graph.

Edges, waiting edges and branches that led to the model node lead to the gate
instead, so the usual path is gate -> (flush | offload) -> summarize -> model,
four visible nodes. Whatever else can start the model node — a
``Command(goto=...)`` from a tools node, a ``Send``, a resume — meets the same
gate inside the model node: the node is wrapped, and when the state it
receives is not the one the gate last let through, the whole compaction pass
runs there first (``engine.run_pass``), its update written in front of the
node's output. The node keeps its name, so streaming metadata,
``interrupt_before``/``after``, ``update_state(as_node=...)`` and Studio see
the user's graph.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, get_type_hints

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from ..core.config import CompactionConfig
from ..core.langchain_args import ContextSize, Trigger, settings_with
from ..engine.langgraph_internals import RunnableCallable, pushed, redirect_to, set_input_schema, wrap_node
from ..engine.nesting import check_nesting, writing_back
from ..engine.nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE, CompactionEngine
from ..engine.overflow import in_front
from ..engine.passes import added_messages, replaced_state
from ..engine.run import RUN_THREAD, state_value
from ..engine.setup import EngineOptions
from ..engine.state import SUMMED_KEYS, CompactionChannel, read_compaction
from ..storage import thread_key
from .models import named_models


def _node(func: Any, afunc: Any, name: str) -> RunnableCallable:
    """Return a node runnable with a sync and an async body and no tracing layer of its own.

    A ``RunnableLambda`` would add a callback run around every call; the gate
    runs before every model call, so it is wrapped the way LangGraph wraps a
    plain function.
    """
    return RunnableCallable(func, afunc, name=name, trace=False)


#: How many (thread, graph) pairs remember what their gate let through.
PASSED_THREADS = 1024


def _signature(messages: Sequence[BaseMessage]) -> tuple:
    return len(messages), messages[-1].id if messages else None


def _graph_key(config: RunnableConfig, compaction: Any) -> tuple | None:
    """Return (thread, graph namespace): a task's namespace ends with its own ``node:task`` segment.

    A run without a thread id is told apart by its own transcript key (None
    before its first gate: nothing is remembered for it).
    """
    configurable = config.get("configurable") or {}
    ns = str(configurable.get("checkpoint_ns") or "")
    thread = configurable.get("thread_id")
    if thread is None:
        thread = compaction.get(RUN_THREAD) if isinstance(compaction, dict) else None
        return (RUN_THREAD, thread, ns.rpartition("|")[0]) if isinstance(thread, str) else None
    return thread_key(thread), ns.rpartition("|")[0]


class _Passed:
    """The messages each graph's gate last let through to the model node, by (thread, graph namespace).

    The model node compares what it receives with it: the same messages mean
    the gate (or the summary) just ran for them; anything else (a
    ``Command(goto=...)`` that skipped the gate, a resume) means the node
    compacts first. Kept in memory: a process that did not see the gate
    simply runs the pass, which decides the same way the gate would.
    """

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def mark(self, config: RunnableConfig, compaction: Any, messages: Sequence[BaseMessage]) -> None:
        key = _graph_key(config, compaction)
        if key is None:
            return
        with self._lock:
            self._seen.pop(key, None)
            self._seen[key] = _signature(messages)
            if len(self._seen) > PASSED_THREADS:
                self._seen.popitem(last=False)

    def check(self, config: RunnableConfig, compaction: Any, messages: Sequence[BaseMessage]) -> bool:
        key = _graph_key(config, compaction)
        with self._lock:
            return key is not None and self._seen.get(key) == _signature(messages)


def _after(state: Any, update: Any) -> list[BaseMessage]:
    """Return the state's messages after a compaction node's update (edits keep ids; a rewrite replaces all)."""
    writes = list((update or {}).get("messages") or []) if isinstance(update, dict) else []
    at = max(
        (i for i, m in enumerate(writes) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES), default=None
    )
    # after a rewrite, edits by id may follow it (the gate answers unanswered calls, then layers 1-2 edit)
    return added_messages(writes[at + 1 :]) if at is not None else state_value(state, "messages") or []


def _compaction_nodes(nodes: CompactionEngine, passed: _Passed) -> tuple[RunnableCallable, RunnableCallable]:
    """Return the gate and summarize nodes, each recording the messages it lets through to the model node."""

    def let_through(state: Any, config: RunnableConfig, update: Any, stage: str) -> Any:
        written = ((update or {}).get("compaction") or {}) if isinstance(update, dict) else {}
        before = state_value(state, "compaction")
        compaction = {**(before if isinstance(before, dict) else {}), **written}
        if stage == SUMMARIZE or not compaction.get("pending"):
            passed.mark(config, compaction, _after(state, update))
        return update

    def gate(state: Any, config: RunnableConfig) -> Any:
        check_nesting(nodes, state, config)
        return let_through(state, config, nodes.gate(state, config), GATE)

    async def agate(state: Any, config: RunnableConfig) -> Any:
        check_nesting(nodes, state, config)
        return let_through(state, config, await nodes.agate(state, config), GATE)

    def summarize(state: Any, config: RunnableConfig) -> Any:
        return let_through(state, config, nodes.summarize(state, config), SUMMARIZE)

    async def asummarize(state: Any, config: RunnableConfig) -> Any:
        return let_through(state, config, await nodes.asummarize(state, config), SUMMARIZE)

    return _node(gate, agate, GATE), _node(summarize, asummarize, SUMMARIZE)


def _model_front(node: Any, nodes: CompactionEngine, passed: _Passed, name: str, recover: bool) -> RunnableCallable:
    """Return the model node wrapped: the gate's pass when the gate was skipped, the view, overflow recovery.

    A ``Send`` payload is not the graph's state: it is compacted for this call
    only, and nothing of that pass is written back.
    """
    inner = node if isinstance(node, Runnable) else RunnableLambda(node)

    def model_input(state: Any) -> Any:
        return replaced_state(state, messages=nodes.model_messages(state)) if nodes.sends_other_messages() else state

    def invoke(state: Any, config: RunnableConfig) -> Any:
        run = nodes.where(config, state)
        done = None
        if pushed(config) or not passed.check(
            config, state_value(state, "compaction"), state_value(state, "messages") or []
        ):
            done = nodes.run_pass(state, run)
            state = done.state
        call = lambda s: inner.invoke(model_input(s), config)  # noqa: E731
        output = nodes.recover(state, run, call) if recover else call(state)
        return in_front(done.update, output) if done is not None and done.update and not pushed(config) else output

    async def ainvoke(state: Any, config: RunnableConfig) -> Any:
        run = nodes.where(config, state)
        done = None
        if pushed(config) or not passed.check(
            config, state_value(state, "compaction"), state_value(state, "messages") or []
        ):
            done = await nodes.arun_pass(state, run)
            state = done.state

        async def call(s: Any) -> Any:
            return await inner.ainvoke(model_input(s), config)

        output = await nodes.arecover(state, run, call) if recover else await call(state)
        return in_front(done.update, output) if done is not None and done.update and not pushed(config) else output

    # no tracing layer of its own (as LangGraph wraps a plain function): the inner node traces itself
    return RunnableCallable(invoke, ainvoke, name=name, trace=False)


def _subgraph_update(before: Any, after: dict) -> dict:
    """Return the parent's update from a compacting subgraph's input state and its output state.

    Messages: only what is new or changed when every message the parent sent
    is still there in order, else the whole compacted history behind a
    remove-all (a summary replaced the start). ``compaction``: counts and
    events as deltas, since the parent's reducer adds them up; other keys as
    they are now.
    """
    sent = list(state_value(before, "messages") or [])
    out = dict(after)
    messages = list(after.get("messages") or [])
    index = {m.id: i for i, m in enumerate(messages)}
    positions = [index[m.id] for m in sent if m.id in index]
    if len(positions) == len(sent) and positions == sorted(positions):
        old = {m.id: m for m in sent}
        out["messages"] = [m for m in messages if m.id not in old or old[m.id] != m]
    else:
        out["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]
    if isinstance(after.get("compaction"), dict):
        start, end = read_compaction(state_value(before, "compaction")), read_compaction(after["compaction"])
        added = {  # the parent's reducer adds these up: hand it what this run added, not the running totals
            key: {k: v - start[key].get(k, 0) for k, v in end[key].items() if v != start[key].get(k, 0)}
            for key in SUMMED_KEYS
        }
        events = [e for e in end["events"] if e not in start["events"]]
        out["compaction"] = {**end, **added, "events": events}
    return out


def _whole_state(state: Any) -> Command:
    """Return the parent's state as an update of the agent's: its ``compaction`` too, which the agent's input omits."""
    return Command(update=dict(state) if isinstance(state, dict) else state)


def subgraph_node(graph: Any, *, name: str | None = None) -> RunnableCallable:
    """Return a node that runs a compiled compacting agent as a subgraph of a parent with the same ``messages``.

    Added directly as a node, a subgraph's output only adds to the parent's
    messages (removals made inside it never reach the parent, langgraph#5755),
    and its whole ``compaction`` value is added again to the parent's. This
    node runs the subgraph with the parent's state and config (checkpoints,
    interrupts, streaming and the store work as for a direct subgraph) and
    writes back what changed: a compaction inside it compacts the parent too,
    and every counter counts once. An agent added directly instead stops at
    its first call after a compaction with an error naming this function.

    Args:
        graph: The compiled compacting agent (a graph built with ``add_compaction``,
            ``CompactionMiddleware`` or ``make_pre_model_hook``).
        name: The node's name in traces; None takes the graph's name, else ``"agent"``.
    """

    def invoke(state: Any, config: RunnableConfig) -> dict:
        with writing_back(config):
            return _subgraph_update(state, graph.invoke(_whole_state(state), config))

    async def ainvoke(state: Any, config: RunnableConfig) -> dict:
        with writing_back(config):
            return _subgraph_update(state, await graph.ainvoke(_whole_state(state), config))

    return RunnableCallable(invoke, ainvoke, name=name or getattr(graph, "name", None) or "agent", trace=False)


def _redirect(target: Any, before: str) -> Any:
    """Return a branch result with ``before`` replaced by the gate (Send payloads are left alone)."""
    if isinstance(target, str):
        return GATE if target == before else target
    if isinstance(target, Send):
        return target
    if isinstance(target, (list, tuple)):
        return type(target)(_redirect(t, before) for t in target)
    return target


def _input_without_compaction(builder: StateGraph) -> None:
    """Take ``compaction`` out of the graph's input: a run's caller controls its messages, never this record.

    A graph behind an endpoint takes the client's JSON as its input; a
    ``compaction`` key there would become state (a transcript's name, pins, a
    prepared summary). Operators keep ``update_state``. Only a TypedDict input
    schema is narrowed (LangGraph's own default, the state schema, included).
    """
    schema = builder.input_schema
    if not (isinstance(schema, type) and issubclass(schema, dict)):
        return
    hints = get_type_hints(schema, include_extras=True)
    if "compaction" not in hints:
        return
    narrowed = _typed_dict(f"{schema.__name__}Input", {k: v for k, v in hints.items() if k != "compaction"})
    set_input_schema(builder, narrowed)


def _typed_dict(name: str, fields: dict[str, Any]) -> type:
    """Return a TypedDict class made at run time (named after the user's schema)."""
    return TypedDict(name, fields)  # type: ignore[operator]  # mypy types only TypedDicts with a literal name


def _check_graph(builder: StateGraph, before: str) -> None:
    """Raise when compaction cannot be added in front of ``before`` (see ``add_compaction``)."""
    if not isinstance(builder, StateGraph):
        raise TypeError(f"builder must be a langgraph StateGraph, not {type(builder).__name__}")
    if before not in builder.nodes:
        known = ", ".join(sorted(n for n in builder.nodes if not n.startswith("__"))) or "none"
        raise ValueError(
            f"before={before!r} is not a node of this graph (nodes: {known}); add it before add_compaction"
        )
    if "messages" not in builder.channels:
        raise ValueError(
            "the graph's state has no 'messages' key; use CompactionState or add "
            "`messages: Annotated[list[AnyMessage], add_messages]` to your state"
        )
    taken = [n for n in (GATE, FLUSH, OFFLOAD, SUMMARIZE) if n in builder.nodes]
    if taken:
        raise ValueError(f"the graph already has node(s) {taken}; add_compaction can be called once per graph")


def _route_to_gate(builder: StateGraph, before: str) -> None:
    """Send every edge and branch that led to ``before`` to the gate instead."""
    redirect_to(builder, before, GATE, lambda target: _redirect(target, before))


def add_compaction(
    builder: StateGraph,
    *,
    before: str,
    model: Any,
    config: CompactionConfig | None = None,
    storage: Any = None,
    flush_model: Any = None,
    agent_model: Any = None,
    system_prompt: Any = None,
    overflow_recovery: bool = True,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    token_counter: Callable[..., int] | None = None,
    summary_prompt: str | None = None,
) -> CompactionEngine:
    """Insert gate -> (flush | offload) -> summarize in front of ``before``; return the nodes.

    Call it after the graph's own nodes and edges exist: every edge that led
    to ``before`` (plain, waiting or conditional) leads to the gate instead.
    A ``compaction`` key is added to the state when the schema lacks one.
    ``before`` is wrapped, keeping its name: a call that did not come through
    the gate (``Command(goto=...)``, ``Send``, a resume) compacts first; with
    ``config.mode == "view"`` it is sent the compacted view while the state
    keeps every message. It may return a dict, a ``Command`` or a list of them.

    Args:
        builder: The user's ``StateGraph``, before ``compile()``; its state has ``messages``.
        before: The node that calls the model.
        model: The summarizer: a chat model, a name resolved as LangChain's
            ``init_chat_model`` does (``"openai:gpt-4o-mini"``), or None for
            extractive summaries.
        config: The settings; None for the defaults.
        storage: A directory path, a LangGraph ``BaseStore``, or None for the
            store the graph is compiled or served with, else an in-memory store
            of the process (``engine.setup.storage_for``).
        flush_model: Extracts memories (a model or a name); None: ``model``.
        agent_model: The model ``before`` calls, tools bound: counted in every
            request, and its window used when ``config.context_window`` is not set.
        system_prompt: What ``before`` puts in front of the messages: counted in every request.
        overflow_recovery: When ``before``'s model refuses the request as too
            long, compact at once and retry the call once (see ``overflow``).
        trigger: When to compact, in LangChain's words, as ``CompactionMiddleware`` takes it.
        keep: The tail a compaction keeps, as ``CompactionMiddleware`` takes it.
        token_counter: Counts a list of messages, as ``CompactionMiddleware`` takes it.
        summary_prompt: The summarizer's prompt, as ``CompactionMiddleware`` takes it.

    Raises:
        ValueError: ``before`` is not a node of the graph, the state has no
            ``messages`` key, a model name names no model, or ``trigger``,
            ``keep`` or an argument that contradicts ``config`` is refused.
    """
    _check_graph(builder, before)
    _input_without_compaction(builder)
    input_schema: type | None = None
    if "compaction" not in builder.channels:
        # the nodes read the user's keys plus ``compaction``: a schema of both adds the channel
        hints = get_type_hints(builder.state_schema, include_extras=True)
        input_schema = _typed_dict(
            f"{builder.state_schema.__name__}WithCompaction", {**hints, **CompactionChannel.__annotations__}
        )

    config = settings_with(
        config, trigger=trigger, keep=keep, token_counter=token_counter, summary_prompt=summary_prompt
    )
    nodes = CompactionEngine(
        named_models(EngineOptions(before, model, config, storage, flush_model, agent_model, system_prompt))
    )
    passed = _Passed()
    wrap_node(builder, before, lambda runnable: _model_front(runnable, nodes, passed, before, overflow_recovery))
    gate, summarize = _compaction_nodes(nodes, passed)
    # where compact_thread and the other thread controls (fronts.controls) find the engine of a compiled graph
    gate.nodes = nodes  # type: ignore[attr-defined]

    _route_to_gate(builder, before)
    builder.add_node(GATE, gate, input_schema=input_schema)
    builder.add_node(FLUSH, _node(nodes.flush, nodes.aflush, FLUSH), input_schema=input_schema)
    builder.add_node(OFFLOAD, _node(nodes.offload, nodes.aoffload, OFFLOAD), input_schema=input_schema)
    builder.add_node(
        SUMMARIZE,
        summarize,
        defer=True,
        input_schema=input_schema,
    )
    builder.add_conditional_edges(GATE, nodes.route, [FLUSH, OFFLOAD, SUMMARIZE, before])
    builder.add_edge(FLUSH, SUMMARIZE)
    builder.add_edge(OFFLOAD, SUMMARIZE)
    builder.add_edge(SUMMARIZE, before)
    return nodes
