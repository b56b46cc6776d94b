"""The ``langgraph-compaction`` command: ``demo``, ``inspect`` and ``consolidate``.

``demo`` runs the long demo session (see ``langgraph_compaction.cli.demo``) and
prints its totals, file paths and plot (``--resume`` continues an interrupted
one); ``inspect`` reads a thread back from ``<storage>/checkpoints.sqlite``
when there is one, and its transcript and memory from the storage directory.
Errors a user can cause print one line naming the flag and exit with status
2; an OpenAI API that fails the session prints one line and exits with 1.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

# the commands import what they need when they run: --help stays fast
from .demo_defaults import CHECKPOINTS_FILE, DEFAULT_OPENAI_MODEL, DEFAULT_STORAGE, DEFAULT_TURNS, DEFAULT_WINDOW

USAGE_ERROR = 2
_EXTRA = "pip install 'langgraph-compaction[demo]'"


class CommandError(Exception):
    """A run that could not be done (an API that refused it): printed as one line, exit status 1."""

    status = 1


class UsageError(CommandError):
    """A mistake in the command line or its inputs: printed as one line, exit status 2."""

    status = USAGE_ERROR


def _console() -> Any:
    """Return the console the commands print to, once the packages of the ``[demo]`` extra they use are there."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401 - demo writes and inspect reads the SQLite checkpoints
        from rich.console import Console
    except ImportError as exc:
        raise UsageError(
            f"the command needs rich, matplotlib and langgraph-checkpoint-sqlite ({exc}): {_EXTRA}"
        ) from exc
    return Console(highlight=False, soft_wrap=True)


def _openai_error(exc: BaseException) -> BaseException | None:
    """Return the OpenAI client's error behind ``exc`` (langchain-openai and LangGraph wrap it), or None."""
    while exc is not None:
        if type(exc).__module__.split(".")[0] == "openai":
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def parser() -> argparse.ArgumentParser:
    """Return the command's argument parser."""
    top = argparse.ArgumentParser(
        prog="langgraph-compaction", description="Keep a LangGraph agent's conversation inside its context window."
    )
    top.add_argument("--version", action=_Version, help="print the package's version and exit")
    commands = top.add_subparsers(dest="command", metavar="{demo,inspect,consolidate}")

    demo = commands.add_parser("demo", help="run a long tool-using agent session through the compacting graph")
    demo.add_argument(
        "--turns", type=_positive, default=DEFAULT_TURNS, help=f"user requests in the session (default {DEFAULT_TURNS})"
    )
    demo.add_argument(
        "--storage",
        default=DEFAULT_STORAGE,
        help=f"directory for checkpoints, transcripts and memory (default ./{DEFAULT_STORAGE})",
    )
    demo.add_argument(
        "--window",
        type=_positive,
        default=DEFAULT_WINDOW,
        help=f"the agent's context window in tokens (default {DEFAULT_WINDOW})",
    )
    demo.add_argument("--thread", help="thread id (default: demo-<UTC time>)")
    demo.add_argument(
        "--resume", action="store_true", help="continue the --thread an interrupted run left, up to --turns requests"
    )
    demo.add_argument("--seed", type=int, default=7, help="seed of the scripted session (default 7)")
    demo.add_argument(
        "--model",
        default=DEFAULT_OPENAI_MODEL,
        help=f"OpenAI model when OPENAI_API_KEY is set (default {DEFAULT_OPENAI_MODEL})",
    )
    demo.add_argument("--plot", help="where to write the PNG plot (default <storage>/demo.png)")
    demo.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    demo.add_argument("--quiet", action="store_true", help="no progress bar and no per-compaction lines")

    inspect = commands.add_parser("inspect", help="show a thread's compactions, summary, transcript and memory files")
    inspect.add_argument("--thread", required=True, help="the thread id to show")
    inspect.add_argument(
        "--storage", default=DEFAULT_STORAGE, help=f"the demo's storage directory (default ./{DEFAULT_STORAGE})"
    )
    inspect.add_argument("--user", default="default", help="whose memory files to list (default: the default user)")
    inspect.add_argument("--summary", help="open a summary by its id: print the messages it replaced, in order")

    # its arguments are parsed by the memory module's own parser (see main)
    commands.add_parser("consolidate", help="merge new daily ledger entries into MEMORY.md (see consolidate --help)")
    for command in (demo, inspect):  # main reports an unknown option with the command's own usage
        command.set_defaults(usage=command)
    return top


