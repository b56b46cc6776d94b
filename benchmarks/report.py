"""Markdown pieces every measure uses: tables and target checks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def check(name: str, measured: float, limit: float, *, unit: str = "×") -> dict:
    """Return a target record ``{name, measured, limit, passed}`` for ``measured <= limit``."""
    return {
        "name": name,
        "measured": round(float(measured), 4),
        "limit": limit,
        "unit": unit,
        "passed": bool(measured <= limit),
    }


def verdict(target: dict) -> str:
    """Return ``PASS``/``MISS`` with the measured figure against its limit, for a table cell or a log line.

    A quick run's figure is ``QUICK``: measured on small inputs, so the full run's limit is shown, not applied.
    """
    figure = f"{target['measured']:.3g}{target['unit']}"
    if target.get("quick"):
        return f"QUICK {figure} (full-run target ≤ {target['limit']:g}{target['unit']}, not checked at quick scale)"
    word = "PASS" if target["passed"] else "MISS"
    return f"{word} {figure} (target ≤ {target['limit']:g}{target['unit']})"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Return a markdown table; floats are shown with three significant digits."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def targets_table(targets: Iterable[dict]) -> str:
    """Return the markdown table of a measure's targets with PASS/MISS."""
    return table(["target", "result"], [(t["name"], verdict(t)) for t in targets])
