"""The groups of ``CompactionConfig``: the three layers, fidelity, and the nested settings.

``CompactionConfig`` keeps the original harness's defaults table at its top
level; everything else is a group here, set as a dict or an instance:
``CompactionConfig(summary={"timeout": 60}, background={"start": 0.8})``.
A size left ``None`` is derived from the window; a limit set to ``None`` is
off (``summary.timeout``, ``summary.result_chars``, ``fidelity.trail_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .prompts import memory_prompt_missing, summary_prompt_missing
from .redact import redact_secrets


class Settings(BaseModel):
    """The base of every settings model: unknown names are refused, values frozen, defaults validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class TruncateArgsConfig(Settings):
    """Layer 1: shorten huge string arguments of old tool calls (no LLM)."""

    enabled: bool = Field(True, description="Run layer 1.")
    trigger_messages: int = Field(25, ge=0, description="Layer 1 acts from this many messages...")
    trigger_tokens: int = Field(40_000, ge=0, description="...or from this many tokens.")
    keep_messages: int = Field(20, ge=0, description="The newest messages, never shortened.")
    max_arg_length: int = Field(2_000, ge=1, description="String arguments longer than this are shortened.")
    keep_chars: int = Field(20, ge=0, description="Characters of a shortened argument that stay, before the marker.")
    truncation_text: str = Field("...(argument truncated)", description="The marker after the kept characters.")


class PruneConfig(Settings):
    """Layer 2: head + marker + tail for old, large tool results (no LLM)."""

    enabled: bool = Field(True, description="Run layer 2.")
    protect_tokens: int = Field(40_000, ge=0, description="Tool results within this many newest tokens are left whole.")
    minimum_tokens: int = Field(20_000, ge=0, description="Prune only when at least this many tokens can be freed.")
    max_output_chars: int = Field(
        2_000, ge=2, description="A pruned result keeps half of this from its head, half from its tail."
    )
    excluded_tools: frozenset[str] = Field(
        frozenset({"read_file", "memory_search", "memory_get", "session_search", "recall"}),
        description="Retrieval tools whose results are never pruned: their output is what the agent looked up.",
    )


class MicroCompactConfig(Settings):
    """Micro-compaction: clear all but the last few tool results (no LLM).

    Off by default; turn it on instead of, or together with, pruning. Results
    are cleared in batches (``minimum_tokens`` at a time) so the prompt prefix
    does not change on every call.
    """

    enabled: bool = Field(False, description="Run micro-compaction.")
    keep_recent: int = Field(3, ge=0, description="The newest tool results left whole.")
    min_chars: int = Field(100, ge=0, description="Older results longer than this are cleared.")
    minimum_tokens: int = Field(5_000, ge=0, description="Clear only when at least this many tokens go at once.")


class FidelityConfig(Settings):
    """What every summary keeps word for word (see ``fidelity``; the pins' budget: ``core.pins``)."""

    request_tokens: int = Field(2_000, ge=0, description="Budget of the user's verbatim requests in SESSION INTENT.")
    max_artifacts: int = Field(
        100, ge=1, description="Entries of the ARTIFACTS trail; older ones are counted, not listed."
    )
    trail_tokens: int | None = Field(
        1_200,
        ge=0,
        description=(
            "About this many tokens for the ARTIFACTS trail: over it, older commands leave first, then read files "
            "share their folder's line, then changed files too (named first); if that is still over, the files of "
            "the largest folders are counted on "
            "their folder's line, read files first, changed files last (the trail names the session_search query "
            "that finds them); the files the agent worked on most keep their own lines in up to half of it. "
            "None: max_artifacts lines only."
        ),
    )
    auto_pin: bool = Field(True, description="Pin the rules users state ('never ...', '必须 ...') automatically.")
    max_auto_pins: int = Field(20, ge=0, description="Automatic pins kept in force; the oldest are unpinned first.")
    max_pins: int = Field(
        20, ge=0, description="Pins the agent may keep in force with the pin tool; the tool says so when it is reached."
    )
    pin_tokens: int | None = Field(
        None,
        ge=1,
        description="Tokens of one pin (longer: refused, or shown by its start). None: 2 % of the window, <=1,000.",
    )
    pins_tokens: int | None = Field(
        None,
        ge=0,
        description="Tokens of all pins in a summary (past it: refused, or counted). None: 5 % of the window, <=4,000.",
    )


class BackgroundConfig(Settings):
    """Compaction off the agent's critical path (see docs/background.md).

    Truthy when enabled, as its short form reads: ``background=False`` is
    ``background={"enabled": False}``, and ``if config.background:`` asks whether it is on.
    """

    enabled: bool = Field(
        True,
        description=(
            "Prepare the summary (offload, flush, summary) in a thread or an asyncio task next to the agent before "
            "the trigger (at background.start of it, sooner when the thread grows fast) and apply it at the "
            "trigger; a request never goes out over the trigger: at the trigger the gate waits for a summary "
            "still being prepared, or compacts in front of the model call when none is. False: every compaction "
            "runs in front of the model call (blocking)."
        ),
    )
    start: float = Field(
        0.85,
        gt=0,
        lt=1,
        description="Fraction of the trigger (tokens and messages) at which a background compaction starts.",
    )

    def __bool__(self) -> bool:
        return self.enabled


