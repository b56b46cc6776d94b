"""What one tool call touched: the files and URLs it read, changed, ran and fetched.

Agents name the same things differently: ``file_path`` (Claude Code),
``filePath`` (OpenCode), ``absolute_path`` (Gemini CLI), a patch in one
argument (Codex's ``apply_patch``), a shell line run in a ``workdir``, an MCP
tool called ``mcp__filesystem__edit_file``. The trail reads all of them the
same way:

- argument keys by meaning, in any case or style: a key whose last word is
  path, file, filename, dir, directory or folder (``filePath``,
  ``absolute_path``, ``target_file``, ``paths``), strings or lists of strings,
  at any depth; source/destination/target keys when the value looks like a
  path; url, uri, href and link keys;
- patches: the ``*** Update File:`` / ``*** Add File:`` / ``*** Delete File:``
  / ``*** Move to:`` headers of Codex's patch format, and unified diffs
  (``--- a/...``, ``+++ b/...``), wherever they appear;
- shell command lines: the paths each command reads or writes
  (redirections, ``tee``, ``cp``, ``mv``, ``rm``, ``sed -i``), with ``cd``
  followed, so that paths stay relative to the working directory the call ran
  in (``workdir``/``cwd``);
- tool names with a namespace (``server__tool``, ``mcp__server__tool``) are
  read by their last part.

Each path gets the verb of what was done to it; ``edited``, ``wrote``,
``deleted`` and ``moved`` are changes (``CHANGE_VERBS``). Shell lines are
read by ``shell``; the trail built from the touches of a conversation is
``trail``. Pure functions; nothing here imports langgraph.

>>> touches("apply_patch", {"input": "*** Begin Patch\\n*** Update File: src/a.ts\\n@@\\n-x\\n+y\\n*** End Patch"})
[Touch(target='src/a.ts', verb='edited', lines=None)]
>>> touches("Read", {"file_path": "src/a.ts", "offset": 121, "limit": 120})
[Touch(target='src/a.ts', verb='read', lines=(121, 240))]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .shell import command_line, command_touches
from .verbs import (
    CHANGE_VERBS,
    URL,
    Touch,
    has_patch,
    looks_like_path,
    normalise_path,
    patch_touches,
    strings,
    tool_name,
    verb_of,
    words,
)

__all__ = [
    "CHANGE_VERBS",
    "Touch",
    "call_commands",
    "command_touches",
    "normalise_path",
    "patch_touches",
    "touches",
]

#: Last words of an argument key that holds paths (``filePath``, ``absolute_path``, ``target_file``, ``paths``).
_PATH_WORDS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "filenames",
        "filepath",
        "filepaths",
        "dir",
        "dirs",
        "directory",
        "directories",
        "folder",
        "folders",
    }
)
#: Keys that hold a path only when the value looks like one (``"target": "production"`` is not a file).
_LOOSE_PATH_WORDS = frozenset(
    {"source", "destination", "dest", "src", "dst", "target", "from", "to", "input", "output", "old", "new"}
)
_URL_WORDS = frozenset({"url", "urls", "uri", "uris", "href", "link", "links"})
_COMMAND_WORDS = frozenset({"command", "commands", "cmd", "bash", "script", "shell"})
#: Keys of the directory a call ran in: the frame of its relative paths, not an artifact.
_WORKDIR_KEYS = frozenset(
    {"workdir", "cwd", "workingdirectory", "workingdir", "currentdirectory", "repopath", "reporoot", "projectroot"}
)
#: Last words of the key of a shell call's directory (Gemini CLI's ``run_shell_command(directory=...)``).
_DIR_WORDS = frozenset({"dir", "directory", "folder"})
#: Words of the keys (or tool names) whose text may be a patch; a file's ``content`` that shows a diff is content.
_PATCH_WORDS = frozenset({"patch", "diff", "input", "changes", "apply"})
#: Argument keys (their words joined) of the first line a read shows, of how many lines, of its last line.
_FIRST_LINE_KEYS = frozenset({"offset", "startline", "linestart", "fromline"})
_LIMIT_KEYS = frozenset({"limit", "numlines", "linecount", "maxlines"})
_LAST_LINE_KEYS = frozenset({"endline", "lineend", "toline"})
#: An editor's sub-command (``view``, ``str_replace``) in a ``command`` argument, not a shell line.
_OPERATION = re.compile(r"[A-Za-z_]+")


@lru_cache(maxsize=4096)
def _key_kind(key: str) -> str | None:
    """Return what an argument key holds by its meaning: ``path``, ``loose`` (maybe a path), ``url``, ``command``."""
    said = words(key)
    if not said or "".join(said) in _WORKDIR_KEYS:
        return None
    last = said[-1]
    if last in _URL_WORDS:
        return "url"
    if last in _PATH_WORDS:
        return "path"
    if last in _COMMAND_WORDS and len(said) == 1:
        return "command"
    if last in _LOOSE_PATH_WORDS:
        return "loose"
    return None


def _one_line(value: str) -> bool:
    """Return True for a value of path length on one line (not a file's content passed by mistake)."""
    stripped = value.strip()
    return bool(stripped) and "\n" not in stripped and len(stripped) <= 500


def _walk(args: dict[str, Any], depth: int = 0) -> list[tuple[str | None, str, Any]]:
    """Return (kind, key, value) for every argument, nested ones included; ``kind`` is what the key says it holds."""
    found: list[tuple[str | None, str, Any]] = []
    for key, value in args.items():
        kind = _key_kind(str(key))
        found.append((kind, str(key), value))
        if kind is None and depth < 3:
            nested = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
            for item in nested:
                if isinstance(item, dict):
                    found += _walk(item, depth + 1)
    return found


def _workdir(fields: list[tuple[str | None, str, Any]], has_command: bool) -> str:
    """Return the directory a call ran in: its ``workdir``/``cwd``, or a shell call's ``directory``."""
    for kind, key, value in fields:
        said = words(key)
        named = "".join(said) in _WORKDIR_KEYS or has_command and kind == "path" and said[-1] in _DIR_WORDS
        if named and isinstance(value, str) and _one_line(value):
            return value.strip()
    return ""


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def _read_lines(args: dict[str, Any]) -> tuple[int, int | None] | None:
    """Return the lines a read asks for (``offset``/``limit``, ``start_line``/``end_line``, ``view_range``), else None.

    An offset is taken as the line the read starts at (1 when it is 0).
    """
    first = limit = last = None
    for key, value in args.items():
        joined = "".join(words(str(key)))
        if joined == "viewrange" and isinstance(value, (list, tuple)) and len(value) == 2:
            first, last = _number(value[0]), _number(value[1])
            last = None if last is not None and last < 0 else last
        elif joined in _FIRST_LINE_KEYS:
            first = _number(value)
        elif joined in _LIMIT_KEYS:
            limit = _number(value)
        elif joined in _LAST_LINE_KEYS:
            last = _number(value)
    if first is None and limit is None and last is None:
        return None
    start = max(first or 1, 1)
    if last is None and limit is not None and limit > 0:
        last = start + limit - 1
    return start, last


def call_commands(args: Any) -> list[str]:
    """Return the shell lines of a call's arguments, without an editor's sub-command (``{"command": "view"}``)."""
    if not isinstance(args, dict):
        return []
    lines = [line for kind, _, v in _walk(args) if kind == "command" and (line := command_line(v).strip())]
    return [] if len(lines) == 1 and _OPERATION.fullmatch(lines[0]) else lines


def touches(name: str, args: Any) -> list[Touch]:
    """Return what one tool call did: (path or URL, verb) for everything it read, changed, ran and fetched.

    ``name`` is the tool's name (a namespace is ignored), ``args`` its
    arguments. The verb of an argument path comes from an editor's
    sub-command (``{"command": "view", "path": ...}``) or the tool's name
    (``read_file`` -> read, ``replace`` -> edited); the tool's name itself
    when it says nothing more.
    """
    if isinstance(args, str):  # a free-form tool input (Codex's custom ``apply_patch``)
        return patch_touches(args) if has_patch(args) else []
    if not isinstance(args, dict):
        return []
    short = tool_name(name)
    fields = _walk(args)
    commands = [line for kind, _, v in fields if kind == "command" and (line := command_line(v).strip())]
    operation = commands[0] if len(commands) == 1 and _OPERATION.fullmatch(commands[0]) else ""
    verb = verb_of(operation, short) if operation else verb_of(short)
    workdir = _workdir(fields, bool(commands) and not operation)
    reading = _Reading(
        verb=verb,
        tool=short,
        lines=_read_lines(args) if verb == "read" else None,
        patch_tool=bool(set(words(short)) & _PATCH_WORDS),
    )
    found: list[Touch] = []
    for kind, key, value in fields:
        if kind != "command":
            found += [t for text in strings(value) if text.strip() != workdir for t in reading.touches(kind, key, text)]
    for command in commands:
        if command != operation:
            found += command_touches(command, workdir)
    return found


@dataclass(frozen=True)
class _Reading:
    """How one call's string arguments are read: the verb of its paths, its tool's name, the lines a read asks for."""

    verb: str | None
    tool: str
    lines: tuple[int, int | None] | None
    patch_tool: bool

    def touches(self, kind: str | None, key: str, text: str) -> list[Touch]:
        """Return what one string argument touched: its path or URL, or the files of the patch it holds."""
        text = text.strip()
        if kind in ("path", "loose") and _one_line(text) and (kind == "path" or looks_like_path(text)):
            if URL.fullmatch(text):
                return [Touch(text, "fetched")]
            return [Touch(text, _key_verb(key, self.verb) or self.tool, self.lines)]
        if kind == "url" and _one_line(text):
            return [Touch(text, "fetched")]
        if (self.patch_tool or set(words(key)) & _PATCH_WORDS) and has_patch(text):
            return patch_touches(text)
        return []


def _key_verb(key: str, verb: str | None) -> str | None:
    """Return the verb for one path argument: a move's source and destination are both moved."""
    if verb in ("moved", "wrote") and words(key)[:1] and words(key)[0] in ("source", "src", "from", "old"):
        return "moved" if verb == "moved" else "read"
    return verb
