"""Runs sent again after a killed worker, an outage or a crash, unanswered calls, and two workers on one thread.

``run_retry_example`` draws, for each model call, a worker (of two), a fault
(``RETRY_FAULTS``) and an ``update_state`` before it, and checks that a
conversation a provider accepts as it is gives requests it accepts too (no
orphan result, no unanswered call), none over the window, and each request's
memory written once however the memory model words it.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ..core.plan import plan_compaction
from ..engine.jobs import use_runner
from ..engine.nodes import CompactionEngine
from ..invariants import (
    bounded_problems,
    broken_tool_ids,
    escaped_paths,
    files_under,
    ledgers_of,
)
from ..storage import FileStorage, StoreStorage
from . import ScriptedModel, scripted_memories
from .conversations import SCRATCH, memory_store, random_config, random_conversation, retried, turns_of
from .stress import DrawnRunner, Simulation

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


def smallest_request(view: Sequence[BaseMessage], nodes: CompactionEngine) -> int:
    """Return the fewest tokens layers 1-2 can bring a request to: over the whole history, excluded tools too."""
    counts = nodes.counter.counts(list(view))
    return plan_compaction(
        view, counts, nodes.budget, nodes.config, nodes.counter.message, overflow=True
    ).tokens_after_layers


def request_problems(view: Sequence[BaseMessage], window: int | None, nodes: CompactionEngine) -> dict[str, list[str]]:
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
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp) / "store"
        real = FileStorage(root) if storage == "file" else StoreStorage(memory_store())
        config = random_config(rng)
        window = config.context_window or 3 * (config.trigger_tokens or 0)
        conversation = random_conversation(rng, clean=True)
        plan = plan or draw_plan(rng, sum(isinstance(m, AIMessage) for m in conversation))
        config = config.model_copy(update={"background": plan["background"], "context_window": window})
        asked = [0]

        def memory(prompt: str) -> str:
            asked[0] += 1  # any LLM words each answer its own way: the ledger's bullet dedupe cannot see a repeat
            return scripted_memories(prompt).replace("- The user asked:", f"- In call {asked[0]}, the user asked:")

        def worker() -> CompactionEngine:
            summarizer = ScriptedModel(summary_words=60, memory=memory)
            return CompactionEngine(before="agent", model=summarizer, config=config, storage=real)

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
