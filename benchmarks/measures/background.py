"""Measure: a timed session, compaction blocking the agent or prepared in the background.

Every model takes ``0.5 s + output tokens / 60`` per second (the agent's and
the compaction model's alike, so a summary costs what its length costs) and
every tool call 0.2 s, on a simulated clock: nothing sleeps, so the whole
measure runs in the time of the replays. The replays are the billed-cost
measure's (``cost.replay``: the same graphs, cache ledger and recall checks);
this measure adds the clock and a background runner that runs each prepared
compaction at once but makes it ready only when the simulated time of its
calls (the memory model, then the summary) has passed.

The 18 real trajectories at a 60k window and a seeded 300-turn synthetic
coding session at 128k, for ours blocking, ours in the background, LangChain's
middleware, langmem and no compaction (whose calls past the window are
counted as if they worked). A turn's stall is its time minus its agent and
tool time: what compaction put on the critical path.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import statistics
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage

from benchmarks.anchors import Thresholds, o200k_tokens, synthetic_session, trajectory_turns
from benchmarks.measures.cost import RecordingModel, replay
from benchmarks.measures.fidelity import KINDS
from benchmarks.measures.replay import THRESHOLDS
from benchmarks.report import check, table, targets_table
from langgraph_compaction.core.billing import OPENAI
from langgraph_compaction.core.config import CompactionConfig
from langgraph_compaction.core.conversation import content_text
from langgraph_compaction.engine.jobs import Job, Runner, use_runner

NAME = "background_compaction"
PLOT = "background_timeline.png"
AGENT_BASE, TOKENS_PER_SECOND, TOOL_SECONDS = 0.5, 60.0, 0.2
SYNTHETIC = Thresholds(context_window=128_000, trigger_tokens=108_000, keep_tokens=8_000, trigger_messages=50)
SYSTEMS = ("ours, blocking", "ours, background", "langchain", "langmem", "none")
#: Other start points, ours in the background only: what the default was chosen from.
SWEEP = tuple(f"ours, background at {start}" for start in (0.8, 0.9, 0.95))

#: The wall time background compaction may add over no compaction, by window: a longer window leaves a job more
#: turns to be ready in.
ADDED = {"60k": 0.03, "128k": 0.01}
#: The longest stall of a compacting turn at p95, in L (a compaction model call), background.
STALL_P95_L = 0.5

#: The job whose model calls are being timed (None: the call is on the agent's critical path).
_charging: contextvars.ContextVar[Prepared | None] = contextvars.ContextVar("charging", default=None)


def call_seconds(output_tokens: int) -> float:
    """Return how long a model call producing ``output_tokens`` takes."""
    return AGENT_BASE + output_tokens / TOKENS_PER_SECOND


@dataclass
class Prepared:
    """One background job on the simulated clock: when it started, its model time per branch, and what it was billed.

    Its summary and memory calls run side by side: it is ready after the
    longer of the two branches.
    """

    id: str
    started: float
    branches: dict = field(default_factory=dict)
    billed: float = 0.0

    @property
    def seconds(self) -> float:
        return max(self.branches.values(), default=0.0)

    @property
    def ready(self) -> float:
        return self.started + self.seconds


class TimedModel(RecordingModel):
    """The replays' summarizer, each call taking ``call_seconds`` of its answer on the simulated clock."""

    timing: Any = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        result = super()._generate(messages, stop, run_manager, **kwargs)
        request = self.ledger.requests[-1]
        answer = content_text(result.generations[0].message.content)
        branch = "memory" if "memory extraction assistant" in content_text(messages[-1].content) else "summary"
        self.timing.side_call(
            call_seconds(o200k_tokens(answer)),
            OPENAI.bill(request.tokens, request.cached),
            branch,
        )
        return result


