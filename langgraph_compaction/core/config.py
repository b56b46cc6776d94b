"""The compaction settings: the original harness's defaults table, in one place.

The top level of ``CompactionConfig`` is that table, each default the
harness's value under its name in snake_case (``triggerMessages`` ->
``trigger_messages``), so it can be checked line by line; the rest lives in
nested groups (``background``, ``summary``, ``memory``, ``guards`` and the
layers, see ``settings``). A size left ``None`` is derived from the model's
window. ``CompactionConfig.resolve()`` turns the settings and a model's
context window into the concrete token budget the nodes use.

Each setting has one spelling: a group's setting is given in its group
(``summary={"timeout": 60}``, read as ``config.summary.timeout``);
``background=False`` is short for ``background={"enabled": False}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from .settings import (
    BackgroundConfig,
    FidelityConfig,
    GuardsConfig,
    MemoryConfig,
    MicroCompactConfig,
    PruneConfig,
    Settings,
    SummaryConfig,
    TruncateArgsConfig,
)

__all__ = [
    "FALLBACK_TRIGGER_TOKENS",
    "MIN_KEEP_TOKENS",
    "SUMMARY_ALLOWANCE",
    "WORKING_SET_MAX_TOKENS",
    "WORKING_SET_RATIO",
    "BackgroundConfig",
    "Budget",
    "CompactionConfig",
    "FidelityConfig",
    "GuardsConfig",
    "MemoryConfig",
    "MicroCompactConfig",
    "PruneConfig",
    "SummaryConfig",
    "TokenCounterFn",
    "TruncateArgsConfig",
    "model_context_window",
]

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


class CompactionConfig(Settings):
    """All compaction settings: the original harness's defaults table, then the nested groups.

    Every top-level default is the harness's, except the kept tail under
    prompt caching. A size left ``None`` is derived from the window.

    >>> budget = CompactionConfig(context_window=128_000).resolve()
    >>> (budget.trigger_tokens, budget.keep_tokens)
    (108000, 2000)
    >>> CompactionConfig(context_window=128_000, prompt_cache=False).resolve().keep_tokens  # the harness's keep
    8000
    >>> CompactionConfig(summary={"timeout": 60}, background={"enabled": False}).summary.timeout
    60.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, arbitrary_types_allowed=True)

    context_window: int | None = Field(
        None, ge=1, description="Model context window; None: take it from the model, else unknown."
    )
    trigger_messages: int = Field(50, ge=0, description="Compact from this many messages; 0 turns the count off.")
    trigger_tokens: int | None = Field(
        None, ge=1, description="Compact from this many tokens; None: derived, window - reserved."
    )
    reserved: int = Field(20_000, ge=0, description="Tokens left free under the window for the compaction itself.")
    fallback_trigger_tokens: int = Field(
        FALLBACK_TRIGGER_TOKENS, ge=1, description="The token trigger when the window is unknown."
    )
    keep_messages: int = Field(
        20, ge=1, description="Messages kept verbatim when the tail is kept by count (keep_by, or an unknown window)."
    )
    keep_tokens: int | None = Field(
        None,
        ge=1,
        description="Tokens of the kept tail; None: derived from the trigger (keep_tokens_min/max/ratio).",
    )
    keep_by: Literal["tokens", "messages"] = Field(
        "tokens",
        description=(
            "How the tail is kept: 'tokens' (keep_tokens, or the last keep_messages when the window is unknown), "
            "'messages' (always the last keep_messages; keep_tokens and keep_fraction stay None)."
        ),
    )
    keep_tokens_min: int = Field(2_000, ge=0, description="Lower bound of the derived kept tail.")
    keep_tokens_max: int = Field(8_000, ge=0, description="Upper bound of the derived kept tail.")
    keep_tokens_ratio: float = Field(0.25, gt=0, le=1, description="The derived kept tail's share of the trigger.")
    working_set_tokens: int | None = Field(
        None,
        ge=0,
        description=(
            "Tokens of the agent's working set kept through a compaction: the latest read of each file it read "
            "and edited recently, newest touched first, kept in the tail or right after the summary as the "
            "messages they are; the summary names the files left out (and the stale ones) and how to get them "
            "back. None: derived, WORKING_SET_RATIO of the trigger, at most WORKING_SET_MAX_TOKENS and what the "
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
            "break. False: the harness's keep (min(keep_tokens_max, max(keep_tokens_min, ratio x trigger))) "
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
    mode: Literal["rewrite", "view"] = Field(
        "rewrite",
        description=(
            "'rewrite': the summary replaces the evicted messages in the state. 'view': the state keeps every "
            "message and the model is sent the compacted view (summary and cutoff kept in `compaction`)."
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

    # LangChain's ("fraction", f) for trigger= and keep=, shares of the model's window.
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

    # The nested groups.
    background: BackgroundConfig = Field(
        BackgroundConfig(), description="Compaction prepared next to the agent (a bool sets background.enabled)."
    )
    summary: SummaryConfig = Field(
        SummaryConfig(), description="The summarizer's prompt, limits and hooks, and the target after a summary."
    )
    memory: MemoryConfig = Field(MemoryConfig(), description="The memory flush's prompt, the ledger, MEMORY.md.")
    guards: GuardsConfig = Field(
        GuardsConfig(), description="The message-trigger floor, the breaker, calibration and redaction."
    )

    @model_validator(mode="before")
    @classmethod
    def _name_the_group(cls, data: Any) -> Any:
        """Refuse a group's setting given at the top level with an error naming its group."""
        for name in data if isinstance(data, dict) else ():
            if name not in cls.model_fields and (home := _group_of(name)):
                group, field = home
                raise ValueError(
                    f"{name} is not a top-level setting: it is {group}.{field}, given as {group}={{{field!r}: ...}}"
                )
        return data

    @field_validator("background", mode="before")
    @classmethod
    def _background_bool(cls, value: Any) -> Any:
        return _short_background(value)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> CompactionConfig:
        """Return a copy with ``update`` validated; a dict updates the settings its group states."""
        if not update:
            return super().model_copy(deep=deep)
        stated: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        for name, value in update.items():
            value = _short_background(value) if name == "background" else value
            group = stated.get(name)
            if isinstance(group, Settings) and isinstance(value, dict):
                value = {**{field: getattr(group, field) for field in group.model_fields_set}, **value}
            stated[name] = value
        return type(self).model_validate(stated)

    @model_validator(mode="after")
    def _check_keep(self) -> CompactionConfig:
        if self.keep_by == "messages" and (self.keep_tokens is not None or self.keep_fraction is not None):
            stated = "keep_tokens" if self.keep_tokens is not None else "keep_fraction"
            raise ValueError(
                f"keep_by='messages' and {stated} ({getattr(self, stated)}) both say what to keep; keep by "
                f"messages (drop {stated}) or by tokens (drop keep_by)"
            )
        if self.keep_fraction is not None and self.keep_tokens is not None:
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
        if self.keep_tokens_min > self.keep_tokens_max:
            raise ValueError(
                f"keep_tokens_min ({self.keep_tokens_min}) is larger than keep_tokens_max "
                f"({self.keep_tokens_max}); set keep_tokens_min <= keep_tokens_max"
            )
        if self.trigger_tokens is not None and self.keep_tokens is not None and self.trigger_tokens <= self.keep_tokens:
            raise ValueError(
                f"keep_tokens ({self.keep_tokens}) is not below trigger_tokens ({self.trigger_tokens}): every "
                "compaction would end over the trigger; set keep_tokens well under trigger_tokens"
            )
        return self

    @model_validator(mode="after")
    def _check_window(self) -> CompactionConfig:
        if (
            self.context_window
            and self.trigger_tokens is None
            and self.trigger_fraction is None
            and not self._fits(self.context_window)
        ):
            raise ValueError(
                f"context_window ({self.context_window:,}) is below the smallest window these settings support, "
                f"{self.smallest_window():,} tokens: after a compaction a summary (~{self._summary_tokens():,} tokens "
                f"with fidelity.request_tokens={self.fidelity.request_tokens:,}) and a kept tail of at least "
                f"{MIN_KEEP_TOKENS} tokens must fit in summary.target_ratio ({self.summary.target_ratio}) of the "
                "trigger (half the window); lower fidelity.request_tokens or raise summary.target_ratio, or set "
                "trigger_tokens and keep_tokens yourself"
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

    def _summary_tokens(self) -> int:
        return SUMMARY_ALLOWANCE + self.fidelity.request_tokens

    def _dynamic(self, window: int) -> tuple[int, int]:
        """Return (trigger, keep) derived from a window: the harness's rules, scaled down for small windows.

        The reserve is at most half the window (so the trigger grows with the
        window, never below half of it). The kept tail is ``keep_tokens_min``
        under ``prompt_cache``, else the harness's share of the trigger, and at
        most what leaves room for a summary under the target:
        ``keep + summary <= target``.
        """
        trigger = window - min(self.reserved, window // 2)
        if self.prompt_cache:
            keep = self.keep_tokens_min
        else:
            keep = min(self.keep_tokens_max, max(self.keep_tokens_min, int(trigger * self.keep_tokens_ratio)))
        return trigger, min(keep, int(trigger * self.summary.target_ratio) - self._summary_tokens())

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
        """Return the concrete budget for a model's window (the harness's dynamic rules).

        The window comes from ``context_window``, else from
        ``model.profile["max_input_tokens"]``; when neither is known the
        trigger is ``fallback_trigger_tokens`` and the tail is kept by
        ``keep_messages`` (as it always is under ``keep_by="messages"``). A window from the model is validated like a
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
        elif self.keep_tokens is not None:
            keep = self.keep_tokens
        elif self.keep_by == "messages" or not derived:
            keep = 0
        elif fixed:  # a fixed trigger: the tail still leaves room for the summary under its target
            target = int(trigger * self.summary.target_ratio)
            keep = min(derived[1], max(MIN_KEEP_TOKENS, target - self._summary_tokens()))
        else:
            keep = derived[1]
        if (keep_share is not None or self.trigger_fraction is not None) and keep >= trigger:
            raise ValueError(
                f"the kept tail ({keep:,} tokens) is not below the trigger ({trigger:,} tokens) in a "
                f"{window:,}-token window: every compaction would end over the trigger; keep less or trigger later"
            )
        target = int(trigger * self.summary.target_ratio)
        if self.working_set_tokens is not None:
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
            min_new_tokens=trigger // 10 if self.summary.min_new_tokens is None else self.summary.min_new_tokens,
            messages_min_tokens=(
                trigger // 4
                if self.guards.trigger_messages_min_tokens is None
                else self.guards.trigger_messages_min_tokens
            ),
        )


def _short_background(value: Any) -> Any:
    """Return ``background`` with its short form, a bool, spelled out: ``{"enabled": value}``."""
    return {"enabled": value} if isinstance(value, bool) else value


def _group_of(name: str) -> tuple[str, str] | None:
    """Return (group, setting) for a name that is a group's setting, bare or prefixed by the group's name."""
    for group, info in CompactionConfig.model_fields.items():
        fields = getattr(info.annotation, "model_fields", None)
        if fields is None:
            continue
        field = name.removeprefix(f"{group}_")
        if field in fields:
            return group, field
    return None


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
    #: At most this many tokens after a compaction (``summary.target_ratio`` of the trigger).
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
