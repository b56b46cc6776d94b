"""Calibrated counting: learn from the model's reported input size how far the estimate is off.

The estimator counts ``messages`` only. The model is also sent the system
prompt and the schemas of the tools it is bound with, and its tokenizer is
not o200k's; the provider's ``usage_metadata["input_tokens"]`` of the last
call says what the request really cost. The ratio of that figure to our
estimate of the same request is kept per thread in the ``compaction`` state
(clamped, decaying towards each new observation), and the gate compares the
conversation against a budget converted into estimator units.

Pure functions; nothing here imports langgraph.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from .billing import CACHED_PRICE
from .config import Budget
from .native import compaction_block, provider_reads_from
from .tokens import MESSAGE_OVERHEAD, estimate_text_tokens

#: The ratio never leaves these bounds: one odd report must not make compaction wild.
RATIO_MIN = 0.5
RATIO_MAX = 2.5
#: Weight of the newest observation; older ones decay geometrically.
DECAY = 0.5

_DEFAULT: dict[str, Any] = {"ratio": 1.0, "samples": 0, "last_id": None, "window": None}


def read_calibration(raw: Any) -> dict[str, Any]:
    """Return the stored calibration with every key present and of the right type (defaults otherwise)."""
    out = dict(_DEFAULT)
    if not isinstance(raw, dict):
        return out
    ratio = raw.get("ratio")
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and RATIO_MIN <= ratio <= RATIO_MAX:
        out["ratio"] = float(ratio)
    for key in ("samples", "window"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[key] = value
    if isinstance(raw.get("last_id"), str):
        out["last_id"] = raw["last_id"]
    if usage := read_usage(raw.get("usage")):
        out["usage"] = usage
    return out


#: The running totals of what the provider reported for the thread's calls.
USAGE_KEYS = ("calls", "input", "cache_read", "cache_creation")


def read_usage(raw: Any) -> dict[str, int]:
    """Return stored usage totals (``calls``, ``input``, ``cache_read``, ``cache_creation``), {} when there are none."""
    if not isinstance(raw, dict):
        return {}
    values = {k: raw.get(k) for k in USAGE_KEYS}
    counts = {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    return counts if len(counts) == len(values) else {}


def add_usage(usage: dict[str, Any], reported: int, cache: dict[str, int]) -> dict[str, int]:
    """Return the usage totals with one more call of ``reported`` input tokens and its cache figures."""
    totals = read_usage(usage) or dict.fromkeys(USAGE_KEYS, 0)
    return {
        "calls": totals["calls"] + 1,
        "input": totals["input"] + reported,
        "cache_read": totals["cache_read"] + cache.get("cache_read", 0),
        "cache_creation": totals["cache_creation"] + cache.get("cache_creation", 0),
    }


def usage_event(calibration: dict[str, Any]) -> dict[str, Any]:
    """Return the figures of a calibration just observed, for an event.

    They are the reply's input and cache figures and the thread's totals.

    ``billed_input`` is the thread's input so far at OpenAI's prices (cache reads at 0.1x).
    """
    figures = {"input_tokens": calibration.get("reported")}
    figures.update({k: calibration[k] for k in ("cache_read", "cache_creation") if k in calibration})
    figures["thread"] = dict(calibration["usage"])
    figures["billed_input"] = round(billed_input(calibration["usage"]))
    return figures


def billed_input(usage: dict[str, Any], cached_price: float = CACHED_PRICE, write_price: float = 1.0) -> float:
    """Return the input tokens ``usage`` bills at full price.

    That is uncached x 1 + cache reads x ``cached_price`` + writes x ``write_price``.

    OpenAI (gpt-5): reads at 0.1, no write surcharge (the defaults); Anthropic: reads 0.1, writes 1.25.
    """
    totals = read_usage(usage) or dict.fromkeys(USAGE_KEYS, 0)
    uncached = max(0, totals["input"] - totals["cache_read"] - totals["cache_creation"])
    return uncached + cached_price * totals["cache_read"] + write_price * totals["cache_creation"]


def bound_tools(model: Any) -> list[Any]:
    """Return the tool schemas a model was bound with (``model.bind_tools(...)``), else ``[]``."""
    while model is not None:
        tools = (getattr(model, "kwargs", None) or {}).get("tools")
        if tools:
            return list(tools)
        model = getattr(model, "bound", None)
    return []


def fixed_tokens(model: Any = None, system_prompt: Any = None) -> int:
    """Return the estimated tokens each request carries besides the state's messages.

    That is the system prompt the model node adds (a string or a
    ``SystemMessage``) and the JSON schemas of the tools ``model`` is bound with.
    """
    tokens = 0
    if isinstance(system_prompt, SystemMessage):
        system_prompt = system_prompt.content
    if system_prompt:
        text = system_prompt if isinstance(system_prompt, str) else json.dumps(system_prompt, default=str)
        tokens += MESSAGE_OVERHEAD + estimate_text_tokens(text)
    tools = bound_tools(model)
    if tools:
        tokens += estimate_text_tokens(json.dumps(tools, ensure_ascii=False, default=str))
    return tokens


def observe(calibration: dict[str, Any], reported: int, estimate: int, **extra: Any) -> dict[str, Any]:
    """Return the calibration after one observation: the model reported ``reported`` for ``estimate``."""
    current = read_calibration(calibration)
    sample = min(RATIO_MAX, max(RATIO_MIN, reported / max(1, estimate)))
    ratio = sample if not current["samples"] else (1 - DECAY) * current["ratio"] + DECAY * sample
    return {
        **current,
        "ratio": round(min(RATIO_MAX, max(RATIO_MIN, ratio)), 4),
        "samples": current["samples"] + 1,
        "reported": int(reported),
        "estimate": int(estimate),
        **extra,
    }


def _input_tokens(message: BaseMessage) -> int | None:
    usage = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
    value = usage.get("input_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def observe_usage(
    calibration: dict[str, Any], messages: Sequence[BaseMessage], counts: Sequence[int], fixed: int
) -> dict[str, Any] | None:
    """Return the calibration updated from the newest reply's ``input_tokens``, or None when there is nothing new.

    The newest assistant message that reports usage answered the messages in
    front of it (compaction only ever runs before a call), so the estimate of
    that request is their count plus ``fixed``.
    """
    current = read_calibration(calibration)
    # only the newest reply: an older one was observed at an earlier call, and scanning a long
    # history whose model reports no usage would cost every call O(n)
    i = next((j for j in range(len(messages) - 1, -1, -1) if isinstance(messages[j], AIMessage)), None)
    if i is None:
        return None
    reported = _input_tokens(messages[i])
    if reported is None or (messages[i].id and messages[i].id == current["last_id"]):
        return None
    if compaction_block(messages[i]):  # compacted by the provider in this call: it reports the context after
        return None
    cache = cache_details(messages[i])
    usage = add_usage(current.get("usage", {}), reported, cache)
    estimate = sum(counts[provider_reads_from(messages[:i]) : i]) + fixed  # it no longer reads what it compacted
    return observe(current, reported, estimate, last_id=messages[i].id, usage=usage, **cache)


def cache_details(message: BaseMessage) -> dict[str, int]:
    """Return the prompt-cache figures a reply reports (``cache_read``, ``cache_creation``), those present only.

    They come from ``usage_metadata["input_token_details"]`` (OpenAI reports
    reads; Anthropic reads and writes) and say how much of the request the
    provider's cache served, which is what a cache-aware compaction is for.
    """
    usage = getattr(message, "usage_metadata", None)
    details = usage.get("input_token_details") if isinstance(usage, dict) else None
    if not isinstance(details, dict):
        return {}
    return {
        k: v
        for k in ("cache_read", "cache_creation")
        if isinstance(v := details.get(k), int) and not isinstance(v, bool)
    }


def calibrated_tokens(estimate: int, calibration: dict[str, Any], fixed: int = 0) -> int:
    """Return the estimated real input size of a request whose messages were estimated at ``estimate``."""
    ratio: float = read_calibration(calibration)["ratio"]
    return round((estimate + fixed) * ratio)


def calibrated_budget(budget: Budget, calibration: dict[str, Any], fixed: int = 0) -> Budget:
    """Return the budget in estimator units for the messages alone.

    Every threshold is a real-token figure: it is divided by the learned
    ratio, and the thresholds that bound the whole request (window, trigger,
    target) also lose the ``fixed`` tokens of system prompt and tool schemas.
    A window the provider reported smaller than configured (from an overflow
    error) lowers the window and the trigger by the difference.
    """
    current = read_calibration(calibration)
    ratio = current["ratio"]
    window, trigger, keep = budget.context_window, budget.trigger_tokens, budget.keep_tokens
    learned = current["window"]
    if learned and (window is None or learned < window):
        trigger = trigger - (window - learned) if window else min(trigger, learned)
        if trigger <= 0:
            trigger = learned // 2  # half the window when the reserve leaves no trigger
        window = learned
        keep = min(keep, trigger // 4)  # a quarter of the trigger: a tail the smaller window can hold
    if ratio == 1.0 and not fixed and window == budget.context_window:
        return budget

    shrink = trigger / max(1, budget.trigger_tokens)  # the thresholds derived from the trigger follow it

    def request(tokens: float) -> int:
        return max(1, int(tokens / ratio) - fixed)

    def part(tokens: float) -> int:
        return int(tokens / ratio)

    return replace(
        budget,
        context_window=request(window) if window else None,
        trigger_tokens=request(trigger),
        keep_tokens=part(keep),
        target_tokens=request(budget.target_tokens * shrink),
        min_new_tokens=part(budget.min_new_tokens * shrink),
        messages_min_tokens=part(budget.messages_min_tokens * shrink),
    )
