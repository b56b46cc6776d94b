"""``langgraph-compaction inspect``: a thread's compactions, state, summaries, transcript and memory files.

The thread's checkpoints come from ``--checkpointer`` (a ``postgresql://``
DSN of a ``PostgresSaver`` database or the path of a ``SqliteSaver`` file),
else from ``<storage>/checkpoints.sqlite`` when the demo wrote one; its
transcript and memory from the storage folder. Everything is read, nothing
written: a copy the user may read but not write is inspected as it is.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .demo_defaults import CHECKPOINTS_FILE, DEFAULT_STORAGE
from .errors import UsageError, console, driver_reason, shown_dsn


@dataclass
class Checkpoints:
    """A checkpoint database opened for reading: its saver, where it is, and a query function over its tables.

    Args:
        saver: the LangGraph checkpointer over the database.
        where: what to call it in messages (a path, or a DSN without its password).
        query: runs one SQL statement with one parameter style (``?`` or ``%s``) and returns its rows.
        flag: the command-line flag that named it, for error messages.
        mark: the query's parameter placeholder (``?`` for SQLite, ``%s`` for PostgreSQL).
    """

    saver: Any
    where: str
    query: Any
    flag: str
    mark: str = "?"

    def threads(self) -> list[str]:
        """Return the thread ids that have checkpoints, in order."""
        return [row[0] for row in self.query("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id", ())]

    def count(self, thread: str) -> int:
        """Return how many checkpoints ``thread`` has."""
        return int(self.query(f"SELECT COUNT(*) FROM checkpoints WHERE thread_id = {self.mark}", (thread,))[0][0])


def _sqlite_rows(conn: sqlite3.Connection) -> Any:
    return lambda sql, params: conn.execute(sql, params).fetchall()


@contextmanager
def _sqlite(path: Path, flag: str) -> Iterator[Checkpoints]:
    """Yield the SqliteSaver file at ``path`` opened read-only.

    A database in WAL mode cannot be opened read-only in a folder the user may
    not write (SQLite would make its shared-memory file there): it is then read
    from a private copy, its write-ahead log included.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    if not path.is_file():
        what = "no such file" if not path.exists() else "not a file"
        raise UsageError(f"{flag} {path}: {what}; pass the SQLite file the graph's SqliteSaver writes")
    with ExitStack() as stack:
        try:
            try:
                conn = _connect_ro(path)
            except sqlite3.OperationalError:
                copy = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="langgraph-compaction-")))
                conn = _connect_ro(_copy_database(path, copy / path.name, flag))
            stack.callback(conn.close)
            conn.execute("SELECT thread_id FROM checkpoints LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise UsageError(
                f"{flag} {path}: not a LangGraph checkpoint database ({exc}); pass the file a SqliteSaver writes"
            ) from exc
        yield Checkpoints(SqliteSaver(conn), str(path), _sqlite_rows(conn), flag)


def _connect_ro(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()  # opening is lazy: read to find out
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return conn


def _copy_database(path: Path, copy: Path, flag: str) -> Path:
    """Copy a SQLite database and its write-ahead log; raise UsageError naming the flag when it cannot be read."""
    try:
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + "-wal")
        if wal.is_file():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot read it ({exc.strerror}); run as a user who may read it, or inspect a copy"
        ) from exc
    return copy


