"""Measure 6: checkpoint bytes after 300 turns of the synthetic session, against the conversation serialized once.

Every system runs with a real checkpointer and default settings, so what is
measured is what a deployment stores: each super-step's checkpoint and
writes. The agent's replies report their usage as a provider's do (this
package then calibrates, and records it, at every turn). SQLite: the bytes of its rows (checkpoints, metadata, writes) and,
for context, the file size (database + WAL, which also holds free pages and
not yet checkpointed frames). PostgreSQL: the thread's checkpoint, blob and
write bytes. "Conversation once" is every message of the session once, as
``messages_to_dict`` JSON. Sizes are taken at a third, two thirds and all of
the turns to check that growth per turn is constant.

This package alone also runs with its defaults at a 32k, a 128k and a 200k
window on a session whose tool results are 3,000 characters: smaller turns
weigh a checkpoint's fixed cost more, and a larger window lets more of the
conversation stand between two compactions.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid

from langchain_core.messages import messages_to_dict

from benchmarks.anchors import (
    SYSTEMS,
    ScriptedAgent,
    Thresholds,
    drive,
    scripted_summarizer,
    synthetic_session,
    system_graph,
)
from benchmarks.report import check, table, targets_table
from langgraph_compaction import CompactionConfig
from langgraph_compaction.engine.state import COMPACTION_SNAPSHOT_EVERY, MESSAGES_SNAPSHOT_EVERY

NAME = "checkpoint_bytes"
#: The windows this package's defaults are measured at, and the size of each tool result in that session.
WINDOWS = {"32k": 32_000, "128k": 128_000, "200k": 200_000}
RESULT_CHARS = 3_000
POSTGRES_URL = os.environ.get("COMPACTION_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_PG_BYTES = """
select (select coalesce(sum(octet_length(blob)), 0) from checkpoint_blobs where thread_id = %(t)s)
     + (select coalesce(sum(octet_length(blob)), 0) from checkpoint_writes where thread_id = %(t)s)
     + (select coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) from checkpoints where thread_id = %(t)s)
"""


_SQLITE_ROWS = (
    "select (select coalesce(sum(length(checkpoint) + length(metadata)), 0) from checkpoints)"
    " + (select coalesce(sum(length(value)), 0) from writes)"
)


def _sqlite_sizes(system: str, session: list, marks: set[int], path, config=None) -> tuple[dict, dict]:
    """Return the row bytes and the file bytes of ``system``'s SQLite checkpoints at each mark (``config``: ours')."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(path, check_same_thread=False)
    sizes: dict[str, int] = {}
    files: dict[str, int] = {}
    try:
        agent = ScriptedAgent()  # its replies report usage, as a provider's do
        graph = system_graph(system, agent, scripted_summarizer(), Thresholds(), config=config).compile(
            checkpointer=SqliteSaver(connection)
        )

        def after_turn(i: int, values: dict) -> None:
            if i + 1 in marks:
                connection.commit()
                sizes[str(i + 1)] = connection.execute(_SQLITE_ROWS).fetchone()[0]
                files[str(i + 1)] = sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))

        drive(graph, agent, session, after_turn=after_turn)
    finally:
        connection.close()
    return sizes, files


def _postgres_sizes(system: str, session: list, marks: set[int], saver, connection, config=None) -> dict:
    thread = f"bench-{system}-{uuid.uuid4().hex[:8]}"
    sizes: dict[str, int] = {}
    agent = ScriptedAgent()  # its replies report usage, as a provider's do
    graph = system_graph(system, agent, scripted_summarizer(), Thresholds(), config=config).compile(checkpointer=saver)

    def after_turn(i: int, values: dict) -> None:
        if i + 1 in marks:
            sizes[str(i + 1)] = connection.execute(_PG_BYTES, {"t": thread}).fetchone()[0]

    try:
        drive(graph, agent, session, thread=thread, after_turn=after_turn)
    finally:
        saver.delete_thread(thread)
    return sizes


def _conversation_once(session: list) -> int:
    return len(
        json.dumps(messages_to_dict([m for pending, reply in session for m in (*pending, reply)])).encode("utf-8")
    )


def _growth(sizes: dict, third: str, two_thirds: str, last: str) -> float:
    """Return the bytes added in the last third of the turns over those added in the middle third (1: linear)."""
    return (sizes[last] - sizes[two_thirds]) / max(1, sizes[two_thirds] - sizes[third])


