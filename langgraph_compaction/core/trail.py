"""The artifact trail: the files, URLs and commands a conversation's tool calls used, as structured entries.

The trail is built from the calls themselves (``touches``), so it survives
whatever an LLM writes: one ``TrailEntry`` per file (its path spelled once,
``normalise_path``), URL or command, newest first, each with what was done
to it (``edited``, ``wrote``, ``deleted``, ``moved``, ``read``, ``searched``,
``ran``, ``used``, ``fetched``; a command's exit status) and how much the
agent's work used it (``uses``, ``weight``). ``bound_trail``
(``trail_bound``) fits it to the summary's lines and tokens, and each line is
rendered to text once (``TrailEntry.render``). The only text read back is a
previous summary's trail (``parse_line``), so that the trail survives
chained compactions. Pure functions; nothing here imports langgraph.

>>> from langchain_core.messages import AIMessage, ToolMessage
>>> call = {"name": "Edit", "args": {"file_path": "./src/a.py", "old_string": "x", "new_string": "y"}, "id": "e"}
>>> [e.render() for e in tool_trail([AIMessage("", tool_calls=[call]), ToolMessage("ok", tool_call_id="e")])]
['src/a.py (edited)']
>>> [e.key for e in parse_line("src/ (2 files: a.py, b.py)")]
['src/a.py', 'src/b.py']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage

from .conversation import answered_call_id, text_of, tool_calls_of, tool_rounds
from .touches import CHANGE_VERBS, call_commands, normalise_path, touches

#: Tool calls after which a touch weighs half as much: the agent's recent work outweighs its early work.
WORK_HALF_LIFE = 100

_EXIT = re.compile(
    r"\b(?:exit(?:ed with)?\s+(?:code|status)|exited with|return\s?code)\s*[:=]?\s*(-?\d+)", re.IGNORECASE
)
_ENTRY_DETAILS = re.compile(r"^(.*?) \(([^()]*)\)$")
_GROUP = re.compile(r"^(\S*)/ \((\d+) (changed )?files(?:, the first (\d+) changed)?: (.*)\)$")
#: What a changed file named on its folder's line (``src/ (2 changed files: a.py, b.py)``) reads back as.
CHANGED = "changed"
_CHANGES = frozenset({*CHANGE_VERBS, CHANGED})
#: A folder whose files are counted, not listed (the trail was over its token bound even with names grouped).
_COUNTED = re.compile(r"^(\S*)/ \((?:(\d+) changed files)?(?:, )?(?:(\d+) other files)?\)$")


@dataclass(frozen=True, eq=False)  # one object per entry: compared and hashed by identity, fast
class TrailEntry:
    """One entry of the trail: a path or URL, a command, or a folder whose files are counted.

    ``key`` is the path or URL, ``$ <command>``, or ``<folder>/`` for a
    counted folder; ``details`` what was done to it, newest first (a
    command: its newest exit status); ``uses`` the calls that touched it and
    ``weight`` those calls, each halved every ``WORK_HALF_LIFE`` calls back
    (0 for entries carried from an earlier summary); ``changed_files`` and
    ``other_files`` the files a counted folder stands for.
    """

    key: str
    details: tuple[str, ...] = ()
    uses: int = 0
    weight: float = 0.0
    changed_files: int = 0
    other_files: int = 0

    @property
    def is_command(self) -> bool:
        return self.key.startswith("$ ")

    @property
    def is_counted(self) -> bool:
        return bool(self.changed_files or self.other_files)

    @property
    def is_change(self) -> bool:
        """Return True for a changed path, or a counted folder (it may hold changed files)."""
        return self.is_counted or not _CHANGES.isdisjoint(self.details)

    @property
    def ident(self) -> tuple[bool, str]:
        """Return what two entries of one thing share (a counted folder is not the folder's own entry)."""
        return self.is_counted, self.key

    def render(self) -> str:
        """Return the entry's line of the trail (``src/a.py (read, edited)``, ``src/pkg/ (12 changed files)``)."""
        if self.is_counted:
            parts = [f"{self.changed_files} changed files"] if self.changed_files else []
            parts += [f"{self.other_files} other files"] if self.other_files else []
            return f"{self.key} ({', '.join(parts)})"
        return f"{self.key} ({', '.join(self.details)})" if self.details else self.key


@dataclass(frozen=True)
class FolderLine:
    """The files of one folder sharing a line: ``src/ (2 files: a.py, b.py)``, names newest first.

    The first ``changed`` names are changed files (``src/ (2 changed files: a.py, b.py)``,
    ``src/ (3 files, the first 2 changed: a.py, b.py, c.py)``).
    """

    folder: str
    names: tuple[str, ...]
    changed: int = 0

    def render(self) -> str:
        count = len(self.names)
        kind = (
            f"{count} {CHANGED} files"
            if self.changed == count
            else f"{count} files, the first {self.changed} {CHANGED}"
            if self.changed
            else f"{count} files"
        )
        return f"{self.folder}/ ({kind}: {', '.join(self.names)})"


#: A line of the bounded trail.
TrailLine = TrailEntry | FolderLine


# --- the trail of a conversation ----------------------------------------------------------------


def _command_entry(line: str, result: str) -> tuple[str, str | None]:
    first, _, rest = line.partition("\n")
    shown = " ".join(first.split())[:200] + (" ..." if rest.strip() or len(first) > 200 else "")
    status = _EXIT.findall(result[-2000:])
    return f"$ {shown}", (f"exit {status[-1]}" if status else None)


def _call_items(call: Mapping[str, Any], result: str) -> list[tuple[str, str | None]]:
    """Return (key, detail) of everything one tool call touched; its shell commands come last."""
    args = call.get("args")
    found: list[tuple[str, str | None]] = [
        (normalise_path(t.target), t.verb) for t in touches(call.get("name") or "tool", args)
    ]
    # last, so that newest first the command comes before the paths it used
    return found + [_command_entry(line, result) for line in call_commands(args)]


def tool_trail(messages: Sequence[BaseMessage]) -> list[TrailEntry]:
    """Return the trail of the messages' tool calls, newest first, one entry per path, URL or command.

    A path's verbs are merged, newest first; a command keeps the exit status
    of its newest run (when its result shows one). ``uses`` counts the calls
    that touched an entry, ``weight`` weighs each by how recent it is.
    """
    calls: list[list[tuple[str, str | None]]] = []
    for r in tool_rounds(messages):
        results = {answered_call_id(messages[j]): text_of(messages[j]) for j in r.result_indices}
        for call in tool_calls_of(messages[r.call_index]):
            calls.append(_call_items(call, results.get(call.get("id") or "", "")))
    details: dict[str, list[str]] = {}
    uses: dict[str, int] = {}
    weight: dict[str, float] = {}
    for age, items in enumerate(reversed(calls)):
        for key, detail in reversed(items):
            if key not in details:
                details[key] = [detail] if detail else []
            elif detail and not key.startswith("$ ") and detail not in details[key]:
                details[key].append(detail)
        for key in dict.fromkeys(key for key, _ in items):
            uses[key] = uses.get(key, 0) + 1
            weight[key] = weight.get(key, 0.0) + 0.5 ** (age / WORK_HALF_LIFE)
    return merge_entries([TrailEntry(k, tuple(d), uses[k], weight[k]) for k, d in details.items()])


def _project_spellings(keys: Sequence[str]) -> dict[str, str]:
    """Return the relative paths that name a file the keys also spell absolute, each with that absolute path.

    Tools that take absolute paths (``filePath``, ``absolute_path``) and a
    shell run in the project's root name one file two ways. The root is the
    folder most such pairs share: ``src/a.ts`` is ``/p/src/a.ts`` when
    ``/p`` is it and the trail has both.
    """
    relative = {k for k in keys if not k.startswith(("/", "~", "../", "$ ")) and "://" not in k}
    roots: dict[str, int] = {}
    for key in keys:
        if key.startswith("/") and relative:
            cut = next((i for i in range(1, len(key)) if key[i] == "/" and key[i + 1 :] in relative), 0)
            if cut:
                roots[key[:cut]] = roots.get(key[:cut], 0) + 1
    if not roots:
        return {}
    root = max(roots, key=lambda r: roots[r])
    absolute = set(keys)
    return {k: f"{root}/{k}" for k in relative if f"{root}/{k}" in absolute}


def merge_entries(entries: Sequence[TrailEntry]) -> list[TrailEntry]:
    """Return the entries with one per path, URL, command or counted folder, in the order each first appears.

    A path's verbs are merged (the first entry's first), a command keeps the
    first entry's exit status, uses, weights and counts add up. A file
    spelled both absolute and relative to the project's root is one entry,
    spelled absolute (``_project_spellings``).
    """
    spelled = _project_spellings([e.key for e in entries])
    merged: dict[tuple[bool, str], TrailEntry] = {}
    for e in entries:
        e = replace(e, key=spelled[e.key]) if e.key in spelled else e
        known = merged.get(e.ident)
        if known is None:
            merged[e.ident] = e
            continue
        extra = () if e.is_command else tuple(d for d in e.details if d not in known.details)
        merged[e.ident] = TrailEntry(
            known.key,
            known.details + extra,
            known.uses + e.uses,
            known.weight + e.weight,
            known.changed_files + e.changed_files,
            known.other_files + e.other_files,
        )
    return list(merged.values())


# --- reading a previous summary's trail back --------------------------------------------------


def parse_line(text: str) -> list[TrailEntry]:
    """Return the entries a rendered line of the trail stands for (a previous summary's trail, read back).

    A folder's line gives its paths (its changed files marked ``changed``),
    a counted folder one counted entry, any
    other line one entry (``key (detail, detail)``).
    """
    text = text.strip()
    if "files" in text:  # only a folder's line has "files" in its details
        group = _GROUP.match(text)
        if group:
            folder = group.group(1)
            names = [n.strip() for n in group.group(5).split(", ") if n.strip()]
            changed = len(names) if group.group(3) else int(group.group(4) or 0)
            return [
                TrailEntry(n if folder == "." else f"{folder}/{n}", (CHANGED,) if k < changed else ())
                for k, n in enumerate(names)
            ]
        counted = _COUNTED.match(text)
        if counted and (counted.group(2) or counted.group(3)):
            return [
                TrailEntry(f"{counted.group(1)}/", (), 0, 0.0, int(counted.group(2) or 0), int(counted.group(3) or 0))
            ]
    match = _ENTRY_DETAILS.match(text)
    if not match:
        return [TrailEntry(text)]
    return [TrailEntry(match.group(1), tuple(d.strip() for d in match.group(2).split(",") if d.strip()))]


def entry_key(text: str) -> str:
    """Return the path, URL or command a rendered line names (the line itself for a folder's line)."""
    found = parse_line(text)
    return found[0].key if len(found) == 1 and not found[0].is_counted else text.strip()


def expand_group(line: str) -> list[str]:
    """Return the paths of a folder's line of the trail (``src/ (2 files: a.py, b.py)``); [] for any other line."""
    return [e.key for e in parse_line(line)] if _GROUP.match(line.strip()) else []


def counted_files(line: str) -> tuple[str, int, int] | None:
    """Return (folder, changed files, other files) of a folder's counted line of the trail, else None."""
    found = parse_line(line)
    if len(found) != 1 or not found[0].is_counted:
        return None
    return found[0].key[:-1], found[0].changed_files, found[0].other_files
