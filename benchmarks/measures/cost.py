"""Measure: billed cost under prompt caching, beside summary fidelity ("cost at equal fidelity").

Raw input tokens are not what a user pays: providers bill a request's cached
prefix at a fraction of the price. Every model request of a replay is
recorded in order (the agent's calls, the summarizer's and the flush
model's), each as its list of messages. A request's cached prefix is the
longest run of leading messages identical to the start of one of the last
``CACHE_DEPTH`` requests (message granularity stands in for the providers'
128-token blocks). Tokens per message: o200k over the message's JSON, plus 4.
Billed (``core.billing``), OpenAI gpt-5 pricing: uncached × 1 + cached ×
0.1; Anthropic: uncached × 1.25 (a cache write) + cached × 0.1.

The 18 real trajectories are replayed at a 60k and a 128k window, the
summarizer being the agent's model (a scripted one). Ours runs at its
defaults for the window (at 60k: trigger 40k tokens or 50 messages; under
``prompt_cache`` the kept tail is ``keep_tokens_min``, 2k, and the working
set keeps the latest read of the files in use besides), the anchors at the
replay measure's budget (trigger 40k tokens or 50 messages, keep 8k; at 128k
trigger 108k). More rows show what the tail and the working set do: ours with
the 2k and the design's 8k tail, each with and without the working set, and
the anchors with a 2k tail (references, not targets). The same replay checks
artifact, request and constraint recall after every compaction, as the
fidelity measure does.

Working-set recall: a replay cannot see the work a real agent redoes when a
compaction took away the file it is editing, so every edit of a file the
agent read before is checked: is the file's latest read (its tool result,
unshortened) in the context the model was given for that call? A miss costs
a real agent a re-read: one more call (its context read from the cache) and
the read's tokens billed uncached. That charge is added once per lost read
and compaction, for every system, and the cost is reported with and without it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from benchmarks.anchors import (
    ScriptedAgent,
    Thresholds,
    drive,
    scripted_summarizer,
    system_graph,
    trajectory_turns,
)
from benchmarks.measures.fidelity import KINDS, call_paths, check_context
from benchmarks.measures.replay import THRESHOLDS
from benchmarks.report import check, table, targets_table
from langgraph_compaction.core.billing import CACHED_PRICE, PRICES
from langgraph_compaction.core.caching import CACHE_DEPTH
from langgraph_compaction.core.config import CompactionConfig, FidelityConfig
from langgraph_compaction.core.layers import SHORTENED_OPENINGS
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.core.validation import anthropic_violations
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.storage.transcript import load_transcript
from langgraph_compaction.testing.ledger import (
    CacheLedger,
    RecordingModel,
    WorkingSetEdit,
    message_key,
    read_in_view,
    working_set_edits,
)

NAME = "billed_cost"
PLOT = "billed_cost.png"
WORKING_SET_PLOT = "working_set_recall.png"
#: The windows replayed: the replay measure's 60k budget, and this package's 128k one for every system.
WINDOWS = {"60k": THRESHOLDS, "128k": Thresholds()}
#: Rows replayed at 60k only (references).
SIXTY_ONLY = ("langchain, 2k tail", "langmem, 2k tail")


def runs(thresholds: Thresholds) -> dict[str, tuple[str, Thresholds, CompactionConfig | None]]:
    """Return the table's rows at one window: (system, thresholds, our settings). Ours at its defaults first."""
    small = replace(thresholds, keep_tokens=2_000)
    return {
        "ours": ("ours", thresholds, CompactionConfig(context_window=thresholds.context_window)),
        "langchain": ("langchain", thresholds, None),
        "langmem": ("langmem", thresholds, None),
        "none": ("none", thresholds, None),
        "ours, 2k tail, no working set": ("ours", thresholds, small.config(working_set_tokens=0)),
        "ours, 2k tail + working set": ("ours", thresholds, small.config()),
        "ours, 8k tail, no working set": ("ours", thresholds, thresholds.config(working_set_tokens=0)),
        "ours, 8k tail": ("ours", thresholds, thresholds.config()),
        "langchain, 2k tail": ("langchain", small, None),
        "langmem, 2k tail": ("langmem", small, None),
    }


