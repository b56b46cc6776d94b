"""The default message-count trigger in the background: the agent goes on while blocking's summary is prepared.

It counts messages, not the window: a request at it is well under the token
trigger. (A message trigger the builder sets, LangChain's ``("messages", n)``,
is met where it is set: tests/fronts/test_langchain_args.py.) Waiting there, or starting a job before it (which covers fewer
messages, so the next compaction comes sooner), costs time or money for
nothing the window needs.
"""

from __future__ import annotations

import logging

from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import WINDOW, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionConfig
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


def _events(caplog) -> list[dict]:
    found = []
    for record in caplog.records:
        fields = record.args[1] if isinstance(record.args, tuple) and len(record.args) == 2 else None
        if isinstance(fields, dict) and fields.get("event"):
            found.append(fields)
    return found


def _first_compaction(caplog, background: bool, tmp_path) -> list[dict]:
    """Run requests until the first summary is applied; return the lifecycle events of the run."""
    caplog.clear()
    config = CompactionConfig(**SETTINGS, background={"enabled": background})
    graph = edge_builder(ToolCallingModel(), tmp_path / str(background), config, ScriptedModel())
    graph = graph.compile(checkpointer=InMemorySaver())
    thread, runner = {"configurable": {"thread_id": "counted"}}, _HeldOne()
    with use_runner(runner):
        for n in range(30):
            started = any(e["event"] == "compaction_started" for e in _events(caplog))
            graph.invoke({"messages": [request(n)]}, thread)
            runner.held = not started  # the job stays in progress for the request after the one that started it
            if any(e["event"] == "compaction_applied" for e in _events(caplog)):
                return _events(caplog)
    raise AssertionError("no summary was applied in 30 requests")


def test_at_the_message_trigger_a_job_covers_what_blocking_would_and_the_agent_does_not_wait(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    blocking = _first_compaction(caplog, False, tmp_path)
    background = _first_compaction(caplog, True, tmp_path)
    (compacted,) = [e for e in blocking if e["event"] == "compaction_applied"]
    assert (
        compacted["reason"] == "messages"
        and compacted["tokens_before"] < 0.8 * CompactionConfig(**SETTINGS).resolve().trigger_tokens
    )
    started = [e for e in background if e["event"] == "compaction_started"]
    assert [e["mode"] for e in started] == ["background"]  # no compaction held the agent
    assert started[0]["evict"] == compacted["evicted"]  # the very cut blocking made
    (applied,) = [e for e in background if e["event"] == "compaction_applied"]
    assert applied["mode"] == "background" and applied["evicted"] == compacted["evicted"]