class SimulatedRunner(Runner):
    """Runs a prepared compaction at once, ready once its simulated model time has passed; waiting advances the clock."""

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.jobs: dict[int, Prepared] = {}

    def is_done(self, job: Job) -> bool:
        return job.future is not None and self.timing.now >= self.jobs[id(job)].ready

    def start_sync(self, job: Job, work, awork) -> None:
        prepared = self.jobs[id(job)] = Prepared(id=job.meta["id"], started=self.timing.now)
        self.timing.prepared.append(prepared)
        token = _charging.set(prepared)
        try:
            future: Future = Future()
            future.set_result(work())  # the offload and flush threads copy this context: their calls are charged too
            job.future = future
        finally:
            _charging.reset(token)

    def wait_sync(self, job: Job, timeout: float | None) -> bool:
        left = self.jobs[id(job)].ready - self.timing.now
        self.timing.stalled(left if timeout is None else min(left, timeout))  # waiting advances the clock
        return self.is_done(job)


class _Events(logging.Handler):
    """Collects the engine's events (from its log), each stamped with the simulated time and the turn."""

    def __init__(self, timing: Timing) -> None:
        super().__init__(logging.INFO)
        self.timing = timing

    def emit(self, record: logging.LogRecord) -> None:
        fields = record.args[1] if isinstance(record.args, tuple) and len(record.args) == 2 else None
        if isinstance(fields, dict) and fields.get("event"):
            self.timing.events.append({**fields, "at": self.timing.now, "turn": len(self.timing.turn_seconds)})


def _output_tokens(reply: Any) -> int:
    calls = json.dumps([c["args"] for c in reply.tool_calls], ensure_ascii=False) if reply.tool_calls else ""
    return o200k_tokens(content_text(reply.content)) + o200k_tokens(calls)


@dataclass
class Timing:
    """The simulated clock of one replay and what happened on it (``cost.replay``'s ``timing``).

    A turn runs from the end of the previous model call: the tools that call
    asked for, the compaction in front of the model (if any), the model call.
    """

    turns: list
    now: float = 0.0
    agent: list = field(default_factory=list)  # (start, seconds) of each agent call
    blocking: list = field(default_factory=list)  # (start, seconds) of each stretch compaction held the agent
    prepared: list = field(default_factory=list)
    events: list = field(default_factory=list)
    turn_seconds: list = field(default_factory=list)
    base_seconds: list = field(default_factory=list)
    summary_calls: list = field(default_factory=list)
    _turn_start: float = 0.0
    _tools: float = 0.0

    def model(self, summarizer: RecordingModel) -> TimedModel:
        fields = {k: getattr(summarizer, k) for k in ("latency", "summary_words", "reply", "ledger")}
        return TimedModel(**fields, timing=self)

    def stalled(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if self.blocking and sum(self.blocking[-1]) == self.now:  # a wait looked at in slices is one stretch
            start, before = self.blocking.pop()
            self.blocking.append((start, before + seconds))
        else:
            self.blocking.append((self.now, seconds))
        self.now += seconds

    def side_call(self, seconds: float, billed: float, branch: str) -> None:
        if branch == "summary":
            self.summary_calls.append(seconds)
        job = _charging.get()
        if job is not None:
            job.branches[branch] = job.branches.get(branch, 0.0) + seconds
            job.billed += billed
        else:
            self.stalled(seconds)

    def agent_call(self, i: int) -> None:
        seconds = call_seconds(_output_tokens(self.turns[i][1]))
        self.agent.append((self.now, seconds))
        self.now += seconds
        self.base_seconds.append(self._tools + seconds)

    def turn_done(self, i: int) -> None:
        self.turn_seconds.append(self.now - self._turn_start)
        self._turn_start = self.now
        following = self.turns[i + 1][0] if i + 1 < len(self.turns) else []
        self._tools = TOOL_SECONDS if any(isinstance(m, ToolMessage) for m in following) else 0.0
        self.now += self._tools


def _replay(system: str, turns: list, path, storage, thresholds: Thresholds) -> dict:
    """Return one system's figures for one session; ``"ours, background at 0.9"`` sets ``background.start``."""
    timing = Timing(turns=turns)
    label, config = system, None
    if system.startswith("ours"):
        label = "ours"
        background: dict = {"enabled": "background" in system}
        if " at " in system:
            background["start"] = float(system.rsplit(" ", 1)[-1])
        config = CompactionConfig(context_window=thresholds.context_window, background=background)
    handler = _Events(timing)
    logger = logging.getLogger("langgraph_compaction")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with use_runner(SimulatedRunner(timing)):
            billed = replay(label, path, storage, thresholds, config, turns=turns, timing=timing)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return _figures(timing, billed)


def _figures(timing: Timing, billed: dict) -> dict:
    """Return one replay's timing, blocking, discard, cost and recall figures."""
    stalls = [max(0.0, round(t - b, 6)) for t, b in zip(timing.turn_seconds, timing.base_seconds, strict=False)]
    named = lambda name: [e for e in timing.events if e.get("event") == name]  # noqa: E731
    applied = named("compaction_applied")
    blocked = [e for e in named("compaction_started") if e.get("mode") == "blocking"]
    discarded_ids = {e.get("prepared_id") for e in named("compaction_discarded")}
    paid = [p for p in timing.prepared if p.id in discarded_ids and p.seconds > 0]
    # ours names each compaction in its events; the anchors' are the turns they stalled
    turns = (
        sorted({e["turn"] for e in applied} | {e["turn"] for e in blocked})
        if applied
        else [i for i, s in enumerate(stalls) if s > 0]
    )
    return {
        "turns": len(stalls),
        "base_seconds": round(sum(timing.base_seconds), 2),
        "wall_seconds": round(sum(timing.turn_seconds), 2),
        "compactions": len(applied) if applied else len(turns),
        "swaps": sum(1 for e in applied if e.get("mode") == "background"),
        "compaction_stalls": [stalls[i] for i in turns if i < len(stalls)],
        "blocked": len(blocked),
        "blocked_why": [e.get("why") or "blocking mode" for e in blocked],
        "prepared": len(timing.prepared),
        "discarded": len(paid),
        "discarded_why": [
            e.get("why") for e in named("compaction_discarded") if e.get("prepared_id") in {p.id for p in paid}
        ],
        "discarded_billed": round(sum(p.billed for p in paid)),
        "summary_call_seconds": timing.summary_calls,
        "billed_openai": billed["billed_openai"],
        "over_trigger": billed["over_trigger"],
        **{kind: billed[kind] for kind in KINDS},
        **{f"{kind}_found": billed[f"{kind}_found"] for kind in KINDS},
        "timeline": {
            "agent": timing.agent,
            "blocking": timing.blocking,
            "prepared": [(p.started, p.seconds) for p in timing.prepared],
            "swaps": [e["at"] for e in applied if e.get("mode") == "background"],
        },
    }


def _sessions(ctx) -> dict[str, tuple[Thresholds, list[tuple[str, Any, list]]]]:
    """Return each window's sessions: (name, file or None, turns)."""
    synthetic = synthetic_session(60 if ctx.quick else 300, seed=ctx.seed)
    return {
        "60k": (THRESHOLDS, [(p.stem, p, trajectory_turns(p)) for p in ctx.trajectories]),
        "128k": (SYNTHETIC, [("synthetic 300 turns" if not ctx.quick else "synthetic 60 turns", None, synthetic)]),
    }


def _p95(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered) + 0.5) - 1))]


