"""The shape of a conversation: tool-call pairing, safe cut points, summaries.

Pure functions over lists of LangChain messages. Results are matched to their
call by position (the closest preceding assistant message that made a call
with that id), never through one global id map, because real logs reuse
tool-call ids for later calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

#: ``name`` of the summary message that compaction writes.
SUMMARY_MESSAGE_NAME = "__compaction_summary__"
#: ``additional_kwargs`` key of what compaction writes: the summary, the messages an
#: ``after_compaction`` hook re-injects (``"kind": "injected"``) and the context status line.
COMPACTION_MARKER = "lc_compaction"


def is_summary(message: BaseMessage) -> bool:
    """Return True for a summary message written by compaction.

    Args:
        message: Any message of a conversation.
    """
    return isinstance(message, HumanMessage) and message.name == SUMMARY_MESSAGE_NAME


def compaction_kind(message: BaseMessage) -> str | None:
    """Return the kind of a message compaction wrote (``summary``, ``injected``, ``status``), None for the others."""
    marker = message.additional_kwargs.get(COMPACTION_MARKER) if isinstance(message.additional_kwargs, dict) else None
    return marker.get("kind") if isinstance(marker, dict) else None


def is_injected(message: BaseMessage) -> bool:
    """Return True for a message an ``after_compaction`` hook placed after a summary.

    The next compaction replaces it.
    """
    return compaction_kind(message) == "injected"


def is_user_turn(message: BaseMessage) -> bool:
    """Return True for a human message that a person wrote (not a summary, a re-injected message or the status line)."""
    return isinstance(message, HumanMessage) and not is_summary(message) and compaction_kind(message) is None


def tool_calls_of(message: BaseMessage) -> list[ToolCall]:
    """Return the tool calls of an assistant message (``[]`` for any other message)."""
    if isinstance(message, AIMessage):
        return list(message.tool_calls or [])
    return []


def answered_call_id(message: BaseMessage) -> str | None:
    """Return the id of the tool call a tool message answers (None for any other message)."""
    return message.tool_call_id if isinstance(message, ToolMessage) else None


def text_of(message: BaseMessage) -> str:
    """Return the readable text of a message's content (text blocks joined)."""
    return content_text(message.content)


def content_text(content: Any) -> str:
    """Return the text of str or list content; non-text blocks are summarised in brackets."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in ("text", "thinking", "reasoning"):
                parts.append(str(block.get(kind) or block.get("text") or ""))
            elif kind == "tool_result":
                parts.append(content_text(block.get("content")))
            elif kind == "tool_use":
                parts.append(
                    f"[tool_use {block.get('name')}: {json.dumps(block.get('input'), ensure_ascii=False, default=str)}]"
                )
            elif kind in ("image", "image_url", "file", "document", "audio"):
                parts.append(f"[{kind}]")
            else:
                parts.append(json.dumps(block, ensure_ascii=False, default=str))
    return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class ToolRound:
    """One assistant message with tool calls and the positions of its results."""

    call_index: int
    result_indices: tuple[int, ...]
    call_ids: tuple[str, ...]

    @property
    def end(self) -> int:
        """Return the index of the last message of the round (call or last result)."""
        return max((self.call_index, *self.result_indices))


def tool_rounds(messages: Sequence[BaseMessage]) -> list[ToolRound]:
    """Return every assistant tool-call round with the indices of the results answering it."""
    owner_of_id: dict[str, int] = {}
    results: dict[int, list[int]] = {}
    rounds_at: list[int] = []
    for i, m in enumerate(messages):
        calls = tool_calls_of(m)
        if calls:
            rounds_at.append(i)
            results[i] = []
            for call in calls:
                if call_id := call.get("id"):
                    owner_of_id[call_id] = i
        elif isinstance(m, ToolMessage):
            owner = owner_of_id.get(m.tool_call_id)
            if owner is not None:
                results[owner].append(i)
    return [
        ToolRound(
            call_index=i,
            result_indices=tuple(results[i]),
            call_ids=tuple(c.get("id") or "" for c in tool_calls_of(messages[i])),
        )
        for i in rounds_at
    ]


def tool_names_by_result(messages: Sequence[BaseMessage], rounds: list[ToolRound] | None = None) -> dict[int, str]:
    """Return, for each answered tool message index, the name of the tool that was called."""
    names: dict[int, str] = {}
    for r in rounds if rounds is not None else tool_rounds(messages):
        by_id = {c.get("id"): c.get("name") for c in tool_calls_of(messages[r.call_index])}
        for j in r.result_indices:
            names[j] = by_id.get(answered_call_id(messages[j])) or messages[j].name or "tool"
    return names


def unsafe_cut_points(messages: Sequence[BaseMessage], rounds: list[ToolRound] | None = None) -> list[bool]:
    """Return, for each index, whether starting the kept tail there would break a tool round.

    A cut inside a round separates a call from a result; a cut at a tool
    message would start the tail with a tool message. Overlapping rounds
    (mixed runs, results separated from their call) are covered as one span.
    With Anthropic extended thinking (an assistant message opens with a
    thinking block) a turn runs from a user message across its tool results,
    and only its first assistant message thinks: a tail may start at a user
    message or at an assistant message that opens with thinking, never at a
    later assistant message of a turn, which Anthropic would refuse.
    """
    n = len(messages)
    delta = [0] * (n + 2)
    for r in rounds if rounds is not None else tool_rounds(messages):
        if r.end > r.call_index:
            delta[r.call_index + 1] += 1
            delta[r.end + 1] -= 1
    unsafe = [False] * (n + 1)
    depth = 0
    for i in range(n + 1):
        depth += delta[i]
        unsafe[i] = depth > 0 or (i < n and isinstance(messages[i], ToolMessage))
    if any(starts_with_thinking(m) for m in messages):
        for i, m in enumerate(messages):
            if isinstance(m, AIMessage) and not starts_with_thinking(m):
                unsafe[i] = True
    return unsafe


def starts_with_thinking(message: BaseMessage) -> bool:
    """Return True for an assistant message that opens with a (redacted) thinking block: Anthropic extended thinking."""
    content = message.content
    return (
        isinstance(message, AIMessage)
        and isinstance(content, list)
        and bool(content)
        and isinstance(content[0], dict)
        and content[0].get("type") in ("thinking", "redacted_thinking")
    )


def latest_user_index(messages: Sequence[BaseMessage]) -> int | None:
    """Return the index of the latest human message a person wrote, or None."""
    for i in range(len(messages) - 1, -1, -1):
        if is_user_turn(messages[i]):
            return i
    return None


def is_system(message: BaseMessage) -> bool:
    """Return True for a system message."""
    return isinstance(message, SystemMessage)


def leading_systems(messages: Sequence[BaseMessage]) -> int:
    """Return how many system messages open the conversation: those are pinned, never compacted.

    A system message after the first turn (a reminder an app adds each turn)
    is conversation: it can be summarized like any other message, or the
    reminders alone would fill the window.
    """
    n = 0
    for m in messages:
        if not isinstance(m, SystemMessage):
            break
        n += 1
    return n


def summary_out_of_place(messages: Sequence[BaseMessage]) -> bool:
    """Return True when a summary sits after the first conversation message.

    A compaction puts its summary right after the leading system messages and
    removes what it summarized. A summary further down means something added
    the removed messages back in front of it: a parent graph whose
    ``add_messages`` never saw the removals.
    """
    lead = leading_systems(messages)
    return any(is_summary(m) for m in messages[lead + 1 :])
