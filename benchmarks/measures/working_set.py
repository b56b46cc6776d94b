"""Measure: the working set. When the agent edits a file, is the file's latest read whole in front of it?

The real trajectories and the stress set (one long generated session per
agent of ``testing.agent_sessions``: Codex, Copilot, OpenCode, Gemini CLI,
with paged reads) are replayed model call by model call through this package
at its defaults, at the 60k and 128k windows of the billed-cost measure.
Every edit of a file read before is checked against the request that makes
it, two ways:

- latest read: the file's latest read (the last tool result that showed it)
  is in the request, the same message with its content unshortened (the
  billed-cost measure's working-set recall, ``testing.ledger``);
- every page: each page of the file the agent read (a read of lines 1-200,
  then 201-400: ``offset``/``limit``, ``startLine``/``endLine``, ``sed -n``,
  ``view_range``), its latest read per range, unless later reads showed
  those lines again (one or together), is in the request whole.

Target: 97 % of the edits, both ways, at both windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import BaseMessage, ToolMessage

from benchmarks.anchors import ScriptedAgent, Thresholds, drive, scripted_summarizer, system_graph, trajectory_turns
from benchmarks.measures.cost import WINDOWS
from benchmarks.report import check, table, targets_table
from langgraph_compaction.core.config import CompactionConfig
from langgraph_compaction.core.conversation import tool_calls_of
from langgraph_compaction.core.touches import normalise_path, touches
from langgraph_compaction.core.working_set import Lines, shown_again
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.testing.agent_sessions import AGENTS, write_session
from langgraph_compaction.testing.ledger import read_in_view, working_set_edits

NAME = "working_set"
TARGET = 0.97
#: Agents of the stress set replayed in a quick run.
QUICK_AGENTS = ("codex", "gemini")


def paged_edits(turns: Sequence[tuple[Sequence[BaseMessage], BaseMessage]]) -> list[tuple[int, list[ToolMessage]]]:
    """Return every edit of a file read before, as (the call that edits, the file's pages then).

    The pages are the latest read of each range the agent read, less those
    later reads showed again (one or together, ``working_set.shown_again``); a
    deleted or moved file has none.
    """
    pages: dict[str, dict[Lines, tuple[ToolMessage, list[Lines]]]] = {}  # each page's read, lines read since
    reading: dict[str, list[tuple[str, Lines]]] = {}  # call id -> (path, lines) it reads, until its result
    found: list[tuple[int, list[ToolMessage]]] = []
    for k, (pending, reply) in enumerate(turns):
        for m in pending:
            if isinstance(m, ToolMessage):
                for path, lines in reading.pop(m.tool_call_id, ()):
                    kept = pages.setdefault(path, {})
                    for page, (_, since) in list(kept.items()):
                        since.append(lines)
                        if shown_again(page, since):
                            del kept[page]
                    kept[lines] = (m, [])
        for call in tool_calls_of(reply):
            done = touches(call.get("name") or "tool", call.get("args"))
            for t in done:
                path = normalise_path(t.target)
                if t.verb in ("edited", "wrote") and pages.get(path):
                    found.append((k, [m for m, _ in pages[path].values()]))
                elif t.verb in ("deleted", "moved"):
                    pages.pop(path, None)
            reading[call.get("id") or ""] = [(normalise_path(t.target), t.lines) for t in done if t.verb == "read"]
    return found


def replay(path: Path, thresholds: Thresholds, storage: Path) -> dict:
    """Return one session's edits and how many had their latest read, and every page, whole in the request."""
    turns = trajectory_turns(path)
    latest: dict[int, list] = {}
    for edit in working_set_edits(turns):
        latest.setdefault(edit.call, []).append(edit)
    paged: dict[int, list[list[ToolMessage]]] = {}
    for call, shown in paged_edits(turns):
        paged.setdefault(call, []).append(shown)
    seen = {"edits": 0, "latest": 0, "paged_edits": 0, "pages": 0, "page_edits": 0, "every_page": 0}
    calls = [0]

    def observe(view: list[BaseMessage]) -> None:
        whole = {(m.id, str(m.content)) for m in view if isinstance(m, ToolMessage)}
        for edit in latest.get(calls[0], ()):
            seen["edits"] += 1
            seen["latest"] += read_in_view(edit, view)
        for shown in paged.get(calls[0], ()):
            seen["page_edits"] += 1
            seen["paged_edits"] += len(shown) > 1
            seen["every_page"] += all((m.id, str(m.content)) in whole for m in shown)
        calls[0] += 1

    agent = ScriptedAgent(measure=False, observe=observe)
    config = CompactionConfig(context_window=thresholds.context_window)
    graph = system_graph("ours", agent, scripted_summarizer(), thresholds, config=config, storage=storage).compile()
    with use_runner(InstantRunner()):  # a background job is ready by the next model call, the same on every run
        drive(graph, agent, turns)
    return seen


def _recall(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _sum(runs: Sequence[dict]) -> dict:
    total = {k: sum(r[k] for r in runs) for k in ("edits", "latest", "page_edits", "every_page", "paged_edits")}
    total["latest_recall"] = _recall(total["latest"], total["edits"])
    total["every_page_recall"] = _recall(total["every_page"], total["page_edits"])
    return total


def run(ctx) -> dict:
    """Replay the trajectories and the stress set at each window; return the edits found with their reads in view."""
    sessions = ctx.scratch_dir / "working-set-sessions"
    stress = [write_session(sessions, agent) for agent in (QUICK_AGENTS if ctx.quick else AGENTS)]
    windows: dict[str, dict] = {}
    for label, thresholds in WINDOWS.items():
        per = {
            path.stem: replay(path, thresholds, ctx.scratch_dir / f"working-set-{label}-{path.stem}")
            for path in [*ctx.trajectories, *stress]
        }
        groups = {
            "real trajectories": [per[p.stem] for p in ctx.trajectories],
            "stress set": [per[p.stem] for p in stress],
        }
        windows[label] = {
            "per_session": per,
            "groups": {name: _sum(runs) for name, runs in groups.items()},
            "all": _sum(list(per.values())),
        }
    targets = []
    for label, w in windows.items():
        for kind, name in (("latest_recall", "latest read"), ("every_page_recall", "every page")):
            recall = w["all"][kind]
            targets.append(
                check(
                    f"{label}: edits without the file's {name} whole in view, %",
                    100 * (1 - (recall or 1.0)),
                    100 * (1 - TARGET),
                    unit=" %",
                )
            )
    return {"windows": windows, "targets": targets}


def _cell(part: int, whole: int) -> str:
    return "–" if not whole else f"{100 * part / whole:.1f} % ({part}/{whole})"


#: The columns of ``groups_table``.
GROUP_COLUMNS = ["window", "sessions", "latest read", "every page", "edits of a file read in pages"]


def groups_table(figures: dict) -> str:
    """Return the recall of the real trajectories, the stress set and all sessions, per window, both ways."""
    rows = [
        (label, name, _cell(g["latest"], g["edits"]), _cell(g["every_page"], g["page_edits"]), g["paged_edits"])
        for label, w in figures["windows"].items()
        for name, g in [*w["groups"].items(), ("all", w["all"])]
    ]
    return table(GROUP_COLUMNS, rows)


def report(figures: dict) -> str:
    per = [
        (label, name, _cell(s["latest"], s["edits"]), _cell(s["every_page"], s["page_edits"]))
        for label, w in figures["windows"].items()
        for name, s in w["per_session"].items()
        if s["edits"]
    ]
    return f"""## The working set: the file being edited, whole in front of the agent

Every edit of a file the agent read before, in the real trajectories and the stress set (one long generated
session per agent: Codex, Copilot, OpenCode, Gemini CLI, with paged reads), replayed through this package at
its defaults: is the file's latest read in the request that makes the edit, unshortened ("latest read"), and
is every page of it there ("every page": each range read, its latest read, unless later reads showed those
lines again)? Target: {100 * TARGET:.0f} % both ways.

{targets_table(figures["targets"])}

{groups_table(figures)}

Per session:

{table(["window", "session", "latest read", "every page"], per)}
"""