def _reason(why: str) -> str:
    """Return a reason with its figures and message ids left out, so that like reasons count together."""
    return re.sub(r"message \S+", "a message", re.sub(r"\d[\d,]*", "N", why))


def _totals(runs: list[dict]) -> dict:
    stalls = [s for r in runs for s in r["compaction_stalls"]]
    calls = [s for r in runs for s in r["summary_call_seconds"]]
    base = sum(r["base_seconds"] for r in runs)
    out = {
        "sessions": len(runs),
        "turns": sum(r["turns"] for r in runs),
        "base_seconds": round(base, 1),
        "wall_seconds": round(sum(r["wall_seconds"] for r in runs), 1),
        "added": round(sum(r["wall_seconds"] for r in runs) / base - 1, 4),
        "compactions": sum(r["compactions"] for r in runs),
        "swaps": sum(r["swaps"] for r in runs),
        "over_trigger": sum(r["over_trigger"] for r in runs),
        "blocked": sum(r["blocked"] for r in runs),
        "blocked_why": Counter(_reason(w) for r in runs for w in r["blocked_why"]).most_common(),
        "prepared": sum(r["prepared"] for r in runs),
        "discarded": sum(r["discarded"] for r in runs),
        "discarded_why": Counter(_reason(w) for r in runs for w in r["discarded_why"]).most_common(),
        "discarded_billed": sum(r["discarded_billed"] for r in runs),
        "stall_p95": round(_p95(stalls), 3),
        "stall_max": round(max(stalls, default=0.0), 3),
        "L": round(statistics.mean(calls), 3) if calls else None,
        "billed_openai": sum(r["billed_openai"] for r in runs),
    }
    for kind in KINDS:
        total, found = sum(r[kind] for r in runs), sum(r[f"{kind}_found"] for r in runs)
        out[f"{kind}_recall"] = round(found / total, 4) if total else None
    return out


