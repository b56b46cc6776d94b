"""The demo session: a long tool-using coding agent run through the compacting graph.

``run_demo`` drives one thread of ``turns`` user requests (`workload`)
through a real ``StateGraph`` built with ``add_compaction``, checkpointed by
``SqliteSaver`` in ``<storage>/checkpoints.sqlite``, with transcripts and the
memory ledger as files under ``<storage>``, and returns a `report.DemoReport`.

Without ``OPENAI_API_KEY`` the agent is scripted (`offline`, deterministic
for a ``seed``), summaries are the package's deterministic extractive
summaries and memories (and their consolidation into MEMORY.md at the end)
come from ``ScriptedModel``; with it, ``ChatOpenAI`` plays the agent, the
summarizer and the memory extractor.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.constants import TAG_NOSTREAM

from ..core.calibration import add_usage, cache_details
from ..core.config import CompactionConfig, PruneConfig
from ..core.conversation import latest_user_index
from ..core.tokens import TokenCounter
from ..memory.consolidation import consolidate_memory
from ..memory.ledger import MEMORY_FILE, ledger_relpath, local_now
from ..storage import DEFAULT_USER, FileStorage
from .demo_defaults import CHECKPOINTS_FILE, DEFAULT_OPENAI_MODEL, DEFAULT_STORAGE, DEFAULT_TURNS, DEFAULT_WINDOW
from .offline import offline_agent
from .report import (
    CallRecord,
    DemoReport,
    EventLine,
    compaction_counts,
    layer_totals,
    save_plot,
    totals_table,
    uncompacted_contexts,
    uncompacted_history,
)
from .workload import MAX_TOOL_ROUNDS, SYSTEM_PROMPT, make_tools, request_text

__all__ = [
    "DemoOptions",
    "DemoReport",
    "build_demo_graph",
    "compaction_counts",
    "default_thread",
    "demo_config",
    "layer_totals",
    "make_tools",
    "run_demo",
    "save_plot",
    "totals_table",
]


class CompactionModelUsage(BaseCallbackHandler):
    """Counts the compaction model calls (tagged ``nostream``) and their estimated input tokens."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.calls = 0
        self.pending = 0
        self._lock = threading.Lock()

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, tags=None, **kwargs: Any
    ) -> None:
        if TAG_NOSTREAM in (tags or []):
            with self._lock:
                self.calls += 1
                self.pending += sum(self.counter.total(batch) for batch in messages)

    def take(self) -> int:
        """Return the input tokens counted since the last ``take``."""
        with self._lock:
            taken, self.pending = self.pending, 0
            return taken


@dataclass
class DemoOptions:
    """The demo's settings (the command's flags)."""

    turns: int = DEFAULT_TURNS
    storage: str = DEFAULT_STORAGE
    window: int = DEFAULT_WINDOW
    thread: str | None = None
    seed: int = 7
    plot: str | None = None
    quiet: bool = False
    model: str = DEFAULT_OPENAI_MODEL
    resume: bool = False

    def check(self) -> None:
        """Raise ValueError naming the flag when a setting cannot work."""
        if self.turns < 1:
            raise ValueError(f"--turns must be at least 1 (got {self.turns})")
        # demo_config changes only layer 2's thresholds, which the smallest window does not depend on
        smallest = CompactionConfig().smallest_window()
        if self.window < smallest:
            raise ValueError(
                f"--window must be at least {smallest:,} tokens (got {self.window:,}): the smallest window in which "
                "a compaction leaves room for its summary and a kept tail"
            )


