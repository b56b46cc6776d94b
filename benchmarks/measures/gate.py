"""Measures 1 and 9: what the node in front of the model costs on a call where nothing needs compaction.

Each system's node is called as the graph calls it, on a history of N
messages restored fresh from a checkpoint before every call (new message
objects with the same ids, as after a checkpoint load), with thresholds so
high that nothing is compacted: our ``CompactionEngine.gate``, LangChain's
``SummarizationMiddleware.before_model``, langmem's ``SummarizationNode``.
Also the whole graph's time per turn against LangChain's graph
(``SummarizationMiddleware``'s ``before_model`` in front of the same agent
node): on a synthetic session with ``InMemorySaver``, and on a history of N
idle messages, thread-less (a stateless endpoint sends the whole history at
every call) and with a checkpointer (the thread holds the history, a turn
sends one message); and the gate's peak memory (tracemalloc).
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.anchors import (
    LangchainNode,
    ScriptedAgent,
    Thresholds,
    drive,
    langchain_graph,
    langchain_middleware,
    langmem_node,
    ours_graph,
    scripted_summarizer,
    synthetic_session,
    system_graph,
)
from benchmarks.report import check, table, targets_table
from langgraph_compaction.engine.nodes import CompactionEngine

NAME = "gate_overhead"
SIZES = (100, 1_000, 5_000, 20_000)
GRAPH_SIZES = (1_000, 5_000, 20_000)
#: how a whole-graph turn reaches the graph: the whole history and no thread, or one message to a thread
GRAPH_MODES = ("thread-less", "checkpointer")
# nothing may fire: no token or message trigger within reach
IDLE = Thresholds(context_window=10**9, trigger_tokens=10**9 - 1, keep_tokens=8_000, trigger_messages=0)


def history(n: int) -> list[BaseMessage]:
    """Return ``n`` messages of a tool loop whose tool results and arguments are too small for layers 1-2."""
    out: list[BaseMessage] = []
    i = 0
    while len(out) < n:
        if i % 10 == 0:
            out.append(HumanMessage(f"Step {i}: please check the parser and run the tests again.", id=f"h{i}"))
        call = f"c{i}"
        out.append(
            AIMessage(
                f"Reading module {i} next.",
                tool_calls=[{"name": "Read", "args": {"file_path": f"src/m{i}.py"}, "id": call}],
                id=f"a{i}",
            )
        )
        out.append(ToolMessage(f"def f{i}(x):\n    return x + {i}\n" * 8, tool_call_id=call, name="Read", id=f"t{i}"))
        i += 1
    # a model call comes after the tools ran: the history never ends on a call without its result
    return out[: n - 1] if isinstance(out[n - 1], AIMessage) else out[:n]


def _callers() -> dict[str, Callable[[dict], Any]]:
    summarizer = scripted_summarizer()
    ours = CompactionEngine(before="agent", model=summarizer, config=IDLE.config())
    lc = LangchainNode(langchain_middleware(summarizer, IDLE))
    lm = langmem_node(summarizer, IDLE)
    config = {"configurable": {"thread_id": "bench"}}
    return {
        "ours": lambda state: ours.gate(state, config),
        "langchain": lc,
        "langmem": lambda state: lm.invoke(state),
    }


def _restored(records: list[dict], copies: int) -> list[list[BaseMessage]]:
    return [messages_from_dict(records) for _ in range(copies)]


def _time_calls(call: Callable, states: list[dict]) -> float:
    """Return the median seconds of one call over fresh states (the first call warms caches and is dropped)."""
    samples = []
    for state in states:
        gc.collect()
        started = time.perf_counter()
        call(state)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples[1:] or samples)


def _peak_bytes(call: Callable, state: dict) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        call(state)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _graph_turn_seconds(system: str, session: list) -> float:
    agent = ScriptedAgent(measure=False)
    graph = system_graph(system, agent, scripted_summarizer(), Thresholds()).compile(checkpointer=InMemorySaver())
    started = time.perf_counter()
    drive(graph, agent, session)
    return (time.perf_counter() - started) / len(session)


def _reply(state: dict) -> dict:
    """The agent's node of the whole-graph figures: a fixed answer, nothing counted."""
    return {"messages": [AIMessage("Done.")]}


def _turn_inputs(mode: str, records: list[dict], turns: int) -> list[dict]:
    if mode == "thread-less":
        return [{"messages": [*messages_from_dict(records), HumanMessage(f"Next step {i}.")]} for i in range(turns)]
    return [{"messages": [HumanMessage(f"Next step {i}.")]} for i in range(turns)]


def _whole_graph_seconds(n: int, mode: str, turns: int) -> dict[str, float]:
    """Return each system's median CPU seconds per turn of its whole graph at ``n`` idle messages.

    Turns alternate between the systems, so the load of the machine weighs on
    both alike; CPU time (``process_time``, every thread of the process) is
    what a turn costs, whatever else the machine runs.
    """
    summarizer = scripted_summarizer()
    saver = mode == "checkpointer"
    graphs = {
        "ours": ours_graph(_reply, summarizer, IDLE.config()),
        "langchain": langchain_graph(_reply, langchain_middleware(summarizer, IDLE)),
    }
    compiled = {name: g.compile(checkpointer=InMemorySaver() if saver else None) for name, g in graphs.items()}
    records = messages_to_dict(history(n))
    config = {"configurable": {"thread_id": f"graph-{n}"}} if saver else None
    if saver:
        for graph in compiled.values():
            graph.invoke({"messages": messages_from_dict(records)}, config)
    inputs = {name: _turn_inputs(mode, records, turns + 1) for name in compiled}
    samples: dict[str, list[float]] = {name: [] for name in compiled}
    for i in range(turns + 1):
        for name, graph in compiled.items():
            gc.collect()
            started = time.process_time()
            graph.invoke(inputs[name][i], config)
            samples[name].append(time.process_time() - started)
    return {name: statistics.median(s[1:]) for name, s in samples.items()}  # the first turn warms caches


