"""The systems every measure compares, built the same way, and the inputs they are fed.

Four systems share one graph topology, ``START -> [compaction node(s)] -> agent -> END``:

- ``ours``: this package's nodes (``add_compaction``);
- ``langchain``: LangChain's ``SummarizationMiddleware``, its ``before_model``
  wrapped as a node in front of the agent node;
- ``langmem``: langmem's ``SummarizationNode`` in overwrite mode (it writes
  back to ``messages``);
- ``none``: no compaction.

The agent node is a ``ScriptedAgent`` that returns the next recorded assistant
message and measures the input it was handed; summaries come from a
``ScriptedModel`` with a settable fixed latency. Inputs are the real
trajectories (``trajectory_turns``) and a seeded synthetic coding-agent
session (``synthetic_session``).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_compaction import CompactionConfig
from langgraph_compaction.testing.agents import (
    AGENT,
    ScriptedAgent,
    Turn,
    billed_counter,
    drive,
    o200k_tokens,
    scripted_summarizer,
    trajectory_turns,
)
from langgraph_compaction.testing.agents import compaction_graph as ours_graph

__all__ = [
    "AGENT",
    "SAMPLES",
    "SYSTEMS",
    "ScriptedAgent",
    "Thresholds",
    "Turn",
    "billed_counter",
    "drive",
    "o200k_tokens",
    "ours_graph",
    "scripted_summarizer",
    "synthetic_session",
    "system_graph",
    "trajectory_turns",
]

SYSTEMS = ("ours", "langchain", "langmem", "none")
SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "token_samples"

# --- thresholds shared by every system -----------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    """One trigger and keep budget, expressed for each system.

    ``trigger_messages`` 0 means a token trigger only. The defaults are this
    package's defaults for a 128k window (trigger 108k tokens or 50 messages,
    keep 8k tokens).
    """

    context_window: int = 128_000
    trigger_tokens: int = 108_000
    keep_tokens: int = 8_000
    trigger_messages: int = 50

    def config(self, **overrides: Any) -> CompactionConfig:
        """Return this package's config for these thresholds (``overrides`` go to ``CompactionConfig``)."""
        return CompactionConfig(
            context_window=self.context_window,
            trigger_tokens=self.trigger_tokens,
            keep_tokens=self.keep_tokens,
            trigger_messages=self.trigger_messages,
            **overrides,
        )

    def langchain_trigger(self) -> list:
        """Return LangChain's ``trigger`` for these thresholds (tokens OR messages)."""
        trigger: list = [("tokens", self.trigger_tokens)]
        if self.trigger_messages:
            trigger.append(("messages", self.trigger_messages))
        return trigger


# --- node factories ---------------------------------------------------------------------


def langchain_middleware(summarizer: Any, thresholds: Thresholds, keep: tuple | None = None) -> Any:
    """Return LangChain's ``SummarizationMiddleware`` with the same trigger, keeping ``keep`` (default: the same tokens)."""
    from langchain.agents.middleware import SummarizationMiddleware

    return SummarizationMiddleware(
        model=summarizer,
        trigger=thresholds.langchain_trigger(),
        keep=keep or ("tokens", thresholds.keep_tokens),
    )


class LangchainNode:
    """LangChain's ``before_model`` as a graph node (it never reads the runtime); ``fired`` counts its compactions."""

    def __init__(self, middleware: Any) -> None:
        self.middleware = middleware
        self.fired = 0

    def __call__(self, state: dict) -> dict:
        update = self.middleware.before_model(state, None)
        self.fired += update is not None
        return update or {}


def langmem_node(summarizer: Any, thresholds: Thresholds, max_summary_tokens: int = 600) -> Any:
    """Return langmem's ``SummarizationNode`` in overwrite mode with the same trigger and keep.

    langmem summarizes the oldest messages once they hold
    ``max_tokens_before_summary`` and the rest fits ``max_tokens -
    max_summary_tokens``: ``trigger - keep`` and ``keep + summary`` make it
    fire when the context reaches the trigger and keep about ``keep``.
    """
    from langmem.short_term import SummarizationNode

    return SummarizationNode(
        model=summarizer,
        max_tokens=thresholds.keep_tokens + max_summary_tokens,
        max_tokens_before_summary=thresholds.trigger_tokens - thresholds.keep_tokens,
        max_summary_tokens=max_summary_tokens,
        output_messages_key="messages",
    )


class LangmemState(MessagesState):
    """langmem's state: messages plus its running summary in ``context``."""

    context: dict


# --- graph builders (uncompiled: the caller picks the checkpointer) ---------------------


def _before_agent(state: type, name: str, node: Any, agent: Any) -> StateGraph:
    builder = StateGraph(state)
    builder.add_node(name, node)
    builder.add_node(AGENT, agent)
    builder.add_edge(START, name)
    builder.add_edge(name, AGENT)
    builder.add_edge(AGENT, END)
    return builder


def langchain_graph(agent: Any, middleware: Any) -> StateGraph:
    """Return ``START -> summarization (LangChain's before_model) -> agent -> END``."""
    return _before_agent(MessagesState, "summarization", LangchainNode(middleware), agent)