RUNS = runs(THRESHOLDS)
#: The rows drawn and compared by the targets.
MAIN = ("ours", "langchain", "langmem", "none")
#: Working-set recall ours must reach at every window.
WORKING_SET_TARGET = 0.97


def replay(
    system: str,
    path: Path | None,
    storage,
    thresholds: Thresholds = THRESHOLDS,
    config: CompactionConfig | None = None,
    *,
    turns: Sequence | None = None,
    timing: Any = None,
) -> dict:
    """Return one system's billed-cost and fidelity figures for one trajectory (ours with ``config`` when given).

    ``turns`` replays a session that is not a file (``path`` None). ``timing``
    (see the background measure) is told of every model call: it is handed
    the summarizer (``timing.model(model)`` returns the one to use), each
    agent call (``timing.agent_call(i)``) and each turn's end (``timing.turn_done(i)``).
    """
    turns = turns if turns is not None else trajectory_turns(path)
    flat = [m for pending, reply in turns for m in (*pending, reply)]
    key = path.with_suffix(".touched.json") if path is not None else None  # the answer key of what each call touched
    touched = call_paths(
        flat, json.loads(key.read_text(encoding="utf-8")) if key is not None and key.exists() else None
    )
    sent_by_call, sent = [], 0
    for pending, _ in turns:
        sent_by_call.append(sent + len(pending))
        sent += len(pending) + 1
    ledger = CacheLedger()
    budget = FidelityConfig().request_tokens
    checks: list[dict] = []
    state = {"calls": 0, "compacted": 0}
    superseded: set = set()  # the results the agent was sent as layer 2's superseded marker
    edits: dict[int, list[WorkingSetEdit]] = {}
    for edit in working_set_edits(turns):
        edits.setdefault(edit.call, []).append(edit)
    ws = {
        "edits": 0,
        "hits": 0,
        "rereads": 0,
        "reread_context": 0,
        "reread_tokens": 0,
        "violations": 0,
        "over_window": 0,
        "over_trigger": 0,
    }
    trigger = config.resolve().trigger_tokens if config is not None else thresholds.trigger_tokens
    counter = TokenCounter()  # each message counted once, not again in every later request
    charged: set = set()  # the reads already charged since the last compaction: a real agent re-reads once

    def observe(view: list[BaseMessage]) -> None:
        request = ledger.add("agent", view)
        if timing is not None:
            timing.agent_call(state["calls"])
        superseded.update(
            m.id for m in view if isinstance(m, ToolMessage) and str(m.content).startswith(SHORTENED_OPENINGS[1])
        )
        present = {m.id for m in view}
        compacted = [m for m in flat[: sent_by_call[state["calls"]]] if m.id not in present]
        if len(compacted) > state["compacted"]:
            checks.append(check_context(compacted, view, budget, touched))
            charged.clear()
        state["compacted"] = len(compacted)
        ws["violations"] += bool(state["compacted"] and anthropic_violations(view))  # the recording's own order aside
        ws["over_window"] += request.tokens > thresholds.context_window
        ws["over_trigger"] += counter.total(view) > trigger  # in the package's own units: what the trigger counts
        for edit in edits.get(state["calls"], ()):
            ws["edits"] += 1
            if read_in_view(edit, view):
                ws["hits"] += 1
            elif edit.read.id not in charged:
                charged.add(edit.read.id)
                ws["rereads"] += 1
                ws["reread_context"] += request.tokens  # the extra call sends the same context, from the cache
                ws["reread_tokens"] += ledger.count(message_key(edit.read))
        state["calls"] += 1

    base = scripted_summarizer()
    summarizer = RecordingModel(**{k: getattr(base, k) for k in ("latency", "summary_words", "reply")}, ledger=ledger)
    if timing is not None:
        summarizer = timing.model(summarizer)
    agent = ScriptedAgent(measure=False, observe=observe)
    graph = system_graph(system, agent, summarizer, thresholds, config=config, storage=storage).compile()
    if timing is None:  # no clock: a background job is ready by the next model call, the same on every run
        with use_runner(InstantRunner()):
            final = drive(graph, agent, turns)
    else:
        final = drive(graph, agent, turns, after_turn=lambda i, _: timing.turn_done(i))
    figures = ledger.figures()
    for kind in KINDS:
        figures[kind] = sum(c[kind] for c in checks)
        figures[f"{kind}_found"] = sum(c[f"{kind}_found"] for c in checks)
    figures["compactions"] = len(checks)
    figures["superseded"] = len(superseded)
    # lost: messages neither in the final state nor in the transcript ours offloads them to
    kept = {m.id for m in final.get("messages", ())}
    if system == "ours":
        kept |= {m.id for m in load_transcript(storage, "bench")}
    figures["lost"] = sum(1 for m in flat if m.id not in kept)
    figures["ws_edits"], figures["ws_hits"], figures["rereads"] = ws["edits"], ws["hits"], ws["rereads"]
    figures["violations"], figures["over_window"] = ws["violations"], ws["over_window"]
    figures["over_trigger"] = ws["over_trigger"]
    for name, pricing in PRICES.items():
        # the re-read: one more call whose context the cache serves, and the read's result billed in full
        charge = round(pricing.cached * ws["reread_context"] + pricing.uncached * ws["reread_tokens"])
        figures[f"reread_{name}"] = charge
        figures[f"billed_{name}_reread"] = figures[f"billed_{name}"] + charge
    return figures


