"""One thread replayed model call by model call through the real compaction nodes, every view and run checked.

``Simulation`` drives the nodes as the compiled graph would run them (gate,
flush and offload on the same snapshot, then summarize), with the stock
``add_messages`` and ``merge_compaction`` reducers, and may lose a node's
update after its side effects, as a crash and resume would. Its ``ledger``
(``invariants.ThreadLedger``) records what broke, per invariant.

``run_example``, ``run_bound_example`` and ``run_background_example`` each
draw one random conversation, budget, ids and faults (``testing.conversations``)
and return the problems found per invariant (target: none);
``replay_trajectory`` replays a recorded trajectory with compaction forced
every few calls. ``python -m benchmarks.stress`` runs them by the thousand.
"""

from __future__ import annotations

import contextvars
import random
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph.message import add_messages

from ..core.config import CompactionConfig
from ..core.conversation import content_text, is_summary
from ..core.fidelity import TRAIL_HEADER
from ..core.sections import section
from ..core.tokens import estimate_text_tokens
from ..engine.jobs import InstantRunner, Job, Runner, use_runner
from ..engine.nodes import CompactionEngine
from ..engine.state import merge_compaction
from ..invariants import (
    ThreadLedger,
    bounded_problems,
    escaped_paths,
    files_under,
    ledgers_of,
)
from ..storage import FileStorage, StoreStorage, message_records, record_id
from . import ScriptedModel
from .conversations import (
    HOSTILE_IDS,
    MODEL_FAULTS,
    SCRATCH,
    FlakyStorage,
    codemod,
    huge_round,
    memory_store,
    random_config,
    random_conversation,
)


