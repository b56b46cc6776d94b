"""Background compaction: a summary prepared next to the agent and swapped in at the trigger, on every front.

Most tests run the jobs with ``InstantRunner`` (each job runs to its end the
moment it starts, so what the gate sees next is decided, not timed) or
``HeldRunner`` (a job stays in progress until the test releases it); the
thread and task tests use the real runner.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import sqlite3
import threading
import warnings
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from support.fronts import REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, edge_builder, request

from langgraph_compaction import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    acompact_messages,
    compact_messages,
    is_summary,
    load_transcript,
    make_pre_model_hook,
    subgraph_node,
)
from langgraph_compaction.core.background import message_digest, prepared_problem, start_budget, wait_limit
from langgraph_compaction.core.config import Budget
from langgraph_compaction.core.view import model_view
from langgraph_compaction.engine.jobs import InstantRunner, Job, use_runner
from langgraph_compaction.memory.ledger import parse_bullets
from langgraph_compaction.testing import ScriptedModel

BACKGROUND = CompactionConfig(context_window=WINDOW, background={"enabled": True})


class HeldRunner(InstantRunner):
    """Runs each job at once but reports it in progress until ``release()``."""

    def __init__(self) -> None:
        super().__init__()
        self.held = True

    def is_done(self, job: Job) -> bool:
        return not self.held and super().is_done(job)

    def release(self) -> None:
        self.held = False

    def wait_sync(self, job: Job, timeout) -> bool:
        self.held = False  # waiting for it is time passing: it finishes
        return super().wait_sync(job, timeout)


def _kinds(found: list[dict]) -> list[tuple]:
    return [(e["event"], e.get("mode")) for e in found]


# --- the pure decisions -------------------------------------------------------------------------


def _history() -> list:
    return [
        SystemMessage("rules", id="s"),
        HumanMessage("first request", id="h1"),
        AIMessage("reading", id="a1", tool_calls=[{"name": "read", "args": {"path": "x.py"}, "id": "c1"}]),
        ToolMessage("x" * 400, tool_call_id="c1", id="t1"),
        HumanMessage("second request", id="h2"),
        AIMessage("done", id="a2"),
    ]


def test_a_prepared_summary_applies_only_while_what_it_covers_is_unchanged():
    messages = _history()
    record = {"covered": [[m.id, message_digest(m)] for m in messages[1:4]], "cutoff_id": "h2"}
    assert prepared_problem(record, messages) is None

    edited = [*messages[:3], messages[3].model_copy(update={"content": "y" * 400}), *messages[4:]]
    assert "t1 it covers has changed" in prepared_problem(record, edited)
    assert "no longer in the history" in prepared_problem(record, [messages[0], *messages[2:]])
    grown = [*messages, AIMessage("more work " * 500, id="a3")]
    assert prepared_problem(record, grown) is None  # a long tail is no reason: what it covers is unchanged
    latest = {**record, "covered": [[m.id, message_digest(m)] for m in messages[1:5]], "cutoff_id": "a2"}
    assert prepared_problem(latest, messages) == "the latest request is among the messages it covers"


def test_the_digest_is_the_same_in_every_process_and_sees_every_field():
    message = AIMessage("x", id="a", tool_calls=[{"name": "t", "args": {"n": 1}, "id": "c"}])
    assert message_digest(message) == message_digest(message.model_copy())
    assert message_digest(message) != message_digest(
        message.model_copy(update={"tool_calls": [{"name": "t", "args": {"n": True}, "id": "c"}]})
    )


def test_the_start_point_and_the_wait_follow_the_trigger_and_the_window():
    budget = Budget(
        context_window=60_000, trigger_tokens=40_000, keep_tokens=2_000, keep_messages=20, trigger_messages=50
    )
    early = start_budget(budget, 0.85)
    assert (early.trigger_tokens, early.trigger_messages, early.keep_tokens) == (34_000, 43, 250)
    assert wait_limit(budget) == 50_000  # halfway from the trigger to the window
    with pytest.raises(ValueError, match=r"background\.start"):
        CompactionConfig(background={"start": 1.0})


# --- the graph front ---------------------------------------------------------------------------------


def _session(agent, model, thread: str, requests: int = REQUESTS, before=None) -> Session:
    session = Session(model)
    config = {"configurable": {"thread_id": thread}}
    for n in range(requests):
        if before is not None:
            before(n, config)
        agent.invoke({"messages": [request(n)]}, config)
        session.check(request(n))
    return session


def agent_graph(model, summarizer, config, storage, checkpointer):
    """Return the agent <-> tools loop with compaction in front of the agent, compiled with ``checkpointer``."""
    builder = edge_builder(model, storage, config, summarizer)
    return builder.compile(checkpointer=checkpointer if checkpointer is not False else None)


def _graph(model, tmp_path, config=BACKGROUND, checkpointer=None, summarizer=None):
    return agent_graph(
        model,
        summarizer or ScriptedModel(),
        config,
        tmp_path,
        InMemorySaver() if checkpointer is None else checkpointer,
    )


@pytest.mark.parametrize("mode", ["rewrite", "view"])
def test_summaries_prepared_in_the_background_are_swapped_in_without_blocking_and_lose_nothing(tmp_path, events, mode):
    model = ToolCallingModel()
    config = CompactionConfig(context_window=WINDOW, mode=mode, background={"enabled": True})
    with use_runner(InstantRunner()):
        graph = _graph(model, tmp_path, config)
        session = _session(graph, model, mode)

    state = graph.get_state({"configurable": {"thread_id": mode}}).values
    assert session.problems == [] and session.peak <= WINDOW
    compaction = state["compaction"]  # in view mode the latest summary lives in the view record
    present = [*state["messages"], *model_view(state["messages"], compaction.get("view"), compaction.get("view_edits"))]
    assert session.lost(present, tmp_path, mode) == []
    kinds = _kinds(events())
    assert kinds.count(("compaction_applied", "background")) >= 2
    assert ("compaction_started", "blocking") not in kinds  # every compaction was prepared in time
    applied = [e for e in events() if e["event"] == "compaction_applied"]
    assert all(e["tokens_after"] < e["tokens_before"] and e["usage"]["calls"] >= 1 for e in applied)
    # the ledger holds each flushed message's memory once
    ledger = "".join(p.read_text() for p in tmp_path.rglob("memory/*.md"))
    bullets = parse_bullets(ledger)
    assert bullets and len(bullets) == len(set(bullets))


def test_update_state_on_a_covered_message_discards_the_prepared_summary_and_writes_no_memory_for_it(tmp_path, events):
    model = ToolCallingModel()
    runner = HeldRunner()
    edited = {}

    def before(n, config):
        started = [e for e in events() if e["event"] == "compaction_started"]
        if started and not edited:
            state = graph.get_state(config).values
            first = next(m for m in state["messages"] if isinstance(m, ToolMessage))
            graph.update_state(config, {"messages": [first.model_copy(update={"content": "edited by hand"})]})
            edited["id"] = first.id
            runner.release()

    with use_runner(runner):
        graph = _graph(model, tmp_path)
        session = _session(graph, model, "edited", before=before)

    assert edited
    discarded = [e for e in events() if e["event"] == "compaction_discarded"]
    assert any(f"{edited['id']} it covers has changed" in e["why"] for e in discarded)
    state = graph.get_state({"configurable": {"thread_id": "edited"}}).values
    assert session.problems == []
    assert [
        p for p in session.lost(state["messages"], tmp_path, "edited") if edited["id"] not in p
    ] == []  # the edit aside
    bullets = parse_bullets("".join(p.read_text() for p in tmp_path.rglob("memory/*.md")))
    assert len(bullets) == len(set(bullets))  # the discarded summary's memory answer was never written


def test_a_prepared_summary_outgrown_by_its_tail_is_still_applied_not_wasted(tmp_path, events):
    """The agent adds more than keep_tokens_max while the summary is made: it is applied all the same, never paid for twice."""
    model = ToolCallingModel()
    runner = HeldRunner()
    held = {}

    def before(
        n, config
    ):  # the job is held for two requests (about 4,000 tokens, twice keep_tokens_max) after it starts
        started = [e for e in events() if e["event"] == "compaction_started"]
        if started and not held:
            held["at"], held["id"] = n, started[0]["prepared_id"]
        if held and n == held["at"] + 2:
            runner.release()

    config = CompactionConfig(
        context_window=WINDOW, keep_tokens_min=2_000, keep_tokens_max=2_000, background={"enabled": True}
    )
    with use_runner(runner):
        graph = _graph(model, tmp_path, config)
        session = _session(graph, model, "outgrown", requests=12, before=before)

    assert held
    applied = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied[0]["mode"] == "background" and applied[0]["prepared_id"] == held["id"]
    assert [e for e in events() if e["event"] == "compaction_discarded"] == []
    assert ("compaction_started", "blocking") not in _kinds(events())
    state = graph.get_state({"configurable": {"thread_id": "outgrown"}}).values
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "outgrown") == []
    bullets = parse_bullets("".join(p.read_text() for p in tmp_path.rglob("memory/*.md")))
    assert bullets and len(bullets) == len(set(bullets))


def test_a_ready_summary_is_checkpointed_and_another_worker_applies_it(tmp_path, events):
    model = ToolCallingModel()
    path = tmp_path / "checkpoints.sqlite"
    config = {"configurable": {"thread_id": "shared"}}
    saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    with use_runner(InstantRunner()):
        first = _graph(model, tmp_path, checkpointer=saver)
        n = 0
        while not first.get_state(config).values.get("compaction", {}).get("prepared"):
            first.invoke({"messages": [request(n)]}, config)
            n += 1
        prepared = first.get_state(config).values["compaction"]["prepared"]
        # the first worker is gone; the second (an engine of its own, no jobs) has only the checkpoint
        second = _graph(model, tmp_path, checkpointer=saver)
        seen = len(events())
        while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
            second.invoke({"messages": [request(n)]}, config)
            n += 1
    applied = [e for e in events()[seen:] if e["event"] == "compaction_applied"]
    assert applied[0]["mode"] == "background" and applied[0]["prepared_id"] == prepared["id"]


def test_a_failing_summarizer_in_the_background_counts_on_the_breaker_and_never_applies(tmp_path, events):
    model = ToolCallingModel()
    failing = ScriptedModel(summary=RuntimeError("provider down"))
    with use_runner(InstantRunner()):
        graph = _graph(model, tmp_path, summarizer=failing)
        session = _session(graph, model, "failing", requests=10)
    state = graph.get_state({"configurable": {"thread_id": "failing"}}).values
    discarded = [e for e in events() if e["event"] == "compaction_discarded"]
    assert discarded and "provider down" in discarded[0]["why"]
    assert state["compaction"]["breaker"]["failures"] >= 1
    # once the breaker is open the summary is the extractive one, background or not; a failed answer never applies
    applied = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied and all(e["layer"] == "extractive" for e in applied)
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "failing") == []


def test_background_false_compacts_blocking_as_before(tmp_path, events):
    model = ToolCallingModel()
    graph = _graph(model, tmp_path, CompactionConfig(context_window=WINDOW, background={"enabled": False}))
    _session(graph, model, "blocking", requests=12)
    kinds = _kinds(events())
    assert ("compaction_started", "blocking") in kinds and ("compaction_applied", "blocking") in kinds
    assert not any(mode == "background" for _, mode in kinds)


# --- real concurrency -------------------------------------------------------------------------------


class _WaitsForTheAgent(ScriptedModel):
    """A summarizer whose first summary call returns only once the agent's model has been called again.

    A blocking compaction holds the agent until its summary is done: the
    wait would run out instead (``seen == [False]``).
    """

    agent: Any = None
    seen: list = []

    def _agent_moved(self, calls: int) -> bool:
        return len(self.agent.inputs) > calls

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if "Context Extraction Assistant" in str(messages[-1].content) and not self.seen:
            calls = len(self.agent.inputs)
            for _ in range(300):
                if self._agent_moved(calls):
                    break
                threading.Event().wait(0.05)
            self.seen.append(self._agent_moved(calls))
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if "Context Extraction Assistant" in str(messages[-1].content) and not self.seen:
            calls = len(self.agent.inputs)
            for _ in range(300):
                if self._agent_moved(calls):
                    break
                await asyncio.sleep(0.05)
            self.seen.append(self._agent_moved(calls))
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


def test_a_sync_front_prepares_the_summary_in_a_thread_while_the_agent_goes_on(tmp_path, events):
    model = ToolCallingModel()
    summarizer = _WaitsForTheAgent(agent=model, seen=[])
    graph = _graph(model, tmp_path, summarizer=summarizer)
    session = _session(graph, model, "threads")
    assert summarizer.seen[0] is True  # the first summary was made while the agent was called again
    state = graph.get_state({"configurable": {"thread_id": "threads"}}).values
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "threads") == []
    assert ("compaction_applied", "background") in _kinds(events())


async def test_an_async_front_prepares_the_summary_in_an_asyncio_task_while_the_agent_goes_on(tmp_path, events):
    model = ToolCallingModel()
    summarizer = _WaitsForTheAgent(agent=model, seen=[])
    graph = _graph(model, tmp_path, summarizer=summarizer)
    session = Session(model)
    config = {"configurable": {"thread_id": "tasks"}}
    for n in range(REQUESTS):
        await graph.ainvoke({"messages": [request(n)]}, config)
        session.check(request(n))
    state = graph.get_state(config).values
    assert summarizer.seen[0] is True
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "tasks") == []
    assert ("compaction_applied", "background") in _kinds(events())


# --- every front ---------------------------------------------------------------------------------------


def test_the_middleware_swaps_in_prepared_summaries(tmp_path, events):
    model = ToolCallingModel()
    with use_runner(InstantRunner()):
        middleware = CompactionMiddleware(model=ScriptedModel(), config=BACKGROUND, storage=tmp_path, add_tools=False)
        agent = create_agent(
            model, TOOLS, system_prompt="Check each module.", middleware=[middleware], checkpointer=InMemorySaver()
        )
        session = _session(agent, model, "middleware")
    state = agent.get_state({"configurable": {"thread_id": "middleware"}}).values
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "middleware") == []
    assert ("compaction_applied", "background") in _kinds(events())


def test_the_prebuilt_hook_swaps_in_prepared_summaries(tmp_path, events):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    model = ToolCallingModel()
    with use_runner(InstantRunner()):
        hook = make_pre_model_hook(
            model=ScriptedModel(), config=BACKGROUND, storage=tmp_path, agent_model=model.bind_tools(TOOLS)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agent = create_react_agent(
                model, TOOLS, pre_model_hook=hook, state_schema=hook.state_schema, checkpointer=InMemorySaver()
            )
        session = _session(agent, model, "hook")
    state = agent.get_state({"configurable": {"thread_id": "hook"}}).values
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "hook") == []
    assert ("compaction_applied", "background") in _kinds(events())


def _functional_history(turns: int) -> list:
    history = []
    for n in range(turns):
        history += [
            HumanMessage(f"Task {n}: check module{n}", id=f"h{n}"),
            AIMessage(
                f"checking {n}",
                id=f"a{n}",
                tool_calls=[{"name": "run_tests", "args": {"module": f"m{n}"}, "id": f"c{n}"}],
            ),
            ToolMessage(f"module{n} ok\n" * 300, tool_call_id=f"c{n}", id=f"t{n}"),
            AIMessage(f"Task {n} is done.", id=f"d{n}"),
        ]
    return history


@pytest.mark.parametrize("use_async", [False, True])
async def test_compact_messages_swaps_in_a_summary_prepared_by_an_earlier_call(tmp_path, events, use_async):
    history, state = [], None
    with use_runner(InstantRunner()):
        for chunk in range(30):
            history = [*history, *_functional_history(chunk + 1)[-4:]]
            settings = dict(
                model=ScriptedModel(), config=BACKGROUND, storage=tmp_path, thread_id="functional", state=state
            )
            result = (
                await acompact_messages(history, **settings) if use_async else compact_messages(history, **settings)
            )
            history, state = result.messages, result.state
    assert ("compaction_applied", "background") in _kinds(events())
    assert sum(1 for m in history if is_summary(m)) == 1
    kept = {m.id for m in history} | {m.id for m in load_transcript(tmp_path, "functional")}
    assert {m.id for m in _functional_history(30)} <= kept


def test_a_compacting_subgraph_swaps_in_its_prepared_summary_for_the_parent(tmp_path, events):
    model = ToolCallingModel()
    with use_runner(InstantRunner()):
        inner = _graph(model, tmp_path, checkpointer=False)
        parent = StateGraph(CompactionState)
        parent.add_node("agent", subgraph_node(inner))
        parent.add_edge(START, "agent")
        parent.add_edge("agent", END)
        graph = parent.compile(checkpointer=InMemorySaver())
        session = _session(graph, model, "parent")
    state = graph.get_state({"configurable": {"thread_id": "parent"}}).values
    assert session.problems == [] and session.lost(state["messages"], tmp_path, "parent") == []
    assert ("compaction_applied", "background") in _kinds(events())


# --- a worker killed while its summary is being prepared ------------------------------------------------


def _worker(root: str, db: str, started: str, waiting: str) -> None:
    """Run requests until a background summary is in progress, and hang in it (the parent kills this process).

    The agent goes on while the summary runs; its next model call waits too (``waiting``), so the parent kills
    the process at a known point: a summary in progress and the agent inside a model call. A kill between the
    agent's tool calls and their results would leave calls no later request answers, whatever compacts them.
    """
    import sys
    import time
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support
    from support.fronts import ToolCallingModel
    from support.fronts import request as ask

    class Hanging(ScriptedModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            if "Context Extraction Assistant" in str(messages[-1].content):
                Path(started).write_text("summary in progress")
                time.sleep(600)
            return super()._generate(messages, stop, run_manager, **kwargs)

    class Waiting(ToolCallingModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            if Path(started).exists():
                Path(waiting).write_text("agent in a model call")
                time.sleep(600)
            return super()._generate(messages, stop, run_manager, **kwargs)

    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    graph = agent_graph(Waiting(), Hanging(), BACKGROUND, Path(root), saver)
    for n in range(REQUESTS):
        graph.invoke({"messages": [ask(n)]}, {"configurable": {"thread_id": "killed"}})


def test_a_worker_killed_mid_summary_loses_nothing_and_the_next_one_compacts_again(tmp_path, events):
    db, started, waiting = str(tmp_path / "checkpoints.sqlite"), tmp_path / "started", tmp_path / "waiting"
    worker = multiprocessing.get_context("spawn").Process(
        target=_worker, args=(str(tmp_path), db, str(started), str(waiting))
    )
    worker.start()
    try:
        for _ in range(1200):
            if waiting.exists() or not worker.is_alive():
                break
            worker.join(0.1)
        assert started.exists(), "the worker never started a background summary"
        assert waiting.exists(), "the worker's agent never reached a model call during the summary"
    finally:
        worker.kill()
        worker.join()

    config = {"configurable": {"thread_id": "killed"}}
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    model = ToolCallingModel()
    with use_runner(InstantRunner()):
        graph = _graph(model, tmp_path, checkpointer=saver)
        values = graph.get_state(config).values
        assert not (values["compaction"] or {}).get("prepared")  # the summary in progress died with its process
        done = int(
            [m for m in values["messages"] if isinstance(m, HumanMessage) and not is_summary(m)][-1].id.split("-")[1]
        )
        session = Session(model)
        for n in range(done + 1, done + 8):
            graph.invoke({"messages": [request(n)]}, config)
            session.check(request(n))
    state = graph.get_state(config).values
    assert ("compaction_applied", "background") in _kinds(events())
    assert session.problems == []
    assert session.lost(state["messages"], tmp_path, "killed") == []
    bullets = parse_bullets("".join(p.read_text() for p in tmp_path.rglob("memory/*.md")))
    assert len(bullets) == len(set(bullets))


def test_random_conversations_compacted_in_the_background_break_no_invariant():
    """The stress command's background examples: jobs ready before or after the trigger, lost, forked from, edited under."""
    from langgraph_compaction.testing.stress import run_background_example

    problems = {}
    for seed in range(4, 200, 10):
        for name, found in run_background_example(random.Random(seed)).items():
            problems.setdefault(name, []).extend(f"seed {seed}: {p}" for p in found)
    assert {name: found for name, found in problems.items() if found} == {}


def test_deepagents_with_ours_in_the_background_compacts_the_agent_and_its_subagent(tmp_path, events):
    from deepagents import create_deep_agent

    # every 4th request goes to the general-purpose subagent, which makes 6 tool rounds: over the trigger on its own
    model = ToolCallingModel(delegate="task", subtask_rounds=6)
    with use_runner(InstantRunner()):
        compaction = CompactionMiddleware(
            model=ScriptedModel(), config=BACKGROUND, storage=tmp_path, name="SummarizationMiddleware"
        )
        agent = create_deep_agent(model=model, tools=TOOLS, middleware=[compaction], checkpointer=InMemorySaver())
        session = _session(agent, model, "deep")
    state = agent.get_state({"configurable": {"thread_id": "deep"}}).values
    assert session.problems == [] and session.peak <= WINDOW
    assert session.lost(state["messages"], tmp_path, "deep") == []
    assert ("compaction_applied", "background") in _kinds(events())
    # the subagent compacted its own history too
    assert any(any(is_summary(m) for m in runs[-1]) for runs in session.subtasks.values())
