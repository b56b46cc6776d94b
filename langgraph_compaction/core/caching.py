"""Prompt-cache breakpoints for Anthropic models: where each request's cached prefix should end.

OpenAI caches a request's longest known prefix by itself. Anthropic caches
only up to the content blocks marked with ``cache_control`` (at most four per
request). ``with_cache_breakpoints`` marks three: the system prompt (stable
for the whole thread), the compaction summary (the start of everything after
the latest compaction) and the newest message (so the next call, which
extends this one, reads all of it from the cache). Call it on the messages
your model node sends to ``ChatAnthropic``; the state keeps them unmarked.

Pure functions; nothing here imports langgraph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from .conversation import is_summary, is_system

#: Anthropic's default cache entry (five minutes).
EPHEMERAL = {"type": "ephemeral"}
#: How many earlier requests a provider's cache is taken to hold, for measuring what it serves.
CACHE_DEPTH = 4


def cache_key(message: BaseMessage) -> tuple[Any, ...]:
    """Return what a provider's cache compares of a message: role, content, tool calls, tool call id, name."""
    calls = tuple((c.get("name"), c.get("args"), c.get("id")) for c in getattr(message, "tool_calls", None) or ())
    return message.type, message.content, calls, getattr(message, "tool_call_id", None), message.name


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Return how many leading items ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def cached_prefix(keys: Sequence[Any], recent: Sequence[Sequence[Any]]) -> int:
    """Return how many leading messages (``keys``, e.g. `cache_key`) a cache holding the ``recent`` requests serves."""
    return max((common_prefix(keys, earlier) for earlier in recent), default=0)


def with_cache_breakpoints(
    messages: Sequence[BaseMessage], cache_control: dict[str, Any] | None = None
) -> list[BaseMessage]:
    """Return copies of ``messages`` with ``cache_control`` on the system prompt, latest summary and newest message.

    A marked message's content becomes content blocks, the last one carrying
    ``cache_control`` (default ``{"type": "ephemeral"}``); a message without
    text (an assistant turn of tool calls only) is left as it is. The others
    are the same objects.
    """
    control = dict(cache_control or EPHEMERAL)
    marks = {
        next((i for i, m in enumerate(messages) if is_system(m)), None),
        next((i for i in range(len(messages) - 1, -1, -1) if is_summary(messages[i])), None),
        len(messages) - 1 if messages else None,
    }
    return [_marked(m, control) if i in marks else m for i, m in enumerate(messages)]


def _marked(message: BaseMessage, control: dict[str, Any]) -> BaseMessage:
    content = message.content
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}] if content else []
    else:
        blocks = [dict(b) if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    if not blocks:
        return message
    blocks[-1] = {**blocks[-1], "cache_control": control}
    return message.model_copy(update={"content": blocks})
