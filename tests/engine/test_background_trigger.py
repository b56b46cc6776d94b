"""Background compaction at the trigger with no summary ready or coming: how long the agent is held.

A job that failed (a 503), a worker restarted in place, or a turn that jumps
past the trigger leave the gate nothing to apply at the trigger. It then
prepares the summary in the run, the summary and the memory model side by
side as a job does: the agent waits one compaction-model call, not the memory
call and then the summary call of a blocking compaction. What fails there is
what a blocking summary's failure is: the history stays while it fits the
window, and its retry is prepared next to the agent.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from support.fronts import (
    WINDOW,
    TimedModel,
    ToolCallingModel,
    edge_builder,
    in_a_job,
    request,
    until_a_job_starts,
)

from langgraph_compaction import CompactionConfig, is_summary
from langgraph_compaction.core.background import wait_limit
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.engine.prepare import MODEL_RETRIES
from langgraph_compaction.testing import ScriptedModel, scripted_summary

#: Every job fails in these tests: the breaker stays closed through them, so that the summarizer is asked at the trigger.
CONFIG = CompactionConfig(
    context_window=WINDOW, summary={"timeout": 30}, background={"enabled": True}, guards={"breaker_failures": 20}
)
LATENCY = 0.4
THREAD = {"configurable": {"thread_id": "trigger"}}


def _failing_in_jobs(prompt: str) -> str:
    """Answer the summary prompt in the run; fail it (a 503) in a background job."""
    if in_a_job():
        raise RuntimeError("Error code: 503 - the summarizer is unavailable")
    return scripted_summary(prompt)


#: A failure no call made again would mend: a job that meets it makes no call again, and the trigger makes the summary
#: in the run (where a summarizer that asks a person can).
NEEDS_THE_RUN = "no person to ask in a background job"


def _unavailable_once(in_jobs: bool = False, times: int = 1):
    """Return a summary answer that fails its first call (``times`` calls) with a 503, and every call from a job
    (``in_jobs``) with a failure no retry mends."""
    answers = iter([RuntimeError("Error code: 503 - the summarizer is unavailable")] * times)

    def answer(prompt: str) -> str:
        if in_jobs and in_a_job():
            raise RuntimeError(NEEDS_THE_RUN)
        failure = next(answers, None)
        if failure is not None:
            raise failure
        return scripted_summary(prompt)

    return answer


def _run_until(graph, events, done, first: int = 0, limit: int = 40) -> int:
    for n in range(first, first + limit):
        graph.invoke({"messages": [request(n)]}, THREAD)
        if done(events()):
            return n
    raise AssertionError(f"not done in {limit} requests: {[e['event'] for e in events()]}")


def test_after_a_failed_job_the_trigger_holds_the_agent_for_one_call_with_memory_and_summary_side_by_side(events):
    summarizer = TimedModel(latency=LATENCY, summary=_failing_in_jobs, spans=[])
    graph = edge_builder(ToolCallingModel(), None, CONFIG, summarizer).compile(checkpointer=InMemorySaver())
    with use_runner(InstantRunner()):  # each job has failed by the next model call
        _run_until(graph, events, lambda found: any(e["event"] == "compaction_applied" for e in found))
    found = events()
    assert any(e["event"] == "compaction_discarded" and "503" in e["why"] for e in found)  # the job failed
    (applied,) = [e for e in found if e["event"] == "compaction_applied"]
    assert applied["layer"] == "summarize" and applied["mode"] == "blocking"  # the model's summary, made in the run
    in_run = [s for s in summarizer.spans if not s[3]]
    summary = [s for s in in_run if s[0] == "summary"]
    memory = [s for s in in_run if s[0] == "memory"]
    assert len(summary) == 1 and len(memory) == 1
    (_, s_began, s_ended, _), (_, m_began, m_ended, _) = summary[0], memory[0]
    assert s_began < m_ended and m_began < s_ended, "the memory call and the summary call ran one after the other"
    state = graph.get_state(THREAD).values
    assert any(is_summary(m) for m in state["messages"])


def test_a_summary_made_at_the_trigger_streams_one_summarize_event_as_a_blocking_compaction_does():
    # the summary made in the run streamed its making and then its swap: two summarize events for one summary
    streamed: dict[bool, list[dict]] = {}
    for background in (True, False):
        config = CONFIG.model_copy(update={"background": {"enabled": background}})
        summarizer = ScriptedModel(summary=_failing_in_jobs)
        graph = edge_builder(ToolCallingModel(), None, config, summarizer).compile(checkpointer=InMemorySaver())
        found: list[dict] = []
        with use_runner(InstantRunner()):
            for n in range(40):
                found += graph.stream({"messages": [request(n)]}, THREAD, stream_mode="custom")
                if any(e.get("event") == "compaction_applied" for e in found):
                    break
        streamed[background] = [e for e in found if e["stage"] in ("flush", "offload", "summarize")]
    stages = {background: [e["stage"] for e in found] for background, found in streamed.items()}
    assert stages[True].count("summarize") == 1 and stages[True].count("flush") == 1, stages[True]
    assert stages[False].count("summarize") == 1 and stages[False].count("flush") == 1, stages[False]
    (summarize,) = [e for e in streamed[True] if e["stage"] == "summarize"]
    assert summarize["event"] == "compaction_applied" and summarize["mode"] == "blocking"


def test_a_summary_failing_at_the_trigger_leaves_the_history_and_the_next_call_tries_again(events):
    summarizer = TimedModel(latency=0.0, summary=_unavailable_once(in_jobs=True), spans=[])
    graph = edge_builder(ToolCallingModel(), None, CONFIG, summarizer).compile(checkpointer=InMemorySaver())
    with use_runner(InstantRunner()):  # each job has failed by the next model call: no retry is in progress
        _run_until(graph, events, lambda found: any(e["event"] == "compaction_applied" for e in found))
    in_run = [s for s in summarizer.spans if s[0] == "summary" and not s[3]]
    assert len(in_run) == 2  # the failed one at the trigger, the one at the next call (its retry job failed too)
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["layer"] == "summarize"
    compaction = graph.get_state(THREAD).values["compaction"]
    assert compaction["counts"]["failed"] == 1
    assert any("503" in str(e.get("error")) for e in compaction["events"] if e.get("stage") == "summarize")


def test_a_summarizer_that_calls_interrupt_pauses_the_run_at_the_trigger_in_the_background_too(events):
    def ask_a_person(prompt: str) -> str:
        if in_a_job():
            raise RuntimeError("no person to ask in a background job")
        return interrupt("Please write the summary.")

    graph = edge_builder(ToolCallingModel(), None, CONFIG, ScriptedModel(summary=ask_a_person)).compile(
        checkpointer=InMemorySaver()
    )
    with use_runner(InstantRunner()):
        for n in range(40):
            out = graph.invoke({"messages": [request(n)]}, THREAD)
            if "__interrupt__" in out:
                break
        assert out["__interrupt__"][0].value == "Please write the summary."
        written = (
            "## SESSION INTENT\nTests.\n\n## SUMMARY\nWe ran the tests.\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nGo on."
        )
        graph.invoke(Command(resume=written), THREAD)
    state = graph.get_state(THREAD).values
    summary = next(m for m in state["messages"] if is_summary(m))
    assert "We ran the tests." in summary.content


def test_when_another_workers_job_failed_and_the_summary_made_here_fails_too_no_blocking_compaction_follows(
    tmp_path, events
):
    # worker A's job fails fast (a failure no retry mends) and publishes its failure; worker B, at the trigger,
    # finds it failed and makes the summary itself, which fails too: the history stays, as after a blocking
    # summary's failure
    saver = InMemorySaver()
    unavailable = ScriptedModel(summary=RuntimeError(NEEDS_THE_RUN))
    with use_runner(InstantRunner()):
        worker_a = edge_builder(ToolCallingModel(), tmp_path, CONFIG, unavailable).compile(checkpointer=saver)
        n = until_a_job_starts(worker_a, THREAD, events)
        summarizer = TimedModel(latency=LATENCY, summary=_unavailable_once(), spans=[])
        worker_b = edge_builder(ToolCallingModel(), tmp_path, CONFIG, summarizer).compile(checkpointer=saver)
        _run_until(worker_b, events, lambda found: any(e["event"] == "compaction_applied" for e in found), n)
    in_run = [s for s in summarizer.spans if not s[3]]
    summaries = [s for s in in_run if s[0] == "summary"]
    assert len(summaries) == 1  # the failed one: its retry is made next to the agent
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"
    for kind, began, ended, _ in in_run:  # no memory call alone, before a summary call, as a blocking compaction's
        if kind == "memory":
            assert any(s_began < ended and began < s_ended for _, s_began, s_ended, _ in summaries)


def test_when_another_workers_job_failed_in_passing_the_next_worker_prepares_it_again_and_goes_on(tmp_path, events):
    # worker A's job fails with a 503 after making its call again; worker B, at the trigger, finds that failure
    # published (a failure that may pass) and prepares the summary again next to the agent: no call in its run
    saver = InMemorySaver()
    unavailable = ScriptedModel(summary=RuntimeError("Error code: 503 - the summarizer is unavailable"))
    with use_runner(InstantRunner()):
        worker_a = edge_builder(ToolCallingModel(), tmp_path, CONFIG, unavailable).compile(checkpointer=saver)
        n = until_a_job_starts(worker_a, THREAD, events)
        summarizer = TimedModel(latency=LATENCY, summary=scripted_summary, spans=[])
        worker_b = edge_builder(ToolCallingModel(), tmp_path, CONFIG, summarizer).compile(checkpointer=saver)
        _run_until(worker_b, events, lambda found: any(e["event"] == "compaction_applied" for e in found), n)
    assert any(e["event"] == "compaction_discarded" and "503" in e["why"] for e in events())  # A's job failed
    assert [s for s in summarizer.spans if not s[3]] == []  # B made no compaction-model call in its run
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"


class _RetryHeld(InstantRunner):
    """Runs the first job at once (it fails); keeps every later one in progress until a gate waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.started = 0
        self.held = True
        self.waits = 0

    def start_sync(self, job, work, awork) -> None:
        self.started += 1
        super().start_sync(job, work, awork)

    def is_done(self, job) -> bool:
        return (self.started == 1 or not self.held) and super().is_done(job)

    def wait_sync(self, job, timeout) -> bool:
        self.waits += 1
        self.held = False
        return super().wait_sync(job, timeout)


