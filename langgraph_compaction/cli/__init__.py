"""The ``langgraph-compaction`` command: ``demo``, ``inspect`` and ``consolidate``.

``demo`` runs the long demo session (see ``langgraph_compaction.cli.demo``) and
prints its totals, file paths and plot (``--resume`` continues an interrupted
one); ``inspect`` reads a thread back from its checkpointer (``--checkpointer``,
a PostgreSQL DSN or a SQLite file, default ``<storage>/checkpoints.sqlite``)
and its transcript and memory from the storage directory or the graph's store
(``--store``), or all of it from a LangGraph server (``--url``).
Errors a user can cause print one line naming the flag and exit with status
2; an OpenAI API that fails the session prints one line and exits with 1.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# the commands import what they need when they run: --help stays fast
from .demo_defaults import DEFAULT_OPENAI_MODEL, DEFAULT_STORAGE, DEFAULT_TURNS, DEFAULT_WINDOW
from .errors import DEMO_EXTRA, USAGE_ERROR, ArgumentParser, CommandError, UsageError, console, printable

__all__ = ["CommandError", "UsageError", "main", "parser"]


def _openai_error(exc: BaseException | None) -> BaseException | None:
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
    top = ArgumentParser(
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
        "--storage",
        help=f"the storage folder given to add_compaction or the demo (default ./{DEFAULT_STORAGE}, "
        "none with --checkpointer)",
    )
    inspect.add_argument(
        "--checkpointer",
        metavar="DSN_OR_PATH",
        help="the graph's checkpoints: a postgresql:// DSN (PostgresSaver) or a SQLite file (SqliteSaver); "
        "default <storage>/checkpoints.sqlite",
    )
    inspect.add_argument(
        "--store",
        metavar="DSN_OR_PATH",
        help="the graph's LangGraph store holding the transcript and memory: a postgresql:// DSN (PostgresStore), "
        "sqlite:///FILE or a SQLite file (SqliteStore); instead of --storage",
    )
    inspect.add_argument(
        "--url",
        help="a LangGraph server (langgraph dev, a deployment) serving the thread, e.g. http://127.0.0.1:2024: "
        "its state and its store's transcript and memory",
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
    """Run ``demo``: the session, then the totals, the paths and the plot.

    Args:
        args: the parsed command line of ``demo``.
    """
    from .demo import DemoOptions, default_thread

    out = console()
    plot = None if args.no_plot else (args.plot or str(Path(args.storage) / "demo.png"))
    if args.resume and args.thread is None:
        raise UsageError("--resume continues the thread --thread names; pass the --thread of the run to continue")
    if plot is not None and args.plot is not None:
        _check_writable(plot)  # before the session, not after it
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
        report = _session(options, out)
    except KeyboardInterrupt:
        print(
            printable(
                "interrupted; the thread's checkpoints keep everything up to the last completed step; "
                f"continue it with: {_resume_command(args, thread)}"
            ),
            file=sys.stderr,
        )
        return 130
    _print_report(out, report, plot, args.storage)
    return 0


def _session(options: Any, out: Any) -> Any:
    """Return ``run_demo``'s report; a mistake or a failed API becomes a one-line error."""
    from .demo import run_demo

    try:
        return run_demo(options, out)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except ImportError as exc:
        raise UsageError(f"{exc}; the demo needs {DEMO_EXTRA}") from exc
    except OSError as exc:  # a file of the storage folder the demo may not write
        raise UsageError(
            f"--storage {options.storage}: cannot write {exc.filename or 'a file'} ({exc.strerror or exc}); "
            "pass a folder the demo may write to"
        ) from exc
    except Exception as exc:
        found = _openai_error(exc)  # a bad key, model name or endpoint
        if found is None:
            raise
        where = os.environ.get("OPENAI_BASE_URL") or "api.openai.com"
        raise CommandError(
            f"the OpenAI API at {where} failed the session ({type(found).__name__}: {found}); check OPENAI_API_KEY, "
            "OPENAI_BASE_URL and --model, or unset OPENAI_API_KEY to run offline"
        ) from exc


def _check_writable(plot: str) -> None:
    """Raise UsageError naming --plot when the plot cannot be written there (a probe: nothing is left behind)."""
    path = Path(plot)
    existed = path.exists()
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "it is a folder", plot)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError as exc:
        raise UsageError(
            f"--plot {plot}: cannot write it ({exc.strerror or exc}); pass a path in a folder you may write to, "
            "or --no-plot"
        ) from exc
    if not existed:
        path.unlink()


def _print_report(out: Any, report: Any, plot: str | None, storage: str) -> None:
    """Print a finished session: the totals, the layers, the files it wrote and the plot."""
    from .demo import layer_totals, save_plot, totals_table

    out.print(totals_table(report))
    out.print(f"compactions by layer: {layer_totals(report) or 'none'}")
    out.print(f"{len(report.calls)} model calls in {report.seconds:.1f} s")
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
        out.print(f"{label + ':':<13}{shown}{note}", markup=False)
    if plot:
        try:
            written = save_plot(report, plot)
        except OSError as exc:
            raise CommandError(
                f"--plot {plot}: cannot write it ({exc.strerror or exc}); the session's files are written, "
                "pass another --plot to draw it next time"
            ) from exc
        out.print(f"{'plot:':<13}{written}", markup=False)
    hint = shlex.join(["langgraph-compaction", "inspect", "--thread", report.thread, "--storage", storage])
    out.print(f"look again with: {hint}", markup=False)


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
    from .inspect import run_inspect_command

    commands = {"demo": run_demo_command, "inspect": run_inspect_command}
    if args.command is None:
        parser().print_help(sys.stderr)
        return USAGE_ERROR
    try:
        return commands[args.command](args)
    except CommandError as exc:
        print(printable(f"langgraph-compaction {args.command}: error: {exc}"), file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
