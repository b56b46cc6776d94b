"""``python -m benchmarks.stress --examples 100000``: random conversations under random faults, invariants counted.

Each example draws a conversation (parallel, interleaved and mixed tool
rounds, reused tool-call ids, orphan results, unanswered calls, content
blocks, huge, empty and non-ASCII messages, invalid tool calls, artifacts
JSON cannot hold; user messages replaced by id after they were offloaded;
forks back to an earlier checkpoint, as time travel does), a budget,
hostile and colliding thread and user ids (ids equal to another id's storage
name, in this release or an earlier one) or no thread id at all, and faults (the summarizer or memory model
raising or answering empty, error-looking, unstructured or ``NO_REPLY``
text; storage failing before or after a write; a node's update lost after
its side effects, as a crash and resume would). One example in ten is a
huge parallel round over the window, or a codemod changing 1,000-3,000
files, at the default ``prompt_cache``: no view may be sent over the trigger
that layers 1-2 could bring under it, and every trail keeps to its budget.
One in ten compacts in the background. One in ten (``run_retry_example``)
sends runs again after a killed worker, a database outage or a crash while
the tools run, leaves calls unanswered by an approval the user answers with
the next request, edits stored messages by id while a background job runs,
and spreads the model calls over two workers: a conversation a provider
accepts as it is must give requests it accepts too (no orphan result, no
unanswered call), none over the window, and each request's memory written
once however the memory model words it. It is replayed model call by
model call through the real compaction nodes (gate, flush and offload on the
same snapshot, then summarize), with the stock ``add_messages`` and
``merge_compaction`` reducers, and every view and every run is checked.

The output is the number of violations per invariant (target: 0) and, with
``--show``, the first few problems. ``--trajectories DIR`` also replays
every ``*.jsonl`` trajectory there with compaction forced every few calls.
"""

from __future__ import annotations

import argparse
import contextvars
import datetime as dt
import logging
import multiprocessing
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph.message import add_messages

from benchmarks.runner import trajectory_files
from langgraph_compaction import CompactionConfig, CompactionNodes, FileStorage, StoreStorage, merge_compaction
from langgraph_compaction.core.conversation import content_text, is_summary
from langgraph_compaction.core.fidelity import TRAIL_HEADER
from langgraph_compaction.core.plan import plan_compaction
from langgraph_compaction.core.sections import section
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.engine.jobs import Job, Runner, use_runner
from langgraph_compaction.invariants import (
    INVARIANTS,
    ThreadLedger,
    bounded_problems,
    broken_tool_ids,
    escaped_paths,
    files_under,
    ledgers_of,
)
from langgraph_compaction.storage import message_records, record_id
from langgraph_compaction.testing import ScriptedModel, scripted_memories

HOSTILE_IDS = [
    "t",
    "../../etc",
    "/abs/path",
    ".",
    "a\x00b",
    "x" * 300,
    "用户🙂",
    "a/b",
    "a.b",
    "langgraph",
    # built to collide: an id, a slug-and-hash spelling of it, its storage name, case, the default
    "user:42",
    "user-42-ea3fd43be1e57d62",
    "~user+3a42",
    "Alice",
    "alice",
    "default",
    "",
]
MODEL_FAULTS: list[Any] = [None, RuntimeError("provider down"), "", "Error: rate limited", "Sure, done.", "NO_REPLY"]
_SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None  # memory-backed: fsync costs nothing there
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII="


# --- conversations ---------------------------------------------------------------------------


_CORPUS = " ".join(
    [
        "fix the parser",
        "修复登录模块",
        "🙂 done",
        "مرحبا بالعالم",
        "NUL\x00byte",
        "def f(x): return x",
        '{"k": [1, 2]}',
        "ok",
    ]
    * 4000
)


def _text(rng: random.Random, size: int) -> str:
    start = rng.randrange(len(_CORPUS) - size) if size else 0
    return _CORPUS[start : start + size]


def _artifact(rng: random.Random) -> Any:
    """Return a tool artifact that plain JSON cannot hold (or would change), or None."""
    if rng.random() >= 0.1:
        return None
    return {
        "raw": bytes([rng.randrange(256) for _ in range(8)]),
        "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        rng.randint(0, 9): (1, (2, "x")),
        "tags": {"a", "b"},
        "frozen": frozenset({1}),
        "took": dt.timedelta(seconds=3),
    }


