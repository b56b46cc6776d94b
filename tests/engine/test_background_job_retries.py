"""A background job meets a passing failure itself: the agent is held for none of it at the trigger.

A summarizer's 503 (or a rate limit, a dropped connection) in a job is tried
again by the job, next to the agent, so the trigger finds its summary ready
rather than compacting in front of the model call; what would fail the same
way (a refused request, a timeout, an ``interrupt()``) is not. A job whose
transcript write failed is not started: its summary would be refused as
covering what the transcript does not hold, and the next call starts it.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt
from support.fronts import (
    WINDOW,
    TimedModel,
    ToolCallingModel,
    edge_builder,
    in_a_job,
    request,
    until_a_job_starts,
)

from langgraph_compaction import CompactionConfig, FileStorage
from langgraph_compaction.core.background import wait_limit
from langgraph_compaction.engine import background
from langgraph_compaction.engine.driver import Performer, adrive, drive
from langgraph_compaction.engine.effects import CallModel, Steps
from langgraph_compaction.engine.errors import worth_retrying
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.engine.offload import OFFLOAD_ATTEMPTS
from langgraph_compaction.engine.prepare import MODEL_RETRIES
from langgraph_compaction.engine.run import Run
from langgraph_compaction.testing import ScriptedModel, scripted_summary

CONFIG = CompactionConfig(context_window=WINDOW, summary={"timeout": 30}, background={"enabled": True})
THREAD = {"configurable": {"thread_id": "retries"}}


class _Status(Exception):
    """A provider's error with its HTTP status, as OpenAI's and Anthropic's SDKs raise them."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code


def _failing_first_in_a_job(error: Exception):
    """Return a summary answer whose first call from a job raises ``error``."""
    failures = iter([error])

    def answer(prompt: str) -> str:
        if in_a_job() and (failure := next(failures, None)) is not None:
            raise failure
        return scripted_summary(prompt)

    return answer


def _until_applied(graph, events) -> None:
    for n in range(40):
        graph.invoke({"messages": [request(n)]}, THREAD)
        if any(e["event"] == "compaction_applied" for e in events()):
            return
    raise AssertionError(f"no summary applied: {[e['event'] for e in events()]}")


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (RuntimeError("Error code: 503 - the summarizer is unavailable"), True),
        (ConnectionError("the connection was reset"), True),
        (_Status(503), True),
        (_Status(529), True),
        (_Status(429), True),
        (_Status(408), True),
        (_Status(400), False),
        (_Status(401), False),
        (_Status(404), False),
        (_Status(413), False),
        (TimeoutError(), False),
        (ContextOverflowError("prompt is too long"), False),
        (GraphInterrupt(()), False),
        (KeyError("__pregel_scratchpad"), False),  # interrupt() called outside the run
        (ValueError("the summarizer's own bug"), False),
        (RuntimeError("Error code: 429 - rate limit reached"), True),
        (RuntimeError("Anthropic is overloaded"), True),
    ],
)
def test_what_a_job_tries_again(error, retried):
    assert worth_retrying(error) is retried


class _Flaky(BaseChatModel):
    """A model whose first calls raise ``failures``, in order; then it answers."""

    failures: list = []
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "flaky"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return ChatResult(generations=[ChatGeneration(message=AIMessage("answered"))])


def _asked(model) -> Steps[str]:
    return (yield CallModel(model, "Summarize."))


@pytest.mark.parametrize("run_async", [False, True], ids=["drive", "adrive"])
@pytest.mark.parametrize(
    ("failures", "retries", "calls", "answered"),
    [
        ([_Status(503), _Status(503)], 2, 3, True),
        ([_Status(503), _Status(503)], 1, 2, False),
        ([_Status(503)], 0, 1, False),
        ([_Status(400)], 2, 1, False),
    ],
)
def test_the_driver_makes_a_failed_call_again_as_often_as_the_job_may(failures, retries, calls, answered, run_async):
    model = _Flaky(failures=list(failures))
    performer = Performer(Run("t", "u", None, CompactionConfig(context_window=WINDOW).resolve()), retries=retries)
    try:
        steps = _asked(model)
        answer = asyncio.run(adrive(steps, performer)) if run_async else drive(steps, performer)
    except Exception:  # noqa: BLE001 - the last failure is the step's to record
        answer = None
    assert model.calls == calls
    assert (answer == "answered") is answered
    assert performer.retried == [id(model)] * (calls - 1)  # each call made again, for its breaker


