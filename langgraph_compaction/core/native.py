"""Provider-native compaction, the pure part: the compaction blocks, their readable text, their billing.

Anthropic answers an on-demand compaction request (beta ``compact-2026-09-04``,
a top-level ``compaction={"type": "summarize"}``) with one block ``{"type":
"compaction", "content": <readable summary>, "signature": ...}``, and its
threshold compaction (``compact_20260112``) starts an answer with one; OpenAI's
Responses API returns an opaque item ``{"type": "compaction",
"encrypted_content": ...}``. The engine keeps a block verbatim in the summary
message's ``additional_kwargs["lc_compaction"]["native"]`` and renders the
readable text as the summary's SUMMARY section. Pure functions; nothing here
imports langgraph.

>>> billed({"input_tokens": 0, "output_tokens": 0, "iterations": [
...     {"type": "compaction", "input_tokens": 900, "output_tokens": 120, "cache_read_input_tokens": 9000}]})
Billed(input_tokens=900, output_tokens=120, cache_read_tokens=9000, cache_write_tokens=0, context_tokens=None)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .conversation import COMPACTION_MARKER, is_summary

#: The beta header of Anthropic's on-demand compaction (the top-level ``compaction`` parameter).
ON_DEMAND_BETA = "compact-2026-09-04"
#: Anthropic's threshold compaction edit and its beta; its trigger is at least ``THRESHOLD_MIN_TOKENS``.
THRESHOLD_EDIT = "compact_20260112"
THRESHOLD_BETA = "compact-2026-01-12"
THRESHOLD_MIN_TOKENS = 50_000
#: Model names (a part of them) that Anthropic's on-demand compaction does not accept.
UNSUPPORTED_ON_DEMAND = ("-4-5",)
#: Content block types a provider's summary loses (the transcript keeps them).
MEDIA_TYPES = frozenset({"image", "image_url", "document", "file", "input_image", "input_file"})
NATIVE_KEY = "native"
ANTHROPIC = "anthropic"


class Billed(NamedTuple):
    """What one provider answer is billed for, and the context its last sampling step read (None: not reported)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    context_tokens: int | None


def _figures(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        int(usage.get("cache_read_input_tokens") or 0),
        int(usage.get("cache_creation_input_tokens") or 0),
    )


def billed(usage: dict[str, Any]) -> Billed:
    """Return what an Anthropic ``usage`` bills: every ``usage.iterations`` entry, else the top-level figures.

    A ``compaction`` entry is not in the top-level figures, so the provider's
    bill is the sum over ``iterations``; the context is the last ``message``
    entry's input (a ``compaction`` entry never tells the context's size).
    """
    iterations = [i for i in usage.get("iterations") or [] if isinstance(i, dict)]
    if not iterations:
        inp, out, read, write = _figures(usage)
        return Billed(inp, out, read, write, inp + read + write or None)
    inp, out, read, write = (sum(column) for column in zip(*(_figures(i) for i in iterations), strict=True))
    messages = [i for i in iterations if i.get("type") == "message"]
    context = sum(_figures(messages[-1])[i] for i in (0, 2, 3)) if messages else None
    return Billed(inp, out, read, write, context)


def compaction_block(message: BaseMessage) -> dict[str, Any] | None:
    """Return the provider's compaction block (Anthropic) or item (OpenAI Responses) an AI message holds, else None."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return None
    return next((b for b in message.content if isinstance(b, dict) and b.get("type") == "compaction"), None)


def provider_reads_from(messages: Sequence[BaseMessage]) -> int:
    """Return the index of the first message a provider reads: the newest holding its compaction block, else 0."""
    return next((i for i in range(len(messages) - 1, -1, -1) if compaction_block(messages[i])), 0)


def readable_text(block: dict[str, Any]) -> str | None:
    """Return a compaction block's readable summary; None for an opaque item or a failed compaction."""
    content = block.get("content")
    return content.strip() if isinstance(content, str) and content.strip() else None


def native_body(readable: str) -> str:
    """Return a summary body whose SUMMARY section is the provider's text (the other sections are completed later)."""
    return f"## SESSION INTENT\nNone\n\n## SUMMARY\n{readable}\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nNone"