class _Version(argparse.Action):
    """``--version``: looked up only when asked (reading the package metadata would slow every ``--help``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("langgraph-compaction")
        except PackageNotFoundError:  # imported from a source tree that was never installed
            found = "(not installed)"
        print(f"{parser.prog} {found}")
        parser.exit()


def run_demo_command(args: argparse.Namespace) -> int:
    """Run ``demo``: the session, then the totals, the paths and the plot."""
    from .demo import DemoOptions, default_thread, layer_totals, run_demo, save_plot, totals_table

    console = _console()
    plot = None if args.no_plot else (args.plot or str(Path(args.storage) / "demo.png"))
    if args.resume and args.thread is None:
        raise UsageError("--resume continues the thread --thread names; pass the --thread of the run to continue")
    # chosen here, not by run_demo, so that an interrupted run can say how to continue it
    thread = default_thread() if args.thread is None else args.thread
    options = DemoOptions(
        turns=args.turns,
        storage=args.storage,
        window=args.window,
        thread=thread,
        seed=args.seed,
        plot=plot,
        quiet=args.quiet,
        model=args.model,
        resume=args.resume,
    )
    try:
        report = run_demo(options, console)
    except KeyboardInterrupt:
        print(
            "interrupted; the thread's checkpoints keep everything up to the last completed step; "
            f"continue it with: {_resume_command(args, thread)}",
            file=sys.stderr,
        )
        return 130
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except ImportError as exc:
        raise UsageError(f"{exc}; the demo needs {_EXTRA}") from exc
    except Exception as exc:
        found = _openai_error(exc)  # a bad key, model name or endpoint
        if found is None:
            raise
        where = os.environ.get("OPENAI_BASE_URL") or "api.openai.com"
        raise CommandError(
            f"the OpenAI API at {where} failed the session ({type(found).__name__}: {found}); check OPENAI_API_KEY, "
            "OPENAI_BASE_URL and --model, or unset OPENAI_API_KEY to run offline"
        ) from exc
    console.print(totals_table(report))
    console.print(f"compactions by layer: {layer_totals(report) or 'none'}")
    console.print(f"{len(report.calls)} model calls in {report.seconds:.1f} s")
    for label, key in (
        ("checkpoints", "checkpoints"),
        ("transcript", "transcript"),
        ("ledger", "ledger"),
        ("MEMORY.md", "memory"),
    ):
        path = Path(report.paths[key])
        note = f"  (consolidation: {report.consolidation})" if key == "memory" else ""
        # a short session may compact nothing: the files of compaction are then not written
        shown = _shown(path) if path.exists() else "none (nothing was compacted)"
        console.print(f"{label + ':':<13}{shown}{note}", markup=False)
    if plot:
        console.print(f"{'plot:':<13}{save_plot(report, plot)}", markup=False)
    hint = shlex.join(["langgraph-compaction", "inspect", "--thread", report.thread, "--storage", args.storage])
    console.print(f"look again with: {hint}", markup=False)
    return 0


def _resume_command(args: argparse.Namespace, thread: str) -> str:
    """Return the shell command that continues ``thread`` with the settings of this run (those not at their default)."""
    words = ["langgraph-compaction", "demo", "--resume", "--thread", thread]
    defaults = parser().parse_args(["demo"])
    for flag in ("storage", "turns", "window", "seed", "model"):
        if getattr(args, flag) != getattr(defaults, flag):
            words += [f"--{flag}", str(getattr(args, flag))]
    return shlex.join(words)


def _shown(path: Path) -> Path:
    """Return ``path`` relative to the working directory when it lies below it (shorter, and what the user typed)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _thread_ids(db: Path) -> list[str]:
    """Return the thread ids in a SqliteSaver database (empty when it has no checkpoints table)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")]
    except sqlite3.DatabaseError:
        return []
    finally:
        conn.close()


def thread_values(storage: Path, thread: str) -> tuple[dict, int]:
    """Return (the thread's latest state values, its checkpoint count) from ``<storage>/checkpoints.sqlite``.

    Raises UsageError naming the thread (and the threads that exist) when
    it has no checkpoints there.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, StateGraph

    from ..engine.state import CompactionState

    db = storage / CHECKPOINTS_FILE
    threads = _thread_ids(db)
    if thread not in threads:
        known = ", ".join(threads[-10:]) or "none"
        raise UsageError(f"--thread {thread!r} has no checkpoints in {db} (threads there: {known})")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    try:
        # the demo's state, read back through a graph of the same schema: a checkpoint may hold only the
        # latest writes of a channel (``messages`` is a DeltaChannel), which the graph replays into the value
        reader = StateGraph(CompactionState)
        reader.add_node("read", lambda state: {})
        reader.add_edge(START, "read")
        values = (
            reader.compile(checkpointer=SqliteSaver(conn)).get_state({"configurable": {"thread_id": thread}}).values
        )
        count = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread,)).fetchone()[0]
    finally:
        conn.close()
    return dict(values), count


def _print_summaries(console: Any, transcript: list, opened: str | None) -> None:
    """Print the summaries of a transcript and what each replaced; with ``opened``, that summary's messages in full."""
    from rich.markup import escape

    from ..storage.transcript import render_recalled, summary_covers

    covers = summary_covers(transcript)
    if opened is not None and opened not in covers:
        known = ", ".join(covers) or "none (the thread has not been summarized)"
        raise UsageError(f"--summary {opened!r} is not a summary of this thread; its summaries: {known}")
    if covers:  # one line each, whole: an id is what the reader copies into --summary
        console.print(f"summaries in the transcript: {len(covers)} (open one with --summary ID)")
        for summary_id, ids in covers.items():
            span = f" ({ids[0]} .. {ids[-1]})" if ids else ""
            console.print(f"  {summary_id}: replaced {len(ids):,} messages{span}", markup=False, soft_wrap=True)
    if opened is not None:
        by_id = {m.id: m for m in transcript}
        console.print(f"[bold]summary {escape(opened)}[/bold] replaced {len(covers[opened]):,} messages:")
        for message_id in covers[opened]:
            shown = (
                render_recalled(by_id[message_id])
                if message_id in by_id
                else f"--- message {message_id} (not in the transcript) ---"
            )
            console.print(shown, markup=False, soft_wrap=True)


