"""Replay a recorded conversation through a compacting graph, model call by model call."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.tokens import estimate_tokens
from langgraph_compaction.testing import view_violations


class Replayer:
    """The model node: returns the next recorded assistant message and checks the view it was given."""

    def __init__(self) -> None:
        self.next_reply: AIMessage | None = None
        self.problems: list[str] = []
        self.view_tokens: list[int] = []
        self.calls = 0
        self.opens_with_assistant = False

    def __call__(self, state: dict) -> dict:
        messages = state["messages"]
        self.calls += 1
        self.view_tokens.append(estimate_tokens(messages))
        latest = next(
            (m for m in reversed(messages) if isinstance(m, HumanMessage) and m.name != "__compaction_summary__"), None
        )
        problems = view_violations(messages, latest)
        if self.opens_with_assistant:  # a recorded greeting before any user turn (tau2) is the log's shape, not ours
            problems = [p for p in problems if not p.endswith("not a user turn")]
        self.problems += [f"call {self.calls}: {p}" for p in problems]
        return {"messages": [self.next_reply]}


def replay(
    trajectory: list,
    summarizer: Any,
    config: CompactionConfig,
    storage: Any,
    checkpointer: Any,
    thread: str = "t",
    replayer: Replayer | None = None,
):
    """Return (replayer, final state) after feeding every recorded turn through the graph (``replayer``: a subclass)."""
    replayer = replayer or Replayer()
    first_turn = next(m for m in trajectory if m.type != "system")
    replayer.opens_with_assistant = first_turn.type == "ai"
    builder = StateGraph(CompactionState)
    builder.add_node("agent", replayer)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=summarizer, config=config, storage=storage)
    graph = builder.compile(checkpointer=checkpointer)
    run = {"configurable": {"thread_id": thread}}
    pending: list = []
    for message in trajectory:
        if isinstance(message, AIMessage):
            replayer.next_reply = message
            graph.invoke({"messages": pending}, run)
            pending = []
        else:
            pending.append(message)
    return replayer, graph.get_state(run).values