def _sum(per: dict, system: str) -> dict:
    rows = [per[t][system] for t in per]
    totals = {k: sum(r[k] for r in rows) for k in rows[0] if k != "billed_per_call"}
    totals["hit_ratio"] = round(totals["agent_cached"] / max(1, totals["agent_input"]), 4)
    totals["side_cached_ratio"] = (
        round(totals["side_cached"] / totals["side_input"], 4) if totals["side_input"] else None
    )
    for kind in KINDS:
        totals[f"{kind}_recall"] = round(totals[f"{kind}_found"] / totals[kind], 4) if totals[kind] else None
    totals["ws_recall"] = round(totals["ws_hits"] / totals["ws_edits"], 4) if totals["ws_edits"] else None
    return totals


def _window(ctx, label: str, thresholds: Thresholds) -> tuple[dict, dict]:
    """Return (per trajectory, totals) of every row at one window."""
    rows = {r: v for r, v in runs(thresholds).items() if label == "60k" or r not in SIXTY_ONLY}
    per: dict[str, dict[str, dict]] = {}
    for path in ctx.trajectories:
        per[path.stem] = {
            row: replay(system, path, ctx.scratch_dir / f"cost-{label}-{path.stem}-{i}", th, config)
            for i, (row, (system, th, config)) in enumerate(rows.items())
        }
    totals = {row: _sum(per, row) for row in rows}
    none = totals["none"]
    for t in totals.values():
        for name in PRICES:
            t[f"vs_none_{name}"] = round(t[f"billed_{name}"] / max(1, none[f"billed_{name}"]), 4)
    return per, totals


def _window_targets(label: str, totals: dict) -> list[dict]:
    """Return the working-set targets at one window: recall, the bill with the re-read charge, fidelity, invariants."""
    ours = totals["ours"]
    best = min(("langchain", "langmem"), key=lambda s: totals[s]["billed_openai_reread"])
    targets = [
        check(
            f"{label}: edits without the file's latest read in context (ours)",
            1 - (ours["ws_recall"] or 1),
            1 - WORKING_SET_TARGET,
            unit="",
        ),
        check(
            f"{label}: billed (OpenAI) with the re-read charge: ours / {best} (the best anchor)",
            ours["billed_openai_reread"] / totals[best]["billed_openai_reread"],
            0.75,
        ),
    ]
    targets += [
        check(f"{label}: {kind} not recalled (ours)", 1 - ours[f"{kind}_recall"], 0.0, unit="")
        for kind in KINDS
        if ours[f"{kind}_recall"] is not None
    ]
    targets.append(
        check(
            f"{label}: requests over the window, ordering violations, lost messages (ours)",
            ours["over_window"] + ours["violations"] + ours["lost"],
            0,
            unit="",
        )
    )
    return targets


