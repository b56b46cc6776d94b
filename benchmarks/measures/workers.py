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

The same fleet under faults (``run_faulty_workers``): three workers, some
killed (``kill -9``) in the middle of a request and restarted in their place,
their requests sent again; a summarizer failing a third of its calls with a
503; the store failing one operation in fifty. Nothing may be lost or twice,
no request may go over the window, and no request may stall longer than a
summary call (a worker waiting for a lease nobody will honour would stall the
summary timeout).
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import os
import random
import statistics
import time
import uuid
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_from_dict
from langchain_core.runnables import ensure_config
from langgraph.store.base import BaseStore, Op, Result
from pydantic import Field

from benchmarks.report import check, table, targets_table
from langgraph_compaction import CompactionConfig, CompactionMiddleware, StoreStorage
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.invariants import duplicate_problems, ledgers_of
from langgraph_compaction.testing import ScriptedModel, scripted_summary
from langgraph_compaction.testing.fleet import SUMMARIZER_LATENCY, WINDOW, fleet_agent, fresh_schema, run_workers
from langgraph_compaction.testing.scenarios import TOOLS, AppModel, request

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
            faulty = run_faulty_workers(
                dsn, workers=3, threads=threads, requests=requests, kills=3, seed=ctx.seed, prefix="faults"
            )
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
    targets += [
        check("faults: requests lost, twice, or memory bullets twice", _problems(faulty), 0, unit=""),
        check("faults: requests over the window", faulty["over_window"], 0, unit=""),
        check(
            "faults: longest stall, in summary calls",
            faulty["longest_stall"] / faulty["summary_call"],
            STALL_CALLS,
            unit=" L",
        ),
        check(
            "faults: longest stall after a restart or a failed request, in summary calls",
            faulty["longest_stall_after_fault"] / faulty["summary_call"],
            STALL_CALLS,
            unit=" L",
        ),
    ]
    return {"window": WINDOW, "runs": runs, "faulty": faulty, "targets": targets}


#: The longest stall the faulty fleet may show, in summary calls (one summary call), overall and after a fault.
STALL_CALLS = 1.0


def _problems(faulty: dict) -> int:
    return faulty["lost"] + faulty["duplicated"] + faulty["bullets_twice"] + len(faulty["unfinished"])


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

{_faulty_report(figures["faulty"])}
"""


def _faulty_report(faulty: dict) -> str:
    headers = ["workers", "requests", "killed", "requests failed", "lost", "twice", "bullets twice", "over window"]
    row = (
        faulty["workers"],
        faulty["requests"],
        faulty["kills"],
        faulty["failed_requests"],
        faulty["lost"],
        faulty["duplicated"],
        faulty["bullets_twice"],
        faulty["over_window"],
    )
    return f"""The same app under faults: workers killed (`kill -9`) mid-request and restarted in their place, their
requests sent again; a summarizer failing a third of its calls with a 503; the store failing one operation in
fifty. The longest stall (a request's time beyond the median request's) was {faulty["longest_stall"]:.2f} s in
all, {faulty["longest_stall_after_fault"]:.2f} s in the three requests of a thread after a restart or a failed
request; a summary call takes {faulty["summary_call"]} s, the summary timeout is {FAULT_TIMEOUT:.0f} s. Of a
request's time, the longest spent in compaction-model calls of its own run (calls side by side counted once)
was {faulty["longest_compaction_wait"]:.2f} s ({faulty["longest_compaction_wait"] / faulty["summary_call"]:.2f} L);
the rest of a stall is the gate's own work, the storage and the checkpointer under faults, and a restarted
worker's first request.

