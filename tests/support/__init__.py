"""A small tool-using agent graph with compaction, shared by the graph tests."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.tokens import estimate_tokens
from langgraph_compaction.testing import view_violations


def in_ci() -> bool:
    """Return whether the tests run in CI (``CI`` set, as ``.ci/run`` does): there a missing service fails, never skips."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


SYSTEM = SystemMessage(content="You are a careful coding agent. Use the tools.", id="system-prompt")


@tool
def bash(cmd: str) -> str:
    """Run a shell command."""
    lines = [f"PASSED tests/test_{cmd.split()[-1]}_{i}.py::test_case_{i} in 0.{i:02d}s" for i in range(120)]
    return f"$ {cmd}\n" + "\n".join(lines) + "\nexit code 0"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "".join(f"{i:4d}  def function_{i}(x):\n        return x * {i}\n" for i in range(60))


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {len(content)} bytes to {path}"


TOOLS = [bash, read_file, write_file]


@dataclass
class ScriptedAgent:
    """An agent model node: two parallel tool calls, a big write, then an answer, for each user turn.

    It records every view it is called with, and the problems a provider
    would have with it.
    """

    views: list[list[BaseMessage]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    view_tokens: list[int] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)

    def __call__(self, state: dict) -> dict:
        messages = state["messages"]
        self.views.append(list(messages))
        self.view_tokens.append(estimate_tokens(messages))
        human_index = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and m.name is None)
        latest = messages[human_index]
        self.problems += [f"call {len(self.views)}: {p}" for p in view_violations(messages, latest)]
        turn = latest.content.split()[1] if latest.content.startswith("Task ") else "x"
        step = self.steps.get(turn, 0)  # kept outside the view: compaction may evict this turn's early rounds
        self.steps[turn] = step + 1
        if step == 0:
            calls = [
                {"name": "bash", "args": {"cmd": f"pytest -q module{turn}"}, "id": f"call-{turn}-bash"},
                {"name": "read_file", "args": {"path": f"src/module{turn}.py"}, "id": f"call-{turn}-read"},
            ]
            return {"messages": [AIMessage(content=f"Looking at module {turn}.", tool_calls=calls)]}
        if step == 1:
            body = "".join(f"def handler_{i}(event):\n    return event['value'] * {i}\n" for i in range(120))
            calls = [
                {
                    "name": "write_file",
                    "args": {"path": f"src/module{turn}.py", "content": body},
                    "id": f"call-{turn}-write",
                }
            ]
            return {"messages": [AIMessage(content="Writing the fix.", tool_calls=calls)]}
        return {"messages": [AIMessage(content=f"Task {turn} is done: src/module{turn}.py updated and tests pass.")]}


def agent_builder(agent: Any, tools: Any = TOOLS, context_schema: Any = None) -> StateGraph:
    """Return the builder of the agent <-> tools loop, without compaction yet."""
    builder = StateGraph(CompactionState, context_schema=context_schema)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def build_graph(
    summarizer: Any, *, config: CompactionConfig, storage: Any, checkpointer: Any = None, store: Any = None
):
    """Return (compiled graph, agent) for the scripted agent with compaction in front of it."""
    agent = ScriptedAgent()
    builder = agent_builder(agent)
    add_compaction(builder, before="agent", model=summarizer, config=config, storage=storage)
    return builder.compile(checkpointer=checkpointer, store=store), agent


def first_input(turn: int) -> dict:
    """Return the input of user turn ``turn`` (the first one carries the system prompt)."""
    request = HumanMessage(content=f"Task {turn} please fix module{turn} and run its tests")
    return {"messages": ([SYSTEM] if turn == 0 else []) + [request]}


SMALL_WINDOW = CompactionConfig(context_window=30_000, background={"enabled": False})
__all__ = ["SMALL_WINDOW", "ScriptedAgent", "agent_builder", "build_graph", "first_input"]


def run_in_two_processes(target: Any, args_of: Any, *, barrier: bool = False, timeout: float = 120) -> None:
    """Run ``target(*args_of(w))`` in two spawned processes at once (with a shared ``Barrier(2)`` appended
    when ``barrier``); assert both exit 0."""
    context = multiprocessing.get_context("spawn")
    meet = (context.Barrier(2),) if barrier else ()
    workers = [context.Process(target=target, args=(*args_of(w), *meet)) for w in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=timeout)
        assert w.exitcode == 0
