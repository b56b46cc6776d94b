"""What a tool call did, in words: its verb, which strings are paths, and what a patch changes.

The vocabulary the trail and the working set read tool calls with
(``touches``, ``shell``): the verbs of operations and tool names (``str_replace``
is an edit, ``cat`` a read), the shape of a path or URL, the files a patch
changes, and the one spelling of a path that every reader compares
(``normalise_path``). Pure functions; nothing here imports langgraph.

>>> normalise_path("./src//billing.py"), normalise_path("/repo/src/a/../b.py", "/repo")
('src/billing.py', 'src/b.py')
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache
from typing import Any, NamedTuple

#: Verbs of entries that record a change; a changed file is always named in the trail.
CHANGE_VERBS = ("edited", "wrote", "deleted", "moved")
#: What a command whose output is about a file, not its text, did to it (``git diff``, ``wc -l``): no read.
INSPECTED = "inspected"

#: What a call did to a path, from the words of its operation or tool name (the first group that matches wins).
_VERBS = (
    ("moved", frozenset({"move", "rename", "mv"})),
    ("edited", frozenset({"edit", "multiedit", "replace", "insert", "patch", "undo", "update", "modify", "append"})),
    ("wrote", frozenset({"create", "write", "save", "touch", "tee", "mkdir", "cp", "copy", "put", "upload"})),
    ("deleted", frozenset({"delete", "remove", "rm", "rmdir", "unlink"})),
    ("searched", frozenset({"grep", "glob", "search", "find", "rg", "ls", "list", "tree"})),
    (
        "read",
        frozenset(
            {
                "view",
                "read",
                "open",
                "cat",
                "head",
                "tail",
                "less",
                "more",
                "get",
                "show",
                "sed",
                "awk",
                "diff",
                "wc",
                "nl",
                "bat",
                "stat",
                "info",
            }
        ),
    ),
    (
        "ran",
        frozenset(
            {
                "python",
                "python3",
                "pytest",
                "node",
                "bash",
                "sh",
                "go",
                "cargo",
                "npm",
                "npx",
                "make",
                "run",
                "exec",
                "execute",
                "test",
                "tsc",
                "jest",
                "ruby",
                "java",
            }
        ),
    ),
)
_EXTENSIONS = (
    "py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|md|mdx|json|jsonl|ya?ml|toml|txt|sh|java|kt|c|h|cc|cpp|hpp|rb|sql|cfg|ini|"
    "html|css|scss|lock|xml|csv|env|log|ipynb|swift|php|vue|svelte|proto|gradle|tf|conf|rst"
)
_PATH_TOKEN = re.compile(rf"^(?:~?\.{{0,2}}/)?(?:[\w.@+%-]+/)+[\w.@+%-]*$|^[\w.@+-]+\.(?:{_EXTENSIONS})$")
URL = re.compile(r"https?://[^\s'\"<>`)\]]+")
_PATCH_HEADER = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_HEADER = re.compile(r"^--- (\S+)[^\n]*\n\+\+\+ (\S+)", re.MULTILINE)


class Touch(NamedTuple):
    """One thing a tool call did: ``verb`` (edited, wrote, read, ...) to ``target`` (a path or URL).

    ``lines`` is the part of the file a read shows, first and last line
    (1-based; last None: to the end), when the call asked for one (``offset``
    and ``limit``, ``sed -n '1,120p'``); None for the whole file.
    """

    target: str
    verb: str
    lines: tuple[int, int | None] | None = None


def normalise_path(path: str, workdir: str = "") -> str:
    """Return the one spelling of a path that reads, edits and results of one file share.

    ``./`` and ``//`` go, ``..`` is collapsed, and an absolute path under
    ``workdir`` becomes relative to it; a folder keeps its closing ``/``; a
    URL stays as it is.
    """
    if not path or "://" in path:
        return path
    normal = posixpath.normpath(path)
    if normal.startswith("//"):  # POSIX keeps a leading ``//``: it is the same root
        normal = normal[1:]
    base = posixpath.normpath(workdir).rstrip("/") if workdir.startswith("/") else ""
    if base and normal.startswith(base + "/"):
        normal = normal[len(base) + 1 :]
    return normal + "/" if path.endswith("/") and normal not in (".", "/") else normal


@lru_cache(maxsize=4096)  # argument keys and tool names repeat on every call: a codemod's 10,000 calls use a few
def words(name: str) -> tuple[str, ...]:
    """Return the lower-case words of a name in any style (``filePath``, ``absolute_path``, ``read-file``)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name or "")
    return tuple(re.findall(r"[a-z]+\d*", spaced.lower()))


def tool_name(name: str) -> str:
    """Return a tool's own name without its namespace (``mcp__github__create_file`` -> ``create_file``)."""
    return re.split(r"__|[./:]", name or "")[-1] or (name or "tool")


def verb_of(*names: str) -> str | None:
    """Return what a call did, from its operation (``str_replace``) or tool name (``MultiEdit``), else None."""
    for name in names:
        said = set(words(name))
        said |= {w.rstrip("0123456789") for w in said}
        for verb, known in _VERBS:
            if said & known:
                return verb
    return None


def looks_like_path(value: str) -> bool:
    """Return True for a word shaped like a relative or absolute path (``src/a.py``, ``./run.sh``, ``docs/``)."""
    return bool(_PATH_TOKEN.match(value)) and not has_revision_dots(value)


def has_revision_dots(value: str) -> bool:
    """Return True when ``..`` is inside a word (``main..HEAD``, a revision range), not a step up (``src/../a.py``)."""
    return any(".." in part and part != ".." for part in value.split("/"))


def patch_touches(text: str) -> list[Touch]:
    """Return the files a patch changes: Codex's ``*** ... File:`` headers, or a unified diff's ``---``/``+++``."""
    found: list[Touch] = []
    verbs = {"Update": "edited", "Add": "wrote", "Delete": "deleted"}
    for match in _PATCH_HEADER.finditer(text):
        if match.group(3):  # ``*** Move to:`` renames the file of the header before it
            if found:
                found[-1] = Touch(found[-1].target, "moved")
            found.append(Touch(match.group(3), "moved"))
        else:
            found.append(Touch(match.group(2), verbs[match.group(1)]))
    for old, new in _DIFF_HEADER.findall(text):
        # git's a/ and b/ prefixes, on both sides or beside /dev/null (a new or a deleted file)
        git = (old.startswith("a/") or old == "/dev/null") and (new.startswith("b/") or new == "/dev/null")
        old, new = (old[2:] if git and old != "/dev/null" else old), (new[2:] if git and new != "/dev/null" else new)
        if old == "/dev/null":
            found.append(Touch(new, "wrote"))
        elif new == "/dev/null":
            found.append(Touch(old, "deleted"))
        elif old != new:
            found += [Touch(old, "moved"), Touch(new, "moved")]
        else:
            found.append(Touch(new, "edited"))
    return found


def has_patch(text: str) -> bool:
    """Return True when the text holds a patch (Codex's ``*** Begin Patch`` or a unified diff)."""
    return "*** Begin Patch" in text or bool(_DIFF_HEADER.search(text))


def strings(value: Any) -> list[str]:
    """Return the strings of an argument: the string itself, or the strings of a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []
