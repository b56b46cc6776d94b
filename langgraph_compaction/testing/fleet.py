"""Several worker processes serving the same threads on one PostgreSQL: for tests and benchmarks.

A deployment runs several worker processes over one ``PostgresSaver`` and one
``PostgresStore``; each request goes to a random worker and a thread runs one
request at a time (as LangGraph's server does). The app is
``testing.scenarios``' agent with ``CompactionMiddleware(config=CompactionConfig(context_window=64_000))``,
its transcripts and memory in the store. ``run_workers`` serves the requests
with ``workers`` processes and returns the compaction-model calls (summaries
and memory extractions, every worker's) beside the summaries applied. It
needs the optional ``langchain`` and ``langgraph-checkpoint-postgres``,
imported when a fleet is built.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import uuid
from collections.abc import Iterator
from typing import Any

from ..core.config import CompactionConfig
from . import ScriptedModel
from .scenarios import TOOLS, AppModel, request

__all__ = ["SUMMARIZER_LATENCY", "WINDOW", "fleet_agent", "fresh_schema", "run_workers", "serve"]

#: The fleet's context window, in tokens.
WINDOW = 64_000
#: Seconds the summarizer (and memory model) takes to answer.
SUMMARIZER_LATENCY = 0.2
#: What a summary request starts with, telling it from a memory extraction.
SUMMARY_PROMPT = "Context Extraction Assistant"


def fleet_agent(checkpointer: Any, store: Any, background: bool, summarizer: Any = None) -> Any:
    """Return the app's agent on this checkpointer and store (its transcripts and memory in the store)."""
    from langchain.agents import create_agent

    from ..fronts.middleware import CompactionMiddleware

    config = CompactionConfig(context_window=WINDOW, background=background)
    compaction = CompactionMiddleware(model=summarizer or ScriptedModel(latency=SUMMARIZER_LATENCY), config=config)
    return create_agent(AppModel(), TOOLS, middleware=[compaction], checkpointer=checkpointer, store=store)


def serve(dsn: str, background: bool, inbox: Any, outbox: Any) -> None:
    """One worker process: run each ``(thread, n)`` request it is handed; at ``None`` report its compaction calls."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    summarizer = ScriptedModel(latency=SUMMARIZER_LATENCY)
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        agent = fleet_agent(saver, store, background, summarizer)
        while (item := inbox.get()) is not None:
            thread, n = item
            try:
                agent.invoke(request(n), {"configurable": {"thread_id": thread}})
                outbox.put(("done", thread, None))
            except Exception as exc:  # noqa: BLE001 - reported to the dispatcher, which stops the run
                outbox.put(("done", thread, f"{type(exc).__name__}: {exc}"[:300]))
    summaries = sum(SUMMARY_PROMPT in prompt for prompt in summarizer.calls)
    outbox.put(("calls", summaries, len(summarizer.calls) - summaries))


@contextlib.contextmanager
def fresh_schema(dsn: str) -> Iterator[str]:
    """Yield a DSN whose search path is a new schema of its own (dropped afterwards), its tables set up."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    schema = f"compaction_workers_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in dsn else "?"
    scoped = f"{dsn}{sep}options=-csearch_path%3D{schema}"
    try:
        with PostgresSaver.from_conn_string(scoped) as saver, PostgresStore.from_conn_string(scoped) as store:
            saver.setup()
            store.setup()
        yield scoped
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def run_workers(
    dsn: str, *, workers: int, background: bool, threads: int, requests: int, seed: int = 0, prefix: str = "thread"
) -> dict:
    """Serve ``requests`` requests on each of ``threads`` threads with ``workers`` processes; return the figures.

    Args:
        dsn: A PostgreSQL DSN whose checkpointer and store tables are set up (see ``fresh_schema``).
        workers: How many worker processes serve the requests.
        background: Compact in the background (else blocking).
        threads: How many threads (conversations) run side by side.
        requests: Requests per thread, each sent once the thread's previous one is answered.
        seed: Seeds the choice of a worker for each request.
        prefix: The threads' ids start with it (several runs can share one schema).
    """
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    context = multiprocessing.get_context("spawn")
    inboxes = [context.Queue() for _ in range(workers)]
    outbox = context.Queue()
    processes = [context.Process(target=serve, args=(dsn, background, inbox, outbox)) for inbox in inboxes]
    for process in processes:
        process.start()
    rng = random.Random(seed)
    names = [f"{prefix}-{t}" for t in range(threads)]
    sent = dict.fromkeys(names, 0)
    errors: list[str] = []
    try:
        for name in names:  # each thread's first request; the next once it is answered
            rng.choice(inboxes).put((name, 0))
            sent[name] = 1
        for _ in range(threads * requests):
            _, name, error = outbox.get(timeout=600)
            if error:
                errors.append(error)
            if sent[name] < requests:
                rng.choice(inboxes).put((name, sent[name]))
                sent[name] += 1
    finally:
        for inbox in inboxes:
            inbox.put(None)
        reports = [outbox.get(timeout=120) for _ in processes]
        for process in processes:
            process.join(timeout=60)
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        agent = fleet_agent(saver, store, background)
        counts = [agent.get_state({"configurable": {"thread_id": n}}).values["compaction"]["counts"] for n in names]
    applied = sum(c.get("summarize", 0) + c.get("extractive", 0) for c in counts)
    summaries = sum(r[1] for r in reports)
    memories = sum(r[2] for r in reports)
    return {
        "workers": workers,
        "background": background,
        "threads": threads,
        "requests": threads * requests,
        "applied": applied,
        "summary_calls": summaries,
        "memory_calls": memories,
        "calls_per_applied": (summaries + memories) / applied if applied else None,
        "errors": errors[:3],
    }