class SummaryConfig(Settings):
    """The summarizer: its prompt, its limits, the hooks around it, and the guards against summarizing in vain."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, arbitrary_types_allowed=True)

    instructions: str | None = Field(
        None, description="Added to the summarizer's instruction (what to keep, the language, the domain)."
    )
    prompt: str | None = Field(
        None,
        description=(
            "Replaces the summarizer's prompt whole: it must hold {messages} ({focus} optional: where the additions "
            "go, else at the end). The sections SESSION INTENT, SUMMARY, ARTIFACTS, NEXT STEPS are read back when "
            "the answer has them; an answer without them is the SUMMARY section, the others built around it."
        ),
    )
    history_tokens: int | None = Field(
        None,
        ge=1,
        description=(
            "About this many tokens of the evicted messages, the newest, are sent to the summarizer, in one request "
            "(LangChain's trim_tokens_to_summarize); the older ones reach the summary through the previous summary "
            "and its deterministic sections. None: all of them, in parts that fit the summarizer's window."
        ),
    )
    timeout: float | None = Field(
        120.0, gt=0, description="Seconds the summarizer may take before the call counts as failed; None: no limit."
    )
    context_window: int | None = Field(None, ge=1, description="Window of the summarizer model; None: the agent's.")
    result_chars: int | None = Field(
        4_000,
        ge=2,
        description=(
            "Tool results longer than this reach the summarizer and the flush model as head + marker + tail "
            "(the transcript keeps them whole); None shows them whole."
        ),
    )
    target_ratio: float = Field(
        0.6, gt=0, le=1, description="A compaction must leave at most this share of the token trigger."
    )
    min_new_tokens: int | None = Field(
        None, ge=0, description="New tokens needed before the next summary; None: 10 % of the trigger."
    )
    before_summary: Callable[..., Any] | None = Field(
        None,
        description=(
            "Called (sync or async) with a CompactionInfo before each summary: return a str of instructions for "
            "this summary, False to skip the model (an extractive summary instead), or None."
        ),
    )
    after_compaction: Callable[..., Any] | None = Field(
        None,
        description=(
            "Called (sync or async) with a CompactionInfo after each summary: the messages it returns go right "
            "after the summary (counted in the budget; the next compaction replaces them)."
        ),
    )
    native: bool | Literal["auto"] = Field(
        False,
        description=(
            "The provider writes the summary: with a ChatAnthropic summarizer the evicted prefix goes to Anthropic's "
            "on-demand compaction and its block is kept verbatim in the summary message (docs/native.md). 'auto': "
            "native where the summarizer supports it, the package's summary otherwise; True also says why not."
        ),
    )

    @field_validator("prompt")
    @classmethod
    def _check_prompt(cls, value: str | None) -> str | None:
        if value is not None and (missing := summary_prompt_missing(value)):
            raise ValueError(
                f"summary.prompt lacks {', '.join(missing)}: the engine puts the conversation there; add it, or "
                "pass your wording as summary.instructions, which adds it to the built-in prompt"
            )
        return value


class MemoryConfig(Settings):
    """Long-term memory: the flush model's prompt, the ledger's dates and the consolidation of MEMORY.md."""

    instructions: str | None = Field(None, description="Added to the memory model's instruction.")
    prompt: str | None = Field(
        None,
        description=(
            "Replaces the memory model's prompt whole: it must hold {messages} and the answer NO_REPLY "
            "({today}, {ledger_path}, {memory_md}, {ledger} optional)."
        ),
    )
    timezone: str = Field("UTC", description="Time zone of the ledger's dates (memory/YYYY-MM-DD.md).")
    consolidation_max_tokens: int = Field(4_000, ge=100, description="Size limit of MEMORY.md after consolidation.")
    consolidation_min_gap: float = Field(1_800.0, ge=0, description="Seconds between two consolidations of one user.")
    daily_file_retention_days: int = Field(
        90, ge=1, description="Daily ledgers older than this move to memory/archive/."
    )

    @field_validator("prompt")
    @classmethod
    def _check_prompt(cls, value: str | None) -> str | None:
        if value is not None and (missing := memory_prompt_missing(value)):
            raise ValueError(
                f"memory.prompt lacks {', '.join(missing)}: the engine puts the conversation at {{messages}} and "
                "accepts bullets or NO_REPLY; add them, or use memory.instructions to add to the built-in prompt"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(value)
        except Exception as exc:  # noqa: BLE001 - any lookup failure is a bad name
            raise ValueError(
                f"timezone {value!r} is not a known IANA zone name; use e.g. 'UTC' or 'Asia/Shanghai'"
            ) from exc
        return value


class GuardsConfig(Settings):
    """Guards: against compacting again and again, a failing summarizer, miscounted tokens and leaked secrets."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, arbitrary_types_allowed=True)

    trigger_messages_min_tokens: int | None = Field(
        None, ge=0, description="The message-count trigger fires only above this; None: 25 % of the trigger."
    )
    breaker_failures: int = Field(3, ge=1, description="Consecutive summarizer failures that open the breaker.")
    breaker_cooldown: float = Field(
        600.0, ge=0, description="Seconds the summarizer is not called once the breaker is open."
    )
    calibrate: bool = Field(True, description="Scale counts by the model's reported usage_metadata.input_tokens.")
    redactor: Callable[[str], str] | None = Field(
        redact_secrets, description="Applied to memory (ledger and MEMORY.md) before it is written; None: off."
    )
    redact_transcripts: bool = Field(
        False, description="Also redact offloaded transcripts (they are then no longer byte-exact)."
    )