def run(ctx) -> dict:
    per: dict[str, dict[str, dict[str, dict]]] = {}
    totals: dict[str, dict[str, dict]] = {}
    for window, (thresholds, sessions) in _sessions(ctx).items():
        per[window] = {}
        for name, path, turns in sessions:
            folder = f"background-{window}-{name}-".replace(" ", "_")
            per[window][name] = {
                s: _replay(
                    s, turns, path, ctx.scratch_dir / (folder + s.replace(" ", "_").replace(",", "")), thresholds
                )
                for s in (*SYSTEMS, *SWEEP)
            }
        totals[window] = {s: _totals([per[window][n][s] for n in per[window]]) for s in (*SYSTEMS, *SWEEP)}
    L = totals["60k"]["ours, blocking"]["L"] or 1.0
    targets = []
    for window, t in totals.items():
        bg, blocking = t["ours, background"], t["ours, blocking"]
        targets += [
            check(f"{window}: wall time added over no compaction, background", bg["added"], ADDED[window], unit=""),
            check(
                f"{window}: model requests over the trigger, background (blocking: {blocking['over_trigger']})",
                bg["over_trigger"],
                blocking["over_trigger"],
                unit="",
            ),
            check(
                f"{window}: longest stall of a compacting turn at p95 / L, background",
                bg["stall_p95"] / (bg["L"] or L),
                STALL_P95_L,
            ),
            check(
                f"{window}: compactions that block, background",
                bg["blocked"] / max(1, bg["compactions"]),
                0.10,
                unit="",
            ),
            check(
                f"{window}: prepared summaries discarded, background",
                bg["discarded"] / max(1, bg["prepared"]),
                0.05,
                unit="",
            ),
            check(
                f"{window}: billed cost (OpenAI), background / blocking",
                bg["billed_openai"] / max(1, blocking["billed_openai"]),
                1.00,
            ),
        ]
        for kind in KINDS:
            if blocking[f"{kind}_recall"] is not None:
                targets.append(
                    check(
                        f"{window}: {kind} recall lost, background vs blocking",
                        (blocking[f"{kind}_recall"] or 0) - (bg[f"{kind}_recall"] or 0),
                        0.0,
                        unit="",
                    )
                )
    largest = max(per["60k"], key=lambda n: per["60k"][n]["none"]["turns"])
    _plot(per["60k"][largest], largest, ctx.results_dir / PLOT)
    slim = {
        w: {
            n: {
                s: {k: v for k, v in r.items() if k not in ("timeline", "summary_call_seconds")}
                for s, r in runs.items()
            }
            for n, runs in sessions.items()
        }
        for w, sessions in per.items()
    }
    return {
        "law": {"base_seconds": AGENT_BASE, "tokens_per_second": TOKENS_PER_SECOND, "tool_seconds": TOOL_SECONDS},
        "background_start": CompactionConfig().background.start,
        "thresholds": {"60k": vars(THRESHOLDS), "128k": vars(SYNTHETIC)},
        "totals": totals,
        "per_session": slim,
        "plot": PLOT,
        "plot_session": largest,
        "targets": targets,
    }


