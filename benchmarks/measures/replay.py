"""Measures 3 and 4: summarizer calls and peak context on the real trajectories, replayed model call by model call.

Every system runs in front of the agent node, which returns each recorded
assistant message in turn. One budget for all: a 60k-token window, trigger
40k tokens or 50 messages, keep 8k tokens (LangChain is also run with its
default ``keep=("messages", 20)``).
"""

from __future__ import annotations

from benchmarks.anchors import (
    ScriptedAgent,
    Thresholds,
    billed_counter,
    drive,
    scripted_summarizer,
    system_graph,
    trajectory_turns,
)
from benchmarks.report import check, table, targets_table

NAME = "trajectory_replay"
THRESHOLDS = Thresholds(context_window=60_000, trigger_tokens=40_000, keep_tokens=8_000, trigger_messages=50)
RUNS = {
    "ours": ("ours", None),
    "langchain": ("langchain", None),
    "langchain (default keep: 20 messages)": ("langchain", ("messages", 20)),
    "langmem": ("langmem", None),
    "none": ("none", None),
}
SUMMARY_PROMPT_MARK = "Context Extraction Assistant"


def _replay(system: str, keep, turns: list, storage) -> dict:
    counter = billed_counter()
    agent = ScriptedAgent(counter=counter)
    summarizer = scripted_summarizer()
    graph = system_graph(system, agent, summarizer, THRESHOLDS, storage=storage, langchain_keep=keep).compile()
    node = graph.builder.nodes["summarization"].runnable if "summarization" in graph.builder.nodes else None
    drive(graph, agent, turns)
    # the allowance of each call: the trigger plus what arrived for this call (the newest turn's own size)
    allowance = [THRESHOLDS.trigger_tokens + counter.total(pending) for pending, _ in turns]
    over = sum(1 for tokens, limit in zip(agent.inputs, allowance, strict=False) if tokens > limit)
    summaries = sum(1 for p in summarizer.calls if system != "ours" or SUMMARY_PROMPT_MARK in p)
    fired = getattr(getattr(node, "func", None), "fired", None)
    return {
        "calls": len(turns),
        "summarizer_calls": summaries,
        "flush_calls": len(summarizer.calls) - summaries if system == "ours" else 0,
        "compactions": fired if fired is not None else summaries,
        "peak_input": max(agent.inputs),
        "calls_over_allowance": over,
        "over_window": sum(1 for t in agent.inputs if t > THRESHOLDS.context_window),
    }


def run(ctx) -> dict:
    per: dict[str, dict] = {}
    for path in ctx.trajectories:
        turns = trajectory_turns(path)
        # ours offloads and flushes to real files, as deployed
        storage = ctx.scratch_dir / f"replay-{path.stem}"
        per[path.stem] = {label: _replay(system, keep, turns, storage) for label, (system, keep) in RUNS.items()}
    totals = {
        label: {
            key: sum(per[t][label][key] for t in per)
            for key in (
                "summarizer_calls",
                "flush_calls",
                "compactions",
                "calls_over_allowance",
                "over_window",
                "calls",
            )
        }
        | {"peak_input": max(per[t][label]["peak_input"] for t in per)}
        for label in RUNS
    }
    lc_calls = totals["langchain"]["summarizer_calls"]
    targets = [
        check("summarizer calls: ours / LangChain", totals["ours"]["summarizer_calls"] / max(1, lc_calls), 0.7),
        check("ours: calls over trigger + newest turn", totals["ours"]["calls_over_allowance"], 0, unit=""),
    ]
    return {"thresholds": vars(THRESHOLDS), "per_trajectory": per, "totals": totals, "targets": targets}


def report(figures: dict) -> str:
    totals, per = figures["totals"], figures["per_trajectory"]
    th = figures["thresholds"]
    summary_rows = [
        (
            label,
            t["calls"],
            t["summarizer_calls"],
            t["flush_calls"],
            t["compactions"],
            t["peak_input"],
            t["calls_over_allowance"],
            t["over_window"],
        )
        for label, t in totals.items()
    ]
    labels = list(totals)
    peak_rows = [(name, *(per[name][label]["peak_input"] for label in labels)) for name in per]
    calls_rows = [(name, *(per[name][label]["summarizer_calls"] for label in labels[:-1])) for name in per]
    return f"""## 3 and 4. Summarizer calls and peak context on {len(per)} real trajectories

Replayed model call by model call; window {th["context_window"]:,} tokens, trigger {th["trigger_tokens"]:,} tokens
or {th["trigger_messages"]} messages, keep {th["keep_tokens"]:,} tokens for every system. Context sizes are exact o200k
tokens of each model call's input. "Compactions" counts the times a system replaced history, whether or not it
called a model (LangChain writes "Previous conversation was too long to summarize." without a call when its
4,000-token trim of the evicted span keeps no human message).

{targets_table(figures["targets"])}

{table(["system", "model calls", "summarizer calls", "flush calls", "compactions", "peak context", "calls over trigger + newest turn", "calls over the window"], summary_rows)}

Peak context per trajectory:

{table(["trajectory", *labels], peak_rows)}

Summarizer calls per trajectory:

{table(["trajectory", *labels[:-1]], calls_rows)}
"""
