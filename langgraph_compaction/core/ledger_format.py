"""The memory ledger's text: markdown bullets under a header, as storage keeps them and memory writes them.

A ledger entry is a header (``## Flush <time>`` and its hidden marker line),
then one ``- `` bullet per fact, then a blank line::

    >>> entry = entry_text("", "## Flush 2026-11-29T10:00:00+00:00\\n", ["Tests run with pytest -q"])
    >>> entry
    '## Flush 2026-11-29T10:00:00+00:00\\n\\n- Tests run with pytest -q\\n\\n'
    >>> entry_parts(entry)
    ('## Flush 2026-11-29T10:00:00+00:00\\n', ['Tests run with pytest -q'])

Both the storage backends (a store keeps each bullet as an item of its own)
and the memory module (flush, search, consolidation) read and write this
format, so it lives here, below both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)\s*$")


def bullet_item(line: str) -> str | None:
    """Return the text of a markdown bullet line (``-``, ``*``, ``+`` or ``1.``), or None for any other line."""
    match = _BULLET.match(line)
    return match.group(1) if match else None


def parse_bullets(text: str) -> list[str]:
    """Return the bullet items of a markdown text, in order (other lines are ignored).

    Args:
        text: A ledger entry, a model's answer or a whole memory file.
    """
    return [item for line in text.splitlines() if (item := bullet_item(line)) is not None]


def normalize_bullet(text: str) -> str:
    """Return a bullet's text folded for duplicate detection (case, spaces, end punctuation).

    >>> normalize_bullet("  The  user PREFERS tabs. ")
    'the user prefers tabs'
    """
    return re.sub(r"\s+", " ", text).strip().rstrip(".;").casefold()


def entry_text(existing: str, header: str, bullets: Sequence[str]) -> str:
    """Return a ledger entry as appended after ``existing``: a separating blank line, the header, the bullets.

    Args:
        existing: The file's text so far (decides how many newlines separate the entry from it).
        header: The entry's header lines, each ending in a newline (``""`` for none).
        bullets: The facts, written one ``- `` bullet each.
    """
    lead = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
    return lead + header + "\n" + "".join(f"- {b}\n" for b in bullets) + "\n"


def entry_parts(entry: str) -> tuple[str, list[str]]:
    """Return (the header lines of an entry, each ending in a newline; its bullets): what ``entry_text`` joined."""
    lines = entry.strip("\n").splitlines()
    header = "".join(f"{line}\n" for line in lines if line.strip() and bullet_item(line) is None)
    return header, parse_bullets(entry)
