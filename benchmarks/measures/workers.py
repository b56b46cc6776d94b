"""Measure: compaction-model calls per applied summary with 2 and 4 worker processes on one PostgreSQL.

A deployment runs several worker processes over one ``PostgresSaver`` and one
``PostgresStore``; each request goes to a random worker and a thread runs one
request at a time (as LangGraph's server does). The app is
``background_apps``'s agent (two tools of about 5,000 tokens a request, the
agent answering in 0.05 s, the summarizer and memory model in 0.2 s) with
``CompactionMiddleware(config=CompactionConfig(context_window=64_000))``; its
transcripts and memory go to the store. With ``background=True`` each worker
that sees a thread near its trigger may prepare that thread's next summary:
the figure is compaction-model calls (summaries and memory extractions, every
worker's) per summary applied, beside the same fleet compacting blocking.
One worker preparing each summary keeps it at blocking's.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.report import check, table, targets_table
from langgraph_compaction.testing.fleet import WINDOW, fresh_schema, run_workers

NAME = "workers"
POSTGRES_URL = os.environ.get("COMPACTION_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
THREADS, REQUESTS = 4, 30
QUICK_THREADS, QUICK_REQUESTS = 2, 15


def run(ctx: Any) -> dict:
    threads, requests = (QUICK_THREADS, QUICK_REQUESTS) if ctx.quick else (THREADS, REQUESTS)
    try:
        with fresh_schema(POSTGRES_URL) as dsn:
            runs = [
                run_workers(
                    dsn, workers=n, background=bg, threads=threads, requests=requests, seed=ctx.seed, prefix=f"{n}-{bg}"
                )
                for n, bg in ((2, False), (2, True), (4, True))
            ]
    except Exception as exc:  # noqa: BLE001 - no PostgreSQL here: say so rather than fail the whole run
        return {
            "skipped": f"PostgreSQL at {POSTGRES_URL} was not usable: {type(exc).__name__}: {exc}"[:300],
            "targets": [],
        }
    blocking = runs[0]["calls_per_applied"] or 0.0
    targets = [
        check(
            f"{r['workers']} workers, background: compaction-model calls per applied summary / blocking's",
            (r["calls_per_applied"] or 0.0) / blocking if blocking else 0.0,
            1.1,
        )
        for r in runs[1:]
    ]
    return {"window": WINDOW, "runs": runs, "targets": targets}


def report(figures: dict) -> str:
    if "skipped" in figures:
        return f"## Several workers on one PostgreSQL\n\nNot measured: {figures['skipped']}"
    rows = [
        (
            f"{r['workers']} workers, {'background' if r['background'] else 'blocking'}",
            r["requests"],
            r["applied"],
            r["summary_calls"],
            r["memory_calls"],
            r["calls_per_applied"] if r["calls_per_applied"] is not None else "–",
        )
        for r in figures["runs"]
    ]
    headers = ["fleet", "requests", "summaries applied", "summary calls", "memory calls", "calls per applied summary"]
    return f"""## Several workers on one PostgreSQL

Worker processes on one `PostgresSaver` and one `PostgresStore`, each request sent to a random worker, one
request per thread at a time; `background_apps`'s agent on a {figures["window"]:,}-token window. Every worker's
compaction-model calls (summaries and memory extractions) per summary applied to a thread.

{targets_table(figures["targets"])}

{table(headers, rows)}
"""