def _plot(runs: dict, name: str, path) -> None:
    """Draw one session's timeline, blocking above, background below: agent calls, compaction, swaps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(13, 4.8), sharex=True)
    for ax, system in zip(axes, ("ours, blocking", "ours, background"), strict=False):
        line = runs[system]["timeline"]
        ax.broken_barh(line["agent"], (20, 8), facecolors="tab:blue", label="agent call")
        ax.broken_barh(line["blocking"], (10, 8), facecolors="tab:red", label="compaction holding the agent")
        ax.broken_barh(line["prepared"], (0, 8), facecolors="tab:orange", label="compaction prepared in the background")
        for at in line["swaps"]:
            ax.axvline(at, color="tab:green", linewidth=0.8)
        ax.set_yticks([4, 14, 24], ["background", "blocking", "agent"])
        ax.set_title(f"{system}: {runs[system]['wall_seconds']:.0f} s", fontsize=9, loc="left")
    axes[1].plot([], [], color="tab:green", label="swap (prepared summary applied)")
    axes[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=4, fontsize=8)
    axes[1].set_xlabel(f"simulated seconds ({name}, 60k window)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _why(pairs: list) -> str:
    return "; ".join(f"{n}× {w}" for w, n in pairs) or "none"


def report(figures: dict) -> str:
    sections = []
    for window, t in figures["totals"].items():
        rows = [
            (
                system,
                r["sessions"],
                r["turns"],
                f"{r['wall_seconds']:,.0f} s",
                f"{100 * r['added']:+.1f} %",
                r["compactions"],
                f"{r['stall_p95']:.2f} s ({r['stall_p95'] / (r['L'] or 1):.2f} L)" if r["compactions"] else "–",
                f"{r['stall_max']:.2f} s" if r["compactions"] else "–",
                f"{r['blocked']} ({100 * r['blocked'] / max(1, r['compactions']):.0f} %)"
                if system.startswith("ours")
                else "all",
                f"{r['discarded']} of {r['prepared']} ({r['discarded_billed'] / 1e3:,.0f}k billed)"
                if r["prepared"]
                else "–",
                f"{r['billed_openai'] / 1e6:.2f}M",
                *("–" if r[f"{k}_recall"] is None else f"{100 * r[f'{k}_recall']:.1f} %" for k in KINDS),
            )
            for system, r in t.items()
            if system in SYSTEMS
        ]
        starts = sorted(
            [(figures["background_start"], "ours, background"), *((float(s.rsplit(" ", 1)[-1]), s) for s in SWEEP)]
        )
        sweep = [
            (
                f"{start}" + (" (default)" if system == "ours, background" else ""),
                f"{100 * t[system]['added']:+.1f} %",
                f"{t[system]['stall_p95'] / (t[system]['L'] or 1):.2f} L",
                f"{t[system]['blocked']} of {t[system]['compactions']}",
                f"{t[system]['discarded']} of {t[system]['prepared']}",
                f"{t[system]['billed_openai'] / max(1, t['ours, blocking']['billed_openai']):.3f}×",
            )
            for start, system in starts
        ]
        bg = t["ours, background"]
        th = figures["thresholds"][window]
        sections.append(
            f"""### {window} window ({t["none"]["sessions"]} session{"s" if t["none"]["sessions"] > 1 else ""}, trigger {th["trigger_tokens"]:,} tokens or {th["trigger_messages"]} messages for the anchors; ours at its defaults for the window)

{table(["system", "sessions", "turns", "wall time", "added over none", "compactions", "stall at p95", "longest stall", "blocking", "prepared, discarded", "billed (OpenAI)", *(f"{k} recall" for k in KINDS)], rows)}

Why background compactions blocked: {_why(bg["blocked_why"])}. Why prepared summaries were discarded: {_why(bg["discarded_why"])}.

Where the background compaction starts (`background.start`), ours in the background:

{table(["background.start", "added over none", "stall at p95", "blocking", "discarded", "billed / blocking"], sweep)}
"""
        )
    law = figures["law"]
    return f"""## Background compaction: a timed session

Every model call takes {law["base_seconds"]} s + output tokens / {law["tokens_per_second"]:.0f} per second (the agent's and the
compaction model's), every round of tool calls {law["tool_seconds"]} s, on a simulated clock. "Stall" is what compaction
added to a turn that compacted (a turn that does not compact adds nothing); L is the mean compaction model call. Blocking:
our default, the summary made in front of the model call. Background (`CompactionConfig(background=True)`,
`background={{"start": {figures["background_start"]}}}`): prepared next to the agent from that share of the trigger and swapped in at
the trigger; "blocking" counts the compactions that still held the agent. Discarded summaries were paid for and never
applied; their cost is in the billed figure. Billed cost and recall as in the billed-cost measure (the same replays).

{targets_table(figures["targets"])}

{"".join(sections)}
![timeline]({figures["plot"]})
"""
