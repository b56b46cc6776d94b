"""What the agent's ``pin`` and ``unpin`` tools answer, and the ``compaction`` update each makes.

``pin`` keeps a text verbatim in every later summary, up to
``FidelityConfig.max_pins`` of the agent's pins and within the pins' token
budget (``core.pins``); ``unpin`` lifts a pin, or keeps a text from being
pinned automatically. ``make_compaction_tools`` wraps them as tools.
"""

from __future__ import annotations

from typing import Any

from ..core.fidelity import active_pins, pin_constraint, pin_id, unpin_constraint
from ..core.pins import PinBudget, pin_budget, pin_refusal, pins_tokens
from ..engine.run import state_value
from ..engine.state import read_compaction


def pin_answer(state: Any, text: str, max_pins: int, budget: PinBudget | None = None) -> tuple[str, dict | None]:
    """Return what ``pin`` tells the agent and the ``compaction`` update to make (None: nothing pinned).

    ``budget`` bounds one pin and the pins in force that are not automatic (those make room); None: the
    budget of an unknown window.
    """
    if not isinstance(text, str) or not text.strip():
        return "Error: give the text to pin, e.g. pin('Never push to main.').", None
    pins = active_pins(read_compaction(state_value(state, "compaction"))["pins"])
    if any(p["id"] == pin_id(text) for p in pins):
        return "Already pinned: it stays verbatim in every later summary.", None
    mine = [p for p in pins if p.get("source") == "agent"]
    if len(mine) >= max_pins:
        return (
            f"Error: not pinned: {len(mine)} of your pins are in force, the most allowed "
            f"(FidelityConfig.max_pins={max_pins}). Unpin one you no longer need with unpin(text), then pin again.",
            None,
        )
    budget = budget or pin_budget()
    held = [p for p in pins if p.get("source") != "auto"]
    if refusal := pin_refusal(text, held, budget):
        return refusal, None
    update = pin_constraint(text)["compaction"]
    update["pins"][0]["source"] = "agent"
    taken = pins_tokens([*held, *update["pins"]])
    return (
        f"Pinned ({len(mine) + 1} of {max_pins}): it stays verbatim in every later summary until unpin(text). "
        f"Pins now take ~{taken:,} of their {budget.pins:,} tokens (FidelityConfig.pins_tokens).",
        update,
    )


def unpin_answer(state: Any, text: str) -> tuple[str, dict | None]:
    """Return what ``unpin`` tells the agent and the ``compaction`` update to make."""
    if not isinstance(text, str) or not text.strip():
        return "Error: give the pinned text (or its id, 'pin-...') to unpin.", None
    update = unpin_constraint(text.strip())["compaction"]
    pinned = any(
        p["id"] == update["pins"][0]["id"]
        for p in active_pins(read_compaction(state_value(state, "compaction"))["pins"])
    )
    if pinned:
        return "Unpinned: later summaries no longer keep it verbatim.", update
    return "It was not pinned; it will not be pinned automatically either.", update