def demo_config(window: int) -> CompactionConfig:
    """Return the demo's settings: the defaults, with layer 2 scaled down to the small window so it acts too."""
    trigger = CompactionConfig(context_window=window).resolve().trigger_tokens
    return CompactionConfig(
        context_window=window, prune=PruneConfig(protect_tokens=trigger // 2, minimum_tokens=trigger // 6)
    )


def _openai_agent(model: Any, tools: list, rounds: dict[str, int]) -> Callable[[list[BaseMessage]], AIMessage]:
    with_tools = model.bind_tools(tools, parallel_tool_calls=True)
    answer_now = model.bind_tools(tools, tool_choice="none")

    def decide(messages: list[BaseMessage]) -> AIMessage:
        at = latest_user_index(messages)
        if at is None:
            raise ValueError("the demo's agent is called without a request")
        request = str(messages[at].id)
        used = rounds.get(request, 0)
        rounds[request] = used + 1
        return (with_tools if used < MAX_TOOL_ROUNDS else answer_now).invoke(messages)

    return decide


def _tool_result_ids() -> Callable[[Any, Callable[[Any], Any]], Any]:
    """Return a ToolNode ``wrap_tool_call`` that gives each tool result the id ``tool-<tool call id>``.

    ToolNode leaves results without an id, so ``add_messages`` would give
    each a random uuid4; summaries quote the ids of the messages they
    compact, so a random id would change every later context's token count
    from run to run (and the offline demo's figures with it). A tool call id
    seen before (a server that reuses them) keeps the random id rather than
    replace the earlier result.
    """
    given: set[str] = set()
    lock = threading.Lock()

    def wrap(request: Any, execute: Callable[[Any], Any]) -> Any:
        result = execute(request)
        if isinstance(result, ToolMessage) and result.id is None and result.tool_call_id:
            ident = f"tool-{result.tool_call_id}"
            with lock:
                fresh = ident not in given
                given.add(ident)
            if fresh:
                return result.model_copy(update={"id": ident})
        return result

    return wrap


def build_demo_graph(
    decide,
    tools: list,
    summarizer: Any,
    flush_model: Any,
    config: CompactionConfig,
    storage: FileStorage,
    checkpointer: Any,
    on_call: Callable[[list[BaseMessage], AIMessage], None],
):
    """Return the compiled agent graph: agent -> tools loop with compaction in front of the agent."""
    from langgraph.graph import START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from ..engine.state import CompactionState
    from ..fronts.graph import add_compaction

    def agent(state: CompactionState) -> dict:
        messages: list[BaseMessage] = list(state["messages"])
        reply = decide(messages)
        on_call(messages, reply)
        return {"messages": [reply]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools, wrap_tool_call=_tool_result_ids()))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=summarizer, flush_model=flush_model, config=config, storage=storage)
    return builder.compile(checkpointer=checkpointer)


def storage_folder(spec: str) -> Path:
    """Return the storage folder ``spec`` names, made (``0700``) when missing.

    Raises ValueError naming --storage when it cannot be one.
    """
    root = Path(spec)
    if root.exists() and not root.is_dir():
        raise ValueError(
            f"--storage {spec}: it is a file, not a folder; pass a folder for the demo's checkpoints and files"
        )
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"--storage {spec}: cannot make the folder ({exc.strerror}); pass a folder the demo may create"
        ) from exc
    return root


def default_thread() -> str:
    """Return a fresh thread id for a demo run (``demo-YYYYMMDD-HHMMSS``)."""
    return "demo-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def _models(
    options: DemoOptions, counter: TokenCounter, rounds: dict[str, int]
) -> tuple[str, Callable, Any, Any, Any, list]:
    """Return (mode line, agent, summarizer, memory model, consolidation model, tools) for the environment.

    ``counter`` counts the offline agent's reported usage; ``rounds`` holds
    the replies each request (by message id) has had, which the agent
    counts on from (compaction may evict a request's earlier rounds).
    """
    tools = make_tools(options.seed)
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(model=options.model, base_url=os.environ.get("OPENAI_BASE_URL") or None, temperature=0)
        where = os.environ.get("OPENAI_BASE_URL") or "api.openai.com"
        line = f"online: ChatOpenAI {options.model} at {where} is the agent, the summarizer and the memory extractor"
        return line, _openai_agent(llm, tools, rounds), llm, llm, llm, tools
    from ..testing import ScriptedModel

    line = (
        "offline: no OPENAI_API_KEY, so a scripted coding agent, deterministic extractive summaries and "
        "scripted memory extraction and consolidation run this session (set OPENAI_API_KEY to use ChatOpenAI)"
    )
    return line, offline_agent(options.seed, counter, rounds), None, ScriptedModel(), ScriptedModel(), tools


