"""A scripted agent and the loop that drives a graph with it, model call by model call: for tests and benchmarks.

``ScriptedAgent`` is an agent's model node that returns the next recorded
assistant message and measures, in exact o200k tokens (``o200k_tokens``, which
needs the optional ``bpe-openai``, imported on first use), the input it was
handed. ``drive`` feeds a compiled graph a list of turns (the messages that
arrive before each model call, and the assistant message that call returns);
``trajectory_turns`` reads a recorded trajectory into such turns and
``compaction_graph`` builds ``START -> compaction -> agent -> END``::

    agent = ScriptedAgent()
    graph = compaction_graph(agent, scripted_summarizer(), CompactionConfig(context_window=60_000)).compile()
    drive(graph, agent, trajectory_turns(path))
    agent.inputs  # the billed tokens of every request the agent was sent
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ..core.config import CompactionConfig
from ..core.tokens import TokenCounter
from ..engine.state import CompactionState
from ..fronts.graph import add_compaction
from ..trajectories import load_trajectory
from . import ScriptedModel, scripted_summary

__all__ = [
    "AGENT",
    "ScriptedAgent",
    "Turn",
    "billed_counter",
    "compaction_graph",
    "drive",
    "o200k_tokens",
    "scripted_summarizer",
    "trajectory_turns",
]

#: The agent node's name in every graph built here.
AGENT = "agent"

Turn = tuple[list[BaseMessage], AIMessage]
"""One model call: the messages that arrive before it, and the assistant message it returns."""


@functools.lru_cache(maxsize=1)
def _o200k() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # bpe-openai loads its tables with a deprecated API
        import bpe_openai

        return bpe_openai.get_encoding("o200k_base")


def o200k_tokens(text: str) -> int:
    """Return the exact o200k_base token count of ``text`` (OpenAI's tokenizer, offline)."""
    return len(_o200k().encode_ordinary(text)) if text else 0


def billed_counter() -> TokenCounter:
    """Return a memoised message counter whose text counts are exact o200k tokens (the measuring stick)."""
    return TokenCounter(text_tokens=o200k_tokens)


def scripted_summarizer(latency: float = 0.0, summary_words: int = 350) -> ScriptedModel:
    """Return a summarizer that writes a four-section summary of about ``summary_words`` words after ``latency`` s.

    It answers every system's prompt with a summary (langmem's prompt has no
    marker the model recognises, so ``reply`` summarizes too) and records each
    prompt in ``calls``.
    """
    return ScriptedModel(
        latency=latency,
        summary_words=summary_words,
        reply=functools.partial(scripted_summary, target_words=summary_words),
    )


@dataclass
class ScriptedAgent:
    """The agent's model node: returns ``next_reply`` and records the tokens of each input it is handed.

    ``inputs`` holds the billed (o200k) tokens of every call's messages;
    ``observe(messages)``, when set, sees each input too.
    """

    counter: TokenCounter = field(default_factory=billed_counter)
    next_reply: AIMessage | None = None
    inputs: list[int] = field(default_factory=list)
    observe: Callable[[list[BaseMessage]], None] | None = None
    measure: bool = True

    def __call__(self, state: Any) -> dict:
        messages = state["messages"]
        reply = self.next_reply
        if self.measure:
            billed = self.counter.total(messages)
            self.inputs.append(billed)
            # as a provider does: the reply reports what the request cost (systems that calibrate use it)
            usage = {"input_tokens": billed, "output_tokens": 0, "total_tokens": billed}
            reply = reply.model_copy(update={"usage_metadata": usage}) if reply is not None else None
        if self.observe is not None:
            self.observe(messages)
        return {"messages": [reply]}


def compaction_graph(agent: Any, summarizer: Any, config: CompactionConfig, storage: Any = None) -> StateGraph:
    """Return ``START -> compaction gate (-> flush | offload -> summarize) -> agent -> END``.

    The summarizer stands for the agent's own model (``agent_model``), as
    when a user compacts with the model the agent runs on: its requests then
    start with the agent's messages, which a provider's cache serves.
    """
    builder = StateGraph(CompactionState)
    builder.add_node(AGENT, agent)
    builder.add_edge(START, AGENT)
    builder.add_edge(AGENT, END)
    add_compaction(builder, before=AGENT, model=summarizer, config=config, storage=storage, agent_model=summarizer)
    return builder


def drive(
    graph: Any,
    agent: ScriptedAgent,
    turns: Sequence[Turn],
    thread: str = "bench",
    after_turn: Callable[[int, dict], None] | None = None,
) -> dict:
    """Feed ``turns`` through a compiled graph, one model call per turn; return the final state values.

    With a checkpointer the graph keeps the state; without one the previous
    values are handed back in with the new messages (what a server would do),
    so a benchmark can leave serialization out. ``after_turn(i, values)`` is
    called after each turn.
    """
    run = {"configurable": {"thread_id": thread}}
    values: dict = {}
    for i, (pending, reply) in enumerate(turns):
        agent.next_reply = reply
        if graph.checkpointer is not None:
            values = graph.invoke({"messages": pending}, run)
        elif "compaction" in graph.builder.channels:  # its record is state a run's input cannot write
            graph.checkpointer = InMemorySaver()
            values = graph.invoke({"messages": [*values.get("messages", ()), *pending]}, run)
        else:
            values = graph.invoke({**values, "messages": [*values.get("messages", ()), *pending]}, run)
        if after_turn is not None:
            after_turn(i, values)
    return values


def trajectory_turns(path: Path) -> list[Turn]:
    """Return a recorded trajectory as model calls: the messages before each assistant message, and that message."""
    turns: list[Turn] = []
    pending: list[BaseMessage] = []
    for message in load_trajectory(path):
        if isinstance(message, AIMessage):
            turns.append((pending, message))
            pending = []
        else:
            pending.append(message)
    return turns
