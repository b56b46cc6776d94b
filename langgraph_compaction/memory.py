"""Long-term memory, the pure part: the flush prompt and the daily ledger's format.

The ledger ``memory/YYYY-MM-DD.md`` is append-only: each flush adds a
``## Flush <ISO time>`` section of markdown bullets. ``MEMORY.md`` is the
curated memory; flush only reads it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Optional, Sequence
from zoneinfo import ZoneInfo

from langchain_core.messages import BaseMessage

from .conversation import is_summary
from .prompts import MEMORY_PROMPT, NO_REPLY
from .summary import render_messages

MEMORY_FILE = "MEMORY.md"
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)\s*$")


def ledger_relpath(day: str) -> str:
    """Return the daily ledger's path for a ``YYYY-MM-DD`` day."""
    return f"memory/{day}.md"


def local_now(timezone: str) -> datetime:
    """Return the current time in the ledger's time zone."""
    return datetime.now(ZoneInfo(timezone))


def flush_input(messages: Sequence[BaseMessage], flushed_ids: Sequence[str]) -> list[BaseMessage]:
    """Return the messages memory must still be extracted from: no summaries, nothing flushed before."""
    done = set(flushed_ids)
    return [m for m in messages if not is_summary(m) and m.id not in done]


def flush_prompt(messages: Sequence[BaseMessage], memory_md: str, ledger: str, day: str) -> str:
    """Return the memory-extraction prompt with MEMORY.md and today's ledger shown read-only."""
    return MEMORY_PROMPT.format(
        ledger_path=ledger_relpath(day),
        today=day,
        memory_md=memory_md.strip() or "(empty)",
        ledger=ledger.strip() or "(empty)",
        messages=render_messages(messages),
    )


def normalize_bullet(text: str) -> str:
    """Return a bullet's text folded for duplicate detection (case, spaces, end punctuation)."""
    return re.sub(r"\s+", " ", text).strip().rstrip(".;").casefold()


def parse_bullets(text: str) -> list[str]:
    """Return the bullet items of a markdown answer (other lines are ignored)."""
    return [m.group(1) for line in text.splitlines() if (m := _BULLET.match(line))]


def ledger_entry(answer: str, existing: str, now: datetime, redact=None) -> Optional[str]:
    """Return the text to append to today's ledger, or None when there is nothing new.

    ``NO_REPLY`` and answers without bullets write nothing; bullets already in
    today's ledger (same normalized text) are not written again.
    """
    if not isinstance(answer, str) or answer.strip() == NO_REPLY:
        return None
    seen = {normalize_bullet(b) for b in parse_bullets(existing)}
    fresh: list[str] = []
    for bullet in parse_bullets(answer):
        if redact is not None:
            bullet = redact(bullet)
        key = normalize_bullet(bullet)
        if key and key not in seen:
            seen.add(key)
            fresh.append(bullet)
    if not fresh:
        return None
    lead = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
    return lead + f"## Flush {now.isoformat(timespec='seconds')}\n\n" + "".join(f"- {b}\n" for b in fresh) + "\n"
