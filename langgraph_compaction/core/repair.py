"""Tool calls nothing answers: each gets a result saying it was not run, right after its message.

A run that ends between the agent's tool calls and their results (a crash, a
killed worker, a client that gives up and sends the request again) or an
approval the user answered with a new message instead of a decision leaves
calls in the history with no result. OpenAI and Anthropic refuse every later
request that carries them. ``answer_unanswered`` gives each such call a
result, placed after the call's message and the results of its siblings that
did run; nothing else moves. Pure functions; nothing here imports langgraph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .conversation import COMPACTION_MARKER, tool_calls_of

#: What the model reads in place of a result that never came.
NOT_RUN = (
    "Not run: this tool call got no result (the run ended before it ran, or it was not approved). "
    "Call it again if it is still needed."
)


def not_run_result(call: Mapping[str, Any]) -> ToolMessage:
    """Return the result that answers a call that was never run (its id derived from the call's, so it is stable)."""
    return ToolMessage(
        NOT_RUN,
        tool_call_id=call["id"],
        name=call.get("name") or "",
        status="error",
        id=f"not-run-{call['id']}",
        additional_kwargs={COMPACTION_MARKER: {"kind": "not_run"}},
    )


def _open_calls(messages: Sequence[BaseMessage]) -> bool:
    """Return True when some tool call has no result after it; holds only the calls still open as it reads."""
    open_ids: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            open_ids.discard(m.tool_call_id)
        elif isinstance(m, AIMessage) and m.tool_calls:
            open_ids.update(str(c["id"]) for c in tool_calls_of(m) if c.get("id"))
    return bool(open_ids)


def answer_unanswered(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[ToolMessage]]:
    """Return the messages with every unanswered tool call answered, and the results added (empty: none was).

    A call counts as answered when a tool result anywhere after its message
    carries its id. Each added result goes right after the block of results
    that follows the call's message, in the order of the calls.
    """
    if not _open_calls(messages):  # the usual case, found without building anything
        return messages if isinstance(messages, list) else list(messages), []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    out: list[BaseMessage] = []
    added: list[ToolMessage] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        out.append(message)
        i += 1
        if not isinstance(message, AIMessage):
            continue
        missing = [c for c in tool_calls_of(message) if c.get("id") and c["id"] not in answered]
        if not missing:
            continue
        while i < n and isinstance(messages[i], ToolMessage):  # the results of its siblings that ran
            out.append(messages[i])
            i += 1
        for call in missing:
            result = not_run_result(call)
            answered.add(result.tool_call_id)
            out.append(result)
            added.append(result)
    return (out, added) if added else (list(messages), [])