def run(ctx) -> dict:
    repeats = 4 if ctx.quick else 8
    callers = _callers()
    seconds: dict[str, dict[str, float]] = {name: {} for name in callers}
    peak: dict[str, int] = {}
    for n in SIZES:
        records = messages_to_dict(history(n))
        # a call on 100 messages takes tens of microseconds: many samples, or timer noise decides the ratio
        copies = repeats * 10 if n <= 1_000 else repeats if n < 20_000 else max(3, repeats // 2)
        for name, call in callers.items():
            # langmem's node also needs its ``context`` key
            states = [{"messages": m, "context": {}} for m in _restored(records, copies + 1)]
            seconds[name][str(n)] = _time_calls(call, states)
        if n == max(SIZES):
            for name, call in callers.items():
                call({"messages": messages_from_dict(records), "context": {}})  # warm, as in a running graph
                peak[name] = _peak_bytes(call, {"messages": messages_from_dict(records), "context": {}})
    session = synthetic_session(60 if ctx.quick else 150, seed=ctx.seed)
    per_turn = {system: _graph_turn_seconds(system, session) for system in ("ours", "langchain")}
    whole = {
        mode: {str(n): _whole_graph_seconds(n, mode, (4 if ctx.quick else 8) if n < 20_000 else 4) for n in GRAPH_SIZES}
        for mode in GRAPH_MODES
    }

    ours = seconds["ours"]
    targets = []
    for n in SIZES:
        targets.append(
            check(f"{n:,} messages: ours / LangChain before_model", ours[str(n)] / seconds["langchain"][str(n)], 0.5)
        )
        targets.append(check(f"{n:,} messages: ours / langmem", ours[str(n)] / seconds["langmem"][str(n)], 0.3))
    targets.append(check("growth: ours at 20,000 / at 1,000 messages", ours["20000"] / ours["1000"], 25))
    targets.append(
        check(
            "whole graph per turn (InMemorySaver): ours / LangChain graph",
            per_turn["ours"] / per_turn["langchain"],
            1.0,
        )
    )
    for mode in GRAPH_MODES:
        for n in GRAPH_SIZES:
            turn = whole[mode][str(n)]
            name = f"{n:,} messages, {mode}: whole graph per turn, ours / LangChain graph"
            targets.append(check(name, turn["ours"] / turn["langchain"], 1.2))
    targets.append(check("peak memory at 20,000 messages: ours / LangChain", peak["ours"] / peak["langchain"], 1.5))
    return {
        "seconds": seconds,
        "graph_seconds_per_turn": per_turn,
        "whole_graph_cpu_seconds": whole,
        "graph_turns": len(session),
        "peak_bytes_20000": peak,
        "targets": targets,
    }


def report(figures: dict) -> str:
    s = figures["seconds"]
    rows = [
        (
            f"{int(n):,}",
            f"{s['ours'][n] * 1e3:.2f} ms",
            f"{s['langchain'][n] * 1e3:.2f} ms",
            f"{s['langmem'][n] * 1e3:.2f} ms",
            s["ours"][n] / s["langchain"][n],
            s["ours"][n] / s["langmem"][n],
        )
        for n in s["ours"]
    ]
    per_turn = figures["graph_seconds_per_turn"]
    peak = figures["peak_bytes_20000"]
    whole = figures.get("whole_graph_cpu_seconds") or {}
    graph_rows = [
        (f"{int(n):,}", mode, f"{t['ours'] * 1e3:.1f} ms", f"{t['langchain'] * 1e3:.1f} ms", t["ours"] / t["langchain"])
        for mode, sizes in whole.items()
        for n, t in sizes.items()
    ]
    graph_table = table(["messages", "turn", "ours", "LangChain graph", "ours / LangChain"], graph_rows)
    return f"""## 1 and 9. Gate overhead per model call, and its peak memory

The node in front of the model on a call where nothing needs compaction, on a history restored fresh from a
checkpoint before each call (median of several calls; times are context, the ratios are the figures).

{targets_table(figures["targets"])}

{table(["messages", "ours (gate)", "LangChain before_model", "langmem node", "ours / LangChain", "ours / langmem"], rows)}

Whole graph with `InMemorySaver`, synthetic session of {figures["graph_turns"]} turns (compactions included):
ours {per_turn["ours"] * 1e3:.1f} ms per turn, LangChain-middleware graph {per_turn["langchain"] * 1e3:.1f} ms per turn.

Whole graph per turn on a history of N messages where nothing needs compaction (target: ours at most 1.2× LangChain's
graph), CPU time per turn, the median of turns alternating between the two: thread-less, each turn sends the whole
history and one new message with no thread id (a stateless endpoint); with a checkpointer (`InMemorySaver`), the
thread holds the history and each turn sends one message.

{graph_table}

Peak memory of one call at 20,000 messages (tracemalloc): ours {peak["ours"] / 1e6:.2f} MB, LangChain
{peak["langchain"] / 1e6:.2f} MB, langmem {peak["langmem"] / 1e6:.2f} MB.
"""
