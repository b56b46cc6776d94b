"""Provider-native compaction: the provider writes the summary, the package keeps its cutoff, offload and trail.

With ``summary={"native": True}`` (or ``"auto"``) and a ``ChatAnthropic``
summarizer, the evicted prefix (the package still picks the cutoff and the
verbatim tail) is sent for Anthropic's on-demand compaction: the same request
with a top-level ``compaction={"type": "summarize", "instructions": ...}`` and
the beta ``compact-2026-09-04``. The signed block it returns is kept verbatim
in the summary message; its readable text is the summary's SUMMARY section.
``"auto"`` uses the package's own summary where the summarizer cannot do
this; ``True`` says why in an event and does the same.

Observe mode: when the agent's own model compacted on the provider's side
(Anthropic ``compact_20260112``, OpenAI Responses ``context_management``), its
answer holds a compaction block; at the next compaction what the provider
dropped before that block is handed to the summarizer as the provider's
summary, not summarized again (the transcript holds it whole).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.constants import TAG_NOSTREAM

from ..core.native import (
    ANTHROPIC,
    ON_DEMAND_BETA,
    anthropic_model,
    billed,
    compaction_block,
    media_blocks,
    native_body,
    on_demand_refusal,
    provider_reads_from,
    provider_request,
    readable_text,
    threshold_refusal,
    with_native,
    without_unanswered_calls,
)
from ..core.summary import build_summary_message
from .effects import CallHook, Steps
from .events import describe_error, emit_event
from .run import Run
from .setup import Setup

#: What the summarizer reads in place of the messages a provider compacted into an opaque item.
OPAQUE_NOTE = (
    "The provider compacted {count} earlier messages into an opaque item; they are in the transcript, and the "
    "sections below list their requests and files."
)


@dataclass(frozen=True)
class NativeAnswer:
    """The provider's compaction of an evicted prefix: the summary body, the block, the model that wrote it."""

    text: str
    block: dict[str, Any]
    model: str | None

    def kept_in(self, composed: Any) -> Any:
        """Return ``composed`` (a summary and the messages with it) with the provider's block kept in the summary."""
        summary = with_native(composed.summary, ANTHROPIC, self.model, self.block)
        result = [summary if m is composed.summary else m for m in composed.result]
        return dataclasses.replace(composed, summary=summary, result=result)


def compact(model: Any, betas: Sequence[str], messages: list[BaseMessage], instructions: str | None) -> AIMessage:
    """Send ``messages`` for Anthropic's on-demand compaction through ``model``; return its answer (one block).

    ``model`` is the ``ChatAnthropic`` summarizer, or the agent's model with its
    tools bound when the summarizer is the agent's model: the request then
    starts as the agent's did, and the provider's cache serves that prefix.
    """
    compaction = {"type": "summarize", **({"instructions": instructions} if instructions else {})}
    runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_native")
    # no context_management (the API refuses both) and no forced tool choice (a compaction samples no reply)
    answer: AIMessage = runnable.invoke(
        messages,
        compaction=compaction,
        betas=list(dict.fromkeys([*betas, ON_DEMAND_BETA])),
        context_management=None,
        tool_choice=None,
        stream=False,
    )
    return answer


def _refusal(setup: Setup) -> tuple[Any, str | None]:
    chat = anthropic_model(setup.model)
    if chat is None:
        name = type(setup.model).__name__
        return None, (
            f"summary.native: the summarizer ({name}) has no on-demand compaction; give a ChatAnthropic "
            "summarizer, or summary={'native': 'auto'} to use the package's own summary with this one"
        )
    return chat, on_demand_refusal(getattr(chat, "model", None))


def refuse_on_demand(setup: Setup) -> dict[str, Any] | None:
    """Say (a log line and an event) why ``summary={"native": True}`` cannot be native with this summarizer."""
    if setup.config.summary.native is not True or setup.model is None:
        return None
    _, refusal = _refusal(setup)
    return emit_event({"stage": "native", "native": "refused", "error": refusal}) if refusal else None