def run(ctx) -> dict:
    windows = {label: _window(ctx, label, thresholds) for label, thresholds in WINDOWS.items()}
    per, totals = windows["60k"]
    none = totals["none"]
    ours = totals["ours"]
    summaries = max(1, ours["compactions"])
    # Every message is sent uncached at least once: no compaction's uncached input is a floor U for any system.
    # A hit ratio h needs agent input >= U / (1 - h), so billed >= 0.9 U + 0.1 U / (1 - h) (OpenAI pricing).
    floor = none["agent_input"] - none["agent_cached"]
    hit_floor = round((1 - CACHED_PRICE) * floor + CACHED_PRICE * floor / (1 - 0.95))
    targets = [
        check("billed (OpenAI): ours / langmem", ours["billed_openai"] / totals["langmem"]["billed_openai"], 0.75),
        check("billed (OpenAI): ours / LangChain", ours["billed_openai"] / totals["langchain"]["billed_openai"], 0.75),
        check("ours: agent input not served from the cache", 1 - ours["hit_ratio"], 0.05, unit=""),
        check("ours: prefix breaks per summary", ours["breaks"] / summaries, 1.0, unit=""),
        check(
            "ours: prefix breaks per summary, layer 1-2 edits that repaid aside",
            (ours["breaks"] - ours["edit_breaks_repaid"]) / summaries,
            1.0,
            unit="",
        ),
        check(
            "ours: summarizer + flush input not served from the cache",
            1 - (ours["side_cached_ratio"] or 0),
            0.2,
            unit="",
        ),
    ]
    for label, (_, window_totals) in windows.items():
        targets += _window_targets(label, window_totals)
    _plot(per, ctx.results_dir / PLOT)
    _plot_working_set({label: w[0] for label, w in windows.items()}, ctx.results_dir / WORKING_SET_PLOT)
    budget = RUNS["ours"][2].resolve()
    return {
        "uncached_floor": floor,
        "billed_floor_at_hit_095": hit_floor,
        "thresholds": vars(THRESHOLDS),
        "ours_budget": {
            "trigger_tokens": budget.trigger_tokens,
            "trigger_messages": budget.trigger_messages,
            "keep_tokens": budget.keep_tokens,
            "working_set_tokens": budget.working_set_tokens,
        },
        "cache_depth": CACHE_DEPTH,
        "totals": totals,
        "per_trajectory": _without_series(per),
        "windows": {
            label: {
                "thresholds": vars(WINDOWS[label]),
                "working_set_tokens": runs(WINDOWS[label])["ours"][2].resolve().working_set_tokens,
                "totals": window_totals,
                "per_trajectory": _without_series(window_per),
            }
            for label, (window_per, window_totals) in windows.items()
        },
        "plot": PLOT,
        "working_set_plot": WORKING_SET_PLOT,
        "targets": targets,
    }


def _without_series(per: dict) -> dict:
    """Return the per-trajectory figures without the per-call series (kept for the plot only)."""
    return {
        t: {s: {k: v for k, v in f.items() if k != "billed_per_call"} for s, f in rows.items()}
        for t, rows in per.items()
    }