def run_demo(options: DemoOptions, out: Any | None = None) -> DemoReport:
    """Run the demo session and return its report; progress and compaction lines go to ``out`` (a rich Console).

    Raises ValueError for bad options, a storage folder the demo cannot write,
    a thread that already has checkpoints (unless ``resume``) or, with
    ``resume``, one that has none. A resumed thread goes on as if never
    stopped: an interrupted request from its next step, then the requests up
    to ``turns``; the report counts this run's calls.

    Args:
        options: the demo's settings (the command's flags).
        out: the console to print to (default: a new one on standard output).
    """
    from langgraph.checkpoint.sqlite import SqliteSaver
    from rich.console import Console

    options.check()
    console = out if out is not None else Console()
    thread = default_thread() if options.thread is None else options.thread
    root = storage_folder(options.storage)
    storage = FileStorage(root)
    counter = TokenCounter()
    config = demo_config(options.window)
    budget = config.resolve()
    rounds: dict[str, int] = {}
    conn = _open_checkpoints(root, options.storage)  # first: a folder it may not write is all it says
    try:
        mode, decide, summarizer, flush_model, consolidator, tools = _models(options, counter, rounds)
        console.print(mode)
        console.print(
            f"thread {thread} · window {options.window:,} tokens · compaction at {budget.trigger_tokens:,} tokens or "
            f"{budget.trigger_messages} messages · tail kept {budget.keep_tokens:,} tokens · storage {root}/",
            markup=False,
        )
        report = DemoReport(
            mode=mode.split(":")[0], thread=thread, window=options.window, trigger=budget.trigger_tokens
        )
        usage = CompactionModelUsage(counter)

        def on_call(messages: list[BaseMessage], reply: AIMessage) -> None:
            reported = (getattr(reply, "usage_metadata", None) or {}).get("input_tokens")
            if isinstance(reported, int):
                report.usage = add_usage(report.usage, reported, cache_details(reply))
            last_id = messages[-1].id if messages else None
            report.calls.append(CallRecord(counter.total(messages), last_id, usage.take()))

        checkpointer = SqliteSaver(conn)
        _check_thread(checkpointer, thread, options.resume, root)
        graph = build_demo_graph(decide, tools, summarizer, flush_model, config, storage, checkpointer, on_call)
        session = _Session(graph, thread, options, report, usage)
        turns = session.resume(storage, rounds, console) if options.resume else list(range(options.turns))
        session.run(turns, console)
        state = graph.get_state({"configurable": {"thread_id": thread}}).values
        report.checkpoints, report.checkpoint_bytes = checkpoint_size(conn, thread)
    finally:
        conn.close()
    _finish(report, state, storage, counter)
    report.compaction_calls = usage.calls
    report.consolidation = consolidate_memory(storage, consolidator, timezone=config.memory.timezone, force=True).status
    day = local_now(config.memory.timezone).date().isoformat()
    report.paths = {
        "checkpoints": str(root / CHECKPOINTS_FILE),
        "transcript": storage.transcript_location(thread),
        "ledger": storage.memory_location(DEFAULT_USER, ledger_relpath(day)),
        "memory": storage.memory_location(DEFAULT_USER, MEMORY_FILE),
    }
    return report


