"""Measure: summary fidelity. After every compaction, is what the agent needs still in its context?

Each real trajectory is replayed model call by model call through this
package and through LangChain's ``SummarizationMiddleware`` with the same
thresholds as the replay measure and the same scripted summarizer, at three
windows (24k, 40k and 60k). The synthetic sessions of
``tests/data/agent_shapes`` (Codex, OpenCode, Gemini CLI and MCP tool shapes,
one of 2,000+ path mentions) are replayed through this package the same way,
and so is the stress set at the 40k window: one long session (560 tool calls,
parallel rounds, paged reads, shell pipelines, ``apply_patch``) per agent of
``testing.agent_sessions`` (Codex, Copilot, OpenCode, Gemini CLI), generated
with its answer key at run time. Its path recall counts only the paths the
trail names (a path counted on its folder's line is not named): target 95 %.
Whenever a model call's input has lost messages (a compaction), that input is
checked against everything compacted so far:

- path recall: the paths and URLs the compacted tool calls touched, named in
  the input (summary or tail), word for word or on a folder's line of the
  trail (``src/ (2 files: a.ts, b.ts)``); a relative path is named by the
  absolute one it ends with (the trail spells a file once, under the project's
  root, when the session named it both ways). For the agent shapes the paths come
  from the answer key written with each session (``<name>.touched.json``);
  for the real trajectories from ``touches.touches``;
- changed-file recall: the paths those calls wrote, edited, patched, deleted
  or moved, named word for word or as changed on their folder's line
  (``src/ (3 files, the first 2 changed: a.ts, b.ts, c.ts)``), or (over the trail's token bound) counted
  on their folder's line, ``src/ (412 changed files)``: such paths are
  reported apart ("counted by folder"), for paths and changed files alike;
- request recall: the last three compacted user requests present verbatim
  (within the 2,000-token request budget; a request over half the budget is a
  pasted document, which the summary cuts to its start, and is not counted);
- constraint recall: the rules the user stated in the compacted messages
  (``stated_rules``: "never ...", "must ...", "不要 ...") present verbatim;
- the summary's size in tokens, against the room a compaction leaves it (the
  target after a compaction, 60 % of the trigger, less the kept tail).

With ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` set (model: ``FIDELITY_JUDGE_MODEL``,
default ``gpt-4o-mini``), an LLM also writes four probe questions (recall,
artifact, continuation, decision) from the history both systems compacted,
answers them from each system's final context, and grades the answers 0-5.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from benchmarks.anchors import ScriptedAgent, Thresholds, drive, scripted_summarizer, system_graph, trajectory_turns
from benchmarks.report import check, table, targets_table
from langgraph_compaction.core.config import FidelityConfig
from langgraph_compaction.core.conversation import content_text, is_summary, is_user_turn, text_of, tool_calls_of
from langgraph_compaction.core.fidelity import stated_rules
from langgraph_compaction.core.summary import render_messages
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.core.touches import CHANGE_VERBS, normalise_path, touches
from langgraph_compaction.core.trail import CHANGED, counted_files, expand_group, parse_line
from langgraph_compaction.testing.agent_sessions import AGENTS, write_session

NAME = "summary_fidelity"
#: A tight window that compacts the short runs again and again, a middle one, and the replay measure's budget.
SETTINGS = {
    "24k window": Thresholds(context_window=24_000, trigger_tokens=12_000, keep_tokens=3_000, trigger_messages=25),
    "40k window": Thresholds(context_window=40_000, trigger_tokens=24_000, keep_tokens=5_000, trigger_messages=40),
    "60k window": Thresholds(context_window=60_000, trigger_tokens=40_000, keep_tokens=8_000, trigger_messages=50),
}
SYSTEMS = ("ours", "langchain")
#: The synthetic sessions in other agents' tool shapes, each with the answer key of what its calls touched.
SHAPES = Path(__file__).resolve().parents[2] / "tests" / "data" / "agent_shapes"
#: Agent shapes replayed in a quick run (the long session takes minutes per window).
QUICK_SHAPES = ("codex_rollout", "opencode_export")
LAST_REQUESTS = 3
KINDS = ("paths", "changed", "requests", "constraints")
#: Path recall the trail must reach after every compaction; changed files, requests and constraints: all of them.
PATH_RECALL_TARGET = 0.95
#: The stress set: long generated sessions of other agents (``testing.agent_sessions``), at this window.
STRESS_WINDOW = "40k window"
STRESS_CALLS = 560
#: Agents of the stress set replayed in a quick run.
QUICK_STRESS = ("codex", "opencode")
PROBE_TYPES = ("recall", "artifact", "continuation", "decision")
PLOT = "summary_fidelity.png"
#: Characters of the compacted history shown to the probe writer (the newest part), about 30k tokens.
PROBE_SPAN_CHARS = 120_000

PROBE_PROMPT = """You are writing a quiz that checks whether an AI agent still knows what happened earlier in its own session, after part of its history was compacted.