def run_inspect_command(args: argparse.Namespace) -> int:
    """Run ``inspect``: the thread's compaction records, current summary, transcript and memory files."""
    from ..storage import FileStorage
    from ..storage.transcript import load_transcript
    from .consolidate import existing_storage

    console = _console()  # first: it names the extra to install when rich is missing
    from rich.markup import escape

    try:
        storage = existing_storage(args.storage)
    except ValueError as exc:
        raise UsageError(f"--storage {exc}") from exc
    files = FileStorage(storage)
    if (storage / CHECKPOINTS_FILE).is_file():
        _print_state(console, args.thread, *thread_values(storage, args.thread), storage / CHECKPOINTS_FILE)
    else:  # add_compaction's folder: the checkpoints are in the graph's own checkpointer
        console.print(
            f"[bold]thread {escape(args.thread)}[/bold] · no {CHECKPOINTS_FILE} in {args.storage} (the thread's checkpoints are "
            "in the checkpointer its graph runs with); its transcript and memory:"
        )

    transcript = Path(files.transcript_location(args.thread))
    if transcript.is_file():
        console.print(
            f"transcript: {transcript} · {len(files.read_transcript(args.thread)):,} messages · {transcript.stat().st_size:,} bytes"
        )
    else:
        console.print(f"transcript: none yet ({transcript} is written at the first compaction)")
    _print_summaries(console, load_transcript(files, args.thread), args.summary)
    memory = files.list_memory_files(args.user)
    console.print(f"memory files of user {args.user!r}: {len(memory) or 'none'}")
    for rel in memory:
        text = files.read_memory_file(args.user, rel) or ""
        bullets = sum(1 for line in text.splitlines() if line.lstrip().startswith("- "))
        console.print(f"  {files.memory_location(args.user, rel)} · {len(text.encode()):,} bytes · {bullets} bullets")
    return 0


def _print_state(console: Any, thread: str, values: dict, checkpoints: int, db: Path) -> None:
    """Print a thread's checkpointed state: its size, compactions by layer, last compaction events and current summary."""
    from rich.markup import escape
    from rich.table import Table

    from ..core.conversation import is_summary
    from ..core.tokens import estimate_tokens
    from ..engine.state import read_compaction
    from .demo import compaction_counts

    messages = list(values.get("messages") or [])
    compaction = read_compaction(values.get("compaction"))
    console.print(f"[bold]thread {escape(thread)}[/bold] · {checkpoints} checkpoints in {db}")
    console.print(f"state: {len(messages)} messages, about {estimate_tokens(messages):,} tokens")
    edited = compaction.get("edited_messages")
    counts = compaction_counts(compaction["counts"], edited if isinstance(edited, dict) else {}) or "none yet"
    console.print(f"compactions by layer: {counts}")
    if compaction["last_error"]:
        console.print(f"last error: {compaction['last_error']}")

    events = Table(title=f"last {len(compaction['events'])} compaction events (tokens before and after)")
    for column in ("stage", "layer", "before", "after", "summarized", "offloaded", "memories"):
        events.add_column(column, justify="left" if column in ("stage", "layer") else "right", no_wrap=True)
    for e in compaction["events"]:
        events.add_row(
            # a background compaction's events name themselves (compaction_ready, compaction_discarded, ...)
            str(e.get("stage", "")),
            str(e.get("layer") or e.get("event") or ("error" if e.get("error") else "")),
            *(
                f"{e[k]:,}" if isinstance(e.get(k), int) else ""
                for k in ("tokens_before", "tokens_after", "evicted", "offloaded", "memories")
            ),
        )
    console.print(events)

    summary = next((m for m in messages if is_summary(m)), None)
    console.print("[bold]current summary[/bold]" + ("" if summary else ": none (the thread has not been summarized)"))
    if summary is not None:
        console.print(summary.content, markup=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["consolidate"]:
        from .consolidate import consolidate_main

        return consolidate_main(argv[1:])
    args, unknown = parser().parse_known_args(argv)
    if unknown:
        # argparse would report it with the top-level usage, which does not list the command's options
        (getattr(args, "usage", None) or parser()).error(f"unrecognized arguments: {' '.join(unknown)}")
    commands = {"demo": run_demo_command, "inspect": run_inspect_command}
    if args.command is None:
        parser().print_help(sys.stderr)
        return USAGE_ERROR
    try:
        return commands[args.command](args)
    except CommandError as exc:
        print(f"langgraph-compaction {args.command}: error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
