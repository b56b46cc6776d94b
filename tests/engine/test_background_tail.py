"""The tail a swap leaves: what the agent added while the summary was made is shortened as blocking would leave it.

A job's summary covers the history up to the cut made when it started; the
tool results the agent read meanwhile follow it. Beyond the tail a blocking
compaction keeps (``keep_tokens``), they are shortened by layers 1-2, their
originals in the transcript, so the context carried to the next compaction
is about blocking's.
"""

from __future__ import annotations

import logging

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from support.events import lifecycle_events
from support.fronts import WINDOW, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionConfig, is_summary, load_transcript
from langgraph_compaction.core.summary import build_summary_message
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.engine.nodes import CompactionEngine
from langgraph_compaction.engine.swap import tail_edits
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


def _round(call_id: str, name: str, args: dict, text: str) -> list:
    return [
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}], id=f"a-{call_id}"),
        ToolMessage(text, tool_call_id=call_id, name=name, id=f"t-{call_id}"),
    ]


def test_at_the_swap_the_working_set_is_weighed_again_with_the_reads_made_while_the_summary_was_made():
    # blocking there would keep the newest reads within the budget; keeping the job's working set whole besides the
    # newer reads left up to twice the budget after each swap (a 128k session billed 1.02x blocking)
    config = CompactionConfig(context_window=60_000, working_set_tokens=5_000)
    engine = CompactionEngine(before="agent", model=ScriptedModel(), config=config)
    body = "".join(f"def handler_{i}(event):\n    return event['value'] * {i}\n" for i in range(120))
    result = [
        build_summary_message("## SUMMARY\nFixing the handlers.", covers=["h0"]),
        # the working set the job's cut kept, within the budget: two reads before its cut (at h1)
        *_round("r1", "Read", {"file_path": "a.py"}, body),
        *_round("r2", "Read", {"file_path": "b.py"}, body),
        HumanMessage("now c.py", id="h1"),
        # what came after the cut: a long test log, then one more read
        *_round("p1", "Bash", {"command": "pytest -q"}, "F" * 40 + "\n" + "log line\n" * 600),
        *_round("r3", "Read", {"file_path": "c.py"}, body),
        AIMessage("Reading done.", id="a-end"),
    ]
    counts = engine.setup.counter.counts(result)
    assert counts[4] + counts[9] <= engine.budget.working_set_tokens < counts[2] + counts[4] + counts[9]

    edits = tail_edits(engine.setup, result, engine.budget)

    # the log and the file touched least recently are shortened (their originals are in the transcript)
    assert set(edits) == {"t-p1", "t-r1"}
    assert len(str(edits["t-p1"].content)) < len(str(result[7].content))
    assert len(str(edits["t-r1"].content)) < len(str(result[2].content))
