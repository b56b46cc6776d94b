"""Message builders for the core's table tests: a message's tokens are its characters (``tokens``).

Counting one token per character keeps every figure of a table readable: a
message of ``"x" * 300`` is 300 tokens, and a tool call counts its name and
arguments as they are written.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_compaction.core.config import Budget
from langgraph_compaction.core.conversation import content_text


def tokens(message: BaseMessage) -> int:
    """Return the tokens of a message: the characters of its text and of its tool calls' names and arguments."""
    calls = getattr(message, "tool_calls", None) or []
    return len(content_text(message.content)) + sum(len(c["name"]) + len(json.dumps(c["args"])) for c in calls)


def counts(messages: list[BaseMessage]) -> list[int]:
    """Return the tokens of each message (``tokens``)."""
    return [tokens(m) for m in messages]


def human(id: str, size: int = 100, text: str | None = None) -> HumanMessage:
    """Return a user message of ``size`` tokens (or of ``text``)."""
    return HumanMessage("h" * size if text is None else text, id=id)


def ai(id: str, size: int = 100, calls: list[dict[str, Any]] | None = None, text: str | None = None) -> AIMessage:
    """Return an assistant message of ``size`` characters of text, making ``calls``."""
    return AIMessage("a" * size if text is None else text, id=id, tool_calls=calls or [])


def call(call_id: str, name: str = "bash", **args: Any) -> dict[str, Any]:
    """Return a tool call of ``name`` with ``args``."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def result(id: str, call_id: str, size: int = 100, name: str | None = None, **kw: Any) -> ToolMessage:
    """Return the tool result answering ``call_id``: ``size`` characters."""
    return ToolMessage("r" * size, tool_call_id=call_id, id=id, name=name, **kw)


def system(id: str, size: int = 100) -> SystemMessage:
    """Return a system message of ``size`` tokens."""
    return SystemMessage("s" * size, id=id)


def chat(n: int, size: int = 100) -> list[BaseMessage]:
    """Return ``n`` messages, user and assistant in turn (``m0``, ``m1``, ...), ``size`` tokens each."""
    return [human(f"m{i}", size) if i % 2 == 0 else ai(f"m{i}", size) for i in range(n)]


def budget(**fields: Any) -> Budget:
    """Return a Budget: a 10,000-token trigger, no window, a 1,000-token tail; ``fields`` override."""
    values: dict[str, Any] = {
        "context_window": None,
        "trigger_tokens": 10_000,
        "keep_tokens": 1_000,
        "keep_messages": 20,
        "trigger_messages": 0,
        "target_tokens": 6_000,
    }
    return Budget(**{**values, **fields})
