"""Measure 7: the critical path of one compaction when the summarizer (and memory flush) take L seconds each.

Our graph runs flush and offload in parallel, then summarize: about 2·L. The
seed's design runs flush, offload and summarize one after another. The
critical path is the time of a turn that compacts minus the median time of
the turns that do not, for ``invoke`` and ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from benchmarks.anchors import ScriptedAgent, Thresholds, ours_graph, scripted_summarizer, synthetic_session
from benchmarks.report import check, table, targets_table
from langgraph_compaction.storage import FileStorage

NAME = "compaction_latency"
# a token trigger low enough to compact every ~10 turns; the 128k window keeps each summary to one call
THRESHOLDS = Thresholds(context_window=128_000, trigger_tokens=20_000, keep_tokens=4_000, trigger_messages=0)


def _turn_times(latency: float, session: list, directory, use_async: bool) -> tuple[list[float], list[bool]]:
    agent = ScriptedAgent(measure=False)
    summarizer = scripted_summarizer(latency=latency)
    graph = ours_graph(agent, summarizer, THRESHOLDS.config(), FileStorage(directory)).compile()
    seconds: list[float] = []
    compacted: list[bool] = []
    values: dict = {}
    run = {"configurable": {"thread_id": "latency"}}
    for pending, reply in session:
        agent.next_reply = reply
        state = {**values, "messages": [*values.get("messages", ()), *pending]}
        summaries_before = (values.get("compaction") or {}).get("counts", {}).get("summarize", 0)
        started = time.perf_counter()
        values = asyncio.run(graph.ainvoke(state, run)) if use_async else graph.invoke(state, run)
        seconds.append(time.perf_counter() - started)
        compacted.append(values["compaction"].get("counts", {}).get("summarize", 0) > summaries_before)
    return seconds, compacted


def run(ctx) -> dict:
    latency = 0.3 if ctx.quick else 1.0
    session = synthetic_session(24 if ctx.quick else 40, seed=ctx.seed)
    results = {}
    for mode in ("invoke", "ainvoke"):
        seconds, compacted = _turn_times(latency, session, ctx.scratch_dir / f"latency-{mode}", mode == "ainvoke")
        base = statistics.median(s for s, c in zip(seconds, compacted, strict=False) if not c)
        paths = [s - base for s, c in zip(seconds, compacted, strict=False) if c]
        if not paths:
            raise RuntimeError(
                f"no compaction happened in {len(session)} turns ({mode}); lower THRESHOLDS.trigger_tokens"
            )
        results[mode] = {
            "compactions": len(paths),
            "critical_path": max(paths),
            "mean_path": statistics.mean(paths),
            "base_turn": base,
        }
    targets = [
        check(f"{mode}: slowest compaction's critical path / L", r["critical_path"] / latency, 2.1)
        for mode, r in results.items()
    ]
    return {"latency": latency, "results": results, "targets": targets}


def report(figures: dict) -> str:
    latency = figures["latency"]
    rows = [
        (
            mode,
            r["compactions"],
            f"{r['critical_path'] * 1e3:.0f} ms",
            f"{r['mean_path'] * 1e3:.0f} ms",
            r["critical_path"] / latency,
            f"{r['base_turn'] * 1e3:.1f} ms",
        )
        for mode, r in figures["results"].items()
    ]
    return f"""## 7. Compaction latency

Summarizer and memory-flush calls each take L = {latency * 1e3:.0f} ms (scripted). Ours: flush and offload in parallel,
then summarize, so the critical path is about 2·L (target ≤ 2·L + 5 %); the seed's design runs its three steps
one after another (flush L + offload + summarize L, and any slow disk adds to it).

{targets_table(figures["targets"])}

{table(["driver", "compactions", "slowest critical path", "mean", "slowest / L", "turn without compaction"], rows)}
"""
