"""``langgraph-compaction consolidate``: merge a storage folder's new ledger entries into MEMORY.md."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ..memory.consolidation import DEFAULT_MAX_TOKENS, DEFAULT_MIN_GAP, DEFAULT_RETENTION_DAYS, consolidate_memory
from ..storage import DEFAULT_USER
from .errors import ArgumentParser, CommandError, driver_reason, printable, shown_dsn
from .locations import POSTGRES_EXTRA, SQLITE_EXTRA, location_kind, require, sqlite_path

#: What a storage folder holds once compaction or the demo has used it (the default user's memory sits at its top).
_STORAGE_MARKERS = ("MEMORY.md", "memory", "sessions", "users", "checkpoints.sqlite")


def existing_storage(spec: str) -> Path:
    """Return the storage folder ``spec`` names; raise ValueError naming it when it is not one (a typo creates nothing).

    Args:
        spec: the folder, as the user typed it.
    """
    folder = Path(spec)
    hint = "pass the storage folder given to add_compaction or the demo (e.g. .compaction)"
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{spec}: it is a file, not a directory; {hint}")
    if not folder.is_dir():
        raise ValueError(f"{spec}: no such directory; {hint}")
    try:
        next(folder.iterdir(), None)
    except PermissionError as exc:
        raise ValueError(
            f"{spec}: cannot read the folder ({exc.strerror}); run as a user who may read it, or pass a readable copy"
        ) from exc
    if not any((folder / name).exists() for name in _STORAGE_MARKERS):
        raise ValueError(
            f"{spec}: not a storage folder (it has no MEMORY.md, memory/, sessions/ or users/); "
            "pass the folder given to add_compaction or the demo (e.g. .compaction)"
        )
    return folder


def _cli_model(name: str, base_url: str | None) -> tuple[Any, str | None]:
    """Return (the consolidation model, a note for the user or None): ChatOpenAI with a key, else the offline model."""
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=name, base_url=base_url, max_retries=2), None
    from ..testing import ScriptedModel

    # the same offline model as the demo: a deterministic merge (dedupe, nothing dropped)
    return (
        ScriptedModel(),
        "offline: no OPENAI_API_KEY, so the new entries are merged deterministically (duplicates dropped)",
    )


def _open_cli_storage(spec: str, stack: ExitStack) -> Any:
    """Return the storage a command-line argument names: a directory, ``sqlite:///file.db`` or a PostgreSQL DSN.

    Raises ValueError or UsageError naming ``spec`` in one line when it cannot be opened.
    """
    kind = location_kind(
        spec, "storage", "consolidate reads the store itself: pass its postgresql:// DSN or sqlite:///FILE"
    )
    if kind == "sqlite":
        require(f"storage {spec}", SQLITE_EXTRA, "langgraph.store.sqlite")
        import sqlite3

        from langgraph.store.sqlite import SqliteStore

        path = sqlite_path(spec)
        folder = Path(path).parent
        if path != ":memory:" and not folder.is_dir():
            raise ValueError(
                f"{spec}: the folder {folder} does not exist; create it or pass a file in a folder that does"
            )
        why = f"{spec}: cannot open the SQLite store ({{}}); pass a file you may read and write"
        return _set_up(stack, lambda: SqliteStore.from_conn_string(path), sqlite3.Error, lambda exc: why.format(exc))
    if kind == "postgres":
        require(f"storage {shown_dsn(spec)}", POSTGRES_EXTRA, "psycopg", "langgraph.store.postgres")
        import psycopg
        from langgraph.store.postgres import PostgresStore

        def refused(exc: Exception) -> str:
            return (
                f"{shown_dsn(spec)}: cannot open the PostgreSQL store ({driver_reason(exc, spec)}); "
                "check the DSN and that the server is running"
            )

        return _set_up(stack, lambda: PostgresStore.from_conn_string(spec), psycopg.Error, refused)
    return str(existing_storage(spec))


def _set_up(
    stack: ExitStack, opened: Callable[[], Any], errors: type[Exception], why: Callable[[Exception], str]
) -> Any:
    """Return the store ``opened`` makes, entered on ``stack`` and set up; a driver error raises ValueError(why)."""
    try:
        store = stack.enter_context(opened())
        store.setup()
    except errors as exc:
        raise ValueError(why(exc)) from exc
    return store


def consolidate_main(argv: Sequence[str] | None = None) -> int:
    """Run ``langgraph-compaction consolidate`` with these arguments; return the exit status.

    0: consolidated, unchanged, rate limited or busy; 1: refused or failed;
    2: bad arguments.
    """
    parser = ArgumentParser(
        prog="langgraph-compaction consolidate",
        description="Merge new daily memory ledger entries into MEMORY.md (with a backup and a loss guard).",
    )
    parser.add_argument(
        "storage", help="a directory, sqlite:///path/to/store.db, or a postgresql:// DSN of a LangGraph store"
    )
    parser.add_argument("--user", default=DEFAULT_USER, help="whose memory (default: %(default)s)")
    parser.add_argument(
        "--model",
        default="gpt-4o-mini",
        help="chat model name for the OpenAI-compatible API when OPENAI_API_KEY is set; "
        "without a key an offline merge runs (default: %(default)s)",
    )
    parser.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="size limit of MEMORY.md (default: %(default)s)"
    )
    parser.add_argument(
        "--min-gap", type=float, default=DEFAULT_MIN_GAP, help="seconds between runs per user (default: %(default)s)"
    )
    parser.add_argument(
        "--retention-days",
        type=int,
        default=DEFAULT_RETENTION_DAYS,
        help="archive daily files older than this (default: %(default)s)",
    )
    parser.add_argument("--timezone", default="UTC", help="time zone of the ledger's days (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="ignore the rate limit")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        try:
            target = _open_cli_storage(args.storage, stack)
            model, note = _cli_model(args.model, args.base_url)
            if note:
                print(note, file=sys.stderr)
            result = consolidate_memory(
                target,
                model,
                user_id=args.user,
                max_tokens=args.max_tokens,
                min_gap_seconds=args.min_gap,
                retention_days=args.retention_days,
                timezone=args.timezone,
                force=args.force,
            )
        except (ValueError, TypeError, OSError, CommandError) as exc:
            print(printable(f"langgraph-compaction consolidate: error: {exc}"), file=sys.stderr)
            return 2
    if args.json:
        print(printable(json.dumps(result.as_event(), ensure_ascii=False, indent=1)))
    else:
        extra = f"; backup: {result.backup_path}" if result.backup_path else ""
        extra += f"; archived {len(result.archived_files)} daily files" if result.archived_files else ""
        counts = f"{result.entries_before} -> {result.entries_after} entries{extra}"
        print(printable(f"{result.status}: {result.reason} ({counts})"))
    return 1 if result.status in ("refused", "failed") else 0