def _open_checkpoints(root: Path, spec: str) -> sqlite3.Connection:
    """Return a connection to ``<root>/checkpoints.sqlite``; raise ValueError naming --storage if it is read-only."""
    try:
        # made 0600 first, as the storage's own files are: sqlite3 would create it with the umask's mode
        # (its journals copy the file's)
        os.close(os.open(root / CHECKPOINTS_FILE, os.O_WRONLY | os.O_CREAT, 0o600))
        return sqlite3.connect(root / CHECKPOINTS_FILE, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(
            f"--storage {spec}: cannot write {CHECKPOINTS_FILE} there ({reason}); pass a folder the demo may write to"
        ) from exc


def _check_thread(checkpointer: Any, thread: str, resume: bool, root: Path) -> None:
    """Raise ValueError when ``thread`` has checkpoints and ``resume`` is off, or has none and it is on."""
    started_before = checkpointer.get_tuple({"configurable": {"thread_id": thread}}) is not None
    where = root / CHECKPOINTS_FILE
    if started_before and not resume:
        inspect = shlex.join(["langgraph-compaction", "inspect", "--thread", thread, "--storage", str(root)])
        raise ValueError(
            f"thread {thread!r} already has checkpoints in {where}; pass --resume to continue it, "
            f"another --thread to start anew, or look at it with `{inspect}`"
        )
    if resume and not started_before:
        raise ValueError(f"--resume: thread {thread!r} has no checkpoints in {where}; start it without --resume")


class _Session:
    """The requests of one demo run sent through the graph, with its progress bar and compaction lines."""

    def __init__(
        self, graph: Any, thread: str, options: DemoOptions, report: DemoReport, usage: CompactionModelUsage
    ) -> None:
        self.graph, self.thread, self.options, self.report = graph, thread, options, report
        # a model call takes at most five steps (gate, flush+offload, summarize, agent, tools)
        self.run_config = {
            "configurable": {"thread_id": thread},
            "recursion_limit": 5 * (MAX_TOOL_ROUNDS + 2) + 10,
            "callbacks": [usage],
        }
        self.first = 0  # the first request this run sends

    def resume(self, storage: FileStorage, rounds: dict[str, int], console: Any) -> list[int]:
        """Return the turns a resumed run goes through: an interrupted request first, then the new ones."""
        snapshot = self.graph.get_state({"configurable": {"thread_id": self.thread}})
        history = uncompacted_history(storage.read_transcript(self.thread), snapshot.values.get("messages") or [])
        rounds.update(rounds_taken(self.thread, history))
        self.first, unfinished = len(rounds), bool(snapshot.next)
        if self.first >= self.options.turns and not unfinished:
            raise ValueError(
                f"--resume: thread {self.thread!r} already has {self.first} requests; pass a larger --turns"
            )
        console.print(
            f"resuming thread {self.thread} at request {self.first + 1 - unfinished} of {self.options.turns} "
            "(the totals count this run's calls)",
            markup=False,
        )
        return [self.first - 1] * unfinished + list(range(self.first, self.options.turns))

    def _inputs(self, turn: int) -> dict | None:
        """Return a turn's input: its request (the system prompt before the first), None to go on from a checkpoint."""
        if turn < self.first:
            return None
        system = [SystemMessage(SYSTEM_PROMPT, id=f"{self.thread}-system")] if turn == 0 else []
        request = HumanMessage(request_text(turn, self.options.seed), id=f"{self.thread}-request-{turn + 1}")
        return {"messages": [*system, request]}

    def run(self, turns: list[int], console: Any) -> None:
        """Send the turns through the graph, recording each compaction event in the report."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        report, line_for, started = self.report, EventLine(), time.monotonic()
        progress = Progress(
            TextColumn("[bold]turns"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            disable=self.options.quiet,
            transient=False,
        )
        with progress:
            done = self.options.turns - len(turns)
            task = progress.add_task("turns", total=self.options.turns, completed=done, status="")
            for turn in turns:
                for event in self.graph.stream(self._inputs(turn), self.run_config, stream_mode="custom"):
                    if isinstance(event, dict) and event.get("type") == "compaction":
                        report.events.append({**event, "turn": turn + 1, "call": len(report.calls) + 1})
                        line = line_for(turn + 1, len(report.calls) + 1, event)
                        if line and not self.options.quiet:
                            progress.console.print(line)
                last = report.calls[-1].tokens if report.calls else 0
                progress.update(task, advance=1, status=f"{len(report.calls)} model calls · context {last:,} tokens")
        report.seconds = time.monotonic() - started


def _finish(report: DemoReport, state: dict, storage: FileStorage, counter: TokenCounter) -> None:
    """Fill in what the report says of the finished session: the uncompacted figures, the counts, the transcript."""
    thread = report.thread
    history = uncompacted_history(storage.read_transcript(thread), state.get("messages") or [])
    report.without = uncompacted_contexts(history, [c.last_id for c in report.calls], counter)
    compaction = state.get("compaction") or {}
    report.counts = dict(compaction.get("counts") or {})
    report.edited = dict(compaction.get("edited_messages") or {})
    transcript = Path(storage.transcript_location(thread))
    report.transcript_bytes = transcript.stat().st_size if transcript.is_file() else 0


def rounds_taken(thread: str, history: Sequence[BaseMessage]) -> dict[str, int]:
    """Return, per request of the demo's thread (by message id), the agent replies that follow it in ``history``."""
    taken: dict[str, int] = {}
    request = None
    for message in history:
        if isinstance(message, HumanMessage) and str(message.id).startswith(f"{thread}-request-"):
            request = str(message.id)
            taken[request] = 0
        elif isinstance(message, AIMessage) and request is not None:
            taken[request] += 1
    return taken


def checkpoint_size(conn: sqlite3.Connection, thread: str) -> tuple[int, int]:
    """Return (checkpoints, bytes) a thread holds in a SqliteSaver database.

    The bytes are the checkpoint blobs, their metadata and the pending writes.
    """
    count, stored = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints WHERE thread_id = ?",
        (thread,),
    ).fetchone()
    writes = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?", (thread,)
    ).fetchone()[0]
    return count, stored + writes