def added(messages: Sequence[BaseMessage], new: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return ``messages`` with ``new`` merged in by ``add_messages``, the reducer of a graph's ``messages``."""
    merged: list[Any] = list(messages)
    return cast(list[BaseMessage], add_messages(merged, list[Any](new)))


# --- one thread, model call by model call --------------------------------------------------------


class Simulation:
    """The compaction nodes driven as the compiled graph would run them, with crash-and-resume injection."""

    def __init__(
        self, nodes: CompactionEngine, config: dict, rng: random.Random, crash_rate: float, storage: Any = None
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
            self.messages = added(self.messages, [new])
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
                self.messages = added(self.messages, update["messages"])
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
        self.messages = added(self.messages, list(pending))
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
        self.messages = added(self.messages, [message])
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


def _drawn_nodes(rng: random.Random, config: Any, real: Any, faults: bool) -> tuple[CompactionEngine, float]:
    """Return nodes in front of ``agent`` with drawn model faults over ``real``, failing at a drawn rate (and it)."""
    summarizer = ScriptedModel(summary=rng.choice(MODEL_FAULTS) if faults else None, summary_words=60)
    flusher = ScriptedModel(memory=rng.choice(MODEL_FAULTS) if faults else None)
    rate = rng.choice([0.0, 0.05, 0.3]) if faults else 0.0
    storage = FlakyStorage(real, rng, rate) if rate else real
    return CompactionEngine(before="agent", model=summarizer, flush_model=flusher, config=config, storage=storage), rate


def run_example(rng: random.Random, *, faults: bool = True, storage: str = "file") -> dict[str, list[str]]:
    """Run one random example; return the problems found per invariant."""
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(memory_store())
        config = random_config(rng)
        nodes, rate = _drawn_nodes(rng, config, real, faults)
        thread, user = rng.choice(HOSTILE_IDS), rng.choice(HOSTILE_IDS)
        where = (
            {"thread_id": thread, "user_id": user} if rng.random() < 0.85 else {"user_id": user}
        )  # or a stateless run
        sim = Simulation(nodes, {"configurable": where}, rng, rate, real)
        with use_runner(InstantRunner()):  # a job draws faults from ``rng`` too: in this thread, a seed replays alike
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


def run_bound_example(rng: random.Random, *, faults: bool = True, storage: str = "file") -> dict[str, list[str]]:
    """Run one example of a huge parallel round or a codemod at the defaults (``prompt_cache=True``).

    Besides the invariants every example checks: no model call is sent more
    than the trigger when layers 1-2 could bring it under (a round of results
    each prunable to a few hundred tokens), and every summary's trail keeps
    to ``fidelity.trail_tokens``.
    """
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(memory_store())
        wide = rng.random() < 0.5
        window = rng.choice([32_000, 64_000, 128_000, 200_000])
        config = CompactionConfig(
            context_window=window if wide else rng.choice([32_000, 128_000]), summary={"timeout": None}
        )
        summarizer = ScriptedModel(summary=rng.choice(MODEL_FAULTS) if faults else None, summary_words=60)
        nodes = CompactionEngine(before="agent", model=summarizer, config=config, storage=real)
        sim = Simulation(nodes, {"configurable": {"thread_id": "bound", "user_id": "u"}}, rng, 0.0, real)
        conversation = huge_round(rng, window) if wide else codemod(rng)
        views: list[list[BaseMessage]] = []
        sent = sim.model_call

        def model_call(pending: Sequence[BaseMessage], send: bool = True) -> list[BaseMessage]:
            views.append(sent(pending, send))
            return views[-1]

        sim.model_call = model_call  # type: ignore[method-assign]
        with use_runner(InstantRunner()):
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
                if budget is not None and size > budget:
                    problems["bounded"].append(f"a summary's trail holds {size:,} tokens, over trail_tokens {budget:,}")
        return problems


# --- background compaction: jobs ready before or after the trigger, lost, forked from, edited under --------------


class DrawnRunner(Runner):
    """Background jobs for the stress command: each runs at once, and is ready a drawn number of model calls later.

    0 is ready at the next call (before the trigger, usually); 50 is never in time (the gate waits for it, or
    compacts without it once the request is too large to wait).
    """

    def __init__(self, rng: random.Random, calls: Callable[[], int]) -> None:
        self.rng, self.calls = rng, calls
        self.ready_at: dict[int, int] = {}

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
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(memory_store())
        config = random_config(rng)
        # room past the trigger to wait for a job in progress, as a known window gives
        window = config.context_window or (3 * (config.trigger_tokens or 0) if rng.random() < 0.8 else None)
        config = config.model_copy(
            update={"context_window": window, "background": {"enabled": True, "start": rng.choice([0.5, 0.8, 0.9])}}
        )
        nodes, rate = _drawn_nodes(rng, config, real, faults)
        thread, user = rng.choice(HOSTILE_IDS), rng.choice(HOSTILE_IDS)
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


def replay_trajectory(path: Path, every: int = 6) -> Simulation:
    """Return the simulation of a recorded trajectory replayed with compaction forced about every ``every`` calls.

    Its ``ledger.problems`` hold what broke, by invariant; ``events`` every compaction event.
    """
    from langgraph_compaction.trajectories import load_trajectory

    conversation = load_trajectory(path)
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        config = CompactionConfig(  # blocking: a compaction at each forced point (the other examples run background)
            context_window=60_000, trigger_tokens=6_000, keep_tokens=1_500, trigger_messages=every * 2, background=False
        )
        nodes = CompactionEngine(before="agent", model=ScriptedModel(), config=config, storage=Path(tmp) / "store")
        sim = Simulation(nodes, {"configurable": {"thread_id": path.stem}}, random.Random(0), 0.0)
        replay(sim, conversation)
        sim.ledger.check_store(
            sim.messages, nodes.storage.read_transcript(path.stem), ledgers_of(nodes.storage, "default")
        )
        sim.ledger.problems["bounded"] += bounded_problems(sim.events, nodes.budget.trigger_tokens)
        sim.ledger.problems["contained"] += escaped_paths(files_under(tmp), Path(tmp) / "store")
        return sim
