"""LangChain's summarization arguments as settings: ``trigger``, ``keep``, ``token_counter``, ``summary_prompt``...

LangChain's ``SummarizationMiddleware`` says when to compact and what to keep
with ``(kind, value)`` pairs: ``("tokens", 4000)``, ``("messages", 50)``, or
``("fraction", 0.8)`` of the model's context window, and dict clauses of
thresholds all met (``{"messages": 10, "tokens": 4000}``); how much of the
history its summarizer reads with ``trim_tokens_to_summarize``. Every front
takes them with that meaning and ``settings_with`` writes them onto
``CompactionConfig``:

>>> config = settings_with(None, trigger=[("tokens", 4000), ("messages", 50)], keep=("messages", 20))
>>> (config.trigger_tokens, config.trigger_messages, config.keep_by, config.keep_messages)
(4000, 50, 'messages', 20)
>>> settings_with(None, trigger=("fraction", 0.8)).resolve(None)  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
ValueError: trigger=('fraction', 0.8) is a fraction of the model's context window, which is unknown ...

A token trigger always stands, as everywhere in this package: a trigger of
messages alone keeps the one derived from the window, so no request goes over
the window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from .config import CompactionConfig

logger = logging.getLogger("langgraph_compaction")

#: LangChain's ``ContextSize``: ``("tokens", 4000)``, ``("messages", 50)``, ``("fraction", 0.8)`` of the window.
ContextSize = tuple[Literal["tokens", "messages", "fraction"], float]
#: LangChain's ``TriggerClause``: thresholds that must all be met, ``{"messages": 10, "tokens": 4000}``.
TriggerClause = Mapping[Literal["tokens", "messages", "fraction"], float]
#: LangChain's ``trigger``: a ``ContextSize`` or a clause, or a list of them (compact when any is met).
Trigger = ContextSize | TriggerClause | list[ContextSize | TriggerClause]

_FORMS = "('tokens', n), ('messages', n) or ('fraction', f) with 0 < f <= 1"


def context_size(value: Any, argument: str) -> tuple[str, int | float]:
    """Return ``value`` checked as one of LangChain's ``(kind, value)`` pairs.

    Args:
        value: ``("tokens", n)`` or ``("messages", n)`` with a whole ``n > 0``,
            or ``("fraction", f)`` with ``0 < f <= 1``.
        argument: The argument it was given as (``trigger`` or ``keep``), named in errors.

    Raises:
        ValueError: naming the argument and the accepted forms.
    """
    if not isinstance(value, tuple) or len(value) != 2:
        raise ValueError(f"{argument}={value!r} is not a (kind, value) pair; use {_FORMS}")
    kind, size = value
    if kind == "fraction":
        if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0 < size <= 1:
            raise ValueError(f"{argument}={value!r}: a fraction of the window is above 0 and at most 1; use {_FORMS}")
    elif kind in ("tokens", "messages"):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"{argument}={value!r}: {kind} is a whole number above 0; use {_FORMS}")
    else:
        raise ValueError(f"{argument}={value!r}: the kind is not one of tokens, messages, fraction; use {_FORMS}")
    return kind, size


def _clauses(trigger: Any) -> list[dict[str, int | float]]:
    """Return LangChain's ``trigger`` as clauses: a pair is a clause of one threshold, a dict one of all its own."""
    items = trigger if isinstance(trigger, list) else [trigger]
    if not items:
        raise ValueError(f"trigger={trigger!r}: give one {_FORMS}, a dict of them (all met), or a list (any met)")
    clauses: list[dict[str, int | float]] = []
    for item in items:
        if isinstance(item, Mapping):
            if not item:
                raise ValueError(f"trigger={trigger!r}: a dict clause names at least one of tokens, messages, fraction")
            clauses.append({kind: context_size((kind, size), "trigger")[1] for kind, size in item.items()})
        else:
            kind, size = context_size(item, "trigger")
            clauses.append({kind: size})
    return clauses


