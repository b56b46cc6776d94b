"""The application's hooks around a summary: what they are told, and what their answers mean.

``CompactionConfig(summary={"before_summary": f, "after_compaction": g})``: each is a plain or
an ``async`` function of one ``CompactionInfo``. ``before_summary`` may answer
extra instructions for this one summary (a string) or ``False`` to skip the
summarizer (the extractive summary is made instead, as when the model fails);
``after_compaction`` may answer messages that go right after the summary (the
contents of ``AGENTS.md``, the todo list, a re-read of the file being edited).
Those are marked (``additional_kwargs["lc_compaction"]["kind"] == "injected"``)
so that the next compaction drops them, and the hook gives them again, instead
of summarizing them. Pure functions; the engine calls the hooks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from .conversation import COMPACTION_MARKER
from .validation import openai_violations


@dataclass(frozen=True)
class CompactionInfo:
    """What a hook is told about one compaction.

    Args:
        thread_id: The thread being compacted.
        user_id: The user the thread belongs to.
        reason: Why compaction ran: ``"tokens"``, ``"messages"``, ``"overflow"``, ``"manual"`` or
            ``"background"``.
        tokens_before: The conversation's tokens before the compaction.
        messages: The messages to be summarized (``before_summary``) or that
            were (``after_compaction``).
        transcript_path: Where the originals are; None without storage.
        focus: What a manual compaction asked the summary to focus on (the
            ``compact`` tool's ``focus``); None when nothing was asked.
        summary: The summary's text, once it is made.
        summary_id: The summary message's id, once it is made.
    """

    thread_id: str
    user_id: str
    reason: str | None
    tokens_before: int
    messages: list[BaseMessage] = field(default_factory=list)
    transcript_path: str | None = None
    focus: str | None = None
    summary: str | None = None
    summary_id: str | None = None


def before_summary_answer(value: Any) -> tuple[str | None, bool]:
    """Return (extra instructions, skip the summarizer) for a ``before_summary`` answer.

    Raises:
        TypeError: For an answer that is not a str, False, True or None.
    """
    if value is None or value is True:
        return None, False
    if value is False:
        return None, True
    if isinstance(value, str):
        return (value.strip() or None), False
    raise TypeError(
        f"before_summary returned {type(value).__name__}; return a str (instructions for this summary), "
        "False (skip the summarizer) or None"
    )


def injected_messages(value: Any, summary_id: str) -> list[BaseMessage]:
    """Return an ``after_compaction`` answer as marked messages with stable ids; raise TypeError on a bad one.

    A string becomes a human message; a message keeps its type and content
    and gets the marker (and, without an id, ``<summary id>:injected:<n>``).
    """
    if value is None:
        return []
    items = [value] if isinstance(value, (str, BaseMessage)) else value
    if not isinstance(items, (list, tuple)):
        raise TypeError(
            f"after_compaction returned {type(value).__name__}; return a list of messages (or strings), or None"
        )
    out = []
    for n, item in enumerate(items):
        if isinstance(item, str):
            item = HumanMessage(item)
        if not isinstance(item, BaseMessage):
            raise TypeError(
                f"after_compaction returned a {type(item).__name__} at position {n}; return messages or strings"
            )
        marker = {"kind": "injected", "summary_id": summary_id}
        out.append(
            item.model_copy(
                update={
                    "id": item.id or f"{summary_id}:injected:{n}",
                    "additional_kwargs": {**item.additional_kwargs, COMPACTION_MARKER: marker},
                }
            )
        )
    return out


def pairing_problem(messages: list[BaseMessage]) -> str | None:
    """Return why messages a hook placed after a summary would break tool-call pairing (None: every call paired).

    A result must answer a call of the message right before its block, and
    every call must be answered before the next message: otherwise every later
    request carries an orphan result or an unanswered call, which providers refuse.
    """
    problems = openai_violations(messages) if messages else []
    return "; ".join(problems) or None