def _plot(per: dict, path) -> None:
    """Draw the billed cost of each agent call (OpenAI pricing) of the largest trajectory, and the totals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    largest = max(per, key=lambda t: per[t]["none"]["agent_input"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for system in MAIN:
        series = per[largest][system]["billed_per_call"]
        left.plot(range(1, len(series) + 1), [c / 1e3 for c in series], label=system, linewidth=0.8)
    left.set(
        xlabel="model call",
        ylabel="billed tokens of the call (thousands, OpenAI)",
        title=f"Billed cost per call: {largest}",
    )
    left.legend()
    totals = [sum(per[t][s]["billed_openai"] for t in per) / 1e6 for s in MAIN]
    right.bar(MAIN, totals)
    right.set(ylabel="billed, millions of token-equivalents", title=f"All {len(per)} trajectories, OpenAI pricing")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_working_set(windows: dict, path) -> None:
    """Draw working-set recall per system, per trajectory that edits a file it read (one panel per window)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(windows), figsize=(7 * len(windows), 5), squeeze=False)
    for ax, (label, per) in zip(axes[0], windows.items(), strict=False):
        names = [t for t in per if per[t]["none"]["ws_edits"]]
        width = 0.8 / len(MAIN)
        for k, system in enumerate(MAIN):
            recall = [100 * per[t][system]["ws_hits"] / per[t][system]["ws_edits"] for t in names]
            ax.bar([i + k * width for i in range(len(names))], recall, width, label=system)
        shown = [t if len(t) <= 30 else f"{t[:14]}…{t[-15:]}" for t in names]
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], shown, rotation=70, fontsize=7)
        ax.set(
            ylabel="edits with the file's latest read in context (%)",
            title=f"Working-set recall, {label} window",
            ylim=(0, 105),
        )
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _recall(t: dict, kind: str) -> str:
    return "–" if t[f"{kind}_recall"] is None else f"{100 * t[f'{kind}_recall']:.1f} %"