{table(headers, [row])}
"""


# --- the same fleet under faults: workers killed (kill -9) and restarted, store outages, failing summarizers ------

#: The summary timeout of the faulty fleet: a worker that waited for a summary nobody publishes would stall this long.
FAULT_TIMEOUT = 10.0


class _CheckedModel(AppModel):
    """The app's agent, its tool calls given ids of their own (workers restart), each request's size recorded."""

    sizes: list = Field(default_factory=list)

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.sizes.append(self.request_tokens(messages, TokenCounter()))
        self.inputs.clear()
        reply = super()._reply(messages)
        calls = [{**call, "id": f"{call['id']}-{uuid.uuid4().hex[:8]}"} for call in reply.tool_calls]
        return reply.model_copy(update={"tool_calls": calls})


class _FlakyStore(BaseStore):
    """A ``PostgresStore`` whose every operation fails at ``rate`` (a database restarting under the fleet)."""

    def __init__(self, store: BaseStore, rate: float, rng: random.Random) -> None:
        self.store, self.rate, self.rng = store, rate, rng
        self.supports_ttl = store.supports_ttl

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.rng.random() < self.rate:
            raise ConnectionError("the database is restarting")
        return self.store.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)


class _TimedSummarizer(ScriptedModel):
    """The fleet's summarizer and memory model, timing each call a run waits for (a job's are made beside it)."""

    spans: list = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        in_run = bool(ensure_config().get("configurable", {}).get("thread_id"))  # a job runs outside the run
        began = time.perf_counter()
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            if in_run:
                self.spans.append((began, time.perf_counter()))

    def waited(self) -> float:
        """Return the seconds the run spent in compaction-model calls (calls side by side counted once); reset."""
        total, end = 0.0, float("-inf")
        for began, ended in sorted(self.spans):
            total += max(0.0, ended - max(began, end))
            end = max(end, ended)
        self.spans.clear()
        return total


def _summary_or_503(rate: float, rng: random.Random) -> Any:
    def answer(prompt: str) -> str:
        if rng.random() < rate:
            raise RuntimeError("Error code: 503 - the summarizer is unavailable")
        return scripted_summary(prompt)

    return answer


def serve_faulty(dsn: str, seed: int, fail_rate: float, outage_rate: float, inbox: Any, outbox: Any) -> None:
    """One worker process of the faulty fleet: run each ``(thread, n)`` request, reporting its time and sizes.

    ``outbox`` is this worker's own pipe to the dispatcher: a worker killed in
    the middle of an answer leaves a torn message (or, on a queue the workers
    shared, its lock taken) in its own pipe only, which the dispatcher drops.
    """
    from langchain.agents import create_agent
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    rng = random.Random(seed)
    summarizer = _TimedSummarizer(latency=SUMMARIZER_LATENCY, summary=_summary_or_503(fail_rate, rng))
    model = _CheckedModel()
    config = CompactionConfig(context_window=WINDOW, summary={"timeout": FAULT_TIMEOUT})
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        flaky = _FlakyStore(store, outage_rate, rng)
        middleware = CompactionMiddleware(model=summarizer, config=config, storage=StoreStorage(flaky))
        agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=saver, store=store)
        while (item := inbox.get()) is not None:
            thread, n, ticket = item
            began, error = time.perf_counter(), None
            try:
                agent.invoke(request(n), {"configurable": {"thread_id": thread, "user_id": thread}})
            except Exception as exc:  # noqa: BLE001 - a failed request is retried by the dispatcher, as a client would
                error = f"{type(exc).__name__}: {exc}"[:300]
            seconds, waited = time.perf_counter() - began, summarizer.waited()
            outbox.send((thread, ticket, error, seconds, max(model.sizes, default=0), waited))
            model.sizes.clear()


def run_faulty_workers(
    dsn: str,
    *,
    workers: int = 3,
    threads: int = 4,
    requests: int = 20,
    kills: int = 3,
    fail_rate: float = 0.3,
    outage_rate: float = 0.02,
    seed: int = 0,
    prefix: str = "faults",
) -> dict:
    """Serve the requests with ``workers`` processes, killing ``kills`` of them (``kill -9``) mid-request; return figures.

    A killed worker is restarted in its place and its request is sent again
    (a client's retry), as is a request that failed. The summarizer fails at
    ``fail_rate`` (a 503) and the store at ``outage_rate``. Figures: requests
    lost or twice in a thread, memory bullets twice, requests over the window,
    and the longest stall (a request's time beyond the median request's) of
    the three requests of a thread after a restart or a failed request.
    """
    context = multiprocessing.get_context("spawn")
    rng = random.Random(seed)
    slots: list[tuple[Any, Any, Any]] = []  # (process, inbox, the reading end of its answers' pipe)

    def start(slot: int | None = None) -> None:
        inbox = context.Queue()
        answers, outbox = context.Pipe(duplex=False)
        args = (dsn, rng.randrange(1 << 30), fail_rate, outage_rate, inbox, outbox)
        process = context.Process(target=serve_faulty, args=args)
        process.start()
        outbox.close()  # the worker's end
        if slot is None:
            slots.append((process, inbox, answers))
        else:
            slots[slot] = (process, inbox, answers)

    for _ in range(workers):
        start()
    names = [f"{prefix}-{t}" for t in range(threads)]
    flight: dict[str, tuple[int, int, int]] = {}  # thread -> (slot, request, ticket): one request per thread at a time
    done = dict.fromkeys(names, 0)
    faulted = dict.fromkeys(names, 0)  # requests left to watch for a stall after a fault
    durations, after_fault, errors, over = [], [], [], 0
    slowest: list[tuple[float, str]] = []  # (seconds, which request) of every request answered
    compaction_waits: list[float] = []  # seconds each request spent in compaction-model calls of its own run
    kill_at = sorted(rng.sample(range(threads * 2, threads * requests - threads), kills))

    tickets = itertools.count()

    def send(name: str, n: int) -> None:
        slot, ticket = rng.randrange(len(slots)), next(tickets)
        flight[name] = (slot, n, ticket)
        slots[slot][1].put((name, n, ticket))

    try:
        for name in names:
            send(name, 0)
        served = 0
        while flight:
            if kill_at and served >= kill_at[0]:
                kill_at.pop(0)
                slot = flight[rng.choice(sorted(flight))][0]
                slots[slot][0].kill()  # kill -9 in the middle of a request
                slots[slot][0].join()
                slots[slot][2].close()  # what it was answering is dropped with it
                start(slot)  # restarted in its place
                for other, (s, m, _) in list(flight.items()):  # its requests are sent again
                    if s == slot:
                        faulted[other] = 3
                        send(other, m)
            ready: list[Any] = multiprocessing.connection.wait([answers for _, _, answers in slots], timeout=300)
            if not ready:
                errors.append("no worker answered for 300 s")
                break
            try:
                name, ticket, error, seconds, largest, waited = ready[0].recv()
            except (EOFError, OSError):  # a worker died unasked: nothing restarts it
                errors.append("a worker died")
                break
            if name not in flight or flight[name][2] != ticket:
                continue  # the answer of a killed worker's request, already sent again
            n = flight[name][1]
            served += 1
            over += largest > WINDOW
            if error:
                errors.append(error)
                faulted[name] = 3
                send(name, n)
                continue
            durations.append(seconds)
            compaction_waits.append(waited)
            slowest.append((seconds, f"{name} request {n}" + (" (after a fault)" if faulted[name] else "")))
            if faulted[name]:
                faulted[name] -= 1
                after_fault.append(seconds)
            done[name] = n + 1
            del flight[name]
            if n + 1 < requests:
                send(name, n + 1)
    finally:
        for _, inbox, _ in slots:
            inbox.put(None)
        for process, _, answers in slots:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
            answers.close()
    return {
        "workers": workers,
        "threads": threads,
        "requests": threads * requests,
        "kills": kills,
        "failed_requests": len(errors),
        "errors": errors[:3],
        **_thread_problems(dsn, names, requests),
        "over_window": over,
        "longest_stall": _stall(durations, durations),
        "longest_stall_after_fault": _stall(after_fault, durations),
        "longest_compaction_wait": max(compaction_waits, default=0.0),
        "summary_call": SUMMARIZER_LATENCY,
        "slowest": [f"{which}: {seconds:.2f} s" for seconds, which in sorted(slowest, reverse=True)[:3]],
        "unfinished": [n for n in names if done[n] < requests],
    }


def _stall(watched: list[float], durations: list[float]) -> float:
    """Return the longest time one of the watched requests took beyond the median request (0 without one)."""
    if not watched or not durations:
        return 0.0
    return max(0.0, max(watched) - statistics.median(durations))


def _thread_problems(dsn: str, names: list[str], requests: int) -> dict:
    """Return the requests lost or held twice (state and transcript together) and the memory bullets twice."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    lost = twice = bullets = 0
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        storage, agent = StoreStorage(store), fleet_agent(saver, store, background=True)
        for name in names:
            held = agent.get_state({"configurable": {"thread_id": name}}).values.get("messages") or []
            ids: dict[str, set[str]] = {}
            for message in [*messages_from_dict(storage.read_transcript(name)), *held]:
                text = str(message.content)
                if isinstance(message, HumanMessage) and text.startswith("Request "):
                    ids.setdefault(text, set()).add(str(message.id))
            lost += sum(f"Request {n}: check module{n} and its documentation" not in ids for n in range(requests))
            twice += sum(len(found) > 1 for found in ids.values())
            bullets += len(duplicate_problems([], ledgers_of(storage, name)))
    return {"lost": lost, "duplicated": twice, "bullets_twice": bullets}