def trigger_settings(trigger: Any) -> dict[str, Any]:
    """Return the settings for LangChain's ``trigger``: a pair, a dict clause (all met), or a list (any met).

    The message trigger is on only when a clause counts messages; a clause of
    messages and tokens (``{"messages": 10, "tokens": 4000}``) is the message
    trigger with its floor of tokens (``guards.trigger_messages_min_tokens``).
    Clauses of tokens and fractions of the window set the token trigger (the
    lowest of them); without any the token trigger stays as configured,
    derived from the window by default.

    Args:
        trigger: ``("tokens" | "messages" | "fraction", value)``, a dict of
            them, or a list of either.

    Raises:
        ValueError: naming ``trigger`` and the accepted forms, or a clause this
            package cannot say (two clauses that count messages with other
            thresholds, or a clause of tokens and a fraction together).
    """
    clauses = _clauses(trigger)
    counting = [c for c in clauses if "messages" in c]
    if (len(counting) > 1 and any(len(c) > 1 for c in counting)) or any(
        {"tokens", "fraction"} <= set(c) or {"messages", "fraction"} <= set(c) for c in clauses
    ):
        raise ValueError(
            f"trigger={trigger!r}: of the clauses that must all be met, one may count messages and tokens "
            "({'messages': 10, 'tokens': 4000}); say the others as pairs, or set CompactionConfig("
            "trigger_messages=..., guards={'trigger_messages_min_tokens': ...}) yourself"
        )
    sizes: dict[str, list[Any]] = {"tokens": [], "messages": [], "fraction": []}
    for clause in clauses:
        if "messages" not in clause:
            for kind, size in clause.items():
                sizes[kind].append(size)
    settings: dict[str, Any] = {"trigger_messages": min((c["messages"] for c in counting), default=0)}
    if floor := next((c["tokens"] for c in counting if "tokens" in c), None):
        settings["guards.trigger_messages_min_tokens"] = floor
    if sizes["tokens"] or sizes["fraction"]:
        settings["trigger_tokens"] = min(sizes["tokens"], default=None)
        settings["trigger_fraction"] = min(sizes["fraction"], default=None)
    return settings


def keep_settings(keep: Any) -> dict[str, Any]:
    """Return the settings for LangChain's ``keep``: one pair, the tail a compaction keeps.

    Args:
        keep: ``("messages", n)`` keeps the newest ``n`` messages,
            ``("tokens", n)`` about ``n`` tokens, ``("fraction", f)`` that
            share of the model's context window.

    Raises:
        ValueError: naming ``keep`` and the accepted forms.
    """
    kind, size = context_size(keep, "keep")
    if kind == "messages":
        return {"keep_messages": size, "keep_by": "messages", "keep_tokens": None, "keep_fraction": None}
    if kind == "tokens":
        return {"keep_tokens": size, "keep_by": "tokens", "keep_fraction": None}
    return {"keep_tokens": None, "keep_by": "tokens", "keep_fraction": size}


#: Just under a share of the window, so that the tail it keeps is below a trigger of that share.
_UNDER = 1 - 2**-12


def _tail_over_trigger(settings: dict[str, Any]) -> dict[str, Any]:
    """Return the trigger moved just past a tail that is not below it: LangChain compacts only what is over the tail.

    Its middleware, at the trigger, summarizes what the tail leaves out, and
    nothing while the history fits the tail: with ``keep`` at or above the
    trigger it compacts once the history outgrows the tail. A log line says
    so; the settings say it the same way.
    """
    pairs = (("keep_messages", "trigger_messages", 1), ("keep_tokens", "trigger_tokens", 1))
    for kept, trigger, step in pairs:
        if settings.get(kept) is not None and settings.get(trigger) and settings[kept] >= settings[trigger]:
            _say(kept, settings[kept], trigger, settings[trigger])
            return {**settings, trigger: settings[kept] + step}
    share, at = settings.get("keep_fraction"), settings.get("trigger_fraction")
    if share is not None and at is not None and settings.get("trigger_tokens") is None and share >= at:
        _say("keep_fraction", share, "trigger_fraction", at)
        return {**settings, "trigger_fraction": share, "keep_fraction": share * _UNDER}
    return settings


def _say(kept: str, tail: Any, trigger: str, at: Any) -> None:
    logger.info(
        "keep (%s=%s) is not below the trigger (%s=%s): compaction starts once the history outgrows the kept "
        "tail, as in LangChain's SummarizationMiddleware (nothing is summarized before)",
        kept,
        tail,
        trigger,
        at,
    )


