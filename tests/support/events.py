"""The lifecycle events the package logged, as the background tests read them."""

from __future__ import annotations


def lifecycle_events(caplog) -> list[dict]:
    """Return the lifecycle events (``compaction_started``, ``compaction_applied``, ...) logged so far, in order."""
    found = []
    for record in caplog.records:
        fields = record.args[1] if isinstance(record.args, tuple) and len(record.args) == 2 else None
        if isinstance(fields, dict) and fields.get("event"):
            found.append(fields)
    return found
