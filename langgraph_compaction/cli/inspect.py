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
from typing import TYPE_CHECKING, Any

from .demo_defaults import CHECKPOINTS_FILE, DEFAULT_STORAGE
from .errors import UsageError, console, driver_reason, shown_dsn
from .locations import POSTGRES_EXTRA, SQLITE_EXTRA, location_kind, require, sqlite_path

if TYPE_CHECKING:
    from ..storage import CompactionStorage, StoreStorage


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
    """Yield the SqliteSaver file at ``path`` opened read-only (`read_only_sqlite`)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with ExitStack() as stack:
        conn = read_only_sqlite(path, flag, "SqliteSaver", "SELECT thread_id FROM checkpoints LIMIT 1", stack)
        yield Checkpoints(SqliteSaver(conn), str(path), _sqlite_rows(conn), flag)


def read_only_sqlite(path: Path, flag: str, writer: str, probe: str, stack: ExitStack) -> sqlite3.Connection:
    """Return a read-only connection to the SQLite file a LangGraph ``writer`` wrote, closed with ``stack``.

    A database in WAL mode cannot be opened read-only in a folder the user may
    not write (SQLite would make its shared-memory file there): it is then read
    from a private copy, its write-ahead log included. UsageError naming
    ``flag`` when the file is missing or ``probe`` (a query of the writer's
    tables) fails.
    """
    if not path.is_file():
        what = "no such file" if not path.exists() else "not a file"
        raise UsageError(f"{flag} {path}: {what}; pass the SQLite file the graph's {writer} writes")
    try:
        try:
            conn = _connect_ro(path)
        except sqlite3.OperationalError:
            copy = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="langgraph-compaction-")))
            conn = _connect_ro(_copy_database(path, copy / path.name, flag))
        stack.callback(conn.close)
        conn.execute(probe).fetchall()
    except sqlite3.DatabaseError as exc:
        raise UsageError(
            f"{flag} {path}: not a database a LangGraph {writer} wrote ({exc}); pass the file a {writer} writes"
        ) from exc
    return conn


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
    shown = shown_dsn(dsn)
    require(f"{flag} {shown}", POSTGRES_EXTRA, "psycopg", "langgraph.checkpoint.postgres")
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

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
            database, ``sqlite:///FILE`` or a path for a SqliteSaver file.
        flag: the flag to name in error messages.

    Raises:
        UsageError: ``spec`` is a libpq ``key=value`` string or a server's URL (`location_kind`).
    """
    kind = location_kind(spec, flag, f"inspect a thread it serves with --url {shown_dsn(spec)}")
    if kind == "postgres":
        return _postgres(spec, flag)
    return _sqlite(Path(sqlite_path(spec) if kind == "sqlite" else spec), flag)


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
        args: the parsed command line (``thread``, ``storage``, ``store``, ``checkpointer``, ``url``, ``user``,
            ``summary``).
    """
    from ..storage import FileStorage, StoreStorage

    out = console()  # first: it names the extra to install when rich is missing
    for flag in ("checkpointer", "store"):
        if args.url and getattr(args, flag):
            raise UsageError(f"--url and --{flag} both name where the thread's {_WHAT[flag]} is; pass one")
    if args.store and args.storage:
        raise UsageError("--store and --storage both name where the transcript and memory are; pass one")
    try:
        with ExitStack() as stack:
            folder = _storage(args)
            files = _open_store(args.store, stack) if args.store else (FileStorage(folder) if folder else None)
            if files is None and not args.url and args.summary is not None:
                raise UsageError("--summary needs the thread's transcript: pass --storage, --store or --url")
            if args.url:
                from .server import ServerStore, server_client, server_state

                client = server_client(args.url)
                values = server_state(client, args.url, args.thread)
                files = files or StoreStorage(ServerStore(client))  # a folder given with --storage comes first
                written_to = _print_state(out, args.thread, values, f"served by {shown_dsn(args.url)}")
            else:
                written_to = _print_checkpoints(out, args, folder, files is not None)
            _print_files(out, files, args, written_to)
    except PermissionError as exc:
        raise UsageError(
            f"cannot read {exc.filename} ({exc.strerror}); run as a user who may read it, or inspect a copy"
        ) from exc
    return 0


#: What each flag that --url excludes names.
_WHAT = {"checkpointer": "state", "store": "transcript and memory"}


def _print_checkpoints(out: Any, args: argparse.Namespace, folder: Path | None, has_files: bool) -> str | None:
    """Print the thread's state from ``--checkpointer`` or the folder's checkpoints file, or say where to find it.

    Returns where the state says the transcript was written (`_print_state`), None without a state.
    """
    spec = args.checkpointer
    if spec is None and folder is not None and (folder / CHECKPOINTS_FILE).is_file():
        spec = str(folder / CHECKPOINTS_FILE)
    if spec is not None:
        with open_checkpoints(spec, "--checkpointer" if args.checkpointer else "--storage") as checkpoints:
            values, count = thread_values(checkpoints, args.thread)
            return _print_state(out, args.thread, values, f"{count} checkpoints in {checkpoints.where}")
    where = f"no {CHECKPOINTS_FILE} in {args.storage or DEFAULT_STORAGE}" if folder is not None else "no checkpointer"
    tail = "; its transcript and memory:" if has_files else ""
    out.print(
        f"thread {args.thread} · {where} (pass --checkpointer with the database the graph's checkpointer writes "
        f"to see its state){tail}",
        markup=False,
    )
    return None


def _storage(args: argparse.Namespace) -> Path | None:
    """Return the storage folder to list: ``--storage``, else the default one unless another source was named."""
    from .consolidate import existing_storage

    if args.storage is None and (args.checkpointer or args.store or args.url):
        return None
    try:
        return existing_storage(args.storage or DEFAULT_STORAGE)
    except ValueError as exc:
        raise UsageError(f"--storage {exc}") from exc


def _open_store(spec: str, stack: ExitStack) -> StoreStorage:
    """Return the transcript and memory of the LangGraph store ``--store`` names, opened for reading."""
    from ..storage import StoreStorage

    kind = location_kind(spec, "--store", f"inspect a thread it serves with --url {shown_dsn(spec)}")
    if kind == "postgres":
        shown = shown_dsn(spec)
        require(f"--store {shown}", POSTGRES_EXTRA, "psycopg", "langgraph.store.postgres")
        import psycopg
        from langgraph.store.postgres import PostgresStore

        try:
            store = stack.enter_context(PostgresStore.from_conn_string(spec))
            store.search(("compaction",), limit=1)
        except psycopg.Error as exc:
            raise UsageError(
                f"--store {shown}: cannot read a LangGraph store there ({driver_reason(exc, spec)}); pass the "
                "database the graph's PostgresStore writes (with the search_path its tables are in)"
            ) from exc
        return StoreStorage(store)
    require("--store", SQLITE_EXTRA, "langgraph.store.sqlite")
    from langgraph.store.sqlite import SqliteStore

    path = Path(sqlite_path(spec) if kind == "sqlite" else spec)
    sqlite_store = SqliteStore(read_only_sqlite(path, "--store", "SqliteStore", "SELECT key FROM store LIMIT 1", stack))
    sqlite_store.is_setup = True  # its tables are there (probed): nothing is created in a file only read
    return StoreStorage(sqlite_store)


def _print_files(out: Any, files: CompactionStorage | None, args: argparse.Namespace, written_to: str | None) -> None:
    """Print the thread's transcript and summaries and the user's memory files, or where to find them.

    ``written_to`` is where the thread's state says its transcript was written: named when it is not where
    inspect looked.
    """
    from ..storage import FileStorage
    from ..storage.transcript import load_transcript

    if files is None:
        out.print(
            "transcript and memory: pass --storage with the folder given to add_compaction, or --store with "
            "the graph's store, to list them"
        )
        return
    location = files.transcript_location(args.thread)
    count = len(files.read_transcript(args.thread))
    if count:
        size = f" · {Path(location).stat().st_size:,} bytes" if isinstance(files, FileStorage) else ""
        out.print(f"transcript: {location} · {count:,} messages{size}", markup=False)
    elif written_to and written_to.startswith("store://") != location.startswith("store://"):
        flag = "--store with the graph's store" if written_to.startswith("store://") else "--storage with its folder"
        out.print(
            f"transcript: none in {location}; the thread's state says it was written to {written_to}: pass {flag}",
            markup=False,
        )
    else:
        out.print(f"transcript: none yet ({location} is written at the first compaction)", markup=False)
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


def _print_state(out: Any, thread: str, values: dict, origin: str) -> str | None:
    """Print a thread's state (read from ``origin``): size, compactions by layer, last events, current summary.

    Returns where the state says the thread's transcript was written (``offload_path``), None before any offload.
    """
    from ..core.conversation import is_summary
    from ..core.tokens import estimate_tokens
    from ..engine.state import read_compaction
    from .report import compaction_counts

    messages = list(values.get("messages") or [])
    compaction = read_compaction(values.get("compaction"))
    out.print(f"thread {thread} · {origin}", markup=False)
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
    return compaction.get("offload_path")