def settings_with(
    config: CompactionConfig | Mapping[str, Any] | None,
    *,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    token_counter: Callable[..., int] | None = None,
    summary_prompt: str | None = None,
    trim_tokens_to_summarize: int | None = None,
) -> CompactionConfig | None:
    """Return ``config`` with LangChain's arguments written onto it (``config`` itself when none is given).

    ``config`` may be a ``CompactionConfig`` or a dict of its settings. An
    argument sets what ``config`` left at its default; a setting ``config``
    states and an argument contradicts is refused, naming both. A message
    trigger counts messages alone, as LangChain's does
    (``guards.trigger_messages_min_tokens=0``), and with a tail kept by
    messages the next summary waits for no new tokens
    (``summary.min_new_tokens=0``): both guards stay when ``config`` states
    them. A tail at or above the trigger moves the trigger just past it
    (``_tail_over_trigger``). Settings of a group are named dotted
    (``summary.prompt``).

    Args:
        config: The settings the arguments add to; None for the defaults.
        trigger: When to compact, see ``trigger_settings``.
        keep: What a compaction keeps, see ``keep_settings``.
        token_counter: A callable(messages) -> int counting a list of messages.
        summary_prompt: The summarizer's prompt; it must hold ``{messages}``.
        trim_tokens_to_summarize: About how many tokens of the newest evicted
            messages the summarizer is sent (``summary.history_tokens``);
            None: all of them.

    Raises:
        ValueError: a bad pair, a contradiction with ``config``, or settings
            the config refuses (pydantic's ``ValidationError`` names the setting).
    """
    if isinstance(config, Mapping):
        config = CompactionConfig.model_validate(dict(config))
    settings: dict[str, Any] = {}
    source: dict[str, str] = {}  # each setting's argument, for the errors

    def add(argument: str, mapped: dict[str, Any]) -> None:
        settings.update(mapped)
        source.update(dict.fromkeys(mapped, argument))

    if trigger is not None:
        add(f"trigger={trigger!r}", trigger_settings(trigger))
    if keep is not None:
        add(f"keep={keep!r}", keep_settings(keep))
    if token_counter is not None:
        add("token_counter=", {"token_counter": token_counter})
    if summary_prompt is not None:
        add("summary_prompt=", {"summary.prompt": summary_prompt})
    if trim_tokens_to_summarize is not None:
        add("trim_tokens_to_summarize=", {"summary.history_tokens": trim_tokens_to_summarize})
    if not settings:
        return config
    base = config if config is not None else CompactionConfig.model_validate({})
    for name, value in settings.items():
        if _stated(base, name) and _value(base, name) != value:
            raise ValueError(
                f"{source[name]} sets {name}={value!r} but config sets {name}={_value(base, name)!r}; "
                f"say it once: drop the argument or the config's {name}"
            )
    settings = _tail_over_trigger(settings)
    if settings.get("trigger_messages"):
        floors = {"guards.trigger_messages_min_tokens": 0}
        if "keep_messages" in settings:
            floors["summary.min_new_tokens"] = 0
        settings.update({n: v for n, v in floors.items() if not _stated(base, n) and n not in settings})
    return _with(base, settings)


def _value(config: Any, name: str) -> Any:
    """Return the setting ``name`` (dotted for a group's: ``summary.prompt``) of ``config``."""
    for part in name.split("."):
        config = getattr(config, part)
    return config


def _stated(config: Any, name: str) -> bool:
    """Return True when ``config`` was given the setting ``name`` (dotted for a group's)."""
    for part in name.split("."):
        if part not in config.model_fields_set:
            return False
        config = getattr(config, part)
    return True


def _with(base: CompactionConfig, settings: dict[str, Any]) -> CompactionConfig:
    """Return ``base``'s stated settings with ``settings`` (dotted names for a group's) written over them."""
    merged: dict[str, Any] = {name: getattr(base, name) for name in base.model_fields_set}
    for name, value in settings.items():
        group, _, field = name.rpartition(".")
        if not group:
            merged[name] = value
            continue
        current = merged.get(group)
        if isinstance(current, dict):  # a group an earlier setting of this call wrote
            stated = current
        else:
            stated = {} if current is None else {n: getattr(current, n) for n in current.model_fields_set}
        merged[group] = {**stated, field: value}
    return type(base).model_validate(merged)
