"""Lifecycle events on ``stream_mode="custom"``: what a UI needs to show "compacting..." and take it down."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import CONFIG, ToolCallingModel, edge_builder, request
from test_graph_routing import command_graph, subtask

from langgraph_compaction import is_summary


def edge_graph(model, tmp_path, config):
    """The usual loop: tools -> agent by an edge, so compaction runs as the graph's own nodes."""
    return edge_builder(model, tmp_path, config).compile(checkpointer=InMemorySaver())


def _stream(graph, message, thread):
    return [
        e for e in graph.stream({"messages": [message]}, thread, stream_mode="custom") if e.get("type") == "compaction"
    ]


def _lifecycle(events):
    return [(e["phase"], e.get("step")) for e in events if e["stage"] == "lifecycle"]


@pytest.mark.parametrize("build", [edge_graph, command_graph], ids=["graph nodes", "inside the model node"])
def test_a_compaction_streams_started_then_each_step_start_and_end(tmp_path, build):
    # a compaction in front of the model (background=False, or background without a summary ready in time);
    # one prepared in the background streams compaction_started, compaction_ready and compaction_applied instead
    model = ToolCallingModel(subtask_rounds=2)
    graph = build(model, tmp_path, CONFIG.model_copy(update={"background": False}))
    thread = {"configurable": {"thread_id": "events"}}
    streamed = []
    for n in range(6):
        streamed += _stream(graph, subtask(n), thread)

    started = [e for e in streamed if e["stage"] == "lifecycle" and e["phase"] == "started"]
    assert started, streamed
    first = started[0]
    assert (
        first["reason"] == "tokens" and first["tokens_before"] > CONFIG.resolve().trigger_tokens and first["evict"] > 0
    )
    # one compaction: started, then the graph's nodes (flush and offload side by side, then summarize) or, in a
    # pass inside the model node, the offload, then the summary with the flush beside it; summarize's end comes last
    at = streamed.index(first)
    steps = _lifecycle(streamed[at:])[:7]
    assert steps[0] == ("started", None)
    if build is edge_graph:
        assert set(steps[1:5]) == {("start", "flush"), ("end", "flush"), ("start", "offload"), ("end", "offload")}
        assert steps[5:7] == [("start", "summarize"), ("end", "summarize")]
    else:
        assert steps[1:4] == [("start", "offload"), ("end", "offload"), ("start", "summarize")]
        assert steps[4:7] == [("start", "flush"), ("end", "flush"), ("end", "summarize")]
    ends = [e for e in streamed[at:] if e["stage"] == "lifecycle" and e["phase"] == "end"][:3]
    assert all(e["ok"] and e["ms"] >= 0 for e in ends)
    # the summarize result event comes before its end: a UI can show the figures when it takes the indicator down
    result = next(e for e in streamed[at:] if e["stage"] == "summarize")
    assert streamed.index(result) < streamed.index(
        next(e for e in streamed[at:] if _lifecycle([e]) == [("end", "summarize")])
    )
    # streamed, not kept: the state's last 20 events are results only
    kept = graph.get_state(thread).values["compaction"]["events"]
    assert kept and not [e for e in kept if e["stage"] == "lifecycle"]
    assert any(is_summary(m) for m in graph.get_state(thread).values["messages"])


def test_nothing_is_streamed_on_a_call_that_compacts_nothing(tmp_path):
    model = ToolCallingModel()
    graph = command_graph(model, tmp_path, CONFIG)
    assert _stream(graph, request(0), {"configurable": {"thread_id": "quiet"}}) == []