@contextmanager
def _postgres(dsn: str, flag: str) -> Iterator[Checkpoints]:
    """Yield the PostgresSaver database ``dsn`` names; raise UsageError in one line when it cannot be read."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    shown = shown_dsn(dsn)
    try:
        conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row, connect_timeout=10)
    except psycopg.Error as exc:
        raise UsageError(
            f"{flag} {shown}: cannot connect ({driver_reason(exc, dsn)}); check the DSN and that the server is running"
        ) from exc

    def rows(sql: str, params: tuple) -> list[tuple]:
        with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
            return cur.execute(sql, params).fetchall()

    with conn:
        try:
            rows("SELECT thread_id FROM checkpoints LIMIT 1", ())
        except psycopg.Error as exc:
            raise UsageError(
                f"{flag} {shown}: no LangGraph checkpoints there ({driver_reason(exc, dsn)}); pass the "
                "database the graph's PostgresSaver writes (with the search_path its tables are in)"
            ) from exc
        yield Checkpoints(PostgresSaver(conn), shown, rows, flag, "%s")


def open_checkpoints(spec: str, flag: str = "--checkpointer") -> Any:
    """Return a context manager over the checkpoint database ``spec`` names: a PostgreSQL DSN or a SQLite file.

    Args:
        spec: ``postgresql://...`` (or ``postgres://``) for a PostgresSaver
            database, anything else the path of a SqliteSaver file.
        flag: the flag to name in error messages.
    """
    if spec.startswith(("postgres://", "postgresql://")):
        return _postgres(spec, flag)
    return _sqlite(Path(spec), flag)


def thread_values(checkpoints: Checkpoints, thread: str) -> tuple[dict, int]:
    """Return (the thread's latest state values, its checkpoint count).

    Raises UsageError naming the thread (and the threads that exist) when it
    has no checkpoints there.

    Args:
        checkpoints: the opened database (`open_checkpoints`).
        thread: the thread id.
    """
    from langgraph.graph import START, StateGraph

    from ..engine.state import CompactionState

    threads = checkpoints.threads()
    if thread not in threads:
        known = ", ".join(threads[-10:]) or "none"
        raise UsageError(f"--thread {thread!r} has no checkpoints in {checkpoints.where} (threads there: {known})")
    # read back through a graph of the compaction schema: a checkpoint may hold only the latest writes of a
    # channel (``messages`` as a DeltaChannel), which the graph replays into the value
    reader = StateGraph(CompactionState)
    reader.add_node("read", lambda state: {})
    reader.add_edge(START, "read")
    graph = reader.compile(checkpointer=checkpoints.saver)
    values = graph.get_state({"configurable": {"thread_id": thread}}).values
    return dict(values), checkpoints.count(thread)


def _print_summaries(out: Any, transcript: list, opened: str | None) -> None:
    """Print a transcript's summaries and what each replaced; with ``opened``, that summary's messages in full."""
    from rich.markup import escape

    from ..storage.transcript import render_recalled, summary_covers

    covers = summary_covers(transcript)
    if opened is not None and opened not in covers:
        known = ", ".join(covers) or "none (the thread has not been summarized)"
        raise UsageError(f"--summary {opened!r} is not a summary of this thread; its summaries: {known}")
    if covers:  # one line each, whole: an id is what the reader copies into --summary
        out.print(f"summaries in the transcript: {len(covers)} (open one with --summary ID)")
        for summary_id, ids in covers.items():
            span = f" ({ids[0]} .. {ids[-1]})" if ids else ""
            out.print(f"  {summary_id}: replaced {len(ids):,} messages{span}", markup=False, soft_wrap=True)
    if opened is None:
        return
    by_id = {m.id: m for m in transcript}
    out.print(f"[bold]summary {escape(opened)}[/bold] replaced {len(covers[opened]):,} messages:")
    for message_id in covers[opened]:
        missing = f"--- message {message_id} (not in the transcript) ---"
        out.print(render_recalled(by_id[message_id]) if message_id in by_id else missing, markup=False, soft_wrap=True)


def run_inspect_command(args: argparse.Namespace) -> int:
    """Run ``inspect``: the thread's compaction records, current summary, transcript and memory files.

    Args:
        args: the parsed command line (``thread``, ``storage``, ``checkpointer``, ``user``, ``summary``).
    """
    out = console()  # first: it names the extra to install when rich is missing
    storage = _storage(args)
    spec = args.checkpointer
    if spec is None and storage is not None and (storage / CHECKPOINTS_FILE).is_file():
        spec = str(storage / CHECKPOINTS_FILE)
    try:
        if spec is not None:
            flag = "--checkpointer" if args.checkpointer else "--storage"
            with open_checkpoints(spec, flag) as checkpoints:
                values, count = thread_values(checkpoints, args.thread)
                _print_state(out, args.thread, values, count, checkpoints.where)
        else:  # add_compaction's folder: the checkpoints are in the graph's own checkpointer
            out.print(
                f"thread {args.thread} · no {CHECKPOINTS_FILE} in {args.storage or DEFAULT_STORAGE} (pass "
                "--checkpointer with the "
                "database the graph's checkpointer writes to see its state); its transcript and memory:",
                markup=False,
            )
        if storage is None:
            out.print("transcript and memory: pass --storage with the folder given to add_compaction to list them")
        else:
            _print_files(out, storage, args)
    except PermissionError as exc:
        raise UsageError(
            f"cannot read {exc.filename} ({exc.strerror}); run as a user who may read it, or inspect a copy"
        ) from exc
    return 0


def _storage(args: argparse.Namespace) -> Path | None:
    """Return the storage folder to list, None when only ``--checkpointer`` was given; UsageError when it is none."""
    from .consolidate import existing_storage

    if args.storage is None and args.checkpointer is not None:
        return None
    try:
        return existing_storage(args.storage or DEFAULT_STORAGE)
    except ValueError as exc:
        raise UsageError(f"--storage {exc}") from exc


def _print_files(out: Any, root: Path, args: argparse.Namespace) -> None:
    """Print the thread's transcript and summaries and the user's memory files in the storage folder ``root``."""
    from ..storage import FileStorage
    from ..storage.transcript import load_transcript

    files = FileStorage(root)
    transcript = Path(files.transcript_location(args.thread))
    if transcript.is_file():
        count = len(files.read_transcript(args.thread))
        out.print(f"transcript: {transcript} · {count:,} messages · {transcript.stat().st_size:,} bytes", markup=False)
    else:
        out.print(f"transcript: none yet ({transcript} is written at the first compaction)", markup=False)
    _print_summaries(out, load_transcript(files, args.thread), args.summary)
    memory = files.list_memory_files(args.user)
    out.print(f"memory files of user {args.user!r}: {len(memory) or 'none'}", markup=False)
    for rel in memory:
        text = files.read_memory_file(args.user, rel) or ""
        bullets = sum(1 for line in text.splitlines() if line.lstrip().startswith("- "))
        where = files.memory_location(args.user, rel)
        out.print(f"  {where} · {len(text.encode()):,} bytes · {bullets} bullets", markup=False)


#: The events table's number columns: (heading, event key). Headings are short so that the table fits 80 columns.
_NUMBERS = (
    ("before", "tokens_before"),
    ("after", "tokens_after"),
    ("summarized", "evicted"),
    ("offloaded", "offloaded"),
    ("memories", "memories"),
)


def events_table(events: list[dict]) -> Any:
    """Return the rich Table of compaction events: the step, then tokens before and after and what moved.

    The numbers are never cut: their columns are as wide as their widest
    figure, and the step column folds instead when the console is narrow.

    Args:
        events: the ``compaction["events"]`` of a thread's state.
    """
    from rich import box
    from rich.table import Table

    rows = []
    for e in events:
        # a background compaction's events name themselves (compaction_ready, compaction_discarded, ...)
        what = e.get("layer") or e.get("event") or ("error" if e.get("error") else "")
        step = " ".join(str(part) for part in (e.get("stage", ""), what) if part)
        rows.append((step, *(f"{e[k]:,}" if isinstance(e.get(k), int) else "" for _, k in _NUMBERS)))
    table = Table(title=f"last {len(events)} compaction events (tokens before and after)", box=box.SIMPLE_HEAD)
    table.add_column("step", overflow="fold", ratio=1)
    for i, (heading, _) in enumerate(_NUMBERS, start=1):
        width = max([len(heading), *(len(row[i]) for row in rows)])
        table.add_column(heading, justify="right", no_wrap=True, min_width=width)
    for row in rows:
        table.add_row(*row)
    return table


def _print_state(out: Any, thread: str, values: dict, checkpoints: int, where: str) -> None:
    """Print a thread's checkpointed state: its size, compactions by layer, last events and current summary."""
    from ..core.conversation import is_summary
    from ..core.tokens import estimate_tokens
    from ..engine.state import read_compaction
    from .report import compaction_counts

    messages = list(values.get("messages") or [])
    compaction = read_compaction(values.get("compaction"))
    out.print(f"thread {thread} · {checkpoints} checkpoints in {where}", markup=False)
    out.print(f"state: {len(messages)} messages, about {estimate_tokens(messages):,} tokens")
    edited = compaction.get("edited_messages")
    counts = compaction_counts(compaction["counts"], edited if isinstance(edited, dict) else {}) or "none yet"
    out.print(f"compactions by layer: {counts}", markup=False)
    if compaction["last_error"]:
        out.print(f"last error: {compaction['last_error']}", markup=False)
    out.print(events_table(compaction["events"]))
    summary = next((m for m in messages if is_summary(m)), None)
    out.print("[bold]current summary[/bold]" + ("" if summary else ": none (the thread has not been summarized)"))
    if summary is not None:
        out.print(summary.content, markup=False)
