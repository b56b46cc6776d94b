"""The circuit breaker of a compaction model: consecutive failures, and when it closes again.

It lives in the thread's ``compaction`` record (``state.Breaker``), one per
model: the summarizer's under ``breaker``, the memory model's under
``flush_breaker`` when that is another model.
"""

from __future__ import annotations

import time

from .state import Breaker


def breaker_after(breaker: Breaker, problem: str | None, limit: int, cooldown: float, attempts: int = 1) -> Breaker:
    """Return the breaker after a model's answer: reset on success, opened at ``limit`` failures in a row.

    ``attempts``: the failed calls the answer took (a background job tries a passing failure again).
    """
    if not problem:
        return {"failures": 0, "open_until": 0.0, "reason": None}
    failures = breaker["failures"] + attempts
    return {"failures": failures, "open_until": time.time() + cooldown if failures >= limit else 0.0, "reason": problem}


def is_open(breaker: Breaker) -> bool:
    """Return True while the breaker's model is not called (it failed too often lately)."""
    return breaker["open_until"] > time.time()
