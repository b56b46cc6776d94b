"""Measure 6: checkpoint bytes after 300 turns of the synthetic session (SQLite file size, Postgres blob bytes).

Every system runs with a real checkpointer, so what is measured is what a
deployment stores: each super-step's checkpoint and writes. Sizes are taken
at a third, two thirds and all of the turns to check that growth is linear.
"""

from __future__ import annotations

import os
import sqlite3
import uuid

from benchmarks.anchors import SYSTEMS, ScriptedAgent, Thresholds, drive, scripted_summarizer, synthetic_session, system_graph
from benchmarks.report import check, table, targets_table

NAME = "checkpoint_bytes"
POSTGRES_URL = os.environ.get("COMPACTION_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_PG_BYTES = """
select (select coalesce(sum(octet_length(blob)), 0) from checkpoint_blobs where thread_id = %(t)s)
     + (select coalesce(sum(octet_length(blob)), 0) from checkpoint_writes where thread_id = %(t)s)
     + (select coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) from checkpoints where thread_id = %(t)s)
"""


def _sqlite_sizes(system: str, session: list, marks: set[int], path) -> dict:
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(path, check_same_thread=False)
    sizes: dict[str, int] = {}
    try:
        agent = ScriptedAgent(measure=False)
        graph = system_graph(system, agent, scripted_summarizer(), Thresholds()).compile(checkpointer=SqliteSaver(connection))

        def after_turn(i: int, values: dict) -> None:
            if i + 1 in marks:
                connection.commit()
                sizes[str(i + 1)] = sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))

        drive(graph, agent, session, after_turn=after_turn)
    finally:
        connection.close()
    return sizes


def _postgres_sizes(system: str, session: list, marks: set[int], saver, connection) -> dict:
    thread = f"bench-{system}-{uuid.uuid4().hex[:8]}"
    sizes: dict[str, int] = {}
    agent = ScriptedAgent(measure=False)
    graph = system_graph(system, agent, scripted_summarizer(), Thresholds()).compile(checkpointer=saver)

    def after_turn(i: int, values: dict) -> None:
        if i + 1 in marks:
            sizes[str(i + 1)] = connection.execute(_PG_BYTES, {"t": thread}).fetchone()[0]

    try:
        drive(graph, agent, session, thread=thread, after_turn=after_turn)
    finally:
        saver.delete_thread(thread)
    return sizes


def run(ctx) -> dict:
    turns = 90 if ctx.quick else 300
    marks = {turns // 3, 2 * turns // 3, turns}
    session = synthetic_session(turns, seed=ctx.seed)
    sqlite = {s: _sqlite_sizes(s, session, marks, str(ctx.scratch_dir / f"checkpoints-{s}.sqlite")) for s in SYSTEMS}
    postgres: dict = {}
    postgres_error = None
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as connection:
            saver = PostgresSaver(connection)
            saver.setup()
            postgres = {s: _postgres_sizes(s, session, marks, saver, connection) for s in SYSTEMS}
    except Exception as exc:  # noqa: BLE001 - a machine without PostgreSQL still gets the SQLite figures
        postgres_error = f"{type(exc).__name__}: {exc}"[:300]

    last, third, two_thirds = str(turns), str(turns // 3), str(2 * turns // 3)
    targets = [check(f"SQLite after {turns} turns: ours / no compaction", sqlite["ours"][last] / sqlite["none"][last], 0.25)]
    if postgres:
        targets.append(check(f"Postgres after {turns} turns: ours / no compaction", postgres["ours"][last] / postgres["none"][last], 0.25))
    for backend, sizes in (("SQLite", sqlite), ("Postgres", postgres)):
        if sizes:
            ours = sizes["ours"]
            # linear: the last third of the turns adds no more than 1.25x what the middle third added
            growth = (ours[last] - ours[two_thirds]) / max(1, ours[two_thirds] - ours[third])
            targets.append(check(f"{backend}: ours, bytes added in the last third / in the middle third", growth, 1.25))
    return {"turns": turns, "sqlite": sqlite, "postgres": postgres, "postgres_error": postgres_error, "targets": targets}


def report(figures: dict) -> str:
    def rows(sizes: dict) -> list:
        marks = list(next(iter(sizes.values())))
        return [(system, *(f"{sizes[system][m] / 1e6:.1f} MB" for m in marks), sizes[system][marks[-1]] / sizes["none"][marks[-1]]) for system in sizes]

    marks = list(figures["sqlite"]["none"])
    headers = ["system", *(f"after {m} turns" for m in marks), "ratio to none"]
    postgres = (
        table(headers, rows(figures["postgres"]))
        if figures["postgres"]
        else f"PostgreSQL was not reachable ({figures['postgres_error']}); SQLite only."
    )
    return f"""## 6. Checkpoint bytes

The synthetic session with each system's graph checkpointed after every super-step; this package's defaults
at a 128k window, the same trigger and keep for the others.

{targets_table(figures['targets'])}

SQLite file size (database + WAL):

{table(headers, rows(figures['sqlite']))}

PostgreSQL bytes of the thread's checkpoints, blobs and writes:

{postgres}
"""
