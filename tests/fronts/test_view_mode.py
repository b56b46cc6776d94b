"""View-only mode: the state keeps every message, the model is sent the compacted view, summaries chain."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from support.fronts import REQUESTS, RESULT_CHARS, WINDOW, Session, ToolCallingModel, request
from test_events import edge_graph
from test_graph_routing import command_graph

from langgraph_compaction import CompactionConfig, is_summary, load_transcript
from langgraph_compaction.core.config import MicroCompactConfig, PruneConfig
from langgraph_compaction.core.view import model_view

VIEW = CompactionConfig(context_window=WINDOW, mode="view")


@pytest.mark.parametrize("build", [edge_graph, command_graph], ids=["graph nodes", "inside the model node"])
def test_the_state_keeps_every_message_while_the_model_gets_the_compacted_view(tmp_path, build):
    model = ToolCallingModel()
    graph = build(model, tmp_path, VIEW)
    session = Session(model)
    thread = {"configurable": {"thread_id": "view"}}
    records = []
    for n in range(REQUESTS):
        graph.invoke({"messages": [request(n)]}, thread)
        session.check(request(n))
        records.append(graph.get_state(thread).values["compaction"].get("view"))

    state = graph.get_state(thread).values
    messages = state["messages"]
    # every message stays, unchanged and in order: 5 per request (request, call, two results, answer), no summary
    assert len(messages) == 5 * REQUESTS and not any(is_summary(m) for m in messages)
    assert [m.id for m in messages if isinstance(m, HumanMessage)] == [request(n).id for n in range(REQUESTS)]
    assert all("chars pruned" not in str(m.content) for m in messages)
    # the model got the view: inside the window, valid, the latest request verbatim
    assert session.problems == [] and session.peak <= WINDOW
    assert len(model.inputs) == 2 * REQUESTS
    assert session.summaries_seen() >= 2
    assert state["compaction"]["counts"]["summarize"] == session.summaries_seen()
    # summaries chain: each record's summary is newer, and the view the state rebuilds is the last one sent
    summaries = [r["summary"]["data"]["id"] for r in records if r]
    assert len(set(summaries)) == session.summaries_seen()
    rebuilt = [m.id for m in model_view(messages, state["compaction"]["view"])]
    assert rebuilt == [m.id for m in model.inputs[-1]] + [messages[-1].id]  # plus the answer to that input
    # the current summary lives in the state too, in the view record; the earlier ones went to the transcript
    current = [m for m in model_view(messages, state["compaction"]["view"]) if is_summary(m)]
    assert session.lost(messages + current, tmp_path, "view") == []
    # the checkpoint holds the whole history: the state is larger than anything the model was sent
    assert len(messages) > max(len(i) for i in model.inputs)


def test_overflow_recovery_in_view_mode_retries_with_the_view_and_keeps_the_history(tmp_path):
    model = ToolCallingModel(refuse_once_over=12_000)
    graph = edge_graph(model, tmp_path, CompactionConfig(context_window=200_000, mode="view"))
    thread = {"configurable": {"thread_id": "overflow"}}
    session = Session(model)
    for n in range(8):
        graph.invoke({"messages": [request(n)]}, thread)
        session.check(request(n))

    state = graph.get_state(thread).values
    assert model.refused == 1 and state["compaction"]["counts"].get("overflow") == 1
    assert len(state["messages"]) == 5 * 8 and not any(is_summary(m) for m in state["messages"])
    assert session.problems == [] and session.summaries_seen() == 1
    retried = next(i for i in model.inputs if any(is_summary(m) for m in i))
    assert model.request_tokens(retried) <= 12_000
    assert len(load_transcript(tmp_path, "overflow")) >= 1


def test_a_view_record_whose_anchor_is_gone_sends_the_whole_history():
    history = [HumanMessage("a", id="a"), HumanMessage("b", id="b")]
    record = {
        "summary": {"type": "human", "data": {"content": "s", "id": "s"}},
        "cutoff_id": "gone",
        "last_id": "b",
        "kept_ids": [],
    }
    assert model_view(history, record) == history
    assert model_view(history, None) == history


def test_mode_is_validated_with_a_clear_error():
    with pytest.raises(ValueError, match="mode"):
        CompactionConfig(mode="replace")


def test_layer_edits_shorten_the_models_copy_only_and_it_gets_what_rewrite_mode_sends(tmp_path):
    layers = {
        "prune": PruneConfig(protect_tokens=3_000, minimum_tokens=1_000),
        "micro": MicroCompactConfig(enabled=True),
    }
    sent, states = {}, {}
    for mode in ("rewrite", "view"):
        model = ToolCallingModel()
        graph = edge_graph(model, tmp_path / mode, CompactionConfig(context_window=200_000, mode=mode, **layers))
        thread = {"configurable": {"thread_id": "edits"}}
        for n in range(REQUESTS):
            graph.invoke({"messages": [request(n)]}, thread)
        sent[mode] = [[(m.type, str(m.content)) for m in view] for view in model.inputs]
        states[mode] = graph.get_state(thread).values

    # the model was sent the same requests, shortened results included
    assert sent["view"] == sent["rewrite"]
    assert any("chars pruned" in content for view in sent["view"] for _, content in view)

    # rewrite mode shortened the state's results; view mode kept every one as the tool returned it
    def shortened(state):
        return sum(len(m.content) < RESULT_CHARS for m in state["messages"] if isinstance(m, ToolMessage))

    assert shortened(states["rewrite"]) > 0 and shortened(states["view"]) == 0
    view = states["view"]
    assert len([m for m in view["messages"] if isinstance(m, ToolMessage)]) == 2 * REQUESTS
    edits = view["compaction"].get("view_edits") or {}
    assert edits and set(edits) <= {m.id for m in view["messages"]}


def test_a_later_system_reminder_is_summarized_in_the_view_as_in_rewrite_mode():
    """Only the leading system messages are pinned; a reminder added later goes with its turn."""
    from langchain_core.messages import AIMessage, SystemMessage

    from langgraph_compaction.core.summary import build_summary_message
    from langgraph_compaction.core.view import view_record

    history = [
        SystemMessage("rules", id="sys"),
        HumanMessage("first", id="h1"),
        SystemMessage("reminder", id="r1"),
        AIMessage("done", id="a1"),
        HumanMessage("second", id="h2"),
        AIMessage("ok", id="a2"),
    ]
    summary = build_summary_message("## SUMMARY\nfirst turn done")
    record = view_record(history, {"h1", "r1", "a1"}, "h2", summary)
    assert [m.id for m in model_view(history, record)] == ["sys", summary.id, "h2", "a2"]
