"""The pins' budget: the tokens one pin, and all pins together, may take in every summary.

A pin is kept verbatim in every later summary, so its size is paid again at
each one: pins that outgrow the window would make every summary larger than
what it replaces. ``FidelityConfig.pin_tokens`` bounds one pin and
``FidelityConfig.pins_tokens`` all of them; left at None they are derived
from the context window (``PIN_SHARE`` and ``PINS_SHARE`` of it, at most
``PIN_MAX_TOKENS`` and ``PINS_MAX_TOKENS``; those maxima when the window is
unknown). The pin tool refuses what would pass them, automatic pins make room
(the oldest are unpinned first), and a summary shows a longer pin by its start
and leaves out, with a count, the pins past the total. Pure functions;
nothing here imports langgraph.

>>> pin_budget(window=32_000)
PinBudget(pin=640, pins=1600)
>>> pin_budget(window=200_000)
PinBudget(pin=1000, pins=4000)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .config import FidelityConfig
from .tokens import estimate_text_tokens

#: One pin's derived budget: this share of the context window, at most ``PIN_MAX_TOKENS``.
PIN_SHARE = 0.02
PIN_MAX_TOKENS = 1_000
#: All pins' derived budget: this share of the context window, at most ``PINS_MAX_TOKENS``. At a 32k window a
#: summary then holds at most 1,600 tokens of pins, which leaves it well under the target after a compaction.
PINS_SHARE = 0.05
PINS_MAX_TOKENS = 4_000

Count = Callable[[str], int]


class PinBudget(NamedTuple):
    """The tokens one pin (``pin``) and all pins together (``pins``) may take in a summary."""

    pin: int
    pins: int


def pin_budget(settings: FidelityConfig | None = None, window: int | None = None) -> PinBudget:
    """Return the pins' budget: ``pin_tokens`` and ``pins_tokens``, or what they derive from the window."""
    settings = settings or FidelityConfig()
    pin = PIN_MAX_TOKENS if not window else max(1, min(PIN_MAX_TOKENS, int(window * PIN_SHARE)))
    pins = PINS_MAX_TOKENS if not window else max(1, min(PINS_MAX_TOKENS, int(window * PINS_SHARE)))
    return PinBudget(
        settings.pin_tokens if settings.pin_tokens is not None else pin,
        settings.pins_tokens if settings.pins_tokens is not None else pins,
    )


def pins_tokens(pins: Sequence[dict[str, Any]], count_tokens: Count = estimate_text_tokens) -> int:
    """Return the tokens the pins' texts take."""
    return sum(count_tokens(p.get("text") or "") for p in pins)


def pin_refusal(
    text: str, held: Sequence[dict[str, Any]], budget: PinBudget, count_tokens: Count = estimate_text_tokens
) -> str | None:
    """Return why ``text`` may not be pinned next to the pins ``held`` (the agent's and the application's), or None."""
    tokens = count_tokens(text.strip())
    if tokens > budget.pin:
        return (
            f"Error: not pinned: this text is ~{tokens:,} tokens, over the limit of one pin (~{budget.pin:,} tokens, "
            "FidelityConfig.pin_tokens). Pin the rule or the fact itself in a sentence or two; keep long material "
            "in a file and pin where it is."
        )
    taken = pins_tokens(held, count_tokens)
    if taken + tokens > budget.pins:
        return (
            f"Error: not pinned: the pins in force take ~{taken:,} tokens and this one ~{tokens:,}, over the budget "
            f"of all pins (~{budget.pins:,} tokens, FidelityConfig.pins_tokens). Unpin one you no longer need with "
            "unpin(text), or pin a shorter text."
        )
    return None


def shortened_pin(text: str, budget_tokens: int, count_tokens: Count = estimate_text_tokens) -> str:
    """Return a pin as a summary shows it: whole, or its start when it is over ``budget_tokens``."""
    tokens = count_tokens(text)
    if tokens <= budget_tokens:
        return text
    keep = max(1, int(len(text) * budget_tokens / tokens * 0.9))
    return (
        f"{text[:keep]} (... {len(text) - keep:,} more characters of this pin, over FidelityConfig.pin_tokens; "
        "unpin it and pin a shorter text)"
    )


def bounded_pins(
    pins: Sequence[dict[str, Any]], budget: PinBudget, count_tokens: Count = estimate_text_tokens
) -> tuple[list[str], int]:
    """Return the pins' texts a summary shows (oldest first, each within ``budget.pin``) and how many it leaves out.

    A pin that does not fit in what ``budget.pins`` leaves is left out; a
    shorter one after it may still fit.
    """
    shown: list[str] = []
    room, left_out = budget.pins, 0
    for pin in pins:
        text = shortened_pin(pin["text"], budget.pin, count_tokens)
        tokens = count_tokens(text)
        if tokens > room:
            left_out += 1
            continue
        shown.append(text)
        room -= tokens
    return shown, left_out


def auto_pins_within(
    in_force: Sequence[dict[str, Any]],
    others: Sequence[dict[str, Any]],
    budget: PinBudget,
    count_tokens: Count = estimate_text_tokens,
) -> int:
    """Return how many of the oldest automatic pins ``in_force`` to unpin for them and ``others`` to fit the budget."""
    total = pins_tokens(others, count_tokens) + pins_tokens(in_force, count_tokens)
    retired = 0
    while total > budget.pins and retired < len(in_force):
        total -= count_tokens(in_force[retired].get("text") or "")
        retired += 1
    return retired
