"""Tool calls nothing answers: each gets a result saying none was recorded, right after its message.

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

from langchain_core.messages import BaseMessage, ToolCall, ToolMessage

from .conversation import COMPACTION_MARKER

#: What the model reads in place of a result that never came. The run may have died after the tool ran and before
#: its result was kept (a payment made, an email sent), so the model is told to check before doing it again.
NOT_RUN = (
    "No result was recorded for this tool call: it was not approved, or the run ended before its result was kept. "
    "It may have run anyway. Before calling it again, check whether its effect already happened "
    "(a file written, a message sent, a payment made); repeat it only if it did not."
)


def not_run_result(call: Mapping[str, Any], message_id: str | None = None) -> ToolMessage:
    """Return the result that answers a call that was never run.

    Its id is derived from the call's, so it is stable; ``message_id`` (the
    call's message) is added to it when a reused call id already named one.
    """
    return ToolMessage(
        NOT_RUN,
        tool_call_id=call["id"],
        name=call.get("name") or "",
        status="error",
        id=f"not-run-{call['id']}" + (f"-{message_id}" if message_id else ""),
        additional_kwargs={COMPACTION_MARKER: {"kind": "not_run"}},
    )


def unanswered_calls(messages: Sequence[BaseMessage]) -> dict[int, list[ToolCall]]:
    """Return the tool calls no later result answers, by the index of their message, in the order of its calls.

    A result answers the latest call of its id still open before it: a
    result an earlier call of a reused id got answers that call only. One
    pass, reading each message's fields once (the gate runs it on every call).
    """
    latest: dict[str, tuple[int, int, ToolCall]] = {}  # the latest open call of each id
    shadowed: dict[str, list[tuple[int, int, ToolCall]]] = {}  # open calls of a reused id, under a later one
    for i, message in enumerate(messages):
        fields = message.__dict__
        if calls := fields.get("tool_calls"):
            for k, call in enumerate(calls):
                if call.get("id"):
                    call_id = str(call["id"])
                    if call_id in latest:
                        shadowed.setdefault(call_id, []).append(latest[call_id])
                    latest[call_id] = (i, k, call)
        elif (answered := fields.get("tool_call_id")) in latest:
            earlier = shadowed.get(answered)
            if earlier:
                latest[answered] = earlier.pop()
            else:
                del latest[answered]
    missing: dict[int, list[ToolCall]] = {}
    for i, _, call in sorted([*latest.values(), *(c for calls in shadowed.values() for c in calls)]):
        missing.setdefault(i, []).append(call)
    return missing


def answer_unanswered(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[ToolMessage]]:
    """Return the messages with every unanswered tool call answered, and the results added (empty: none was).

    A call counts as answered when a tool result after its message carries
    its id (see ``unanswered_calls``). Each added result goes right after the
    block of results that follows the call's message, in the order of the
    calls, under an id no other message has.
    """
    missing = unanswered_calls(messages)
    if not missing:  # the usual case: one pass, nothing built
        return messages if isinstance(messages, list) else list(messages), []
    ids = {m.id for m in messages}
    out: list[BaseMessage] = []
    added: list[ToolMessage] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        out.append(message)
        i += 1
        calls = missing.get(i - 1)
        if not calls:
            continue
        while i < n and isinstance(messages[i], ToolMessage):  # the results of its siblings that ran
            out.append(messages[i])
            i += 1
        for call in calls:
            result = not_run_result(call)
            if result.id in ids:  # a reused call id
                result = not_run_result(call, message.id)
            ids.add(result.id)
            out.append(result)
            added.append(result)
    return out, added
