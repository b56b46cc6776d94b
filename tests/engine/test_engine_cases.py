"""Issue cases found from outside the suite: system reminders, edits by id, the memory model's breaker, streaming."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.tokens import estimate_tokens
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "t"}}
SIX_K = CompactionConfig(context_window=6_000, trigger_tokens=3_000, keep_tokens=800)


def _graph(config, summarizer=None, reply="Noted; here is what I found about that. " * 6, **options):
    """Return (graph, views): a chat agent that records every request it is sent."""
    views: list[list] = []

    def agent(state):
        views.append(list(state["messages"]))
        return {"messages": [AIMessage(reply)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=summarizer or ScriptedModel(), config=config, **options)
    return builder.compile(checkpointer=InMemorySaver()), views


def test_a_system_reminder_every_turn_is_conversation_and_is_summarized():
    # an app adds a short SystemMessage each turn; only the leading system prompt is pinned
    graph, views = _graph(SIX_K)
    graph.invoke({"messages": [SystemMessage("You are a helpful assistant.", id="sys")]}, THREAD)
    for t in range(120):
        reminder = SystemMessage(
            f"Reminder {t}: the user's time zone is Europe/Paris; keep answers short.", id=f"rem{t}"
        )
        graph.invoke(
            {"messages": [reminder, HumanMessage(f"Turn {t}: what about the invoice totals?", id=f"h{t}")]}, THREAD
        )
    assert max(estimate_tokens(v) for v in views) <= 6_000
    state = graph.get_state(THREAD).values
    assert state["messages"][0].id == "sys" and state["messages"][1].name == "__compaction_summary__"
    systems = [m for m in state["messages"] if isinstance(m, SystemMessage)]
    assert len(systems) <= 20  # 121 reminders were sent; the old ones were summarized with their turns


def test_over_budget_names_the_part_that_is_too_large():
    from langgraph_compaction.core.plan import over_budget_reason
    from langgraph_compaction.core.summary import build_summary_message

    messages = [SystemMessage("rules", id="sys"), build_summary_message("## SUMMARY\nshort")]
    messages += [SystemMessage(f"reminder {i}", id=f"r{i}") for i in range(40)] + [HumanMessage("now?", id="h")]
    counts = [20, 150] + [140] * 40 + [10]
    why = over_budget_reason(messages, counts, 5_000)
    assert why.index("later system messages 5,600 (40 messages)") < why.index("the summary 150 (1 message)")


def test_a_message_replaced_by_id_with_the_same_content_length_is_recounted():
    # update_state replaces an assistant message: same (empty) content, ~7,000 more tokens of tool-call arguments
    graph, views = _graph(SIX_K)
    call = {"name": "write_file", "args": {"path": "a.py", "content": "x = 1"}, "id": "c1"}
    graph.invoke(
        {
            "messages": [
                HumanMessage("Write a.py.", id="h0"),
                AIMessage("", tool_calls=[call], id="a1"),
                ToolMessage("wrote 5 bytes", tool_call_id="c1", name="write_file", id="t1"),
            ]
        },
        THREAD,
    )
    big = {**call, "args": {"path": "a.py", "content": "value = compute(value) + 1\n" * 1_100}}
    graph.update_state(THREAD, {"messages": [AIMessage("", tool_calls=[big], id="a1")]})
    assert estimate_tokens(graph.get_state(THREAD).values["messages"]) > 6_000
    graph.invoke({"messages": [HumanMessage("And now b.py.", id="h1")]}, THREAD)
    assert estimate_tokens(views[-1]) <= 6_000


def _restored(messages):
    """Return the messages as a checkpointer hands them back: new objects, equal values."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    return serde.loads_typed(serde.dumps_typed(list(messages)))


def _flagged(messages):
    """A token counter that charges 1,000 for every "HEAVY" in a message's content or tool calls."""
    return sum(10 + 1_000 * repr((m.content, getattr(m, "tool_calls", None))).count("HEAVY") for m in messages)


def _history(edit=None):
    args = {"path": "light.py", "edits": [{"old": "light", "new": "light"}]}
    if edit == "flat arguments":
        args = {**args, "path": "HEAVY.py"}
    if edit == "nested arguments":
        args = {**args, "edits": [{"old": "light", "new": "HEAVY"}]}
    block = "HEAVY" if edit == "block text" else "light"
    result = "HEAVY" if edit == "tool result" else "light"
    return [
        HumanMessage("Edit a.py.", id="h0"),
        AIMessage(
            [{"type": "text", "text": f"I will edit it ({block})."}],
            tool_calls=[{"name": "edit", "args": args, "id": "c1"}],
            id="a1",
        ),
        ToolMessage(f"edited: {result}", tool_call_id="c1", name="edit", id="t1"),
        HumanMessage("Thanks.", id="h1"),
    ]


