"""Reactive overflow recovery: when the model refuses a request as too long, compact at once and retry once.

Whether an error is such a refusal is ``errors.is_context_overflow``'s
call; LangGraph's control flow (``interrupt()``, ``GraphBubbleUp``) always
passes through untouched.
The model node ``add_compaction`` wraps recovers this way (unless
``overflow_recovery=False``); ``invoke_with_recovery`` /
``ainvoke_with_recovery`` do the same for a node that calls the model itself.

On a refusal the compaction nodes run in place, in overflow mode: layers 1-2
over the whole history, half the keep budget, and an extractive summary when
the summarizer fails. The call is then retried once, never with an unchanged
request; when even the smallest request compaction can make is over the
window, ``ContextTooLongError`` says how large it is and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from ..core.calibration import calibrated_tokens, observe, read_calibration
from .effects import CallAgent, Steps
from .errors import ContextTooLongError, is_context_overflow, overflow_figures
from .events import describe_error, emit_event
from .passes import Stages, apply_update, pass_steps, update_delta
from .run import Run, state_value
from .state import GraphUpdate, read_compaction


def smallest_request_problem(
    messages: Sequence[BaseMessage], counts: Sequence[int], window: int, fixed: int, calibration: dict[str, Any]
) -> str:
    """Return why the compacted request is still over ``window`` tokens: its size and its largest part."""
    total = calibrated_tokens(sum(counts), calibration, fixed)
    head = f"even the smallest request compaction can make is ~{total:,} tokens, over the model's window of {window:,}"
    if not messages:
        return f"{head}: the system prompt and tool schemas alone take ~{calibrated_tokens(0, calibration, fixed):,}"
    i = max(range(len(messages)), key=lambda k: counts[k])
    largest = calibrated_tokens(counts[i], calibration)
    if largest >= window:
        return (
            f"{head}: message {messages[i].id!r} ({messages[i].type}) alone is ~{largest:,} tokens; shorten or split it"
        )
    return (
        f"{head}: what cannot be summarized (system prompt, tool schemas, the latest request and the newest tool "
        "round) "
        f"is that large; its largest message is {messages[i].id!r} ({messages[i].type}, ~{largest:,} tokens)"
    )


def in_front(update: GraphUpdate, output: Any) -> Any:
    """Return a model node's output with a compaction ``update`` applied before it.

    The output may be a dict, a ``Command`` or a list of them (what
    ``create_agent``'s model node returns): the update's messages come first,
    so a rewrite lands before the reply, and ``compaction`` deltas add up.
    """
    if isinstance(output, Command) or (
        isinstance(output, (list, tuple)) and any(isinstance(o, Command) for o in output)
    ):
        # a node may return a list of updates and commands; LangGraph applies them in order
        return [update, *(output if isinstance(output, (list, tuple)) else [output])]
    if output is None:
        output = {}
    if not isinstance(output, dict):
        raise TypeError(
            "compaction needs the model node to return a dict, a Command or a list of them, "
            f"not {type(output).__name__}; "
            "return {'messages': [...]}"
        )
    new = output.get("messages") or []
    new = [new] if isinstance(new, BaseMessage) else list(new)
    merged = {**output, **update, "messages": list(update.get("messages") or []) + new}
    if "compaction" in output and "compaction" in update:
        merged["compaction"] = update_delta([update, output])
    return merged


def _merged(output: Any, messages: list[Any], compaction: dict[str, Any]) -> Any:
    """Return the retried node's output with the compacted history written in front of its messages."""
    return in_front({"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages], "compaction": compaction}, output)


def recovery_steps(engine: Stages, state: Any, run: Run) -> Steps[Any]:
    """Call the agent, and on an overflow compact in overflow mode and call once more; return the node's output.

    The agent's call is the ``CallAgent`` effect (the driver's ``call_agent``);
    the compaction is the pass every front runs (``passes.pass_steps``), its
    gate in overflow mode.
    """
    try:
        return (yield CallAgent(state))
    except GraphBubbleUp:  # interrupt() and other control flow belong to LangGraph, never to recovery
        raise
    except Exception as exc:  # noqa: BLE001 - anything but an overflow goes back to the caller unchanged
        if not is_context_overflow(exc):
            raise
        refusal = exc
    messages = engine.messages_of(state)
    record = read_compaction(state_value(state, "compaction"))
    counts = engine.counter.counts(messages)
    window, requested = overflow_figures(refusal)
    calibration = read_calibration(record["calibration"])
    if requested:
        calibration = observe(calibration, requested, sum(counts) + engine.fixed_tokens, window=window)
    window = window or calibration["window"] or run.budget.hard_limit
    updates: list[GraphUpdate] = [{"compaction": {"calibration": calibration}}]
    working = apply_update(state, updates[0])

    compacted_updates, working = yield from pass_steps(engine, working, run, overflow=True)
    updates += compacted_updates

    compacted = engine.messages_of(working)
    sizes = engine.counter.counts(compacted)
    after = calibrated_tokens(sum(sizes), calibration, engine.fixed_tokens)
    unchanged = [(m.id, m.content) for m in compacted] == [(m.id, m.content) for m in messages]
    event = {
        "stage": "overflow",
        "error": describe_error(refusal)[:300],
        "window": window,
        "tokens_before": requested or calibrated_tokens(sum(counts), calibration, engine.fixed_tokens),
        "tokens_after": after,
    }
    if unchanged or after > window:
        why = smallest_request_problem(compacted, sizes, window, engine.fixed_tokens, calibration)
        emit_event({**event, "error": why})
        raise ContextTooLongError(f"the model refused the request as too long, and {why}") from refusal
    updates.append({"compaction": {"events": [emit_event({**event, "retried": True})], "counts": {"overflow": 1}}})
    try:
        output = yield CallAgent(working)
    except Exception as exc:  # noqa: BLE001 - one retry only: a second refusal surfaces
        if not is_context_overflow(exc):
            raise
        raise ContextTooLongError(
            f"the model refused the request as too long again after compaction to ~{after:,} tokens "
            f"(window {window:,}): {describe_error(exc)}"
        ) from exc
    # the whole history after compaction: the compacted messages, or in view mode every message (the view is derived)
    return _merged(output, list(state_value(working, "messages") or []), update_delta(updates))


def _request(system_prompt: Any, messages: list[Any]) -> list[Any]:
    if not system_prompt:
        return messages
    system = system_prompt if isinstance(system_prompt, SystemMessage) else SystemMessage(content=system_prompt)
    return [system, *messages]


def invoke_with_recovery(
    nodes: Any, model: Any, state: Any, config: RunnableConfig | None = None, *, system_prompt: Any = None
) -> dict[str, Any]:
    """Call ``model`` on the state's messages and return the node update ``{"messages": [reply]}``.

    For a node that calls the model itself: when the model refuses the request
    as too long, the history is compacted (the update then rewrites it) and
    the call is retried once.

    Args:
        nodes: The compaction nodes ``add_compaction`` returns (a ``CompactionEngine``).
        model: The agent's chat model.
        state: The node's graph state; its messages are the request.
        config: The node's run config, passed on to the model and used to find the thread.
        system_prompt: A string or ``SystemMessage`` put in front of the messages for the call
            only; None sends the messages as they are.
    """
    config = config or {}

    def call(s: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(_request(system_prompt, nodes.messages_of(s)), config)]}

    update: dict[str, Any] = nodes.recover(state, nodes.where(config, state), call)
    return update


async def ainvoke_with_recovery(
    nodes: Any, model: Any, state: Any, config: RunnableConfig | None = None, *, system_prompt: Any = None
) -> dict[str, Any]:
    """Return ``invoke_with_recovery``'s update, calling the model with ``ainvoke``.

    Args:
        nodes: See ``invoke_with_recovery``; every argument means the same.
        model: See ``invoke_with_recovery``.
        state: See ``invoke_with_recovery``.
        config: See ``invoke_with_recovery``.
        system_prompt: See ``invoke_with_recovery``.
    """
    config = config or {}

    async def call(s: Any) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(_request(system_prompt, nodes.messages_of(s)), config)]}

    update: dict[str, Any] = await nodes.arecover(state, nodes.where(config, state), call)
    return update