def test_a_job_prepared_again_after_a_failure_in_passing_is_not_waited_for_while_the_request_fits(tmp_path, events):
    # worker A's job fails with a 503 after making its call again; worker B prepares it again at the trigger and goes
    # on. That job is the retry of a failure: while it runs, B's next calls do not wait for it until halfway into the
    # window's reserve, as they would not for the retry of a summary that failed here
    saver, agent, runner = InMemorySaver(), ToolCallingModel(), _RetryHeld()
    unavailable = ScriptedModel(summary=RuntimeError("Error code: 503 - the summarizer is unavailable"))
    config = CONFIG.model_copy(update={"guards": CONFIG.guards.model_copy(update={"calibrate": False})})
    budget = config.resolve()
    with use_runner(runner):  # A's job runs at once and fails; B's stays in progress until a gate waits for it
        worker_a = edge_builder(ToolCallingModel(), tmp_path, config, unavailable).compile(checkpointer=saver)
        n = until_a_job_starts(worker_a, THREAD, events)
        worker_b = edge_builder(agent, tmp_path, config, ScriptedModel()).compile(checkpointer=saver)
        _run_until(worker_b, events, lambda found: any(e["event"] == "compaction_applied" for e in found), n)
    sizes = [agent.request_tokens(request) for request in agent.inputs]
    assert sum(size >= budget.trigger_tokens for size in sizes) >= 2  # past the trigger while the retry ran
    assert max(sizes) < wait_limit(budget) and runner.waits <= 1
    (applied,) = [e for e in events() if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"


def test_after_a_failed_job_its_retry_is_not_waited_for_while_the_request_fits(events):
    runner, agent = _RetryHeld(), ToolCallingModel()
    config = CONFIG.model_copy(update={"guards": CONFIG.guards.model_copy(update={"calibrate": False})})
    budget = config.resolve()
    with use_runner(runner):
        # the first job's call and its retries fail: the job fails
        summarizer = ScriptedModel(summary=_unavailable_once(times=1 + MODEL_RETRIES))
        graph = edge_builder(agent, None, config, summarizer).compile(checkpointer=InMemorySaver())
        _run_until(graph, events, lambda found: any(e["event"] == "compaction_applied" for e in found))
    found = events()
    assert any(e["event"] == "compaction_discarded" and "503" in e["why"] for e in found)  # the first job failed
    assert runner.started == 2  # its retry, started before the trigger
    # the agent went on past the trigger while the retry was prepared, and waited for it before halfway into the
    # window's reserve (the request after the wait is compacted)
    sizes = [agent.request_tokens(request) for request in agent.inputs]
    assert budget.trigger_tokens < max(sizes) < wait_limit(budget)
    assert runner.waits <= 1
    (applied,) = [e for e in found if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background"
