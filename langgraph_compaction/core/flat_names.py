"""Earlier spellings of ``CompactionConfig``'s settings, read into today's shape.

Settings that now live in a nested group were once flat
(``summary_timeout=60`` is ``summary={"timeout": 60}``), ``background`` was a
bool, and a derived size was spelled ``0`` or ``-1`` where it is now ``None``.
``nest`` turns such input into today's shape, so code written for the flat
settings keeps working:

>>> nest({"background": False, "summary_timeout": 60, "keep_tokens": -1})
{'background': {'enabled': False}, 'keep_tokens': None, 'summary': {'timeout': 60}}
>>> nest({"keep_tokens": 0})  # the tail kept by message count
{'keep_tokens': None, 'keep_by': 'messages'}
"""

from __future__ import annotations

from typing import Any

#: Each flat name of a setting that now lives in a group: (group, name in the group).
FLAT_NAMES: dict[str, tuple[str, str]] = {
    "background_start": ("background", "start"),
    "summary_instructions": ("summary", "instructions"),
    "summary_prompt": ("summary", "prompt"),
    "summary_timeout": ("summary", "timeout"),
    "summarizer_context_window": ("summary", "context_window"),
    "summarizer_result_chars": ("summary", "result_chars"),
    "target_ratio": ("summary", "target_ratio"),
    "min_new_tokens": ("summary", "min_new_tokens"),
    "before_summary": ("summary", "before_summary"),
    "after_compaction": ("summary", "after_compaction"),
    "memory_instructions": ("memory", "instructions"),
    "memory_prompt": ("memory", "prompt"),
    "timezone": ("memory", "timezone"),
    "consolidation_max_tokens": ("memory", "consolidation_max_tokens"),
    "consolidation_min_gap": ("memory", "consolidation_min_gap"),
    "daily_file_retention_days": ("memory", "daily_file_retention_days"),
    "trigger_messages_min_tokens": ("guards", "trigger_messages_min_tokens"),
    "breaker_failures": ("guards", "breaker_failures"),
    "breaker_cooldown": ("guards", "breaker_cooldown"),
    "calibrate": ("guards", "calibrate"),
    "redactor": ("guards", "redactor"),
    "redact_transcripts": ("guards", "redact_transcripts"),
}

#: Sizes once spelled with a number for "derived from the window" (or "from the model"): that number.
DERIVED_SENTINELS: dict[str, int] = {
    "context_window": 0,
    "trigger_tokens": 0,
    "keep_tokens": -1,
    "working_set_tokens": -1,
}


def _is_int(value: Any, number: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == number


def _group_values(value: Any) -> dict[str, Any]:
    """Return a group given as a dict or a settings instance as a dict of what it states."""
    if isinstance(value, dict):
        return dict(value)
    fields_set = getattr(value, "model_fields_set", None)
    if fields_set is None:  # not a group: leave it to the field's own validation
        raise TypeError
    return {name: getattr(value, name) for name in fields_set}


def nest(data: dict[str, Any]) -> dict[str, Any]:
    """Return ``data`` with flat names moved into their groups and derived sizes spelled ``None``.

    Raises:
        ValueError: a flat name and its group state one setting twice with different values.
    """
    out = dict(data)
    for name, number in DERIVED_SENTINELS.items():
        if _is_int(out.get(name), number):
            out[name] = None
    if _is_int(out.get("keep_tokens"), 0):  # "keep by message count" has its own setting now
        out["keep_tokens"] = None
        out["keep_by"] = "messages"
    if isinstance(out.get("background"), bool):
        out["background"] = {"enabled": out["background"]}
    for flat in [name for name in out if name in FLAT_NAMES]:
        group, name = FLAT_NAMES[flat]
        value = out.pop(flat)
        try:
            values = _group_values(out.get(group, {}))
        except TypeError:
            continue  # the group's own error names it
        if name in values and values[name] is not value and values[name] != value:
            raise ValueError(
                f"{flat}={value!r} and {group}.{name}={values[name]!r} set one setting twice; "
                f"say it once, as {group}={{{name!r}: ...}}"
            )
        out[group] = {**values, name: value}
    return out


def updated(stated: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Return the settings ``stated`` with ``update`` applied: a group given as a dict updates the stated group."""
    out = dict(stated)
    for name, value in nest(update).items():
        if isinstance(value, dict) and name in out:
            try:
                value = {**_group_values(out[name]), **value}
            except TypeError:
                pass
        out[name] = value
    return out