Below is the part of the session that was compacted. Write exactly four questions, one of each type, each answered by something stated in it:
- recall: a specific fact the user or a tool stated (a name, a number, an error message);
- artifact: a file that was created, changed or read, or a command that was run and how it ended;
- continuation: what the agent should do next, given where the work stood;
- decision: a choice the agent or the user made, and why.

Answer with JSON only: {{"probes": [{{"type": "recall", "question": "...", "answer": "..."}}, ...]}}

<compacted>
{span}
</compacted>"""

ANSWER_PROMPT = """You are the agent in the session below; it is all you remember of it. Answer the question in one or two sentences from this context only. If the context does not say, answer "I don't know".

<context>
{context}
</context>

Question: {question}"""

GRADE_PROMPT = """Grade an answer against the reference answer: 0 (wrong, missing or "I don't know") to 5 (complete and correct). Answer with JSON only: {{"score": N}}

Question: {question}
Reference answer: {reference}
Answer to grade: {answer}"""


@dataclass
class Replay:
    """What one system's replay of one trajectory showed: a check per compaction, and the end state."""

    checks: list[dict] = field(default_factory=list)
    compacted: list[BaseMessage] = field(default_factory=list)
    view: list[BaseMessage] = field(default_factory=list)


def expected_requests(compacted: Sequence[BaseMessage], budget_tokens: int) -> list[str]:
    """Return the last ``LAST_REQUESTS`` compacted user requests that the request budget holds, newest first.

    A request over half the budget (a pasted document) is not expected
    verbatim, but takes up half the budget as the summary spends it.
    """
    texts = [t for t in (text_of(m).strip() for m in compacted if is_user_turn(m)) if t]
    chosen: list[str] = []
    room = budget_tokens
    for text in reversed(texts):
        tokens = estimate_text_tokens(text)
        if tokens > budget_tokens // 2:
            room -= min(budget_tokens // 2, max(room, 0))
            continue
        if tokens > room or len(chosen) == LAST_REQUESTS:
            break
        chosen.append(text)
        room -= tokens
    return chosen


#: What each tool call touched, by (message id, call id): (paths, changed paths). Real logs reuse call ids.
CallPaths = dict[tuple[str | None, str], tuple[list[str], list[str]]]


def call_paths(messages: Sequence[BaseMessage], answer_key: dict | None = None) -> CallPaths:
    """Return what each tool call touched: from the session's answer key when it has one, else from the calls."""
    found: CallPaths = {}
    for m in messages:
        for call in tool_calls_of(m):
            if answer_key is not None:
                touched = answer_key[call["id"]]
                changed = [normalise_path(p) for p in touched["changed"]]
                found[(m.id, call["id"])] = (changed + [normalise_path(p) for p in touched["read"]], changed)
            else:
                got = touches(call.get("name") or "tool", call.get("args"))
                found[(m.id, call.get("id") or "")] = (
                    [normalise_path(t.target) for t in got],
                    [normalise_path(t.target) for t in got if t.verb in CHANGE_VERBS],
                )
    return found


def trail_paths(context: str, changed: bool = False) -> set[str]:
    """Return the paths the folder lines of a context's trail name (``- src/ (2 files: a.ts, b.ts)``).

    ``changed``: only the changed files they name (``src/ (3 files, the first 2 changed: a.ts, b.ts, c.ts)``).
    An absolute path also names the relative paths it ends with (``/p/src/a.ts``: ``src/a.ts``): the trail
    spells a file once, under the project's root, when the session named it both ways.
    """
    named = {
        e.key
        for line in context.splitlines()
        if line.startswith("- ") and expand_group(line[2:])
        for e in parse_line(line[2:])
        if not changed or CHANGED in e.details
    }
    return named | {p[i + 1 :] for p in named if p.startswith("/") for i in range(1, len(p)) if p[i] == "/"}


def counted_folders(context: str) -> set[str]:
    """Return the folders whose files a context's trail counts instead of listing (``- src/ (412 changed files)``)."""
    return {c[0] for line in context.splitlines() if line.startswith("- ") and (c := counted_files(line[2:]))}


def under_counted(path: str, folders: set[str]) -> bool:
    """Return True when the trail counts ``path`` on its folder's line (or an enclosing folder's; ``.`` is the top)."""
    if "." in folders and not path.startswith(("/", "~")) and "://" not in path:
        return True
    return any(path[:i] in folders for i in range(len(path)) if path[i] == "/")


def check_context(
    compacted: Sequence[BaseMessage], view: Sequence[BaseMessage], budget_tokens: int, touched: CallPaths
) -> dict:
    """Return, for one compaction, how many paths, changed files, requests and constraints were expected and found."""
    context = render_messages(view)
    grouped = {"paths": trail_paths(context), "changed": trail_paths(context, changed=True)}
    calls = [touched[(m.id, c.get("id") or "")] for m in compacted for c in tool_calls_of(m)]
    changed = list(dict.fromkeys(p for _, changes in calls for p in changes))
    expected = {
        "paths": list(dict.fromkeys(p for paths, _ in calls for p in paths)),
        "changed": changed,
        "requests": expected_requests(compacted, budget_tokens),
        "constraints": list(dict.fromkeys(text for text, _ in stated_rules(compacted))),
    }
    counted = counted_folders(context)
    figures: dict[str, Any] = {}
    for kind, items in expected.items():
        missing = [item for item in items if item not in context and item not in grouped.get(kind, ())]
        # a path the trail counts on its folder's line, over its token bound, is accounted for (and counted apart)
        by_folder = [item for item in missing if kind in ("paths", "changed") and under_counted(item, counted)]
        missing = [item for item in missing if item not in by_folder]
        figures[kind] = len(items)
        figures[f"{kind}_found"] = len(items) - len(missing)
        figures[f"{kind}_counted"] = len(by_folder)
        figures[f"{kind}_missing"] = [m[:120] for m in missing[:3]]
    summary = next((text_of(m) for m in view if is_summary(m)), "")
    figures["summary_tokens"] = estimate_text_tokens(summary) if summary else 0
    return figures


def replay(system: str, path: Path, thresholds: Thresholds, storage: Path) -> Replay:
    """Return the fidelity checks of one system replaying one trajectory, one check per compaction."""
    turns = trajectory_turns(path)
    flat = [m for pending, reply in turns for m in (*pending, reply)]
    key = path.with_suffix(".touched.json")
    touched = call_paths(flat, json.loads(key.read_text(encoding="utf-8")) if key.exists() else None)
    sent_by_call = []
    sent = 0
    for pending, _ in turns:
        sent_by_call.append(sent + len(pending))
        sent += len(pending) + 1
    budget = FidelityConfig().request_tokens
    seen = Replay()
    calls = [0]

    def observe(view: list[BaseMessage]) -> None:
        present = {m.id for m in view}
        compacted = [m for m in flat[: sent_by_call[calls[0]]] if m.id not in present]
        calls[0] += 1
        if len(compacted) > len(seen.compacted):
            seen.checks.append(check_context(compacted, view, budget, touched))
        seen.compacted, seen.view = compacted, list(view)

    agent = ScriptedAgent(measure=False, observe=observe)
    graph = system_graph(system, agent, scripted_summarizer(), thresholds, storage=storage).compile()
    drive(graph, agent, turns)
    return seen


def _totals(checks: Sequence[dict]) -> dict:
    sizes = [c["summary_tokens"] for c in checks if c["summary_tokens"]]
    totals: dict[str, Any] = {
        "compactions": len(checks),
        "summary_tokens_mean": round(sum(sizes) / len(sizes)) if sizes else None,
        "summary_tokens_max": max(sizes, default=None),
    }
    for kind in KINDS:
        expected = sum(c[kind] for c in checks)
        found = sum(c[f"{kind}_found"] for c in checks)
        totals[kind] = expected
        totals[f"{kind}_found"] = found
        totals[f"{kind}_recall"] = round(found / expected, 4) if expected else None
        totals[f"{kind}_counted"] = sum(c.get(f"{kind}_counted", 0) for c in checks)
        totals[f"{kind}_missing"] = next((c[f"{kind}_missing"] for c in checks if c[f"{kind}_missing"]), [])
    return totals


# --- the LLM-judged probe evaluation ------------------------------------------------------------


def _json_of(text: str) -> Any:
    """Return the JSON object in a model's answer (it may be wrapped in prose or a code fence), or None."""
    start, end = text.find("{"), text.rfind("}")
    try:
        return json.loads(text[start : end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        return None


def _ask(llm: Any, prompt: str) -> str:
    return content_text(llm.invoke([HumanMessage(prompt)]).content)


def probe_scores(llm: Any, compacted: Sequence[BaseMessage], views: dict[str, Sequence[BaseMessage]]) -> dict:
    """Return each system's mean grade (0-1) per probe type, for probes written from the compacted history.

    ``views`` maps a system to the context it kept. Probes the model did not
    write as asked are counted in ``unusable``.
    """
    span = render_messages(compacted)[-PROBE_SPAN_CHARS:]
    written = _json_of(_ask(llm, PROBE_PROMPT.format(span=span)))
    offered = written.get("probes") if isinstance(written, dict) else None
    probes = [
        p
        for p in (offered if isinstance(offered, list) else [])
        if isinstance(p, dict) and p.get("type") in PROBE_TYPES and p.get("question") and p.get("answer")
    ]
    grades: dict[str, dict[str, list[float]]] = {system: {t: [] for t in PROBE_TYPES} for system in views}
    unusable = len(PROBE_TYPES) - len(probes)
    for probe in probes:
        for system, view in views.items():
            answer = _ask(llm, ANSWER_PROMPT.format(context=render_messages(view), question=probe["question"]))
            grade = _json_of(
                _ask(llm, GRADE_PROMPT.format(question=probe["question"], reference=probe["answer"], answer=answer))
            )
            score = grade.get("score") if isinstance(grade, dict) else None
            if isinstance(score, (int, float)) and 0 <= score <= 5:
                grades[system][probe["type"]].append(score / 5)
            else:
                unusable += 1
    return {"probes": len(probes), "unusable": unusable, "grades": grades}


def _judge() -> Any | None:
    """Return the judge model when an OpenAI-compatible endpoint is configured, else None."""
    if not (os.environ.get("OPENAI_BASE_URL") and os.environ.get("OPENAI_API_KEY")):
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        model=os.environ.get("FIDELITY_JUDGE_MODEL", "gpt-4o-mini"),
        temperature=0,
        max_retries=2,
        timeout=120,
    )


def probe_evaluation(replays: dict[str, dict[str, Replay]], quick: bool, llm: Any = None) -> dict:
    """Return the probe evaluation's figures, or why it was skipped (no endpoint configured)."""
    llm = llm if llm is not None else _judge()
    if llm is None:
        return {"status": "skipped", "reason": "OPENAI_BASE_URL / OPENAI_API_KEY are not set"}
    grades: dict[str, dict[str, list[float]]] = {system: {t: [] for t in PROBE_TYPES} for system in SYSTEMS}
    probes = unusable = used = 0
    for runs in replays.values():
        both = {m.id for m in runs["langchain"].compacted}
        compacted = [m for m in runs["ours"].compacted if m.id in both]
        if not compacted or (quick and used == 2):
            continue
        used += 1
        result = probe_scores(llm, compacted, {system: runs[system].view for system in SYSTEMS})
        probes += result["probes"]
        unusable += result["unusable"]
        for system in SYSTEMS:
            for kind in PROBE_TYPES:
                grades[system][kind] += result["grades"][system][kind]
    means = {
        system: {kind: round(sum(g) / len(g), 3) if g else None for kind, g in per.items()}
        for system, per in grades.items()
    }
    return {
        "status": "ran",
        "model": getattr(llm, "model_name", None) or type(llm).__name__,
        "trajectories": used,
        "probes": probes,
        "unusable": unusable,
        "scores": means,
    }


# --- the measure ---------------------------------------------------------------------------------


def shape_files(quick: bool) -> list[Path]:
    """Return the agent-shape sessions to replay (two short ones in a quick run)."""
    files = sorted(SHAPES.glob("*.jsonl"))
    return [f for f in files if f.stem in QUICK_SHAPES] if quick else files


def _room(thresholds: Thresholds) -> int:
    """Return the tokens a summary has after a compaction: the target (60 % of the trigger) less the kept tail."""
    budget = thresholds.config().resolve()
    return budget.target_tokens - budget.keep_tokens


def _window_targets(label: str, v: dict) -> list[dict]:
    """Return one window's targets for this package, over the real trajectories and the agent shapes together."""
    runs = [per["ours"] for per in (*v["per_trajectory"].values(), *v["per_shape"].values())]
    missed = {kind: sum(t[kind] - t[f"{kind}_found"] for t in runs) for kind in KINDS}
    lowest = min((t["paths_recall"] for t in runs if t["paths_recall"] is not None), default=1.0)
    largest = max((t["summary_tokens_max"] or 0 for t in runs), default=0)
    return [
        check(f"{label}: changed files missing after a compaction", missed["changed"], 0, unit=""),
        check(
            f"{label}: lowest path recall of a run, % short of 100",
            100 * (1 - lowest),
            100 * (1 - PATH_RECALL_TARGET),
            unit=" %",
        ),
        check(f"{label}: requests missing after a compaction", missed["requests"], 0, unit=""),
        check(f"{label}: constraints missing after a compaction", missed["constraints"], 0, unit=""),
        check(f"{label}: largest summary, tokens (room: target - kept tail)", largest, v["summary_room"], unit=""),
    ]


def named_recall(totals: dict, kind: str) -> float | None:
    """Return the share of the expected paths (``kind``: paths or changed) the context named, counted ones not."""
    expected = totals[kind]
    return round((totals[f"{kind}_found"] - totals[f"{kind}_counted"]) / expected, 4) if expected else None


def stress_set(ctx, agents: Sequence[str] | None = None) -> dict:
    """Return the totals of each long session of the stress set (``agents``: all, or a quick run's), at ``STRESS_WINDOW``."""
    folder = ctx.scratch_dir / "agent_sessions"
    found: dict[str, dict] = {}
    for agent in agents if agents is not None else QUICK_STRESS if ctx.quick else AGENTS:
        path = write_session(folder, agent, calls=STRESS_CALLS)
        seen = replay("ours", path, SETTINGS[STRESS_WINDOW], ctx.scratch_dir / f"fidelity-stress-{agent}")
        found[agent] = {
            **_totals(seen.checks),
            "calls": STRESS_CALLS,
            "named_paths": named_recall(_totals(seen.checks), "paths"),
            "named_changed": named_recall(_totals(seen.checks), "changed"),
        }
    return found


def _stress_targets(stress: dict) -> list[dict]:
    if not stress:
        return []
    lowest = min((t["named_paths"] for t in stress.values() if t["named_paths"] is not None), default=1.0)
    return [
        check(
            f"stress set ({STRESS_WINDOW}): lowest path recall of a session, paths named (not counted), % short of 100",
            100 * (1 - lowest),
            100 * (1 - PATH_RECALL_TARGET),
            unit=" %",
        ),
        check(
            f"stress set ({STRESS_WINDOW}): changed files missing after a compaction",
            sum(t["changed"] - t["changed_found"] for t in stress.values()),
            0,
            unit="",
        ),
    ]


def run(ctx, shapes: Sequence[Path] | None = None, agents: Sequence[str] | None = None) -> dict:
    """Replay the trajectories (both systems), the agent shapes and the stress set (this package) at each window.

    ``shapes`` overrides the shape files, ``agents`` the stress set's agents.
    """
    shapes = shape_files(ctx.quick) if shapes is None else list(shapes)
    settings: dict[str, dict] = {}
    first: dict[str, dict[str, Replay]] = {}
    for label, thresholds in SETTINGS.items():
        replays: dict[str, dict[str, Replay]] = {}
        for path in ctx.trajectories:
            storage = ctx.scratch_dir / f"fidelity-{thresholds.context_window}-{path.stem}"
            replays[path.stem] = {system: replay(system, path, thresholds, storage) for system in SYSTEMS}
        shaped = {
            path.stem: replay(
                "ours", path, thresholds, ctx.scratch_dir / f"fidelity-{thresholds.context_window}-{path.stem}"
            )
            for path in shapes
        }
        first = first or replays
        settings[label] = {
            "thresholds": vars(thresholds),
            "summary_room": _room(thresholds),
            "per_trajectory": {name: {s: _totals(runs[s].checks) for s in SYSTEMS} for name, runs in replays.items()},
            "per_shape": {name: {"ours": _totals(seen.checks)} for name, seen in shaped.items()},
            "totals": {s: _totals([c for runs in replays.values() for c in runs[s].checks]) for s in SYSTEMS},
            "shape_totals": {"ours": _totals([c for seen in shaped.values() for c in seen.checks])},
        }
    _plot(settings, ctx.results_dir / PLOT)
    stress = stress_set(ctx, agents)
    return {
        "stress": stress,
        "plot": PLOT,
        "settings": settings,
        "request_tokens": FidelityConfig().request_tokens,
        "max_artifacts": FidelityConfig().max_artifacts,
        "trail_tokens": FidelityConfig().trail_tokens,
        "probes": probe_evaluation(first, ctx.quick),
        "targets": [t for label, v in settings.items() for t in _window_targets(label, v)] + _stress_targets(stress),
    }


def _plot(settings: dict, path: Path) -> None:
    """Draw each system's recall of artifacts, requests and constraints, one panel per budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(settings), figsize=(5.5 * len(settings), 4), squeeze=False)
    for ax, (label, v) in zip(axes[0], settings.items(), strict=False):
        for k, system in enumerate(SYSTEMS):
            # nothing expected (no rule stated in the compacted span): no bar rather than a zero
            recalls = [
                100 * r if (r := v["totals"][system][f"{kind}_recall"]) is not None else float("nan") for kind in KINDS
            ]
            ax.bar([x + 0.38 * k for x in range(len(KINDS))], recalls, width=0.38, label=system)
        ax.set_xticks([x + 0.19 for x in range(len(KINDS))], [f"{kind} recall" for kind in KINDS])
        ax.set(ylim=(0, 120), ylabel="% present after compaction", title=label)
        ax.legend(loc="upper center", ncol=len(SYSTEMS))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _recall(totals: dict, kind: str) -> str:
    if not totals[kind]:
        return "–"
    counted = totals.get(f"{kind}_counted")
    by_folder = f", {counted} counted by folder" if counted else ""
    return f"{100 * totals[f'{kind}_recall']:.1f} % ({totals[f'{kind}_found']}/{totals[kind]}{by_folder})"


def _probe_section(probes: dict) -> str:
    if probes["status"] != "ran":
        return f"LLM-judged probe evaluation: skipped ({probes['reason']}); set both to run it."
    rows = [
        (
            system,
            *(probes["scores"][system][t] if probes["scores"][system][t] is not None else "–" for t in PROBE_TYPES),
        )
        for system in SYSTEMS
    ]
    return (
        f"LLM-judged probe evaluation ({probes['model']}, {probes['trajectories']} trajectories, {probes['probes']} probes, "
        f"{probes['unusable']} unusable answers); mean grade, 0-1:\n\n" + table(["system", *PROBE_TYPES], rows)
    )


def _budget(thresholds: dict) -> str:
    return (
        f"window {thresholds['context_window']:,}, trigger {thresholds['trigger_tokens']:,} tokens or "
        f"{thresholds['trigger_messages']} messages, keep {thresholds['keep_tokens']:,} tokens"
    )


def _size(totals: dict, room: int) -> str:
    if not totals["summary_tokens_max"]:
        return "–"
    return f"{totals['summary_tokens_mean']:,} / {totals['summary_tokens_max']:,} of {room:,}"


def _row(name: str, system: str, totals: dict, room: int) -> tuple:
    return (name, system, totals["compactions"], *(_recall(totals, k) for k in KINDS), _size(totals, room))


HEADERS = [
    "",
    "system",
    "compactions",
    "path recall",
    "changed-file recall",
    "request recall",
    "constraint recall",
    "summary tokens, mean / max of room",
]


def _named(recall: float | None) -> str:
    return "–" if recall is None else f"{100 * recall:.1f} %"


def _stress_section(figures: dict) -> str:
    """Return the stress set's table: per long session, the paths and changed files named after every compaction."""
    stress = figures.get("stress") or {}
    if not stress:
        return ""
    rows = [
        (
            agent,
            t["calls"],
            t["compactions"],
            _named(t["named_paths"]),
            _recall(t, "paths"),
            _named(t["named_changed"]),
            _recall(t, "changed"),
        )
        for agent, t in stress.items()
    ]
    headers = [
        "agent",
        "tool calls",
        "compactions",
        "paths named",
        "paths named or counted",
        "changed files named",
        "changed files named or counted",
    ]
    return f"""Stress set ({STRESS_WINDOW}, `testing.agent_sessions`): one long generated session per agent, in its own tool
vocabulary, with parallel rounds, paged reads, shell pipelines and `apply_patch`; the trail keeps to its
{figures.get("trail_tokens") or 0:,} tokens. "Named" counts only the paths the trail names, word for word or on a
folder's line (target: 95 % of paths); a path counted on its folder's line is accounted for but not named.

{table(headers, rows)}"""


def report(figures: dict) -> str:
    settings = figures["settings"]
    total_rows = []
    for label, v in settings.items():
        room = v["summary_room"]
        total_rows += [_row(f"{label}, real trajectories", s, v["totals"][s], room) for s in SYSTEMS]
        total_rows.append(_row(f"{label}, agent shapes", "ours", v["shape_totals"]["ours"], room))
    label, main = next(iter(settings.items()))
    per = main["per_trajectory"]
    rows = [_row(name, system, per[name][system], main["summary_room"]) for name in per for system in SYSTEMS]
    shape_rows = [
        _row(f"{name} ({label})", "ours", v["per_shape"][name]["ours"], v["summary_room"])
        for name in main["per_shape"]
        for label, v in settings.items()
    ]
    missing = [
        f"- {system}, {kind} ({label}): e.g. {', '.join(repr(m) for m in v[group][system][f'{kind}_missing'])}"
        for label, v in settings.items()
        for group in ("totals", "shape_totals")
        for system in v[group]
        for kind in KINDS
        if v[group][system][f"{kind}_missing"]
    ]
    budgets = "; ".join(f"{name}: {_budget(v['thresholds'])}" for name, v in settings.items())
    return f"""## Summary fidelity: paths, changed files, requests and constraints after every compaction

{len(per)} real trajectories replayed model call by model call through this package and LangChain's
SummarizationMiddleware, and {len(main["per_shape"])} synthetic sessions in other agents' tool shapes (Codex, OpenCode,
Gemini CLI, MCP; tests/data/agent_shapes) through this package, with the same scripted summarizer ({budgets}).
After each compaction the model's input (summary and tail) is checked against everything compacted so far:
the paths and URLs the compacted tool calls touched (word for word, or on a folder's line of the trail), the
files they changed (word for word; over the trail's token bound, counted on their folder's line, shown apart
as "counted by folder"), the last {LAST_REQUESTS} user requests (verbatim, within the
{figures["request_tokens"]:,}-token request budget) and the rules the user stated (verbatim). For the agent
shapes the paths come from the answer key written with each session. Recalls are summed over all compactions.
This package's trail holds {figures["max_artifacts"]} lines in about {figures.get("trail_tokens") or 0:,} tokens; past
that, read paths share a line per folder, and when that is not enough the files of the largest folders, changed
ones too, are counted on the folder's line (with the `session_search` query that finds them again). The summary's size is set against its room: the target after a compaction (60 % of
the trigger) less the kept tail.

{targets_table(figures["targets"])}

{table(HEADERS, total_rows)}

![recall after compaction]({figures["plot"]})

{_probe_section(figures["probes"])}

Per trajectory ({label}):

{table(["trajectory", *HEADERS[1:]], rows)}

Per agent shape, every window:

{table(["session", *HEADERS[1:]], shape_rows)}

{_stress_section(figures)}

{"Examples of what was missing:" + chr(10) + chr(10).join(missing) if missing else "Nothing was missing."}
"""
