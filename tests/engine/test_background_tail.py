"""The tail a swap leaves: what the agent added while the summary was made is shortened as blocking would leave it.

A job's summary covers the history up to the cut made when it started; the
tool results the agent read meanwhile follow it. Beyond the tail a blocking
compaction keeps (``keep_tokens``), they are shortened by layers 1-2, their
originals in the transcript, so the context carried to the next compaction
is about blocking's.
"""

from __future__ import annotations

import logging

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from support.events import lifecycle_events
from support.fronts import WINDOW, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionConfig, is_summary, load_transcript
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.testing import ScriptedModel


class _HeldTwo(InstantRunner):
    """Runs each job at once but reports it in progress until ``release()`` (the agent goes on meanwhile)."""

    held = True

    def is_done(self, job) -> bool:
        return not self.held and super().is_done(job)

    def wait_sync(self, job, timeout) -> bool:
        self.held = False
        return super().wait_sync(job, timeout)


def test_the_results_the_agent_read_while_a_summary_was_made_are_shortened_at_the_swap(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    config = CompactionConfig(context_window=WINDOW, background={"enabled": True})
    graph = edge_builder(ToolCallingModel(), tmp_path, config, ScriptedModel()).compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "tail"}}
    runner, started, n = _HeldTwo(), None, 0
    with use_runner(runner):
        while not any(e["event"] == "compaction_applied" for e in lifecycle_events(caplog)):
            graph.invoke({"messages": [request(n)]}, thread)
            n += 1
            if started is None and any(e["event"] == "compaction_started" for e in lifecycle_events(caplog)):
                started = n
            if started is not None and n == started + 2:
                runner.held = False  # the agent read two requests' results while the summary was made
            assert n < 40, "no summary was applied"
    applied = next(e for e in lifecycle_events(caplog) if e["event"] == "compaction_applied")
    assert applied["mode"] == "background"
    messages = graph.get_state(thread).values["messages"]
    start = next(i for i, m in enumerate(messages) if is_summary(m)) + 1
    results = [m for m in messages[start:] if isinstance(m, ToolMessage)]
    originals = {m.id: m for m in load_transcript(tmp_path, "tail") if isinstance(m, ToolMessage)}
    shortened = [m for m in results if m.content != originals[m.id].content]
    assert shortened, "every result read while the summary was made is still whole after the swap"
    assert results[-1].content == originals[results[-1].id].content  # the newest result stays whole
    assert all(len(str(m.content)) < len(str(originals[m.id].content)) for m in shortened)
