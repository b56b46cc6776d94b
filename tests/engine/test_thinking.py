"""Anthropic extended thinking with tool use: a kept tail never starts inside an assistant turn.

With thinking on, an assistant turn runs from a user request across its tool
results to the answer; only its first assistant message carries the signed
thinking block. A tail that starts at a later assistant message of the turn
in progress is a turn without its thinking, which Anthropic refuses.
"""

from __future__ import annotations

import copy

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from support.fronts import TOOLS

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction, is_summary
from langgraph_compaction.core.plan import find_cutoff
from langgraph_compaction.core.tokens import estimate_tokens
from langgraph_compaction.testing import ScriptedModel, anthropic_violations

ROUNDS = 4


def thinking(n: int) -> dict:
    return {
        "type": "thinking",
        "thinking": f"Request {n}: check the module, then the docs.",
        "signature": f"sig-{n}-" + "A" * 40,
    }


class ThinkingAgent:
    """Answers each request with ROUNDS tool rounds, then a text; only the turn's first message thinks."""

    def __init__(self) -> None:
        self.views: list[list] = []
        self.steps: dict[str, int] = {}
        self.signed: dict[str, dict] = {}

    def __call__(self, state: dict) -> dict:
        messages = state["messages"]
        self.views.append(list(messages))
        latest = [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)][-1]
        n = int(latest.content.split(":")[0].split()[-1])
        step = self.steps.get(latest.id, 0)
        self.steps[latest.id] = step + 1
        head = [thinking(n)] if step == 0 else []
        if step < ROUNDS:
            calls = [
                {"name": "run_tests", "args": {"module": f"m{n}-{step}"}, "id": f"t{n}-{step}"},
                {"name": "fetch_docs", "args": {"topic": f"m{n}-{step}"}, "id": f"d{n}-{step}"},
            ]
            blocks = (
                head
                + [{"type": "text", "text": "Checking."}]
                + [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]} for c in calls]
            )
            reply = AIMessage(blocks, tool_calls=calls, id=f"ai-{n}-{step}")
        else:
            reply = AIMessage(head + [{"type": "text", "text": f"Request {n} done."}], id=f"ai-{n}-{step}")
        if head:
            self.signed[reply.id] = copy.deepcopy(reply.content[0])
        return {"messages": [reply]}


def thinking_graph(agent: ThinkingAgent, tmp_path, config: CompactionConfig):
    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config, storage=tmp_path)
    return builder.compile(checkpointer=InMemorySaver())


def test_every_request_stays_valid_by_anthropics_thinking_rules(tmp_path):
    agent = ThinkingAgent()
    window = 12_000
    graph = thinking_graph(agent, tmp_path, CompactionConfig(context_window=window))
    thread = {"configurable": {"thread_id": "thinking"}}
    for n in range(10):
        graph.invoke({"messages": [HumanMessage(f"Request {n}: check module{n}", id=f"r{n}")]}, thread)

    # thinking is on for every request, whether or not a thinking block is still in the view
    problems = [
        f"call {i}: {p}" for i, view in enumerate(agent.views) for p in anthropic_violations(view, thinking=True)
    ]
    assert problems == []
    assert any(is_summary(m) for view in agent.views for m in view)
    assert max(estimate_tokens(view) for view in agent.views) <= window
    # every thinking block the model is sent back is the signed original, unchanged
    for view in agent.views:
        for m in view:
            if m.id in agent.signed:
                assert m.content[0] == agent.signed[m.id]


def test_the_checker_names_a_turn_in_progress_without_its_thinking():
    call = [{"name": "run_tests", "args": {"module": "m"}, "id": "c2"}]
    view = [
        HumanMessage("summary of earlier conversation", name="__compaction_summary__", id="s"),
        AIMessage([{"type": "text", "text": "Checking."}], tool_calls=call, id="a2"),  # the turn's second message
        ToolMessage("ok", tool_call_id="c2", id="t2"),
    ]
    assert any(
        "thinking" in p
        for p in anthropic_violations([HumanMessage("go", id="h"), AIMessage([thinking(0)], id="a0"), *view])
    )
    # a finished turn's messages need no thinking; nor does a request without any thinking
    assert anthropic_violations(view) == []


def test_the_cut_moves_to_the_start_of_the_turn():
    call = lambda i: [{"name": "run_tests", "args": {"module": "m"}, "id": f"c{i}"}]  # noqa: E731
    messages = [
        HumanMessage("first", id="h0"),
        AIMessage([thinking(0), {"type": "text", "text": "a"}], tool_calls=call(0), id="a0"),
        ToolMessage("x" * 4000, tool_call_id="c0", id="t0"),
        AIMessage([{"type": "text", "text": "b"}], tool_calls=call(1), id="a1"),
        ToolMessage("y" * 4000, tool_call_id="c1", id="t1"),
        AIMessage([{"type": "text", "text": "c"}], tool_calls=call(2), id="a2"),
        ToolMessage("z" * 40, tool_call_id="c2", id="t2"),
    ]
    counts = [estimate_tokens([m]) for m in messages]
    cut = find_cutoff(messages, counts, keep_tokens=50, keep_messages=2)
    # without thinking the tail could start at a2; with it, only where a turn starts (none here after h0)
    assert cut is None or messages[cut.cutoff].id in ("h0", "a0")
