"""Markdown pieces every measure uses: tables and target checks."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

_HEADING = re.compile(r"^#{1,6} ")


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

    The figure has three significant digits, more where fewer would show a miss as if it met its limit
    (``MISS 1.053× (target ≤ 1.05×)``), and thousands in full (``4,440``, never ``4.44e+03``). A quick run's
    figure is ``QUICK``: measured on small inputs, so the full run's limit is shown, not applied.

    Args:
        target: a record of `check`.
    """
    unit, limit = target["unit"], number(target["limit"], 6)
    figure = f"{_telling(target['measured'], target['limit'], target['passed'])}{unit}"
    if target.get("quick"):
        return f"QUICK {figure} (full-run target ≤ {limit}{unit}, not checked at quick scale)"
    word = "PASS" if target["passed"] else "MISS"
    return f"{word} {figure} (target ≤ {limit}{unit})"


def number(value: float, digits: int = 3) -> str:
    """Return a figure with ``digits`` significant digits, in plain notation: ``0.0928``, ``1.05``, ``4,440``.

    >>> [number(v) for v in (0.09281, 1.0534, 4440.2, 16000, 0.0)]
    ['0.0928', '1.05', '4,440', '16,000', '0']

    Args:
        value: the figure.
        digits: significant digits (whole numbers of 1,000 or more keep all theirs).
    """
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _telling(measured: float, limit: float, passed: bool) -> str:
    """Return the measured figure with the fewest digits (3 to 6) that do not contradict PASS or MISS."""
    for digits in range(3, 7):
        shown = number(measured, digits)
        if (float(shown.replace(",", "")) <= limit) == passed:
            return shown
    return shown


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Return a markdown table; floats are shown with three significant digits."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return number(value)
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


def separated_blocks(markdown: str) -> str:
    """Return ``markdown`` with a blank line before every heading that follows other text.

    A heading glued to the line above is part of that block: after a table
    it renders as one more table row, after a paragraph as text. Fenced code
    is left as it is.

    Args:
        markdown: a measure's report, or the whole report.
    """
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and _HEADING.match(line) and out and out[-1].strip():
            out.append("")
        out.append(line)
    return "\n".join(out)
