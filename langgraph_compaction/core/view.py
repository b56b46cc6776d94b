"""View-only mode: the state keeps every message, the model is sent the compacted view.

``CompactionConfig(mode="view")`` keeps the whole conversation in the state
(for UIs and audits) and records each compaction as a *view record* in the
``compaction`` key instead of removing messages: the summary message, where
the kept tail starts (``cutoff_id``), the request kept in front of it and the
last message the compaction saw. Layers 1-2 shorten the model's copy only:
their edits are kept by message id (``view_edits``), the state's messages stay
as they were added. ``model_view`` rebuilds what the model is sent from the
full history, the record and the edits, so summaries chain exactly as in
rewrite mode. Pure functions, JSON-native records.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, message_to_dict, messages_from_dict

from .conversation import COMPACTION_MARKER, leading_systems
from .plan import compacted_view

logger = logging.getLogger("langgraph_compaction")


def kept_edits(edits: Any, view: Sequence[BaseMessage]) -> dict[str, Any]:
    """Return the layer edits of the messages still in ``view`` (the others left it with a summary)."""
    ids = {m.id for m in view}
    return {i: e for i, e in edits.items() if i in ids} if isinstance(edits, dict) else {}


def view_record(
    messages: Sequence[BaseMessage],
    evict_ids: set[Any],
    cutoff_id: str | None,
    summary: BaseMessage,
    after: Sequence[BaseMessage] = (),
) -> dict[str, Any]:
    """Return the JSON-native record of a compaction of ``messages`` (themselves a view or the whole history).

    ``cutoff_id`` is the first message of the kept tail (None: nothing after
    the cut); the messages before it that stay (besides the leading system
    messages: the latest request) are named, so the view can be rebuilt after new messages
    arrive. ``after`` are the messages an ``after_compaction`` hook placed
    after the summary (in the view only, like the summary).
    """
    end = next((i for i, m in enumerate(messages) if m.id == cutoff_id), len(messages)) if cutoff_id else len(messages)
    lead = leading_systems(messages)  # pinned; a system message after them is conversation
    kept_before = [m.id for m in messages[lead:end] if m.id not in evict_ids]
    return {
        "summary": message_to_dict(summary),
        "cutoff_id": cutoff_id,
        "last_id": messages[-1].id if messages else None,
        "kept_ids": kept_before,
        **({"after": [message_to_dict(m) for m in after]} if after else {}),
    }


def model_view(messages: Sequence[BaseMessage], record: Any, edits: Any = None) -> list[BaseMessage]:
    """Return what the model is sent in view mode: the leading system messages, the summary, then the kept tail.

    ``edits`` (message id -> ``message_to_dict`` of the shortened copy)
    replaces those messages. Without a record (nothing compacted yet) the
    whole history. A record whose anchor messages are gone (the history was
    edited or rewritten since) no longer describes this history: the whole
    history is returned and the next gate compacts it again.
    """
    messages = list(messages)
    if isinstance(edits, dict) and edits:
        shortened = dict(zip(edits, messages_from_dict(list(edits.values())), strict=True))
        messages = [shortened.get(m.id, m) for m in messages]
    if not isinstance(record, dict) or not isinstance(record.get("summary"), dict):
        return messages
    ids = {m.id: i for i, m in enumerate(messages)}
    cutoff_id, last_id = record.get("cutoff_id"), record.get("last_id")
    if cutoff_id is not None:
        end = ids.get(cutoff_id)
    else:
        end = ids[last_id] + 1 if last_id in ids else None
    if end is None:
        logger.warning(
            "the compaction view names message %r, which is not in the state; sending the whole history",
            cutoff_id or last_id,
        )
        return messages
    kept = set(record.get("kept_ids") or [])
    evict_ids = {m.id for m in messages[leading_systems(messages) : end] if m.id not in kept}
    (summary,) = messages_from_dict([record["summary"]])
    after = messages_from_dict(record["after"]) if isinstance(record.get("after"), list) else []
    return compacted_view(messages, evict_ids, summary, after)


def context_status(tokens: int, window: int | None, compactions: int, transcript: str | None) -> HumanMessage:
    """Return the one-line context status that ends the model's view (``CompactionConfig(context_status=True)``).

    It goes after the newest message, so the cached prefix is the same with
    or without it, and it is never written to the state.
    """
    used = (
        f"{tokens:,} of {window:,} tokens used ({100 * tokens // max(window, 1)}%)"
        if window
        else f"~{tokens:,} tokens used"
    )
    where = f"full transcript: {transcript}" if transcript else "no transcript written yet"
    text = f"[Context status: {used}; {compactions} compaction{'' if compactions == 1 else 's'} so far; {where}.]"
    return HumanMessage(text, id="__compaction_status__", additional_kwargs={COMPACTION_MARKER: {"kind": "status"}})
