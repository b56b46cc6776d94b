"""LangChain's summarization arguments as settings: ``trigger``, ``keep``, ``token_counter``, ``summary_prompt``.

LangChain's ``SummarizationMiddleware`` says when to compact and what to keep
with ``(kind, value)`` pairs: ``("tokens", 4000)``, ``("messages", 50)``, or
``("fraction", 0.8)`` of the model's context window. Every front takes them
with that meaning and ``settings_with`` writes them onto ``CompactionConfig``:

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

from collections.abc import Callable
from typing import Any, Literal

from .config import CompactionConfig

#: LangChain's ``ContextSize``: ``("tokens", 4000)``, ``("messages", 50)``, ``("fraction", 0.8)`` of the window.
ContextSize = tuple[Literal["tokens", "messages", "fraction"], float]
#: LangChain's ``trigger``: one ``ContextSize`` or a list of them (compact when any is met).
Trigger = ContextSize | list[ContextSize]

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


def trigger_settings(trigger: Any) -> dict[str, Any]:
    """Return the settings for LangChain's ``trigger``: one pair, or a list of pairs (compact when any is met).

    The message trigger is on only when a pair names messages. Pairs of
    tokens and fractions of the window set the token trigger (the lowest of
    them); without any the token trigger stays as configured, derived from
    the window by default.

    Args:
        trigger: ``("tokens" | "messages" | "fraction", value)`` or a list of them.

    Raises:
        ValueError: naming ``trigger`` and the accepted forms (LangChain's
            dict clauses, several thresholds that must all be met, are refused).
    """
    pairs = trigger if isinstance(trigger, list) else [trigger]
    if not pairs or any(isinstance(p, dict) for p in pairs):
        raise ValueError(
            f"trigger={trigger!r}: give one {_FORMS}, or a list of them (compact when any is met); "
            "for 'this many messages and at least this many tokens' set CompactionConfig(trigger_messages=..., "
            "guards={'trigger_messages_min_tokens': ...})"
        )
    sizes: dict[str, list] = {"tokens": [], "messages": [], "fraction": []}
    for pair in pairs:
        kind, size = context_size(pair, "trigger")
        sizes[kind].append(size)
    settings: dict[str, Any] = {"trigger_messages": min(sizes["messages"], default=0)}
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


def settings_with(
    config: CompactionConfig | None,
    *,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    token_counter: Callable[..., int] | None = None,
    summary_prompt: str | None = None,
) -> CompactionConfig | None:
    """Return ``config`` with LangChain's arguments written onto it (``config`` itself when none is given).

    An argument sets what ``config`` left at its default; a setting ``config``
    states and an argument contradicts is refused, naming both. A message
    trigger counts messages alone, as LangChain's does
    (``guards.trigger_messages_min_tokens=0``), and with a tail kept by
    messages the next summary waits for no new tokens
    (``summary.min_new_tokens=0``): both guards stay when ``config`` states
    them. Settings of a group are named dotted (``summary.prompt``).

    Args:
        config: The settings the arguments add to; None for the defaults.
        trigger: When to compact, see ``trigger_settings``.
        keep: What a compaction keeps, see ``keep_settings``.
        token_counter: A callable(messages) -> int counting a list of messages.
        summary_prompt: The summarizer's prompt; it must hold ``{messages}``
            and the four section names (LangChain's default prompt has them).

    Raises:
        ValueError: a bad pair, a tail of messages not below the message
            trigger, a contradiction with ``config``, or settings the config
            refuses (pydantic's ``ValidationError`` names the setting).
    """
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
    if not settings:
        return config
    base = config if config is not None else CompactionConfig.model_validate({})
    for name, value in settings.items():
        if _stated(base, name) and _value(base, name) != value:
            raise ValueError(
                f"{source[name]} sets {name}={value!r} but config sets {name}={_value(base, name)!r}; "
                f"say it once: drop the argument or the config's {name}"
            )
    if settings.get("trigger_messages"):
        floors = {"guards.trigger_messages_min_tokens": 0}
        if "keep_messages" in settings:
            if settings["keep_messages"] >= settings["trigger_messages"]:
                raise ValueError(
                    f"keep={keep!r} is not below trigger={trigger!r}: every compaction would leave the message "
                    "trigger met; keep fewer messages than the trigger counts"
                )
            floors["summary.min_new_tokens"] = 0
        settings.update({name: value for name, value in floors.items() if not _stated(base, name)})
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