def refuse_threshold(agent_model: Any) -> dict[str, Any] | None:
    """Say (a log line and an event) why Anthropic refuses the threshold compaction the agent's model is set up with.

    A ``ChatAnthropic`` agent whose ``context_management`` holds a
    ``compact_20260112`` edit with a trigger under the provider's minimum gets
    an HTTP 400 on every call; this names the field and the fix first.
    """
    chat = anthropic_model(agent_model)
    refusal = threshold_refusal(getattr(chat, "context_management", None)) if chat is not None else None
    return emit_event({"stage": "native", "native": "refused", "error": refusal}) if refusal else None


def _add_billed(run: Run, usage: dict[str, Any]) -> dict[str, Any]:
    """Add what the provider bills for a compaction (its ``usage.iterations``) to the run's usage; return it."""
    bill = billed(usage)._asdict()
    read = bill["input_tokens"] + bill["cache_read_tokens"] + bill["cache_write_tokens"]
    for key, value in (("input_tokens", read), ("output_tokens", bill["output_tokens"])):
        run.usage[key] = run.usage.get(key, 0) + value
    run.usage["total_tokens"] = run.usage.get("total_tokens", 0) + read + bill["output_tokens"]
    run.usage["calls"] = run.usage.get("calls", 0) + 1
    return bill


def native_answer(
    setup: Setup,
    evicted: Sequence[BaseMessage],
    focus: str | None,
    instructions: Sequence[str | None],
    run: Run,
    events: list[dict[str, Any]],
) -> Steps[NativeAnswer | None]:
    """Yield the on-demand compaction of ``evicted``; return its answer, or None when the package's summary is used.

    The package's summary is used where the summarizer cannot compact
    (``"auto"``; ``True`` says why in an event) and when the provider's
    compaction fails or has no readable text (an event says why): native
    first, the package's summary as the fallback.
    """
    mode = setup.config.summary.native
    if not mode or setup.model is None:
        return None
    chat, refusal = _refusal(setup)
    if refusal:
        if mode is True:  # asked for: say why not, once per compaction, and summarize as usual
            events.append(emit_event({"stage": "summarize", "native": "refused", "error": refusal}))
        return None
    model = getattr(chat, "model", None)
    request = without_unanswered_calls(provider_request([*setup.head, *evicted], ANTHROPIC, model))
    wording = [setup.config.summary.instructions, *instructions, f"Focus on: {focus}" if focus else None]
    try:
        sender = setup.agent_model if setup.summary_shares_cache else chat
        reply = yield CallHook(compact, (sender, chat.betas or [], request, "\n\n".join(filter(None, wording)) or None))
    except Exception as exc:  # noqa: BLE001 - a failed compaction is never committed: the package summarizes
        error = f"the provider's compaction failed: {describe_error(exc)}; the package's summary is used"
        events.append(emit_event({"stage": "summarize", "native": ANTHROPIC, "model": model, "error": error}))
        return None
    bill = _add_billed(run, (reply.response_metadata or {}).get("usage") or {})
    block = compaction_block(reply)
    text = readable_text(block) if block else None
    event: dict[str, Any] = {"stage": "summarize", "native": ANTHROPIC, "model": model, "billed": bill}
    if media := media_blocks(evicted):  # offload ran first: the transcript holds them
        event["media_in_transcript"] = media
    if block is None or text is None:
        event["error"] = "the provider's compaction returned no readable summary; the package's summary is used"
    events.append(emit_event(event))
    return NativeAnswer(native_body(text), block, model) if block is not None and text is not None else None


def observed(evicted: Sequence[BaseMessage], events: list[dict[str, Any]]) -> list[BaseMessage]:
    """Return what the summarizer reads of ``evicted``: what a provider compacted, as its own summary.

    The newest compaction block an agent's answer holds stands for every
    message before it (the provider no longer reads them); the answer itself
    is kept without the block.
    """
    at = provider_reads_from(evicted)
    block = compaction_block(evicted[at]) if evicted else None
    if block is None:
        return list(evicted)
    answer = evicted[at]
    text = readable_text(block) or OPAQUE_NOTE.format(count=at)
    rest = [b for b in answer.content if b is not block]
    provider = ANTHROPIC if "signature" in block or "content" in block else "openai"  # OpenAI's item is opaque
    events.append(emit_event({"stage": "summarize", "observed": provider, "provider_dropped": at}))
    kept = [answer.model_copy(update={"content": rest})] if rest or getattr(answer, "tool_calls", None) else []
    return [build_summary_message(native_body(text)), *kept, *evicted[at + 1 :]]