def native_of(message: BaseMessage) -> dict[str, Any] | None:
    """Return what a summary message keeps of a provider's compaction: ``{"provider", "model", "block"}``, or None."""
    if not is_summary(message):
        return None
    marker = message.additional_kwargs.get(COMPACTION_MARKER)
    native = marker.get(NATIVE_KEY) if isinstance(marker, dict) else None
    return native if isinstance(native, dict) and isinstance(native.get("block"), dict) else None


def with_native(summary: BaseMessage, provider: str, model: str | None, block: dict[str, Any]) -> BaseMessage:
    """Return the summary message with the provider's block kept verbatim in its compaction marker."""
    marker = dict(summary.additional_kwargs.get(COMPACTION_MARKER) or {})
    marker[NATIVE_KEY] = {"provider": provider, "model": model, "block": block}
    return summary.model_copy(update={"additional_kwargs": {**summary.additional_kwargs, COMPACTION_MARKER: marker}})


def provider_request(messages: Sequence[BaseMessage], provider: str, model: str | None) -> list[BaseMessage]:
    """Return the messages as sent to ``provider``'s ``model``: a summary made by it becomes its compaction block.

    The provider reads its own block (signed, maybe encrypted) in place of the
    text; any other model, or another provider, reads the summary's text.
    """
    out: list[BaseMessage] = []
    for m in messages:
        native = native_of(m)
        if native and native.get("provider") == provider and native.get("model") == model:
            out.append(AIMessage(content=[native["block"]], id=m.id))
        else:
            out.append(m)
    return out


def anthropic_model(model: Any) -> Any | None:
    """Return the ``ChatAnthropic`` ``model`` is or binds (tools, config), else None."""
    while model is not None:
        if isinstance(model, BaseChatModel) and model._llm_type == "anthropic-chat":  # a binding passes it on too
            return model
        model = getattr(model, "bound", None)
    return None


def for_model(messages: Sequence[BaseMessage], model: Any) -> list[BaseMessage]:
    """Return the messages as sent to the chat ``model``: a summary its own Anthropic model wrote becomes its block.

    Any other model (another Claude model, another provider, an unknown one)
    reads the summary's text.
    """
    chat = anthropic_model(model)
    return list(messages) if chat is None else provider_request(messages, ANTHROPIC, getattr(chat, "model", None))


def without_unanswered_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the messages without a trailing assistant turn whose tool calls have no results (providers refuse it)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    last_ai = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if last_ai is not None and any(c.get("id") not in answered for c in messages[last_ai].tool_calls):  # type: ignore[attr-defined]
        return list(messages[:last_ai])
    return list(messages)


def media_blocks(messages: Sequence[BaseMessage]) -> int:
    """Return how many image, document and file blocks the messages hold (a provider's summary loses them)."""
    return sum(
        1
        for m in messages
        if isinstance(m.content, list)
        for b in m.content
        if isinstance(b, dict) and b.get("type") in MEDIA_TYPES
    )


def on_demand_refusal(model: str | None) -> str | None:
    """Return why Anthropic's on-demand compaction refuses ``model`` (with the fix), or None when it accepts it."""
    name = model or ""
    if any(part in name for part in UNSUPPORTED_ON_DEMAND):
        return (
            f"summary.native: the model {name!r} does not support Anthropic's on-demand compaction (the 4.5 models "
            "do not); use a newer Claude model as the summarizer, or summary={'native': 'auto'} to use the "
            "package's own summary with it"
        )
    return None


def threshold_refusal(context_management: Any) -> str | None:
    """Return why a ``context_management`` with a ``compact_20260112`` edit would be refused, or None."""
    edits = context_management.get("edits") if isinstance(context_management, dict) else None
    for edit in edits or []:
        if isinstance(edit, dict) and edit.get("type") == THRESHOLD_EDIT:
            trigger = (edit.get("trigger") or {}).get("value")
            if isinstance(trigger, int) and trigger < THRESHOLD_MIN_TOKENS:
                return (
                    f"context_management: the {THRESHOLD_EDIT} trigger ({trigger:,} input tokens) is below "
                    f"Anthropic's minimum of {THRESHOLD_MIN_TOKENS:,}; raise trigger.value to at least "
                    f"{THRESHOLD_MIN_TOKENS:,}"
                )
    return None