def random_conversation(rng: random.Random, prefix: str = "m", *, clean: bool = False) -> list[BaseMessage]:
    """Return a conversation with the shapes real agents produce and logs contain (unique message ids).

    ``clean`` draws the same shapes but one a provider accepts as it is: no
    reused call id, no call left unanswered, no note between results, no
    orphan result (the draws are made all the same, so a seed gives the same
    conversation otherwise).
    """
    n = [0]

    def mid() -> str:
        n[0] += 1
        return f"{prefix}{n[0]}"

    messages: list[BaseMessage] = []
    if rng.random() < 0.7:
        messages.append(SystemMessage(content="You are a coding agent.", id=mid()))
    call_ids = [0]
    reminders = rng.random() < 0.2  # an app that adds a system reminder before user turns
    for turn in range(rng.randint(1, 8)):
        if reminders and turn and rng.random() < 0.7:
            messages.append(
                SystemMessage(content=f"Reminder: the time is 10:{turn:02d}; stay in the repository.", id=mid())
            )
        content: Any = f"request {turn}: " + _text(rng, rng.choice([0, 20, 400, 4000]))
        if rng.random() < 0.1:
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG * 50}"}},
            ]
        messages.append(HumanMessage(content=content, id=mid()))
        for _ in range(rng.choice([0, 0, 1, 2, 3, 4])):
            width = rng.choice([1, 1, 2, 3, 8, 100 if rng.random() < 0.05 else 4])
            calls = []
            for _ in range(width):
                call_ids[0] += 1
                reused = rng.random() < 0.1 and not clean
                cid = "call_1" if reused else f"c{call_ids[0]}"  # reused ids happen in real logs
                args: Any = {"cmd": _text(rng, rng.choice([5, 300, 5000]))}
                if rng.random() < 0.2:
                    args = {"n": rng.randint(0, 9), "nested": {"a": [1, {"b": None}]}, "flag": True}
                calls.append({"name": rng.choice(["bash", "read_file", "write_file"]), "args": args, "id": cid})
            ai_content: Any = _text(rng, rng.choice([0, 50]))
            if rng.random() < 0.1:
                ai_content = [
                    {"type": "thinking", "thinking": "plan", "signature": "s"},
                    {"type": "text", "text": "calling"},
                ]
            invalid = (
                [{"name": "bash", "args": '{"cmd": "ls', "id": "bad", "error": "bad json", "type": "invalid_tool_call"}]
                if rng.random() < 0.05
                else []
            )
            messages.append(AIMessage(content=ai_content, tool_calls=calls, invalid_tool_calls=invalid, id=mid()))
            results = [
                ToolMessage(
                    content=_text(rng, rng.choice([0, 100, 3000, 30000 if rng.random() < 0.1 else 500])),
                    tool_call_id=c["id"],
                    id=mid(),
                    artifact=_artifact(rng),
                )
                for c in calls
            ]
            if rng.random() < 0.1 and results and not clean:
                results.pop(rng.randrange(len(results)))  # a call never answered
            if len(results) > 1 and rng.random() < 0.15 and not clean:
                results.insert(rng.randrange(1, len(results)), HumanMessage(content="(queued note)", id=mid()))
            messages.extend(results)
        if rng.random() < 0.05 and not clean:
            messages.append(ToolMessage(content="stray result", tool_call_id=f"ghost{turn}", id=mid()))  # an orphan
        if rng.random() < 0.7:
            messages.append(AIMessage(content="answer " + _text(rng, rng.choice([0, 30, 800])), id=mid()))
    if not isinstance(messages[-1], AIMessage):
        messages.append(AIMessage(content="final answer", id=mid()))
    return messages