def langmem_graph(agent: Any, node: Any) -> StateGraph:
    """Return ``START -> summarization (langmem, overwrite) -> agent -> END``."""
    return _before_agent(LangmemState, "summarization", node, agent)


def plain_graph(agent: Any) -> StateGraph:
    """Return ``START -> agent -> END`` (no compaction)."""
    builder = StateGraph(MessagesState)
    builder.add_node(AGENT, agent)
    builder.add_edge(START, AGENT)
    builder.add_edge(AGENT, END)
    return builder


def system_graph(
    system: str,
    agent: Any,
    summarizer: Any,
    thresholds: Thresholds,
    *,
    config: CompactionConfig | None = None,
    storage: Any = None,
    langchain_keep: tuple | None = None,
) -> StateGraph:
    """Return the uncompiled graph of ``system`` (one of ``SYSTEMS``) at these thresholds."""
    if system == "ours":
        return ours_graph(agent, summarizer, config or thresholds.config(), storage)
    if system == "langchain":
        return langchain_graph(agent, langchain_middleware(summarizer, thresholds, langchain_keep))
    if system == "langmem":
        return langmem_graph(agent, langmem_node(summarizer, thresholds))
    if system == "none":
        return plain_graph(agent)
    raise ValueError(f"system {system!r} is not one of {SYSTEMS}")


# --- the synthetic coding-agent session ----------------------------------------------------

_REQUESTS = (
    "Fix the failing tests in the text wrapping module and explain the cause.",
    "Add a max_lines option to the wrapper and document it in the README.",
    "The CI log shows a warning in the C extension; find where it comes from and fix it.",
    "Refactor the dedent helper so that it handles tabs, then rerun the whole suite.",
    "List the installed packages that still pin an old version and propose upgrades.",
    "Write a regression test for the empty-input case and make it pass.",
)


@functools.lru_cache(maxsize=1)
def _sample_texts() -> dict[str, str]:
    names = {
        "code": "python_source.py.txt",
        "log": "test_log.txt",
        "json": "tool_output.json",
        "prose": "english_prose.txt",
    }
    return {kind: (SAMPLES / name).read_text(encoding="utf-8") for kind, name in names.items()}


def _slice(rng: random.Random, text: str, chars: int) -> str:
    start = rng.randrange(0, max(1, len(text) - chars))
    return text[start : start + chars]


def synthetic_session(
    turns: int, seed: int = 0, system_prompt: bool = True, result_chars: int | None = None
) -> list[Turn]:
    """Return a seeded coding-agent session of ``turns`` model calls adding about 2,000 tokens each.

    Each call returns a short plan and one tool call (``Read``, ``Bash``,
    ``Grep`` or an ``Edit`` whose new text is over 2,000 characters); the
    next call first receives that tool's result (real source, test logs, JSON
    or prose from ``tests/data/token_samples``) and, every tenth call, a new
    user request. The first call also receives a system prompt. With
    ``result_chars`` every Read, Bash and Grep result is that many characters
    instead of 5,000 to 11,000 (smaller turns: a checkpoint's fixed cost weighs more).
    """
    rng = random.Random(seed)
    size = (lambda low, high: result_chars) if result_chars else rng.randrange
    texts = _sample_texts()
    session: list[Turn] = []
    pending: list[BaseMessage] = []
    if system_prompt:
        pending.append(
            SystemMessage(
                "You are a careful coding agent working in a Python repository. Use the tools.", id="syn-system"
            )
        )
    for i in range(turns):
        if i % 10 == 0:
            pending.append(
                HumanMessage(_REQUESTS[(i // 10) % len(_REQUESTS)] + f" (task {i // 10 + 1})", id=f"syn-{i}-user")
            )
        tool = rng.choices(("Read", "Bash", "Grep", "Edit"), weights=(4, 3, 2, 1))[0]
        if tool == "Read":
            args, result = (
                {"file_path": f"src/textwrap_{rng.randrange(12)}.py"},
                _slice(rng, texts["code"], size(7_000, 11_000)),
            )
        elif tool == "Bash":
            args, result = {"command": "python -m pytest -q tests/"}, _slice(rng, texts["log"], size(6_000, 10_000))
        elif tool == "Grep":
            args, result = (
                {"pattern": "def wrap", "output_mode": "json"},
                _slice(rng, texts["json"], size(5_000, 7_000)),
            )
        else:
            body = _slice(rng, texts["code"], rng.randrange(2_500, 4_000))
            args, result = (
                {"file_path": f"src/textwrap_{rng.randrange(12)}.py", "new_string": body},
                "The file was updated.",
            )
        plan = _slice(rng, texts["prose"], rng.randrange(150, 400))
        call_id = f"call_{i:04d}"
        reply = AIMessage(plan, tool_calls=[{"name": tool, "args": args, "id": call_id}], id=f"syn-{i}-ai")
        session.append((pending, reply))
        pending = [ToolMessage(result, tool_call_id=call_id, name=tool, id=f"syn-{i}-tool")]
    return session