@pytest.mark.parametrize("edit", ["flat arguments", "nested arguments", "block text", "tool result"])
def test_the_gate_memo_recounts_a_same_length_edit_of_a_restored_history(edit):
    from langgraph_compaction.engine.nodes import CompactionEngine

    seen = []
    nodes = CompactionEngine(
        before="agent",
        model=ScriptedModel(),
        config=CompactionConfig(token_counter=lambda ms: seen.extend(ms) or _flagged(ms)),
    )
    assert nodes.memo("t", _restored(_history())).counts == [10, 10, 10, 10]
    seen.clear()
    assert nodes.memo("t", _restored(_history())).counts == [10, 10, 10, 10] and seen == []  # nothing counted twice
    edited = _restored(_history(edit))
    changed = 2 if edit == "tool result" else 1
    assert sum(nodes.memo("t", edited).counts) == 1_040
    assert [m.id for m in seen] == [edited[changed].id]  # the edited message is counted again, and only it


def _seven_calls(path):
    """An assistant message of seven calls: "HEAVY.py" for "light.py" is 7,000 more tokens at the same lengths."""
    return AIMessage(
        "", tool_calls=[{"name": "write_file", "args": {"path": path}, "id": f"c{i}"} for i in range(7)], id="a1"
    )


@pytest.mark.parametrize("how", ["update_state", "time travel", "another node"])
def test_a_same_length_edit_of_tool_call_arguments_is_recounted_by_the_gate(how):
    builder = StateGraph(CompactionState)
    builder.add_node(
        "editor",
        lambda state: (
            {"messages": [_seven_calls("HEAVY.py")]} if how == "another node" and len(state["messages"]) > 9 else {}
        ),
    )
    builder.add_node("agent", lambda state: {"messages": [AIMessage("Done.")]})
    builder.add_edge(START, "editor")
    builder.add_edge("editor", "agent")
    builder.add_edge("agent", END)
    add_compaction(
        builder, before="agent", model=ScriptedModel(), config=SIX_K.model_copy(update={"token_counter": _flagged})
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    results = [ToolMessage("wrote it", tool_call_id=f"c{i}", name="write_file", id=f"t{i}") for i in range(7)]
    graph.invoke({"messages": [HumanMessage("Write them.", id="h0"), _seven_calls("light.py"), *results]}, THREAD)
    config = THREAD
    if how == "update_state":
        graph.update_state(THREAD, {"messages": [_seven_calls("HEAVY.py")]})
    if how == "time travel":  # the gate has seen a later, light history; the fork goes back before it
        first = graph.get_state(THREAD).config
        graph.invoke({"messages": [HumanMessage("Next.", id="h1")]}, THREAD)
        config = graph.update_state(first, {"messages": [_seven_calls("HEAVY.py")]})
    events = graph.stream({"messages": [HumanMessage("And now the next one.", id="h2")]}, config, stream_mode="custom")
    started = [e for e in events if e.get("phase") == "started"]  # the gate counted it and asked for a compaction
    assert started and started[0]["tokens_before"] > 7_000


# --- the memory model's breaker, and what counts count ------------------------------------------


def _tool_agent_run(tmp_path, summarizer, flush_model=None, turns=30, config=None):
    from support import ScriptedAgent, agent_builder, first_input

    agent = ScriptedAgent()
    builder = agent_builder(agent)
    config = config or CompactionConfig(context_window=60_000)
    add_compaction(builder, before="agent", model=summarizer, flush_model=flush_model, config=config, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    for t in range(turns):
        graph.invoke(first_input(t), THREAD)
    return graph.get_state(THREAD).values, agent


def test_one_always_failing_model_for_summaries_and_memory_is_called_at_most_six_times(tmp_path):
    down = ScriptedModel(summary=RuntimeError("provider down"), memory=RuntimeError("provider down"))
    state, agent = _tool_agent_run(tmp_path, down)  # 90 tool rounds, a compaction every few turns
    assert state["compaction"]["counts"]["extractive"] >= 3
    assert len(down.calls) <= 6
    assert agent.problems == []


def test_a_failing_memory_model_has_its_own_breaker(tmp_path):
    summarizer, memory = ScriptedModel(), ScriptedModel(memory=RuntimeError("memory model down"))
    state, _ = _tool_agent_run(tmp_path, summarizer, flush_model=memory)
    compaction = state["compaction"]
    assert len(memory.calls) == 3 and compaction["flush_breaker"]["open_until"] > 0
    assert compaction["breaker"]["failures"] == 0 and compaction["counts"]["summarize"] >= 4  # summaries go on
    assert any("breaker is open" in (e.get("note") or "") for e in compaction["events"])


def test_counts_are_compactions_and_edited_messages_are_the_messages_they_touched():
    from support import build_graph, first_input

    from langgraph_compaction.core.config import PruneConfig

    config = CompactionConfig(  # blocking: a swap prepared in the background replaces what layer 2 would prune
        context_window=100_000,
        keep_tokens=8_000,
        prune=PruneConfig(protect_tokens=5_000, minimum_tokens=2_000),
        background=False,
    )
    graph, _ = build_graph(ScriptedModel(), config=config, storage=None, checkpointer=InMemorySaver())
    seen: list[dict] = []
    for t in range(12):
        seen += [
            c for _, c in graph.stream(first_input(t), THREAD, stream_mode=["custom"]) if c.get("type") == "compaction"
        ]
    compaction = graph.get_state(THREAD).values["compaction"]
    layered = [e for e in seen if e["stage"] == "gate" and e.get("edited")]
    summaries = [e for e in seen if e["stage"] == "summarize" and e.get("layer")]
    assert sum(e["edited"] for e in layered) > len(layered) and summaries  # a prune may shorten several results at once
    for layer in ("truncate", "prune"):
        made = [e for e in layered if layer in e["layer"].split("+")]
        assert compaction["counts"].get(layer, 0) == len(made)
    assert compaction["counts"]["summarize"] == len(summaries)
    assert compaction["edited_messages"]["summarize"] == sum(e["evicted"] for e in summaries)
    assert sum(compaction["edited_messages"].get(k, 0) for k in ("truncate", "prune")) == sum(
        e["edited"] for e in layered
    )


def test_chained_extractive_summaries_carry_the_history_once_with_a_running_count():
    from langgraph_compaction.core.summary import build_summary_message, extractive_summary, section

    model_summary = build_summary_message(
        "## SESSION INTENT\nShip it.\n\n## SUMMARY\nThe model wrote this once.\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nGo."
    )
    call = {"name": "bash", "args": {"cmd": "make"}, "id": "c"}
    summary = model_summary
    for k in range(32):
        turn = [
            HumanMessage(f"step {k}", id=f"h{k}"),
            AIMessage("", tool_calls=[{**call, "id": f"c{k}"}], id=f"a{k}"),
            ToolMessage("ok", tool_call_id=f"c{k}", name="bash", id=f"t{k}"),
        ]
        summary = build_summary_message(extractive_summary([summary, *turn]))
    body = section(summary.content, "SUMMARY")
    assert body.count("The model wrote this once.") == 1
    assert (
        body.count("compacted") == 1 and "96 messages were compacted in all; 32 assistant turns called tools." in body
    )
    single = extractive_summary([HumanMessage("hi", id="h"), AIMessage("", tool_calls=[call], id="a")][1:])
    assert "1 message was compacted in all; 1 assistant turn called tools." in single


def test_what_a_messages_stream_consumer_receives_during_a_compaction():
    # per compaction exactly two items come from the compaction nodes: the state rewrite and the flagged summary
    from support import build_graph, first_input

    graph, _ = build_graph(
        ScriptedModel(), config=CompactionConfig(context_window=30_000), storage=None, checkpointer=InMemorySaver()
    )
    items, chat = [], []
    for t in range(8):
        for msg, meta in graph.stream(first_input(t), THREAD, stream_mode="messages"):
            items.append((meta["langgraph_node"], msg))
            # the two lines a chat UI writes:
            if msg.type == "remove":  # the rewrite of the state, not a chat message
                continue
            chat.append("--- context compacted ---" if msg.additional_kwargs.get("lc_compaction") else msg.type)
    compaction = graph.get_state(THREAD).values["compaction"]
    from_compaction = [(node, msg) for node, msg in items if node.startswith("compaction")]
    assert compaction["counts"]["summarize"] >= 2
    assert len(from_compaction) == 2 * compaction["counts"]["summarize"]
    for (node1, remove), (node2, summary) in zip(from_compaction[::2], from_compaction[1::2], strict=False):
        # the summarize node writes a blocking compaction; the gate applies one prepared in the background
        assert node1 == node2 and node1 in ("compaction_summarize", "compaction_gate")
        assert remove.type == "remove" and remove.id == "__remove_all__"
        assert (
            summary.name == "__compaction_summary__" and summary.additional_kwargs["lc_compaction"]["kind"] == "summary"
        )
        assert summary.additional_kwargs["lc_compaction"]["evicted"] > 0
    assert chat.count("--- context compacted ---") == compaction["counts"]["summarize"]
    assert "human" not in chat  # the summary is the only human message compaction writes, and it renders as the divider


def test_an_interrupt_inside_the_summarizer_pauses_the_run_instead_of_failing_the_summary():
    # LangGraph's control flow passes through compaction: here a person writes the summary
    from langgraph.types import Command, interrupt

    summarizer = ScriptedModel(summary=lambda prompt: interrupt("Please write the summary."))
    graph, views = _graph(SIX_K, summarizer)
    for t in range(40):
        out = graph.invoke({"messages": [HumanMessage(f"Turn {t}: tell me about the invoice rounding.")]}, THREAD)
        if "__interrupt__" in out:
            break
    assert out["__interrupt__"][0].value == "Please write the summary."
    written = "## SESSION INTENT\nInvoices.\n\n## SUMMARY\nWe went over rounding.\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nGo on."
    graph.invoke(Command(resume=written), THREAD)
    state = graph.get_state(THREAD).values
    summary = next(m for m in state["messages"] if m.name == "__compaction_summary__")
    assert "We went over rounding." in summary.content and state["compaction"]["counts"].get("failed", 0) == 0