def test_a_summarizer_failing_once_in_a_job_is_retried_there_and_the_trigger_applies_its_summary(events):
    error = RuntimeError("Error code: 503 - the summarizer is unavailable")
    summarizer = TimedModel(latency=0.0, summary=_failing_first_in_a_job(error), spans=[])
    graph = edge_builder(ToolCallingModel(), None, CONFIG, summarizer).compile(checkpointer=InMemorySaver())
    with use_runner(InstantRunner()):
        _until_applied(graph, events)
    found = events()
    (applied,) = [e for e in found if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"
    assert not [e for e in found if e["event"] == "compaction_discarded"]
    assert not [e for e in found if e["event"] == "compaction_started" and e["mode"] == "blocking"]
    summaries = [s for s in summarizer.spans if s[0] == "summary"]
    assert [in_job for *_, in_job in summaries] == [True, True]  # the failed call and its retry, both in the job
    assert not graph.get_state(THREAD).values["compaction"]["counts"].get("failed")


def test_a_refused_summary_request_is_not_retried_in_the_job(events):
    summarizer = TimedModel(latency=0.0, summary=_failing_first_in_a_job(_Status(400)), spans=[])
    graph = edge_builder(ToolCallingModel(), None, CONFIG, summarizer).compile(checkpointer=InMemorySaver())
    with use_runner(InstantRunner()):
        _until_applied(graph, events)
    found = events()
    assert any(e["event"] == "compaction_discarded" and "400" in e["why"] for e in found)
    jobs = [e for e in found if e["event"] == "compaction_started" and e["mode"] == "background"]
    in_jobs = [s for s in summarizer.spans if s[0] == "summary" and s[3]]
    assert len(jobs) == 2 and len(in_jobs) == 2  # one call each: the refused one was not made again


class _TranscriptDown(FileStorage):
    """Files whose next ``fail`` transcript writes raise, as a database restarting would."""

    fail = 0

    def append_transcript(self, thread_id, records):
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the database is restarting")
        return super().append_transcript(thread_id, records)


def test_a_job_whose_transcript_write_fails_is_not_started_and_the_next_call_starts_it(tmp_path, events):
    storage = _TranscriptDown(tmp_path)
    storage.fail = OFFLOAD_ATTEMPTS  # the first job's offload meets the database restarting, and its second try
    graph = edge_builder(ToolCallingModel(), storage, CONFIG).compile(checkpointer=InMemorySaver())
    with use_runner(InstantRunner()):
        _until_applied(graph, events)
    found = events()
    assert storage.fail == 0  # the write did fail once
    assert not [e for e in found if e["event"] == "compaction_discarded"]
    started = [e for e in found if e["event"] == "compaction_started"]
    assert [e["mode"] for e in started] == ["background"]
    (applied,) = [e for e in found if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background" and applied["prepared_id"] == started[0]["prepared_id"]


class _HeldUntilWaited(InstantRunner):
    """Runs each job at once, but keeps it in progress until a gate waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0
        self.held: set[int] = set()

    def start_sync(self, job, work, awork) -> None:
        super().start_sync(job, work, awork)
        self.held.add(id(job))

    start_async = start_sync

    def is_done(self, job) -> bool:
        return id(job) not in self.held and super().is_done(job)

    def wait_sync(self, job, timeout) -> bool:
        self.waits += 1
        self.held.discard(id(job))
        return super().wait_sync(job, timeout)


def test_a_job_trying_a_failed_call_again_is_not_waited_for_at_the_trigger_while_the_request_fits(events):
    runner, agent = _HeldUntilWaited(), ToolCallingModel()
    config = CONFIG.model_copy(update={"guards": CONFIG.guards.model_copy(update={"calibrate": False})})
    budget = config.resolve()
    summarizer = ScriptedModel(summary=_failing_first_in_a_job(RuntimeError("Error code: 503 - unavailable")))
    graph = edge_builder(agent, None, config, summarizer).compile(checkpointer=InMemorySaver())
    with use_runner(runner):
        _until_applied(graph, events)
    # a failed call costs the agent no wait while the request fits: it went on past the trigger while the job tried
    # again, and waited for it before halfway into the window's reserve
    sizes = [agent.request_tokens(request) for request in agent.inputs]
    assert budget.trigger_tokens < max(sizes) < wait_limit(budget)
    assert runner.waits <= 1
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"


def test_a_gate_waiting_at_the_trigger_lets_the_agent_go_on_once_the_job_tries_a_failed_call_again(events):
    # the job's first call is in flight when the thread reaches the trigger, so the gate waits for it; the call
    # fails (a 503) and the job makes it again: the gate stops waiting and the agent goes on while the request fits
    calls = []

    def slow_then_unavailable(prompt: str) -> str:
        calls.append(in_a_job())
        time.sleep(0.3)
        if len(calls) == 1:
            raise RuntimeError("Error code: 503 - the summarizer is unavailable")
        return scripted_summary(prompt)

    agent = ToolCallingModel()
    config = CONFIG.model_copy(update={"guards": CONFIG.guards.model_copy(update={"calibrate": False})})
    budget = config.resolve()
    graph = edge_builder(agent, None, config, ScriptedModel(summary=slow_then_unavailable)).compile(
        checkpointer=InMemorySaver()
    )
    _until_applied(graph, events)  # jobs in threads of their own, as deployed
    assert calls[:2] == [True, True]  # the failed call and its retry, in the job
    sizes = [agent.request_tokens(request) for request in agent.inputs]
    assert budget.trigger_tokens < max(sizes) < wait_limit(budget)
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"


def test_a_worker_waiting_for_another_workers_job_goes_on_once_that_job_tries_a_failed_call_again(tmp_path, events):
    # worker A's job fails its first call (a 503) and makes it again; worker B, waiting at the trigger for what A
    # publishes, reads that A's job is trying again and lets the agent go on while the request fits
    calls = []

    def unavailable_then_slow(prompt: str) -> str:
        calls.append(in_a_job())
        time.sleep(0.3 if len(calls) == 1 else 0.8)
        if len(calls) == 1:
            raise RuntimeError("Error code: 503 - the summarizer is unavailable")
        return scripted_summary(prompt)

    saver = InMemorySaver()
    config = CONFIG.model_copy(update={"guards": CONFIG.guards.model_copy(update={"calibrate": False})})
    budget = config.resolve()
    worker_a = edge_builder(ToolCallingModel(), tmp_path, config, ScriptedModel(summary=unavailable_then_slow))
    n = until_a_job_starts(worker_a.compile(checkpointer=saver), THREAD, events)
    agent, summarizer = ToolCallingModel(), TimedModel(latency=0.0, spans=[])
    worker_b = edge_builder(agent, tmp_path, config, summarizer).compile(checkpointer=saver)
    seen = len(events())
    while not any(e["event"] == "compaction_applied" for e in events()[seen:]):
        worker_b.invoke({"messages": [request(n)]}, THREAD)
        n += 1
        assert n < 60, "worker B never compacted"
    sizes = [agent.request_tokens(request) for request in agent.inputs]
    assert budget.trigger_tokens < max(sizes) < wait_limit(budget)
    assert [s for s in summarizer.spans if not s[3]] == []  # worker B made no summary in front of the model call
    (applied,) = [e for e in events()[seen:] if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"


@pytest.mark.parametrize(
    ("limit", "summary_failures", "memory_failures", "retries"),
    [
        (3, 0, 0, 2),  # a healthy provider: two more tries
        (3, 1, 0, 1),  # one failure on record: the tries end where the breaker would open
        (3, 0, 1, 1),  # the memory model's breaker counts as well
        (3, 2, 0, 0),
        (3, 5, 0, 0),
        (20, 0, 0, MODEL_RETRIES),  # never more than MODEL_RETRIES
        (1, 0, 0, 0),  # a breaker that opens at the first failure: no retry
    ],
)
def test_a_jobs_tries_end_where_the_breaker_would_open(limit, summary_failures, memory_failures, retries):
    setup = SimpleNamespace(config=CompactionConfig(guards={"breaker_failures": limit}))
    record = {"breaker": {"failures": summary_failures}, "flush_breaker": {"failures": memory_failures}}
    assert background._retries(setup, record) == retries
