"""Checks that a message list is one a provider accepts.

These encode the ordering rules OpenAI and Anthropic enforce with an HTTP 400,
so tests, benchmarks and the stress run can assert "the model would have
accepted this" without a network.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from .conversation import starts_with_thinking, tool_calls_of


def openai_violations(messages: Sequence[BaseMessage]) -> list[str]:
    """Return the reasons OpenAI's chat API would reject this message order (empty if none).

    Args:
        messages: The messages a request would send, in order.
    """
    problems: list[str] = []
    if not messages:
        return ["the message list is empty"]
    open_calls: set[str | None] = set()  # a call may come without an id
    open_at: int | None = None
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_calls:
                problems.append(
                    f"message {i}: tool result {m.tool_call_id!r} does not answer a call of the closest preceding "
                    "assistant message"
                )
            else:
                open_calls.discard(m.tool_call_id)
            continue
        if open_calls:
            problems.append(
                f"message {open_at}: tool calls {sorted(open_calls, key=str)} are not answered before message {i}"
            )
        open_calls = {c.get("id") for c in tool_calls_of(m)}
        open_at = i
    if open_calls:
        problems.append(f"message {open_at}: tool calls {sorted(open_calls, key=str)} are never answered")
    return problems


def broken_tool_ids(messages: Sequence[BaseMessage]) -> set[tuple[str, str]]:
    """Return ``("orphan", id)`` / ``("unanswered", id)`` for each tool id a provider would reject."""
    broken: set[tuple[str, str]] = set()
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            if m.tool_call_id in open_calls:
                open_calls.discard(m.tool_call_id)
            else:
                broken.add(("orphan", str(m.tool_call_id)))
            continue
        broken.update(("unanswered", str(i)) for i in open_calls)
        open_calls = {str(c.get("id")) for c in tool_calls_of(m)}
    broken.update(("unanswered", str(i)) for i in open_calls)
    return broken


def anthropic_violations(messages: Sequence[BaseMessage], *, thinking: bool | None = None) -> list[str]:
    """Return the reasons Anthropic's messages API would reject this order (empty if none).

    Besides the tool-result pairing (the same as OpenAI's), Anthropic accepts
    system messages only as one leading block and wants the first turn to be
    a user turn. With extended thinking (``thinking=True``; None: when any
    assistant message opens with a thinking block), the assistant turn in
    progress (the request ends with tool results) must open with its
    thinking block.

    Args:
        messages: The messages a request would send, in order.
        thinking: Whether extended thinking is on; None decides it from the
            messages (on when any assistant message opens with a thinking block).
    """
    problems = openai_violations(messages)
    seen_other = False
    first_turn_checked = False
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            if seen_other:
                problems.append(f"message {i}: system message after the conversation started")
            continue
        seen_other = True
        if not first_turn_checked:
            first_turn_checked = True
            if not isinstance(m, HumanMessage):
                problems.append(f"message {i}: the first turn is {m.type}, not a user turn")
    if thinking is None:
        thinking = any(starts_with_thinking(m) for m in messages)
    if thinking and messages and isinstance(messages[-1], ToolMessage):
        # the turn in progress starts after the last user message (a tool result is not one)
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1) + 1
        first = next((i for i in range(start, len(messages)) if isinstance(messages[i], AIMessage)), None)
        if first is not None and not starts_with_thinking(messages[first]):
            problems.append(
                f"message {first}: with extended thinking, the assistant turn in progress must open with its "
                "thinking block"
            )
    return problems


def view_violations(messages: Sequence[BaseMessage], latest_human: BaseMessage | None) -> list[str]:
    """Return every broken promise of a compacted view: provider rules, system first, latest request.

    Args:
        messages: The compacted view, as the model would be sent it.
        latest_human: The most recent human message of the uncompacted
            conversation, which the view must contain verbatim; None when it
            has none.
    """
    problems = anthropic_violations(messages)
    system_ids = [m.id for m in messages if isinstance(m, SystemMessage)]
    if len(system_ids) != len(set(system_ids)):
        problems.append("a system message appears twice")
    if latest_human is not None and not any(
        isinstance(m, HumanMessage) and m.id == latest_human.id and m.content == latest_human.content for m in messages
    ):
        problems.append("the latest human message is missing or changed")
    return problems