def run(ctx) -> dict:
    turns = 90 if ctx.quick else 300
    marks = {turns // 3, 2 * turns // 3, turns}
    last, third, two_thirds = str(turns), str(turns // 3), str(2 * turns // 3)
    session = synthetic_session(turns, seed=ctx.seed)
    once = _conversation_once(session)
    small = synthetic_session(turns, seed=ctx.seed, result_chars=RESULT_CHARS)
    small_once = _conversation_once(small)
    configs = {label: CompactionConfig(context_window=window) for label, window in WINDOWS.items()}
    measured = {s: _sqlite_sizes(s, session, marks, str(ctx.scratch_dir / f"checkpoints-{s}.sqlite")) for s in SYSTEMS}
    sqlite = {s: rows for s, (rows, _) in measured.items()}
    sqlite_files = {s: files for s, (_, files) in measured.items()}
    windows: dict = {"sqlite": {}, "postgres": {}}
    for label, config in configs.items():
        path = str(ctx.scratch_dir / f"checkpoints-ours-{label}.sqlite")
        windows["sqlite"][label] = _sqlite_sizes("ours", small, marks, path, config)[0]
    postgres: dict = {}
    postgres_error = None
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as connection:
            saver = PostgresSaver(connection)
            saver.setup()
            postgres = {s: _postgres_sizes(s, session, marks, saver, connection) for s in SYSTEMS}
            for label, config in configs.items():
                windows["postgres"][label] = _postgres_sizes("ours", small, marks, saver, connection, config)
    except Exception as exc:  # noqa: BLE001 - a machine without PostgreSQL still gets the SQLite figures
        postgres_error = f"{type(exc).__name__}: {exc}"[:300]

    targets = [check(f"SQLite after {turns} turns: ours / the conversation once", sqlite["ours"][last] / once, 4)]
    if postgres:
        targets.append(
            check(f"Postgres after {turns} turns: ours / the conversation once", postgres["ours"][last] / once, 4)
        )
    for backend, sizes in (("SQLite", sqlite), ("Postgres", postgres)):
        if sizes:
            # linear: the last third of the turns adds no more than 1.25x what the middle third added
            targets.append(
                check(
                    f"{backend}: ours, bytes added in the last third / in the middle third",
                    _growth(sizes["ours"], third, two_thirds, last),
                    1.25,
                )
            )
    for backend, key in (("SQLite", "sqlite"), ("Postgres", "postgres")):
        for label, sizes in windows[key].items():
            name = f"{backend}, {label} window, {RESULT_CHARS:,}-character results"
            targets.append(check(f"{name}: ours / the conversation once", sizes[last] / small_once, 4))
            targets.append(
                check(
                    f"{name}: bytes added in the last third / in the middle third",
                    _growth(sizes, third, two_thirds, last),
                    1.25,
                )
            )
    return {
        "turns": turns,
        "conversation_once": once,
        "sqlite": sqlite,
        "sqlite_files": sqlite_files,
        "postgres": postgres,
        "postgres_error": postgres_error,
        "windows": {"result_chars": RESULT_CHARS, "conversation_once": small_once, **windows},
        "targets": targets,
    }


def report(figures: dict) -> str:
    once = figures["conversation_once"]

    def rows(sizes: dict, once: int = once) -> list:
        marks = list(next(iter(sizes.values())))
        per_turn = lambda s: (s[marks[-1]] - s[marks[0]]) / (int(marks[-1]) - int(marks[0]))  # noqa: E731
        return [
            (
                system,
                *(f"{sizes[system][m] / 1e6:.2f} MB" for m in marks),
                f"{sizes[system][marks[-1]] / once:.2f}×",
                f"{per_turn(sizes[system]) / 1e3:.1f} kB",
            )
            for system in sizes
        ]

    marks = list(figures["sqlite"]["none"])
    headers = [
        "system",
        *(f"after {m} turns" for m in marks),
        "vs the conversation once",
        "per turn after the first third",
    ]
    postgres = (
        table(headers, rows(figures["postgres"]))
        if figures["postgres"]
        else f"PostgreSQL was not reachable ({figures['postgres_error']}); SQLite only."
    )
    return f"""## 6. Checkpoint bytes

The synthetic session with each system's graph checkpointed after every super-step; this package's defaults
at a 128k window (its state keeps `messages` and `compaction` in `DeltaChannel`s: a checkpoint stores the step's writes,
the whole list every {MESSAGES_SNAPSHOT_EVERY} updates and the whole compaction value every {COMPACTION_SNAPSHOT_EVERY}), the same trigger and keep for the
others (their own `add_messages` state: every checkpoint holds the whole list). The agent's replies report usage.

{targets_table(figures["targets"])}

The conversation serialized once (every message, `messages_to_dict` JSON): {once / 1e6:.2f} MB.

SQLite, bytes of its rows (checkpoints, metadata, writes):

{table(headers, rows(figures["sqlite"]))}

SQLite file size (database + WAL; the WAL keeps frames until SQLite checkpoints it):

{table(headers, rows(figures["sqlite_files"]))}

PostgreSQL bytes of the thread's checkpoints, blobs and writes:

{postgres}
{_windows_report(figures, headers, rows)}"""


def _windows_report(figures: dict, headers: list, rows) -> str:
    """Return the section on this package's defaults at each window (absent from results older than the measure)."""
    windows = figures.get("windows")
    if not windows:
        return ""
    once = windows["conversation_once"]
    saved = [
        f"{saver}, bytes of {what}:\n\n{table(['window', *headers[1:]], rows(windows[key], once))}\n"
        for saver, key, what in (
            ("SQLite", "sqlite", "its rows"),
            ("PostgreSQL", "postgres", "the thread's checkpoints, blobs and writes"),
        )
        if windows[key]
    ]
    return f"""
This package's defaults (`CompactionConfig(context_window=...)`) at each window, on the same session with every
tool result {windows["result_chars"]:,} characters (the conversation once: {once / 1e6:.2f} MB):

""" + "\n".join(saved)
