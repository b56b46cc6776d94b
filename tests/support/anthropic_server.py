"""A create_agent app whose summarizer is ``ChatAnthropic`` over HTTP to the local stand-in of Anthropic's API.

The stand-in itself is public (``langgraph_compaction.testing.providers``):
the docs' examples start it too. What it answers, from the anthropic SDK's
types (2.15): an on-demand compaction request (beta ``compact-2026-09-04``,
top-level ``compaction={"type": "summarize"}``) gets one block ``{"type":
"compaction", "content", "signature"}``, ``stop_reason="compaction"``, zero
top-level usage and one ``usage.iterations`` entry of type ``compaction``; a
threshold compaction (``compact_20260112``) starts an answer with that block.
The agent is the scripted tool-calling model of ``support.fronts``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_compaction import CompactionConfig, CompactionMiddleware
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.providers import AnthropicStandIn
from support.fronts import TOOLS, ToolCallingModel, request

__all__ = ["MODEL", "THREAD", "WINDOW", "AnthropicStandIn", "native_agent", "provider_summary", "run_session"]

WINDOW = 30_000
MODEL = "claude-opus-4-7"
THREAD = {"configurable": {"thread_id": "native"}}


def provider_summary(messages: list[dict]) -> str:
    """Return the stand-in's summary of a request: how many tool calls it read, and the first one's input."""
    calls = [
        b["input"]
        for m in messages
        for b in m.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    return f"Provider summary: checked {len(calls)} modules; first {calls[0] if calls else None}."


def native_agent(
    stand_in: AnthropicStandIn, path: Any, native: Any = True, model: str = MODEL, saver: Any = None, **settings: Any
) -> Any:
    """Return the app: ``ChatAnthropic`` summarizes (``summary.native``), a SQLite checkpointer in ``path``."""
    summarizer = ChatAnthropic(model=model, base_url=stand_in.base_url, api_key="test", max_retries=0)
    config = CompactionConfig(context_window=WINDOW, summary={"native": native}, **settings)
    middleware = CompactionMiddleware(model=summarizer, flush_model=ScriptedModel(), config=config, storage=path)
    saver = saver or SqliteSaver(sqlite3.connect(path / "checkpoints.sqlite", check_same_thread=False))
    return create_agent(ToolCallingModel(), TOOLS, middleware=[middleware], checkpointer=saver)


def run_session(agent: Any, requests: int = 8) -> dict:
    """Send ``requests`` user requests on one thread; return the state after them."""
    for n in range(requests):
        agent.invoke({"messages": [request(n)]}, THREAD)
    return agent.get_state(THREAD).values
