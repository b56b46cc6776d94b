"""The compaction settings: the design's defaults table, in one place.

Every default below is the original design's value under its name in
snake_case (``triggerMessages`` -> ``trigger_messages``), so the table can be
checked line by line. ``CompactionConfig.resolve()`` turns the settings and a
model's context window into the concrete token budget the nodes use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .prompts import memory_prompt_missing, summary_prompt_missing
from .redact import redact_secrets

#: Trigger used when the model does not report its context window.
FALLBACK_TRIGGER_TOKENS = 160_000
#: Tokens a summary is expected to take (besides the user's verbatim requests it quotes, ``fidelity.request_tokens``).
SUMMARY_ALLOWANCE = 1_000
#: The smallest kept tail a derived budget may have: the latest request and a short answer.
MIN_KEEP_TOKENS = 250
#: The derived working-set budget: this share of the trigger, at most ``WORKING_SET_MAX_TOKENS`` (the files an agent
#: edits do not grow with the window, while every kept token is billed again on each call) and at most what the target
#: leaves after the summary and the tail. Chosen from the billed-cost benchmark (docs/working-set.md).
WORKING_SET_RATIO = 0.15
WORKING_SET_MAX_TOKENS = 6_000

TokenCounterFn = Callable[[Sequence[Any]], int]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class TruncateArgsConfig(_Settings):
    """Layer 1: shorten huge string arguments of old tool calls (no LLM)."""

    enabled: bool = Field(True, description="Run layer 1.")
    trigger_messages: int = Field(25, ge=0, description="Layer 1 acts from this many messages...")
    trigger_tokens: int = Field(40_000, ge=0, description="...or from this many tokens.")
    keep_messages: int = Field(20, ge=0, description="The newest messages, never shortened.")
    max_arg_length: int = Field(2_000, ge=1, description="String arguments longer than this are shortened.")
    keep_chars: int = Field(20, ge=0, description="Characters of a shortened argument that stay, before the marker.")
    truncation_text: str = Field("...(argument truncated)", description="The marker after the kept characters.")


class PruneConfig(_Settings):
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


class MicroCompactConfig(_Settings):
    """The second design's micro-compaction: clear all but the last few results.

    Off by default; turn it on instead of, or together with, pruning. Results
    are cleared in batches (``minimum_tokens`` at a time) so the prompt prefix
    does not change on every call.
    """

    enabled: bool = Field(False, description="Run micro-compaction.")
    keep_recent: int = Field(3, ge=0, description="The newest tool results left whole.")
    min_chars: int = Field(100, ge=0, description="Older results longer than this are cleared.")
    minimum_tokens: int = Field(5_000, ge=0, description="Clear only when at least this many tokens go at once.")


class FidelityConfig(_Settings):
    """Not in the design's table: what every summary keeps word for word (see ``fidelity``; pins: ``core.pins``)."""

    request_tokens: int = Field(2_000, ge=0, description="Budget of the user's verbatim requests in SESSION INTENT.")
    max_artifacts: int = Field(
        100, ge=1, description="Entries of the ARTIFACTS trail; older ones are counted, not listed."
    )
    trail_tokens: int | None = Field(
        1_200,
        ge=0,
        description=(
            "About this many tokens for the ARTIFACTS trail: over it, older commands leave first, then read files "
            "share their folder's line; if still over, the largest folders' files are counted on their folder's "
            "line, read files first, changed files last (the trail names the session_search query that finds them); "
            "the files the agent worked on most keep their own lines in up to half of it. None: max_artifacts only."
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


class CompactionConfig(_Settings):
    """All compaction settings; every field defaults to the design's table, except the kept tail under prompt caching.

    >>> budget = CompactionConfig(context_window=128_000).resolve()
    >>> (budget.trigger_tokens, budget.keep_tokens)
    (108000, 2000)
    >>> CompactionConfig(context_window=128_000, prompt_cache=False).resolve().keep_tokens  # the design's keep
    8000
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, arbitrary_types_allowed=True)

    context_window: int | None = Field(
        None, ge=0, description="Model context window; None/0 = take it from the model, else unknown."
    )
    trigger_messages: int = Field(50, ge=0, description="0 disables the message-count trigger.")
    trigger_tokens: int = Field(0, ge=0, description="0 = dynamic: window - reserved.")
    reserved: int = Field(20_000, ge=0, description="Tokens left free under the window for the compaction itself.")
    fallback_trigger_tokens: int = Field(
        FALLBACK_TRIGGER_TOKENS, ge=1, description="The token trigger when the window is unknown."
    )
    keep_messages: int = Field(20, ge=1, description="Messages kept verbatim when the tail is kept by count.")
    keep_tokens: int = Field(-1, ge=-1, description="-1 dynamic, 0 = use keep_messages, >0 static.")
    keep_tokens_min: int = Field(2_000, ge=0, description="Lower bound of the derived kept tail.")
    keep_tokens_max: int = Field(8_000, ge=0, description="Upper bound of the derived kept tail.")
    keep_tokens_ratio: float = Field(0.25, gt=0, le=1, description="The derived kept tail's share of the trigger.")
    working_set_tokens: int = Field(
        -1,
        ge=-1,
        description=(
            "Tokens of the agent's working set kept through a compaction: the latest read of each file it read "
            "and edited recently, newest touched first, kept in the tail or right after the summary as the "
            "messages they are; the summary names the files left out (and the stale ones) and how to get them "
            "back. -1 derived: WORKING_SET_RATIO of the trigger, at most WORKING_SET_MAX_TOKENS and what the "
            "target leaves after the summary and the kept tail. 0 turns it off."
        ),
    )
    flush_before_compact: bool = Field(True, description="Extract long-term memories before a summary.")
    offload_before_compact: bool = Field(
        True, description="Append the conversation to the transcript before anything leaves the state."
    )
    prompt_cache: bool = Field(
        True,
        description=(
            "The provider bills a cached prompt prefix at a fraction of the price (OpenAI, Anthropic, Gemini). "
            "A summary changes the prefix, so the tail kept after it is billed in full once and then read on "
            "every call: the derived keep is keep_tokens_min (the newest tool round is always kept whole). "
            "Layers 1-2 edit the history only together with a summary or when the edit repays its cache "
            "break. False: the design's keep (min(keep_tokens_max, max(keep_tokens_min, ratio x trigger))) "
            "and layers 1-2 edit whenever they fire. An explicit keep_tokens is kept either way."
        ),
    )

    truncate_args: TruncateArgsConfig = TruncateArgsConfig()
    prune: PruneConfig = PruneConfig()
    micro: MicroCompactConfig = MicroCompactConfig()
    fidelity: FidelityConfig = FidelityConfig()

    token_counter: TokenCounterFn | None = Field(
        None,
        description="Any callable(list[BaseMessage]) -> int, e.g. model.get_num_tokens_from_messages.",
    )
    summary_timeout: float | None = Field(
        120.0, gt=0, description="Seconds the summarizer may take before the call counts as failed."
    )
    summarizer_context_window: int | None = Field(
        None, ge=1, description="Window of the summarizer model; defaults to the agent's."
    )
    summarizer_result_chars: int | None = Field(
        4_000,
        ge=2,
        description=(
            "Tool results longer than this reach the summarizer and the flush model as head + marker + tail "
            "(the transcript keeps them whole); None shows them whole."
        ),
    )
    timezone: str = Field("UTC", description="Time zone of the ledger's dates (memory/YYYY-MM-DD.md).")
    consolidation_max_tokens: int = Field(4_000, ge=100, description="Size limit of MEMORY.md after consolidation.")
    consolidation_min_gap: float = Field(1_800.0, ge=0, description="Seconds between two consolidations of one user.")
    daily_file_retention_days: int = Field(
        90, ge=1, description="Daily ledgers older than this move to memory/archive/."
    )
    redactor: Callable[[str], str] | None = Field(
        redact_secrets, description="Applied to memory (ledger and MEMORY.md) before it is written; None = off."
    )
    redact_transcripts: bool = Field(
        False, description="Also redact offloaded transcripts (they are then no longer byte-exact)."
    )
    mode: Literal["rewrite", "view"] = Field(
        "rewrite",
        description=(
            "'rewrite': the summary replaces the evicted messages in the state. 'view': the state keeps every "
            "message and the model is sent the compacted view (summary and cutoff kept in `compaction`)."
        ),
    )

    # Not in the design's table: the guards against compacting again and again without progress.
    target_ratio: float = Field(
        0.6, gt=0, le=1, description="A compaction must leave at most this share of trigger_tokens."
    )
    min_new_tokens: int | None = Field(
        None, ge=0, description="New tokens needed before the next summary; None = 10 % of the trigger."
    )
    trigger_messages_min_tokens: int | None = Field(
        None, ge=0, description="The message-count trigger fires only above this; None = 25 % of the trigger."
    )
    breaker_failures: int = Field(3, ge=1, description="Consecutive summarizer failures that open the breaker.")
    breaker_cooldown: float = Field(
        600.0, ge=0, description="Seconds the summarizer is not called once the breaker is open."
    )
    calibrate: bool = Field(True, description="Scale counts by the model's reported usage_metadata.input_tokens.")

    # Not in the defaults table: LangChain's ("fraction", f) for trigger= and keep=, shares of the model's window.
    trigger_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description=(
            "Compact at this share of the context window (trigger=('fraction', f)); with trigger_tokens too, at "
            "the lower of the two. None: trigger_tokens alone."
        ),
    )
    keep_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Keep this share of the context window as the tail (keep=('fraction', f)). None: keep_tokens.",
    )

    @model_validator(mode="after")
    def _check_fractions(self) -> CompactionConfig:
        if self.keep_fraction is not None and self.keep_tokens >= 0:
            raise ValueError(
                f"keep_fraction ({self.keep_fraction}) and keep_tokens ({self.keep_tokens}) both say what to keep; "
                "set one of them"
            )
        if self.keep_fraction is not None and self.trigger_fraction is not None:
            if self.keep_fraction >= self.trigger_fraction:
                raise ValueError(
                    f"keep_fraction ({self.keep_fraction}) is not below trigger_fraction ({self.trigger_fraction}): "
                    "every compaction would end over the trigger; keep a smaller share than the trigger's"
                )
        return self

    def _fraction_of_window(self, window: int | None, name: str) -> int | None:
        """Return ``name``'s share of ``window`` in tokens (at least 1), None when it is not set."""
        share = getattr(self, name)
        if share is None:
            return None
        if not window:
            argument = name.removesuffix("_fraction")
            raise ValueError(
                f"{argument}=('fraction', {share}) ({name}) is a fraction of the model's context window, which is "
                "unknown: the model reports no profile['max_input_tokens']; set CompactionConfig(context_window=...) "
                f"or give {argument} in tokens"
            )
        return max(1, int(window * share))

    # Not in the design's table: compaction off the agent's critical path (see docs/background.md).
    background: bool = Field(
        True,
        description=(
            "Prepare the summary (offload, flush, summary) in a thread or an asyncio task next to the agent before "
            "the trigger (at background_start of it, sooner when the thread grows fast) and apply it at the "
            "trigger; a request never goes out over the trigger: at the trigger the gate waits for a summary "
            "still being prepared, or compacts in front of the model call when none is. False: every compaction "
            "runs in front of the model call (blocking)."
        ),
    )
    background_start: float = Field(
        0.85,
        gt=0,
        lt=1,
        description="Fraction of the trigger (tokens and messages) at which a background compaction starts.",
    )

    # Not in the design's table: the application's controls over what compaction writes and keeps.
    summary_instructions: str | None = Field(
        None, description="Added to the summarizer's instruction (what to keep, the language, the domain)."
    )
    memory_instructions: str | None = Field(None, description="Added to the memory model's instruction.")
    summary_prompt: str | None = Field(
        None,
        description=(
            "Replaces the summarizer's prompt whole: it must hold {messages} and the four sections SESSION INTENT, "
            "SUMMARY, ARTIFACTS, NEXT STEPS ({focus} optional: where the additions go, else at the end)."
        ),
    )
    memory_prompt: str | None = Field(
        None,
        description=(
            "Replaces the memory model's prompt whole: it must hold {messages} and the answer NO_REPLY "
            "({today}, {ledger_path}, {memory_md}, {ledger} optional)."
        ),
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
    dedupe_results: bool = Field(
        True,
        description=(
            "Layer 2 also shortens a tool result superseded by a later call of the same tool with the same "
            "arguments (never across a change of a file in between), to a marker naming the newer result. Under "
            "prompt_cache it waits for a summary, or for a request over the window."
        ),
    )
    context_status: bool = Field(
        False,
        description=(
            "End the model's view with one line: tokens used of the window, compactions so far, the transcript "
            "(after the newest message, so the cached prefix is untouched; never stored in the state)."
        ),
    )

    @field_validator("summary_prompt")
    @classmethod
    def _check_summary_prompt(cls, value: str | None) -> str | None:
        if value is not None and (missing := summary_prompt_missing(value)):
            raise ValueError(
                f"summary_prompt lacks {', '.join(missing)}: the engine puts the conversation at {{messages}} and "
                "reads the four sections back; add them as headings (LangChain's DEFAULT_SUMMARY_PROMPT has all "
                "four), or pass your wording as summary_instructions, which adds it to the built-in prompt"
            )
        return value

    @field_validator("memory_prompt")
    @classmethod
    def _check_memory_prompt(cls, value: str | None) -> str | None:
        if value is not None and (missing := memory_prompt_missing(value)):
            raise ValueError(
                f"memory_prompt lacks {', '.join(missing)}: the engine puts the conversation at {{messages}} and "
                "accepts bullets or NO_REPLY; add them, or use memory_instructions to add to the built-in prompt"
            )
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> CompactionConfig:
        if self.keep_tokens_min > self.keep_tokens_max:
            raise ValueError(
                f"keep_tokens_min ({self.keep_tokens_min}) is larger than keep_tokens_max "
                f"({self.keep_tokens_max}); set keep_tokens_min <= keep_tokens_max"
            )
        if 0 < self.trigger_tokens <= self.keep_tokens:
            raise ValueError(
                f"keep_tokens ({self.keep_tokens}) is not below trigger_tokens ({self.trigger_tokens}): every "
                "compaction would end over the trigger; set keep_tokens well under trigger_tokens"
            )
        if (
            self.context_window
            and self.trigger_tokens == 0
            and self.trigger_fraction is None
            and not self._fits(self.context_window)
        ):
            raise ValueError(
                f"context_window ({self.context_window:,}) is below the smallest window these settings support, "
                f"{self.smallest_window():,} tokens: after a compaction a summary (~{self._summary_tokens():,} tokens "
                f"with fidelity.request_tokens={self.fidelity.request_tokens:,}) and a kept tail of at least "
                f"{MIN_KEEP_TOKENS} tokens must fit in target_ratio ({self.target_ratio}) of the trigger (half the "
                "window); lower fidelity.request_tokens or raise target_ratio, or set trigger_tokens and keep_tokens "
                "yourself"
            )
        try:
            from zoneinfo import ZoneInfo

            ZoneInfo(self.timezone)
        except Exception as exc:  # noqa: BLE001 - any lookup failure is a bad name
            raise ValueError(
                f"timezone {self.timezone!r} is not a known IANA zone name; use e.g. 'UTC' or 'Asia/Shanghai'"
            ) from exc
        return self

    def _summary_tokens(self) -> int:
        return SUMMARY_ALLOWANCE + self.fidelity.request_tokens

    def _dynamic(self, window: int) -> tuple[int, int]:
        """Return (trigger, keep) derived from a window: the design's rules, scaled down for small windows.

        The reserve is at most half the window (so the trigger grows with the
        window, never below half of it). The kept tail is ``keep_tokens_min``
        under ``prompt_cache``, else the design's share of the trigger, and at
        most what leaves room for a summary under the target:
        ``keep + summary <= target``.
        """
        trigger = window - min(self.reserved, window // 2)
        if self.prompt_cache:
            keep = self.keep_tokens_min
        else:
            keep = min(self.keep_tokens_max, max(self.keep_tokens_min, int(trigger * self.keep_tokens_ratio)))
        return trigger, min(keep, int(trigger * self.target_ratio) - self._summary_tokens())

    def _fits(self, window: int) -> bool:
        return self._dynamic(window)[1] >= MIN_KEEP_TOKENS

    def smallest_window(self) -> int:
        """Return the smallest ``context_window`` whose derived budget leaves room for a summary and a kept tail."""
        low, high = 1, 1 << 40
        while low < high:  # the derived keep grows with the window
            mid = (low + high) // 2
            low, high = (low, mid) if self._fits(mid) else (mid + 1, high)
        return low

    def resolve(self, model: Any = None) -> Budget:
        """Return the concrete budget for a model's window (the design's dynamic rules).

        The window comes from ``context_window``, else from
        ``model.profile["max_input_tokens"]``; when neither is known the
        trigger is ``fallback_trigger_tokens`` and the tail is kept by
        ``keep_messages``. A window from the model is validated like a
        configured one (``ValidationError`` below ``smallest_window()``).
        ``trigger_fraction`` and ``keep_fraction`` are shares of that window:
        a ``ValueError`` names them when it is unknown, or when the tail they
        leave is not below the trigger.
        """
        if not self.context_window and (reported := model_context_window(model)):
            return type(self).model_validate({**dict(self), "context_window": reported}).resolve()
        window = self.context_window
        derived = self._dynamic(window) if window else None
        fixed = [t for t in (self.trigger_tokens, self._fraction_of_window(window, "trigger_fraction")) if t]
        if fixed:
            trigger = min(fixed)
        elif derived:
            trigger = derived[0]
        else:
            trigger = self.fallback_trigger_tokens

        keep_share = self._fraction_of_window(window, "keep_fraction")
        if keep_share is not None:
            keep = keep_share
        elif self.keep_tokens > 0:
            keep = self.keep_tokens
        elif self.keep_tokens == 0 or not derived:
            keep = 0
        elif fixed:  # a fixed trigger: the tail still leaves room for the summary under its target
            keep = min(derived[1], max(MIN_KEEP_TOKENS, int(trigger * self.target_ratio) - self._summary_tokens()))
        else:
            keep = derived[1]
        if (keep_share is not None or self.trigger_fraction is not None) and keep >= trigger:
            raise ValueError(
                f"the kept tail ({keep:,} tokens) is not below the trigger ({trigger:,} tokens) in a "
                f"{window:,}-token window: every compaction would end over the trigger; keep less or trigger later"
            )
        target = int(trigger * self.target_ratio)
        if self.working_set_tokens >= 0:
            working_set = self.working_set_tokens
        else:  # a share of the trigger, within what the target leaves after the summary and the tail
            share = min(int(trigger * WORKING_SET_RATIO), WORKING_SET_MAX_TOKENS)
            working_set = max(0, min(share, target - self._summary_tokens() - keep))
        return Budget(
            context_window=window or None,
            trigger_tokens=trigger,
            keep_tokens=keep,
            working_set_tokens=working_set,
            keep_messages=self.keep_messages,
            trigger_messages=self.trigger_messages,
            target_tokens=target,
            min_new_tokens=trigger // 10 if self.min_new_tokens is None else self.min_new_tokens,
            messages_min_tokens=(
                trigger // 4 if self.trigger_messages_min_tokens is None else self.trigger_messages_min_tokens
            ),
        )


@dataclass(frozen=True)
class Budget:
    """Thresholds resolved for one model: when to compact and how much tail to keep.

    ``keep_tokens == 0`` means the tail is kept by message count
    (``keep_messages``), as when the window is unknown.
    """

    context_window: int | None
    trigger_tokens: int
    keep_tokens: int
    keep_messages: int
    trigger_messages: int
    #: Tokens of the working set a compaction keeps besides the tail (0: off).
    working_set_tokens: int = 0
    #: At most this many tokens after a compaction (``target_ratio`` of the trigger).
    target_tokens: int = 0
    #: New tokens that must arrive after a summary before the next one (unless the window would overflow).
    min_new_tokens: int = 0
    #: The message-count trigger needs at least this many tokens too.
    messages_min_tokens: int = 0

    @property
    def hard_limit(self) -> int:
        """Return the token count the model cannot accept: the window, else the trigger."""
        return self.context_window or self.trigger_tokens


def model_context_window(model: Any) -> int | None:
    """Return ``model.profile["max_input_tokens"]`` when the model reports one, else None."""
    profile = getattr(model, "profile", None)
    if isinstance(profile, dict):
        value = profile.get("max_input_tokens")
        if isinstance(value, int) and value > 0:
            return value
    return None
