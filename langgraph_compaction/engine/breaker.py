"""The circuit breaker of a compaction model: consecutive failures, and when it closes again.

It lives in the thread's ``compaction`` state (JSON-native), one per model:
the summarizer's under ``breaker``, the memory model's under
``flush_breaker`` when that is another model.
"""

from __future__ import annotations

import time


def read_breaker(view: dict, key: str = "breaker") -> dict:
    """Return a circuit breaker of the thread (``key``): consecutive failures of its model and when it closes again."""
    raw = view.get(key) if isinstance(view.get(key), dict) else {}
    failures, until = raw.get("failures"), raw.get("open_until")
    return {
        "failures": failures if isinstance(failures, int) and failures > 0 else 0,
        "open_until": float(until) if isinstance(until, (int, float)) and until > 0 else 0.0,
        "reason": raw.get("reason") if isinstance(raw.get("reason"), str) else None,
    }


def breaker_after(breaker: dict, problem: str | None, limit: int, cooldown: float) -> dict:
    """Return the breaker after one model attempt: reset on success, opened at ``limit`` failures in a row."""
    if not problem:
        return {"failures": 0, "open_until": 0.0, "reason": None}
    failures = breaker["failures"] + 1
    return {"failures": failures, "open_until": time.time() + cooldown if failures >= limit else 0.0, "reason": problem}