def random_config(rng: random.Random) -> CompactionConfig:
    """Return a budget from tiny (compaction on most calls) to roomy, fixed or derived from a small window."""
    if rng.random() < 0.2:  # the design's dynamic rules, scaled down for a small window
        window = rng.choice([CompactionConfig().smallest_window(), 16_000, 24_000, 40_000])
        return CompactionConfig(
            context_window=window, trigger_messages=rng.choice([0, 8, 20, 50]), summary={"timeout": None}
        )
    trigger = rng.choice([1_500, 3_000, 6_000, 12_000, 40_000])  # 1,500: compaction on nearly every call
    return CompactionConfig(
        context_window=rng.choice([None, trigger * 2, trigger + 20_000]),
        trigger_tokens=trigger,
        keep_tokens=rng.choice([0, trigger // 8, trigger // 3]),
        keep_messages=rng.randint(1, 12),
        trigger_messages=rng.choice([0, 8, 20, 50]),
        summary={"timeout": None},
    )


# --- faults ------------------------------------------------------------------------------------


class FlakyStorage:
    """A storage whose calls fail at random: before doing anything, or after the write (the caller sees an error)."""

    def __init__(self, inner: Any, rng: random.Random, rate: float) -> None:
        self.inner, self.rng, self.rate = inner, rng, rate

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not callable(method) or name.endswith("location"):
            return method

        def call(*args: Any) -> Any:
            if self.rng.random() < self.rate:
                raise OSError(28, "No space left on device (injected)")
            result = method(*args)
            if self.rng.random() < self.rate:
                raise ConnectionError("connection reset after the write (injected)")
            return result

        return call


# --- one thread, model call by model call --------------------------------------------------------


class Simulation:
    """The compaction nodes driven as the compiled graph would run them, with crash-and-resume injection."""

    def __init__(
        self, nodes: CompactionNodes, config: dict, rng: random.Random, crash_rate: float, storage: Any = None
    ) -> None:
        self.nodes, self.config, self.rng, self.crash_rate = nodes, config, rng, crash_rate
        self.storage = storage  # read (never failing) to choose messages already offloaded
        self.messages: list[BaseMessage] = []
        self.compaction: dict = {}
        self.events: list[dict] = []
        self.ledger = ThreadLedger()
        self.checkpoints: list[tuple] = []

    def transcript_key(self) -> str:
        """Return the thread's transcript key: its thread id, or the run's own key when it has none."""
        thread = self.config["configurable"].get("thread_id")
        return str(thread) if thread is not None else str(self.compaction.get("run_thread") or "")

    def replace(self, kinds: tuple[type, ...] = (HumanMessage,)) -> None:
        """Replace by id (``update_state``) a message of ``kinds`` whose current version the transcript already holds.

        A user message's text is edited; a tool result's output is.
        """
        latest = {record_id(r): r for r in self.storage.read_transcript(self.transcript_key())}
        stored = [
            m
            for m in self.messages
            if isinstance(m, kinds) and not is_summary(m) and latest.get(m.id) == message_records([m])[0]
        ]
        if stored:
            old = self.rng.choice(stored)
            new = old.model_copy(update={"content": f"(edited) {content_text(old.content)}"})
            self.messages = add_messages(self.messages, [new])
            self.ledger.replaced([new])

    def fork(self) -> None:
        """Go back to an earlier checkpoint and carry on from there (time travel), as a second branch."""
        if self.checkpoints:
            messages, compaction, history, records, versions = self.rng.choice(self.checkpoints)
            self.messages, self.compaction = list(messages), dict(compaction)
            # the abandoned branch stays in the checkpointer's history, not this thread's: only the fork is checked
            self.ledger.history, self.ledger.records, self.ledger.versions = (
                list(history),
                dict(records),
                list(versions),
            )

    def _apply(self, updates: Sequence[dict | None]) -> None:
        for update in updates:
            if not update:
                continue
            if "messages" in update:
                self.messages = add_messages(self.messages, update["messages"])
            if "compaction" in update:
                self.events += list((update["compaction"] or {}).get("events") or [])
                self.compaction = merge_compaction(self.compaction, update["compaction"])

    def _node(self, node: Callable, state: dict) -> dict | None:
        if self.rng.random() < self.crash_rate:
            node(state, self.config)  # its side effects happen, its update is lost: a crash, then resume re-runs it
        return node(state, self.config)

    def snapshot(self) -> tuple:
        """Return the thread as a checkpoint holds it (see ``restore``)."""
        ledger = self.ledger
        return (
            list(self.messages),
            dict(self.compaction),
            list(ledger.history),
            dict(ledger.records),
            list(ledger.versions),
        )

    def restore(self, snapshot: tuple) -> None:
        """Put the thread back as ``snapshot`` held it: what was not checkpointed since never happened to the state."""
        messages, compaction, history, records, versions = snapshot
        self.messages, self.compaction = list(messages), dict(compaction)
        self.ledger.history, self.ledger.records, self.ledger.versions = list(history), dict(records), list(versions)

    def model_call(self, pending: Sequence[BaseMessage], send: bool = True) -> list[BaseMessage]:
        """Add the pending messages, run the compaction nodes, and return the view the model receives.

        ``send=False``: the run dies before the model call (the view is neither sent nor checked).
        """
        self.messages = add_messages(self.messages, list(pending))
        self.ledger.added(pending)
        state = {"messages": self.messages, "compaction": self.compaction}
        self._apply([self._node(self.nodes.gate, state)])
        state = {"messages": self.messages, "compaction": self.compaction}
        route = self.nodes.route(state)
        if route != self.nodes.before:
            branches = {"compaction_flush": self.nodes.flush, "compaction_offload": self.nodes.offload}
            self._apply([self._node(branches[name], state) for name in route if name in branches])
            state = {"messages": self.messages, "compaction": self.compaction}
            self._apply([self._node(self.nodes.summarize, state)])
        view = list(self.messages)
        if not send:
            return view
        self.ledger.check_view(view)
        snapshot = (list(self.messages), dict(self.compaction), list(self.ledger.history), dict(self.ledger.records))
        self.checkpoints = [*self.checkpoints[-7:], (*snapshot, list(self.ledger.versions))]
        return view

    def reply(self, message: BaseMessage) -> None:
        self.messages = add_messages(self.messages, [message])
        self.ledger.added([message])


def replay(sim: Simulation, conversation: Sequence[BaseMessage]) -> None:
    """Feed a conversation model call by model call: each assistant message answers the view before it."""
    pending: list[BaseMessage] = []
    for message in conversation:
        if isinstance(message, AIMessage):
            if sim.storage is not None and sim.rng.random() < 0.05:
                sim.replace()
            if sim.rng.random() < 0.03:
                sim.fork()
            sim.model_call(pending)
            sim.reply(message)
            pending = []
        else:
            pending.append(message)


def run_example(rng: random.Random, *, faults: bool = True, storage: str = "file") -> dict[str, list[str]]:
    """Run one random example; return the problems found per invariant."""
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(_memory_store())
        config = random_config(rng)
        summarizer = ScriptedModel(summary=rng.choice(MODEL_FAULTS) if faults else None, summary_words=60)
        flusher = ScriptedModel(memory=rng.choice(MODEL_FAULTS) if faults else None)
        rate = rng.choice([0.0, 0.05, 0.3]) if faults else 0.0
        thread, user = rng.choice(HOSTILE_IDS), rng.choice(HOSTILE_IDS)
        where = (
            {"thread_id": thread, "user_id": user} if rng.random() < 0.85 else {"user_id": user}
        )  # or a stateless run
        nodes = CompactionNodes(
            before="agent",
            model=summarizer,
            flush_model=flusher,
            config=config,
            storage=FlakyStorage(real, rng, rate) if rate else real,
        )
        sim = Simulation(nodes, {"configurable": where}, rng, rate, real)
        replay(sim, random_conversation(rng))
        key = sim.transcript_key()
        transcript = real.read_transcript(key)
        sim.ledger.check_store(sim.messages, transcript, ledgers_of(real, user))
        problems = sim.ledger.problems
        problems["bounded"] += bounded_problems(sim.events, nodes.budget.trigger_tokens)
        # only this run wrote: any other id that reads a transcript reads this run's
        problems["contained"] += [
            f"thread {other!r} reads the transcript of {key!r}"
            for other in HOSTILE_IDS
            if other != key and real.read_transcript(other)
        ]
        if storage == "file":
            problems["contained"] += escaped_paths(files_under(tmp), root)
        return problems


# --- bounded requests: huge parallel rounds at the default prompt_cache, 1,000+ changed files ---------------------


def huge_round(rng: random.Random, window: int) -> list[BaseMessage]:
    """Return one request answered by one parallel round of 2-12 results that together are over the window."""
    width = rng.randint(2, 12)
    chars = int(window * rng.uniform(1.05, 1.6) * 3.2 / width)  # about 3.2 characters a token in these logs
    name = rng.choice(["bash", "write_file", "read_file", "read_log"])
    calls = [{"name": name, "args": {"cmd": f"cat log{i}"}, "id": f"wide{i}"} for i in range(width)]
    line = "2026-01-01 12:00:00 worker step ok value=1234567\n"
    results = [
        ToolMessage(content=(line * (chars // len(line) + 1))[:chars], tool_call_id=c["id"], name=name, id=f"wr{i}")
        for i, c in enumerate(calls)
    ]
    return [
        HumanMessage(content="Read the logs and say what failed.", id="wh"),
        AIMessage(content="", tool_calls=calls, id="wa"),
        *results,
        AIMessage(content="Every worker passed.", id="wz"),
    ]


def codemod(rng: random.Random) -> list[BaseMessage]:
    """Return requests that change 1,000-3,000 files over 1-60 folders, ``edit_file`` or ``git rm``, 50-400 a time."""
    total, folders, batch = rng.randint(1_000, 3_000), rng.randint(1, 60), rng.randint(50, 400)
    paths = [f"pkg{i % folders}/sub{i % 3}/file_{i}.py" for i in range(total)]
    messages: list[BaseMessage] = []
    for start in range(0, total, batch):
        chunk = paths[start : start + batch]
        messages.append(HumanMessage(content=f"Apply the codemod to batch {start // batch}.", id=f"ch{start}"))
        if rng.random() < 0.7:
            calls = [
                {"name": "edit_file", "args": {"path": p, "old": "log", "new": "logger"}, "id": f"e{start}-{k}"}
                for k, p in enumerate(chunk)
            ]
        else:
            calls = [{"name": "bash", "args": {"command": "git rm -q " + " ".join(chunk)}, "id": f"rm{start}"}]
        messages.append(AIMessage(content="", tool_calls=calls, id=f"ca{start}"))
        messages += [ToolMessage(content="ok", tool_call_id=c["id"], id=f"cr{c['id']}") for c in calls]
        messages.append(AIMessage(content=f"Batch {start // batch} done.", id=f"cz{start}"))
    return messages


def run_bound_example(rng: random.Random, *, faults: bool = True, storage: str = "file") -> dict[str, list[str]]:
    """Run one example of a huge parallel round or a codemod at the defaults (``prompt_cache=True``).

    Besides the invariants every example checks: no model call is sent more
    than the trigger when layers 1-2 could bring it under (a round of results
    each prunable to a few hundred tokens), and every summary's trail keeps
    to ``fidelity.trail_tokens``.
    """
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(_memory_store())
        wide = rng.random() < 0.5
        window = rng.choice([32_000, 64_000, 128_000, 200_000])
        config = CompactionConfig(
            context_window=window if wide else rng.choice([32_000, 128_000]), summary={"timeout": None}
        )
        summarizer = ScriptedModel(summary=rng.choice(MODEL_FAULTS) if faults else None, summary_words=60)
        nodes = CompactionNodes(before="agent", model=summarizer, config=config, storage=real)
        sim = Simulation(nodes, {"configurable": {"thread_id": "bound", "user_id": "u"}}, rng, 0.0, real)
        conversation = huge_round(rng, window) if wide else codemod(rng)
        views: list[list[BaseMessage]] = []
        sent = sim.model_call

        def model_call(pending: Sequence[BaseMessage], send: bool = True) -> list[BaseMessage]:
            views.append(sent(pending, send))
            return views[-1]

        sim.model_call = model_call  # type: ignore[method-assign]
        replay(sim, conversation)
        problems = sim.ledger.problems
        sim.ledger.check_store(sim.messages, real.read_transcript("bound"), ledgers_of(real, "u"))
        problems["bounded"] += bounded_problems(sim.events, nodes.budget.trigger_tokens)
        if wide:
            sizes = [nodes.counter.total(v) for v in views]
            problems["bounded"] += [
                f"a view of {n:,} tokens was sent, over the trigger {nodes.budget.trigger_tokens:,}"
                for n in sizes
                if n >= nodes.budget.trigger_tokens
            ]
        budget = config.fidelity.trail_tokens
        for m in sim.messages:
            if is_summary(m):
                # the trail's own lines: what the summarizer wrote above it is the summary's, bounded by its target
                body = section(content_text(m.content), "ARTIFACTS")
                lines = body.split(TRAIL_HEADER, 1)[1].splitlines()[1:] if TRAIL_HEADER in body else []
                size = sum(estimate_text_tokens(line[2:]) + 2 for line in lines if line.startswith("- "))
                if size > budget:
                    problems["bounded"].append(f"a summary's trail holds {size:,} tokens, over trail_tokens {budget:,}")
        return problems


# --- background compaction: jobs ready before or after the trigger, lost, forked from, edited under --------------


class DrawnRunner(Runner):
    """Background jobs for the stress command: each runs at once, and is ready a drawn number of model calls later.

    0 is ready at the next call (before the trigger, usually); 50 is never in time (the gate waits for it, or
    compacts without it once the request is too large to wait).
    """

    def __init__(self, rng: random.Random, calls: Callable[[], int]) -> None:
        self.rng, self.calls, self.ready_at = rng, calls, {}

    def start_sync(self, job: Job, work: Callable, awork: Callable) -> None:
        future: Future = Future()
        try:
            future.set_result(contextvars.Context().run(work))
        except Exception as exc:  # noqa: BLE001 - the job's own failure: the gate reads it from the future
            future.set_exception(exc)
        job.future = future
        self.ready_at[id(job)] = self.calls() + self.rng.choice([0, 1, 2, 4, 50])

    def is_done(self, job: Job) -> bool:
        return job.future is not None and self.calls() >= self.ready_at[id(job)]

    def wait_sync(self, job: Job, timeout: float | None) -> bool:
        self.ready_at[id(job)] = self.calls()  # waiting lets it finish
        return True


def run_background_example(rng: random.Random, *, faults: bool = True, storage: str = "file") -> dict[str, list[str]]:
    """Run one random example with ``background=True``; return the problems found per invariant.

    Before each model call it may draw: the process ending (every job in
    progress lost, as a restart loses them), a fork back to an earlier
    checkpoint while a summary is pending, or ``update_state`` on an
    offloaded user message (one a prepared summary covers, as a rule).
    """
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(_memory_store())
        config = random_config(rng)
        # room past the trigger to wait for a job in progress, as a known window gives
        window = config.context_window or (config.trigger_tokens * 3 if rng.random() < 0.8 else None)
        config = config.model_copy(
            update={"context_window": window, "background": {"enabled": True, "start": rng.choice([0.5, 0.8, 0.9])}}
        )
        summarizer = ScriptedModel(summary=rng.choice(MODEL_FAULTS) if faults else None, summary_words=60)
        flusher = ScriptedModel(memory=rng.choice(MODEL_FAULTS) if faults else None)
        rate = rng.choice([0.0, 0.05, 0.3]) if faults else 0.0
        thread, user = rng.choice(HOSTILE_IDS), rng.choice(HOSTILE_IDS)
        nodes = CompactionNodes(
            before="agent",
            model=summarizer,
            flush_model=flusher,
            config=config,
            storage=FlakyStorage(real, rng, rate) if rate else real,
        )
        sim = Simulation(nodes, {"configurable": {"thread_id": thread, "user_id": user}}, rng, rate, real)
        calls = [0]
        with use_runner(DrawnRunner(rng, lambda: calls[0])):
            pending: list[BaseMessage] = []
            for message in random_conversation(rng):
                if not isinstance(message, AIMessage):
                    pending.append(message)
                    continue
                draw = rng.random()
                if draw < 0.05:
                    nodes.jobs.forget()  # the process ends: every job in progress is lost
                elif draw < 0.10:
                    sim.fork()
                elif draw < 0.15:
                    sim.replace()
                sim.model_call(pending)
                calls[0] += 1
                sim.reply(message)
                pending = []
        nodes.jobs.forget()
        sim.ledger.check_store(sim.messages, real.read_transcript(sim.transcript_key()), ledgers_of(real, user))
        problems = sim.ledger.problems
        problems["bounded"] += bounded_problems(sim.events, nodes.budget.trigger_tokens)
        if storage == "file":
            problems["contained"] += escaped_paths(files_under(tmp), root)
        return problems


# --- retried runs, unanswered calls, update_state under a background job, two workers ------------------------

#: What can happen at a model call of a run's first attempt. ``kill``: the worker process dies after the compaction
#: steps' side effects, nothing since the last checkpoint is kept, and the client sends the request again to another
#: worker; ``outage``: the same, the database having dropped the worker's connection (the worker lives on);
#: ``crash_in_tools``: the run dies while the tools run (the calls are checkpointed, their results are not) and the
#: request is sent again; ``approval_rejected``: the calls wait for an approval the user answers with the next request.
RETRY_FAULTS = (None, "kill", "outage", "crash_in_tools", "approval_rejected")
_FAULT_WEIGHTS = (70, 8, 8, 8, 6)


def draw_plan(rng: random.Random, calls: int) -> dict:
    """Return what happens at each model call of a run: its worker (of two), its fault, an ``update_state`` before it.

    ``background`` compacts next to the agent; ``two_workers`` sends each model call to a random one of two worker
    processes (else always the first).
    """
    two = rng.random() < 0.5
    return {
        "background": rng.random() < 0.5,
        "two_workers": two,
        "calls": [
            {
                "worker": rng.randrange(2) if two else 0,
                "fault": rng.choices(RETRY_FAULTS, _FAULT_WEIGHTS)[0],
                "edit": rng.random() < 0.05,
            }
            for _ in range(max(1, calls))
        ],
    }


def turns_of(conversation: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Return the conversation cut into runs, each from a user request (leading system messages go with the first)."""
    turns: list[list[BaseMessage]] = []
    for message in conversation:
        if isinstance(message, HumanMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def retried(turn: Sequence[BaseMessage], attempt: int) -> list[BaseMessage]:
    """Return a run sent again: the same request and work, every message and tool call under a new id.

    A client's retry sends the request without the id the state gave it, and the tools run again: their calls and
    results get new ids. Leading system messages are the thread's, not the run's: they are not sent again.
    """
    out = []
    for m in turn:
        if isinstance(m, SystemMessage):
            continue
        update: dict[str, Any] = {"id": f"{m.id}~retry{attempt}"}
        if isinstance(m, AIMessage) and m.tool_calls:
            update["tool_calls"] = [{**c, "id": f"{c['id']}~retry{attempt}"} for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            update["tool_call_id"] = f"{m.tool_call_id}~retry{attempt}"
        out.append(m.model_copy(update=update))
    return out


def remembered_twice(ledgers: dict[str, str]) -> list[str]:
    """Return the user requests that more than one ledger bullet remembers (each request's memory is written once).

    A request edited by id (``update_state``) is new content: its edited version may be remembered once more.
    """
    import re
    from collections import Counter

    from langgraph_compaction.memory.ledger import parse_bullets

    bullets = [b for text in ledgers.values() for b in parse_bullets(text)]
    counts = Counter(r for b in bullets for r in set(re.findall(r"(?:\(edited\) )?request \d+:", b)))
    return [f"{r[:-1]} is remembered in {k} ledger bullets" for r, k in sorted(counts.items()) if k > 1]


def smallest_request(view: Sequence[BaseMessage], nodes: CompactionNodes) -> int:
    """Return the fewest tokens layers 1-2 can bring a request to: over the whole history, excluded tools too."""
    counts = nodes.counter.counts(list(view))
    return plan_compaction(
        view, counts, nodes.budget, nodes.config, nodes.counter.message, overflow=True
    ).tokens_after_layers


def request_problems(view: Sequence[BaseMessage], window: int | None, nodes: CompactionNodes) -> dict[str, list[str]]:
    """Return what a provider would refuse in a request: an orphan result, an unanswered call, over the window.

    A request over the window counts only when layers 1-2 could have brought it under (guarantee 3): the model
    refuses any other, and the fronts' overflow recovery compacts it in overflow mode and retries, or says why it
    cannot (``ContextTooLongError``).
    """
    problems: dict[str, list[str]] = {"valid_history": [], "bounded": []}
    problems["valid_history"] += [
        f"a request carries {kind} tool id {tid!r}" for kind, tid in sorted(broken_tool_ids(view))
    ]
    size = nodes.counter.total(list(view))
    if window and size > window and smallest_request(view, nodes) <= window:
        problems["bounded"].append(f"a request of {size:,} tokens was sent, over the {window:,}-token window")
    return problems


def run_retry_example(
    rng: random.Random, *, faults: bool = True, storage: str = "file", plan: dict | None = None
) -> dict[str, list[str]]:
    """Run one conversation through retried runs, unanswered calls and two workers; return the problems per invariant.

    Each model call follows ``plan`` (drawn from ``rng`` when None, see ``draw_plan``): the worker it goes to, a
    fault that makes the client send its run again (a killed worker, a database outage, a crash while the tools
    run) or an approval the user answers with the next request, and ``update_state`` on a stored message before it
    (with a background job, as a rule, in progress). The conversation is one a provider accepts, so every request
    the model receives must be too: no orphan result, no unanswered call (invariant 1), and no request over the
    window (3). Nothing is lost (2); each request's memory is written once, however the memory model words it (4).
    ``faults`` adds no model or storage fault here: the retries are the faults.
    """
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(_memory_store())
        config = random_config(rng)
        window = config.context_window or config.trigger_tokens * 3
        conversation = random_conversation(rng, clean=True)
        plan = plan or draw_plan(rng, sum(isinstance(m, AIMessage) for m in conversation))
        config = config.model_copy(update={"background": plan["background"], "context_window": window})
        asked = [0]

        def memory(prompt: str) -> str:
            asked[0] += 1  # any LLM words each answer its own way: the ledger's bullet dedupe cannot see a repeat
            return scripted_memories(prompt).replace("- The user asked:", f"- In call {asked[0]}, the user asked:")

        def worker() -> CompactionNodes:
            summarizer = ScriptedModel(summary_words=60, memory=memory)
            return CompactionNodes(before="agent", model=summarizer, config=config, storage=real)

        workers = [worker(), worker()]
        sim = Simulation(workers[0], {"configurable": {"thread_id": "retried", "user_id": "u"}}, rng, 0.0, real)
        problems = sim.ledger.problems
        calls = [0]
        serving = [0]

        def play(turn: Sequence[BaseMessage], first: bool) -> str:
            """Play one attempt of a run; return "done", "retry" (the client sends it again) or "rejected"."""
            pending: list[BaseMessage] = []
            for message in turn:
                if not isinstance(message, AIMessage):
                    pending.append(message)
                    continue
                step = plan["calls"][calls[0] % len(plan["calls"])]
                calls[0] += 1
                if step["worker"] != serving[0]:  # each worker's jobs in progress are its own
                    serving[0] = step["worker"]
                    sim.nodes = workers[serving[0]]
                if step["edit"] and plan["background"]:
                    sim.replace((HumanMessage, ToolMessage))
                fault = step["fault"] if first else None
                if fault in ("kill", "outage"):
                    before = sim.snapshot()
                    sim.model_call(pending, send=False)  # its side effects happen; nothing reaches the checkpoint
                    sim.restore(before)
                    if fault == "kill":  # its jobs in progress die with it; another process serves the retry
                        sim.nodes.jobs.forget()
                        workers[serving[0]] = worker()
                        sim.nodes = workers[serving[0]]
                    return "retry"
                view = sim.model_call(pending)
                for name, found in request_problems(view, window, sim.nodes).items():
                    problems[name] += found
                sim.reply(message)
                pending = []
                if message.tool_calls and fault == "crash_in_tools":
                    return "retry"
                if message.tool_calls and fault == "approval_rejected":
                    return "rejected"
            for result in pending:  # results no model call read yet: the tools step checkpointed them
                sim.reply(result)
            return "done"

        with use_runner(DrawnRunner(rng, lambda: calls[0])):
            for turn in turns_of(conversation):
                if play(turn, first=True) == "retry":
                    play(retried(turn, 1), first=False)
        for each in workers:
            each.jobs.forget()
        sim.ledger.check_store(sim.messages, real.read_transcript("retried"), ledgers_of(real, "u"))
        problems["exactly_once"] += remembered_twice(ledgers_of(real, "u"))
        problems["bounded"] += bounded_problems(sim.events, config.resolve().trigger_tokens)
        if storage == "file":
            problems["contained"] += escaped_paths(files_under(tmp), root)
        return problems


def pick_example(seed: int) -> Callable[..., dict[str, list[str]]]:
    """Return the example a seed runs: one in ten is a huge parallel round or a codemod (``run_bound_example``),
    one in ten compacts in the background (``run_background_example``), one in ten is retried, left with
    unanswered calls and served by two workers (``run_retry_example``)."""
    special = {9: run_bound_example, 4: run_background_example, 7: run_retry_example}
    return special.get(seed % 10, run_example)


def _memory_store() -> Any:
    from langgraph.store.memory import InMemoryStore

    return InMemoryStore()


def replay_trajectory(path: Path, every: int = 6) -> Simulation:
    """Return the simulation of a recorded trajectory replayed with compaction forced about every ``every`` calls.

    Its ``ledger.problems`` hold what broke, by invariant; ``events`` every compaction event.
    """
    from langgraph_compaction.trajectories import load_trajectory

    conversation = load_trajectory(path)
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
        config = CompactionConfig(  # blocking: a compaction at each forced point (the other examples run background)
            context_window=60_000, trigger_tokens=6_000, keep_tokens=1_500, trigger_messages=every * 2, background=False
        )
        nodes = CompactionNodes(before="agent", model=ScriptedModel(), config=config, storage=Path(tmp) / "store")
        sim = Simulation(nodes, {"configurable": {"thread_id": path.stem}}, random.Random(0), 0.0)
        replay(sim, conversation)
        sim.ledger.check_store(
            sim.messages, nodes.storage.read_transcript(path.stem), ledgers_of(nodes.storage, "default")
        )
        sim.ledger.problems["bounded"] += bounded_problems(sim.events, nodes.budget.trigger_tokens)
        sim.ledger.problems["contained"] += escaped_paths(files_under(tmp), Path(tmp) / "store")
        return sim


# --- the command -------------------------------------------------------------------------------


def _batch(args: tuple[int, int, bool, str]) -> tuple[dict[str, int], list[str]]:
    start, count, faults, storage = args
    totals = {name: 0 for name in INVARIANTS}
    samples: list[str] = []
    for seed in range(start, start + count):
        try:
            problems = pick_example(seed)(random.Random(seed), faults=faults, storage=storage)
        except Exception as exc:  # noqa: BLE001 - a crash of the run is a broken promise too
            problems = {"valid_history": [f"the run raised {type(exc).__name__}: {exc}"]}
        for name, found in problems.items():
            totals[name] += len(found)
            samples += [f"seed {seed}: {name}: {p}" for p in found[:2]]
    return totals, samples[:20]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000, help="random examples to run (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first example")
    parser.add_argument(
        "--workers", type=int, default=multiprocessing.cpu_count(), help="processes (default: all CPUs)"
    )
    parser.add_argument(
        "--storage", choices=["file", "store"], default="file", help="FileStorage or a LangGraph InMemoryStore"
    )
    parser.add_argument("--no-faults", action="store_true", help="no injected model, storage or crash faults")
    parser.add_argument("--trajectories", type=Path, help="also replay every *.jsonl trajectory in this folder")
    parser.add_argument("--show", type=int, default=5, help="print this many sample problems")
    args = parser.parse_args(argv)
    try:  # checked before the examples run: a mistyped folder must not end in "0 violations"
        trajectories = trajectory_files(args.trajectories, quick=False) if args.trajectories else []
    except ValueError as exc:
        parser.error(str(exc))
    logging.getLogger("langgraph_compaction").setLevel(logging.ERROR)  # injected faults would flood the log

    began = time.perf_counter()
    size = max(1, min(500, args.examples // max(1, args.workers * 4)))
    jobs = [
        (s, min(size, args.seed + args.examples - s), not args.no_faults, args.storage)
        for s in range(args.seed, args.seed + args.examples, size)
    ]
    totals = {name: 0 for name in INVARIANTS}
    samples: list[str] = []
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        done = 0
        for counts, found in pool.imap_unordered(_batch, jobs):
            for name, n in counts.items():
                totals[name] += n
            samples += found
            done += size
            print(
                f"{min(done, args.examples)}/{args.examples} examples, violations so far: {sum(totals.values())}",
                file=sys.stderr,
                flush=True,
            )
    for path in trajectories:
        for name, found in replay_trajectory(path).ledger.problems.items():
            totals[name] += len(found)
            samples += [f"{path.stem}: {name}: {p}" for p in found[:2]]

    print(
        f"{args.examples} random examples"
        + (f" + {len(trajectories)} trajectories" if trajectories else "")
        + f" ({'with' if not args.no_faults else 'without'} faults, {args.storage} storage)"
        + f" in {time.perf_counter() - began:.0f} s"
    )
    print(f"{'invariant':<16}violations")
    for name in INVARIANTS:
        print(f"{name:<16}{totals[name]}")
    for line in samples[: args.show]:
        print("  " + line.replace("\n", " ")[:300])
    return 1 if any(totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
