"""The default message-count trigger in the background: the summary is prepared before it and swapped in at it.

It counts messages, not the window: a request at it is well under the token
trigger. (A message trigger the builder sets, LangChain's ``("messages", n)``,
is met where it is set: tests/fronts/test_langchain_args.py.) A job started
at the trigger would let the agent go on with the whole history until it is
ready, every call of it billed for what blocking had already summarized; one
started before it, as before the token trigger, is ready there.
"""

from __future__ import annotations

import logging

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from support.events import lifecycle_events
from support.fronts import WINDOW, ToolCallingModel, agent_loop, edge_builder, edit_file, request

from langgraph_compaction import CompactionConfig, add_compaction
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.testing import ScriptedModel

SETTINGS = {
    "context_window": 4 * WINDOW,  # the token trigger far: the default message trigger (50) comes first
    "guards": {"trigger_messages_min_tokens": 0},
    "summary": {"min_new_tokens": 0},
}


class _HeldOne(InstantRunner):
    """Runs each job at once but reports it in progress for one more request (``release()``), never waited for."""

    held = True

    def is_done(self, job) -> bool:
        return not self.held and super().is_done(job)


def _first_compaction(caplog, background: bool, tmp_path) -> dict[str, int]:
    """Run requests until the first summary is applied; return the request at which each lifecycle event came first."""
    caplog.clear()
    config = CompactionConfig(**SETTINGS, background={"enabled": background})
    graph = edge_builder(ToolCallingModel(), tmp_path / str(background), config, ScriptedModel())
    graph = graph.compile(checkpointer=InMemorySaver())
    thread, runner = {"configurable": {"thread_id": "counted"}}, _HeldOne()
    at: dict[str, int] = {}
    with use_runner(runner):
        for n in range(30):
            started = any(e["event"] == "compaction_started" for e in lifecycle_events(caplog))
            graph.invoke({"messages": [request(n)]}, thread)
            runner.held = not started  # the job stays in progress for the request after the one that started it
            for event in lifecycle_events(caplog):
                at.setdefault(event["event"], n)
            if "compaction_applied" in at:
                return at
    raise AssertionError("no summary was applied in 30 requests")


def test_before_the_message_trigger_a_job_prepares_the_summary_swapped_in_where_blocking_compacts(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    blocking = _first_compaction(caplog, False, tmp_path)
    background = _first_compaction(caplog, True, tmp_path)
    assert background["compaction_started"] < blocking["compaction_applied"]  # started before the count trigger
    assert background["compaction_applied"] == blocking["compaction_applied"]  # in place at the trigger, not after


def test_at_the_message_trigger_the_compaction_is_well_under_the_token_trigger(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    _first_compaction(caplog, False, tmp_path)
    (compacted,) = [e for e in lifecycle_events(caplog) if e["event"] == "compaction_applied"]
    assert compacted["mode"] == "blocking" and compacted["reason"] == "messages"
    assert compacted["tokens_before"] < 0.8 * CompactionConfig(**SETTINGS).resolve().trigger_tokens


def _codemod_agent(state: dict) -> dict:
    """Edit a batch of 100 files a request in one tool round, then say it is done."""
    if isinstance(state["messages"][-1], ToolMessage):
        return {"messages": [AIMessage("Batch done.")]}
    n = sum(isinstance(m, HumanMessage) for m in state["messages"])
    calls = [
        {"name": "edit_file", "args": {"path": f"src/pkg{k % 12}/mod{n}_{k}.py", "old": "log", "new": "logger"}}
        for k in range(100)
    ]
    return {"messages": [AIMessage("", tool_calls=[{**c, "id": f"e{n}-{k}"} for k, c in enumerate(calls)])]}


def test_tool_rounds_past_the_message_count_cost_one_summary_call_per_compaction(tmp_path):
    # each request is one round of 200 messages, past the message count (50) alone: a job started before its round
    # could fold only the request in front of it, and a summary of that is thrown away (longer than what it replaces)
    summarizer = ScriptedModel()
    builder = agent_loop(_codemod_agent, [edit_file])
    add_compaction(
        builder, before="agent", model=summarizer, config=CompactionConfig(context_window=32_000), storage=tmp_path
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "codemod"}}
    with use_runner(InstantRunner()):
        for n in range(8):
            graph.invoke({"messages": [HumanMessage(f"Request {n}: rename the logger in the next batch.")]}, thread)
    compaction = graph.get_state(thread).values["compaction"]
    summaries = [e for e in compaction["events"] if e.get("stage") == "summarize" and "tokens_after" in e]
    calls = sum("Context Extraction Assistant" in prompt for prompt in summarizer.calls)
    assert compaction["counts"]["summarize"] >= 6  # one compaction a request once the thread is past the count
    assert calls <= compaction["counts"]["summarize"] + 1  # every summary call applied, or ready for the next request
    assert {e["mode"] for e in summaries[1:]} == {"background"}  # prepared while the agent went on