def report(figures: dict) -> str:
    totals = figures["totals"]
    rows = [
        (
            system,
            f"{t['agent_input'] / 1e6:.2f}M",
            f"{t['agent_cached'] / 1e6:.2f}M",
            f"{t['hit_ratio']:.3f}",
            f"{t['breaks']} ({t['breaks'] - t['summary_breaks']} not at a summary, {t['edit_breaks_repaid']} repaid)",
            f"{t['side_input'] / 1e6:.2f}M ({100 * (t['side_cached_ratio'] or 0):.0f} % cached)",
            f"{t['billed_openai'] / 1e6:.2f}M",
            f"{t['vs_none_openai']:.3f}×",
            f"{t['billed_anthropic'] / 1e6:.2f}M",
            f"{t['vs_none_anthropic']:.3f}×",
            *(_recall(t, k) for k in KINDS),
        )
        for system, t in totals.items()
    ]
    per = figures["per_trajectory"]
    per_rows = [(name, *(f"{per[name][s]['billed_openai'] / 1e3:,.0f}k" for s in totals)) for name in per]
    th, ours = figures["thresholds"], figures["ours_budget"]
    return f"""## Billed cost under prompt caching, at equal fidelity

{len(per)} real trajectories replayed model call by model call at a {th["context_window"]:,}-token window, the summarizer
being the agent's model (scripted). Ours runs at its defaults for the window (trigger {ours["trigger_tokens"]:,} tokens or
{ours["trigger_messages"]} messages, kept tail {ours["keep_tokens"]:,}: under `prompt_cache` the tail is billed in full after
every summary, so the derived one is `keep_tokens_min`); LangChain's middleware and langmem at trigger
{th["trigger_tokens"]:,} tokens or {th["trigger_messages"]} messages, keep {th["keep_tokens"]:,}. The last three rows show what the
tail alone does (references, not targets). Every request (agent, summarizer, flush) is billed with its cached prefix: the longest run of
leading messages identical to the start of one of the last {figures["cache_depth"]} requests. Tokens: o200k over each message's
JSON + 4. OpenAI (gpt-5): uncached × 1 + cached × 0.1; Anthropic: uncached × 1.25 + cached × 0.1. Hit ratio and breaks
(an agent request that does not extend the previous one) are over the agent's calls; "no compaction" runs past the
window (reference only). Recall is checked after every compaction, as in the fidelity measure.

{targets_table(figures["targets"])}

The billed-cost and hit-ratio targets cannot both be met on these trajectories: every message is sent uncached at least
once ({figures["uncached_floor"] / 1e6:.2f}M tokens, no compaction's uncached input), and a hit ratio of 0.95 needs 20 times
that as agent input, which bills at least 0.9 × {figures["uncached_floor"] / 1e6:.2f}M + 0.1 × 20 × {figures["uncached_floor"] / 1e6:.2f}M =
{figures["billed_floor_at_hit_095"] / 1e6:.2f}M, over 0.75 × langmem ({0.75 * totals["langmem"]["billed_openai"] / 1e6:.2f}M): ours is tuned for the bill.

{table(["system", "agent input", "cached", "hit ratio", "breaks", "summarizer + flush input", "billed (OpenAI)", "vs none", "billed (Anthropic)", "vs none", *(f"{kind} recall" for kind in KINDS)], rows)}

![billed cost per call]({figures["plot"]})

Billed (OpenAI) per trajectory:

{table(["trajectory", *totals], per_rows)}
{_working_set_report(figures)}"""


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _working_set_report(figures: dict) -> str:
    """Return the working-set part of the report: recall and the bill with the re-read charge, per window."""
    windows = figures.get("windows")
    if not windows:
        return ""
    parts = [
        """
### The working set: is the file being edited still in front of the agent?

For every edit of a file the agent read before (what `touches.touches` reads from the calls: verb `read`, then
`edited` or `wrote`), is the file's latest read, its tool result unshortened, in the context the model was given for
that call? A miss costs a real agent a re-read: one more call (its context served by the cache, 0.1×) and the read's
tokens billed uncached (1×; Anthropic 1.25×), charged once per lost read between two compactions. "with re-read" adds
that charge to the bill; the ratio is to the cheaper anchor (LangChain's middleware or langmem) with the same charge.
"""
    ]
    for label, w in windows.items():
        totals = w["totals"]
        best = min(("langchain", "langmem"), key=lambda s: totals[s]["billed_openai_reread"])
        rows = [
            (
                system,
                f"{_pct(t['ws_recall'])} ({t['ws_hits']}/{t['ws_edits']})",
                t["rereads"],
                f"{t['billed_openai'] / 1e6:.2f}M",
                f"{t['reread_openai'] / 1e6:.3f}M",
                f"{t['billed_openai_reread'] / 1e6:.2f}M",
                f"{t['billed_openai_reread'] / totals[best]['billed_openai_reread']:.3f}×",
                f"{t['billed_anthropic_reread'] / 1e6:.2f}M",
                t["compactions"],
                t["over_window"],
                t["violations"],
                t["lost"],
                " / ".join(_pct(t[f"{k}_recall"]) for k in KINDS),
            )
            for system, t in totals.items()
        ]
        th = w["thresholds"]
        parts.append(
            f"""
#### {label} window (trigger {th["trigger_tokens"]:,} tokens or {th["trigger_messages"]} messages; ours keeps a working set of up to {w["working_set_tokens"]:,} tokens)

{table(["system", "working-set recall (edits)", "re-reads", "billed (OpenAI)", "re-read charge", "with re-read", f"vs {best}, with re-read", "with re-read (Anthropic)", "compactions", "requests over the window", "ordering violations", "lost messages", "paths / changed / requests / constraints recall"], rows)}
"""
        )
    per = windows["60k"]["per_trajectory"]
    systems = list(windows["60k"]["totals"])
    rows = [
        (
            name,
            per[name]["none"]["ws_edits"],
            *(_pct(per[name][s]["ws_hits"] / per[name][s]["ws_edits"]) for s in systems),
        )
        for name in per
        if per[name]["none"]["ws_edits"]
    ]
    parts.append(
        f"""
Working-set recall per trajectory that edits a file it read (60k window; the answer key is the edits column: the
edits after a read that `touches.touches` finds in the recorded calls):

{table(["trajectory", "edits after a read", *systems], rows)}

![working-set recall per system and trajectory]({figures["working_set_plot"]})
"""
    )
    return "".join(parts)
