"""Issue cases found from outside the suite: system reminders, edits by id, the memory model's breaker, streaming."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.tokens import estimate_tokens

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
        reminder = SystemMessage(f"Reminder {t}: the user's time zone is Europe/Paris; keep answers short.", id=f"rem{t}")
        graph.invoke({"messages": [reminder, HumanMessage(f"Turn {t}: what about the invoice totals?", id=f"h{t}")]}, THREAD)
    assert max(estimate_tokens(v) for v in views) <= 6_000
    state = graph.get_state(THREAD).values
    assert state["messages"][0].id == "sys" and state["messages"][1].name == "__compaction_summary__"
    systems = [m for m in state["messages"] if isinstance(m, SystemMessage)]
    assert len(systems) < 10  # 121 reminders were sent; the old ones were summarized with their turns


def test_over_budget_names_the_part_that_is_too_large():
    from langgraph_compaction.plan import over_budget_reason
    from langgraph_compaction.summary import build_summary_message

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
        {"messages": [HumanMessage("Write a.py.", id="h0"), AIMessage("", tool_calls=[call], id="a1"),
                      ToolMessage("wrote 5 bytes", tool_call_id="c1", name="write_file", id="t1")]},
        THREAD,
    )
    big = {**call, "args": {"path": "a.py", "content": "value = compute(value) + 1\n" * 1_100}}
    graph.update_state(THREAD, {"messages": [AIMessage("", tool_calls=[big], id="a1")]})
    assert estimate_tokens(graph.get_state(THREAD).values["messages"]) > 6_000
    graph.invoke({"messages": [HumanMessage("And now b.py.", id="h1")]}, THREAD)
    assert estimate_tokens(views[-1]) <= 6_000
