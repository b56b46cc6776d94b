"""The summarizer's request: the agent's own cached prefix plus an instruction, or the rendered transcript in parts.

With the agent's own model the summarizer (and the memory model) is sent the
agent's request up to the cut, unchanged, followed by one instruction: the
provider's prompt cache serves that prefix. Another model gets the evicted
messages rendered as text, split into parts that fit its window and merged
(each part's summary chained into the next), and split again into halves when
the model refuses a part as too long.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from ..core.summary import (
    build_summary_message,
    chunk_for_window,
    newest_within,
    own_summary,
    render_messages,
    summary_instruction,
    summary_problem,
    summary_prompt,
)
from ..core.tokens import estimate_text_tokens
from .effects import CallModel, Steps
from .errors import is_context_overflow, overflow_figures
from .events import describe_error
from .setup import Setup
from .state import Pending

#: Tokens left free in the summarizer's window besides a reused prefix: the instruction and the answer.
PREFIX_ALLOWANCE = 4_000

#: A summary's text, or why there is none.
Answer = tuple[str | None, str | None]


def cached_prefix(
    setup: Setup, messages: Sequence[BaseMessage], pending: Pending | dict[str, Any]
) -> list[BaseMessage] | None:
    """Return the agent's own request up to the cut (system prompt first), or None when it cannot be reused.

    It cannot after an overflow (the agent's request was refused as too
    long) or when it may not fit the summarizer's window.
    """
    if pending.get("reason") == "overflow":
        return None
    cutoff_id = pending.get("cutoff_id")
    end = next((i for i, m in enumerate(messages) if m.id == cutoff_id), len(messages)) if cutoff_id else len(messages)
    prefix = [*setup.head, *messages[:end]]
    if setup.counter.total(prefix) + setup.fixed_tokens + PREFIX_ALLOWANCE > setup.summarizer_window():
        return None
    return prefix


def summarizer_budget(setup: Setup) -> int:
    """Return the tokens one summarizer request may hold: its window less the reserve and the answer."""
    window = setup.summarizer_window()
    return max(1_000, window - min(setup.config.reserved, window // 2) - 1_500)


def _prompt(setup: Setup, instructions: Sequence[str | None]) -> dict[str, Any]:
    config = setup.config
    return {"prompt": config.summary.prompt, "instructions": [config.summary.instructions, *instructions]}


def _from_prefix(
    setup: Setup,
    evicted: Sequence[BaseMessage],
    focus: str | None,
    prefix: list[BaseMessage],
    instructions: Sequence[str | None],
) -> Steps[Answer]:
    instruction = summary_instruction(focus, **_prompt(setup, instructions))
    try:
        answer = yield CallModel(setup.agent_model, [*prefix, HumanMessage(instruction)])
    except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
        if is_context_overflow(exc):  # the rendered transcript shortens long results and can be split
            return (yield from summary_text(setup, evicted, focus, instructions=instructions))
        return None, f"the summarizer failed: {describe_error(exc)}"
    replaced = render_messages(evicted, setup.config.summary.result_chars)
    problem = summary_problem(answer, replaced=replaced, prompt=setup.config.summary.prompt)
    return (None, problem) if problem else (answer, None)


def _from_function(setup: Setup, evicted: Sequence[BaseMessage]) -> Steps[Answer]:
    try:
        answer = yield CallModel(setup.model, list(evicted))
    except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
        return None, f"the summarizer failed: {describe_error(exc)}"
    replaced = render_messages(evicted, setup.config.summary.result_chars)
    problem = summary_problem(answer, replaced=replaced, prompt="")  # it was sent no prompt to write back
    return (None, problem) if problem else (answer, None)


def summary_text(
    setup: Setup,
    evicted: Sequence[BaseMessage],
    focus: str | None,
    budget: int | None = None,
    prefix: list[BaseMessage] | None = None,
    instructions: Sequence[str | None] = (),
) -> Steps[Answer]:
    """Yield summarizer calls (split and merged when the prefix is over its window); return (text, problem).

    With ``prefix`` (the agent's own request up to the cut, see
    ``cached_prefix``) one call sends it followed by the instruction. When the
    summarizer refuses a part as too long (its window is smaller than
    configured), the prefix is split again into parts half as large.
    ``instructions`` (the application's, this summary's) are added to the
    prompt (``summary.prompt`` when configured, else the built-in one).
    With ``summary.history_tokens`` only the newest evicted messages are sent,
    in one request; a summarizer function (``takes_messages``) is given the
    messages themselves and returns the text.
    """
    shown, history = setup.config.summary.result_chars, setup.config.summary.history_tokens
    if history is not None:  # the newest messages only, in one request (LangChain's trim_tokens_to_summarize)
        evicted = newest_within(evicted, history, setup.counter.counts(evicted))
    elif prefix is not None:
        return (yield from _from_prefix(setup, evicted, focus, prefix, instructions))
    if getattr(setup.model, "takes_messages", False):  # a summarizer function: given the messages, not a prompt
        return (yield from _from_function(setup, evicted))
    budget = budget or summarizer_budget(setup)
    text: str | None = None
    # the counts are known: only a prefix that may not fit is rendered and measured piece by piece
    fits = history is not None or setup.counter.total(evicted) * 1.2 + 500 < budget
    for chunk in [list(evicted)] if fits else chunk_for_window(evicted, budget, estimate_text_tokens, shown):
        # the previous part's summary without its loop: what the model's own text is (own_summary)
        inputs = ([build_summary_message(own_summary(text, setup.config.summary.prompt)[0])] if text else []) + chunk
        replaced = render_messages(inputs, shown)
        request = summary_prompt(replaced, focus, **_prompt(setup, instructions))
        try:
            answer = yield CallModel(setup.model, request)
        except Exception as exc:  # noqa: BLE001 - a failed summary is never committed
            window, _ = overflow_figures(exc)
            smaller = min(budget // 2, (window or budget) // 2)
            if is_context_overflow(exc) and smaller >= 250:
                return (yield from summary_text(setup, evicted, focus, smaller, instructions=instructions))
            return None, f"the summarizer failed: {describe_error(exc)}"
        problem = summary_problem(answer, replaced=replaced, prompt=setup.config.summary.prompt)
        if problem:
            return None, problem
        text = answer
    return text, None
