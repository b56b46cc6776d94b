"""The artifact trail: which files and URLs an agent's tool calls read, changed, ran and fetched.

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

Each path gets the verbs of what was done to it; ``edited``, ``wrote``,
``deleted`` and ``moved`` are changes. When the trail is over its bound, read paths are grouped by
folder (``src/checkpoints/ (12 files: fsStore.ts, store.ts, ...)``); when
that is not enough for its token bound, the files of the largest folders are
counted instead (``src/pkg/ (412 changed files, 30 other files)``), changed
files too: a codemod over thousands of files leaves a trail of a few lines,
each named by the folder ``session_search`` finds them with. Building the
trail is linear in its entries. Pure functions; nothing here imports langgraph.

>>> touches("apply_patch", {"input": "*** Begin Patch\\n*** Update File: src/a.ts\\n@@\\n-x\\n+y\\n*** End Patch"})
[Touch(target='src/a.ts', verb='edited')]
>>> touches("shell_command", {"command": "cd src && sed -n '1,40p' store.ts > out.txt", "workdir": "/repo"})
[Touch(target='src/store.ts', verb='read'), Touch(target='src/out.txt', verb='wrote')]
"""

from __future__ import annotations

import heapq
import posixpath
import re
import shlex
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage

from .conversation import text_of, tool_calls_of, tool_rounds

#: Verbs of entries that record a change; a changed file is always named in the trail.
CHANGE_VERBS = ("edited", "wrote", "deleted", "moved")

#: What a call did to a path, from the words of its operation or tool name (the first group that matches wins).
_VERBS = (
    ("moved", frozenset({"move", "rename", "mv"})),
    ("edited", frozenset({"edit", "replace", "insert", "patch", "undo", "update", "modify", "append"})),
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
#: Programs whose first operand is a script or a pattern, not a file (unless ``-e``/``-f`` gives it).
_SCRIPTED = frozenset({"sed", "awk", "grep", "egrep", "rg", "perl"})
#: Programs whose operands are files or folders, so a bare word (``docs``) is a path too.
_FILE_PROGRAMS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "ls",
        "rg",
        "grep",
        "egrep",
        "find",
        "wc",
        "rm",
        "rmdir",
        "cp",
        "mv",
        "touch",
        "mkdir",
        "sed",
        "awk",
        "nl",
        "bat",
        "stat",
        "diff",
        "tee",
        "tree",
        "du",
    }
)
_BARE_WORD = re.compile(r"^[\w.@+~/-]*[A-Za-z_][\w.@+~/-]*$")
#: What git does to the paths on its line, by subcommand; the others take no paths.
_GIT_VERBS = {
    "rm": "deleted",
    "mv": "moved",
    "diff": "read",
    "show": "read",
    "log": "read",
    "blame": "read",
    "add": "used",
    "checkout": "edited",
    "restore": "edited",
    "ls-files": "searched",
    "grep": "searched",
    "status": "read",
}
#: Programs whose operands are text or API routes (``echo a/b``, ``gh api repos/o/r``), not files.
_TEXT_PROGRAMS = frozenset({"echo", "printf", "gh", "export"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "xargs"})

_EXIT = re.compile(
    r"\b(?:exit(?:ed with)?\s+(?:code|status)|exited with|return\s?code)\s*[:=]?\s*(-?\d+)", re.IGNORECASE
)
_EXTENSIONS = (
    "py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|md|mdx|json|jsonl|ya?ml|toml|txt|sh|java|kt|c|h|cc|cpp|hpp|rb|sql|cfg|ini|"
    "html|css|scss|lock|xml|csv|env|log|ipynb|swift|php|vue|svelte|proto|gradle|tf|conf|rst"
)
_PATH_TOKEN = re.compile(rf"^(?:~?\.{{0,2}}/)?(?:[\w.@+%-]+/)+[\w.@+%-]*$|^[\w.@+-]+\.(?:{_EXTENSIONS})$")
_URL = re.compile(r"https?://[^\s'\"<>`)\]]+")
_LINE_SUFFIX = re.compile(r"(?::\d+){1,2}$")
_SEGMENT_BREAK = frozenset({"&&", "||", ";", "|", "&", "(", ")"})
_FD_DUP = re.compile(r"\d*>&\d+")
_REDIRECT = re.compile(r"^(\d*|&)(>>?|<)(.*)$")
_PATCH_HEADER = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_HEADER = re.compile(r"^--- (\S+)[^\n]*\n\+\+\+ (\S+)", re.MULTILINE)
#: An editor's sub-command (``view``, ``str_replace``) in a ``command`` argument, not a shell line.
_OPERATION = re.compile(r"[A-Za-z_]+")
_ENTRY_DETAILS = re.compile(r"^(.*?) \(([^()]*)\)$")
_GROUP = re.compile(r"^(\S*)/ \((\d+) files: (.*)\)$")
#: A folder whose files are counted, not listed (the trail was over its token bound even with names grouped).
_COUNTED = re.compile(r"^(\S*)/ \((?:(\d+) changed files)?(?:, )?(?:(\d+) other files)?\)$")


class Touch(NamedTuple):
    """One thing a tool call did: ``verb`` (edited, wrote, read, ...) to ``target`` (a path or URL)."""

    target: str
    verb: str


# --- reading one call ---------------------------------------------------------------------------


@lru_cache(maxsize=4096)  # argument keys and tool names repeat on every call: a codemod's 10,000 calls use a few
def _words(name: str) -> tuple[str, ...]:
    """Return the lower-case words of a name in any style (``filePath``, ``absolute_path``, ``read-file``)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name or "")
    return tuple(re.findall(r"[a-z]+\d*", spaced.lower()))


def _tool_name(name: str) -> str:
    """Return a tool's own name without its namespace (``mcp__github__create_file`` -> ``create_file``)."""
    return re.split(r"__|[./:]", name or "")[-1] or (name or "tool")


def _verb_of(*names: str) -> str | None:
    """Return what a call did, from its operation (``str_replace``) or tool name (``MultiEdit``), else None."""
    for name in names:
        words = set(_words(name))
        words |= {w.rstrip("0123456789") for w in words}
        for verb, known in _VERBS:
            if words & known:
                return verb
    return None


@lru_cache(maxsize=4096)
def _key_kind(key: str) -> str | None:
    """Return what an argument key holds by its meaning: ``path``, ``loose`` (maybe a path), ``url``, ``command``."""
    words = _words(key)
    if not words or "".join(words) in _WORKDIR_KEYS:
        return None
    last = words[-1]
    if last in _URL_WORDS:
        return "url"
    if last in _PATH_WORDS:
        return "path"
    if last in _COMMAND_WORDS and len(words) == 1:
        return "command"
    if last in _LOOSE_PATH_WORDS:
        return "loose"
    return None


def _one_line(value: str) -> bool:
    """Return True for a value of path length on one line (not a file's content passed by mistake)."""
    stripped = value.strip()
    return bool(stripped) and "\n" not in stripped and len(stripped) <= 500


def _looks_like_path(value: str) -> bool:
    return bool(_PATH_TOKEN.match(value)) and ".." not in value.lstrip("./")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def patch_touches(text: str) -> list[Touch]:
    """Return the files a patch changes: Codex's ``*** ... File:`` headers, or a unified diff's ``---``/``+++`` pairs."""
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


def _has_patch(text: str) -> bool:
    return "*** Begin Patch" in text or bool(_DIFF_HEADER.search(text))


def _tokens(line: str) -> list[str]:
    """Return a shell line's words and operators; a line shlex cannot split (an open quote) is split on blanks."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:
        return line.split()


def _segments(tokens: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEGMENT_BREAK or set(token) <= set(";&|()"):
            segments.append([])
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _path_of(token: str, bare: bool = False) -> str | None:
    """Return the path a shell word names (``src/a.py:12`` -> ``src/a.py``), or None for flags, globs, revisions.

    With ``bare``, the word is an operand of a program that takes files, and
    any plain word is a path.
    """
    if token.startswith("-"):
        bare, token = False, token.split("=", 1)[1] if "=" in token else ""
    token = _LINE_SUFFIX.sub("", token.strip())
    if not token or any(c in token for c in "*?[]{}$`'\"=\\") or "://" in token:
        return None
    return token if _looks_like_path(token) or bare and _BARE_WORD.match(token) and ".." not in token else None


def _resolve(path: str, cwd: str) -> str:
    """Return a path relative to the call's working directory, with the ``cd`` steps taken since applied."""
    if not cwd or path.startswith(("/", "~")):
        return path
    return posixpath.normpath(posixpath.join(cwd, path))


def _cd(target: str | None, cwd: str, workdir: str) -> str:
    """Return the working directory after ``cd target``, relative to the call's ``workdir`` ('' is the workdir)."""
    if not target or target in ("-", "~") or target.startswith(("~", "$")):
        return ""
    if target.startswith("/"):
        base = workdir.rstrip("/")
        if base and (target == base or target.startswith(base + "/")):
            relative = posixpath.relpath(target, base)
            return "" if relative == "." else relative
        return ""  # a new root: what follows is relative to it
    resolved = posixpath.normpath(posixpath.join(cwd, target)) if cwd else posixpath.normpath(target)
    return "" if resolved == "." else resolved


def _git_operands(arguments: list[str]) -> tuple[str, list[str]]:
    """Return git's subcommand and its operands; ``-C dir`` is where git runs, like a workdir, not a file it touches."""
    while arguments and arguments[0].startswith("-"):
        arguments = arguments[2:] if arguments[0] in ("-C", "-c", "--git-dir", "--work-tree") else arguments[1:]
    return (arguments[0], arguments[1:]) if arguments else ("", [])


def _segment_touches(words: list[str], cwd: str) -> list[Touch]:
    """Return what one simple command did to the paths on it."""
    while words and (words[0] in _PREFIXES or re.match(r"^\w+=", words[0])):
        words = words[1:]
    if not words:
        return []
    program = posixpath.basename(words[0])
    verb = _verb_of(program) or "used"
    found: list[Touch] = []
    arguments: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        redirect = _REDIRECT.match(word)
        if redirect and redirect.group(1) != "&" and not redirect.group(3).startswith("&"):
            target = redirect.group(3) or next(rest, "")
            if target and target != "/dev/null" and _path_of(target) is not None:
                found.append(Touch(_resolve(target, cwd), "read" if redirect.group(2) == "<" else "wrote"))
            continue
        arguments.append(word)
    if program in _TEXT_PROGRAMS:
        return found
    if program == "git":
        sub, arguments = _git_operands(arguments)
        if sub not in _GIT_VERBS:  # push, rebase, switch ... name branches and remotes (``origin/main``), not files
            return found
        program, verb = ("mv" if sub == "mv" else "git"), _GIT_VERBS[sub]
    if program in _SCRIPTED and not {"-e", "-f", "--regexp", "--expression"} & set(arguments):
        operands = [w for w in arguments if not w.startswith("-") and not w.isdigit()]
        arguments = [w for w in arguments if w is not operands[0]] if operands else arguments
    paths = [_resolve(p, cwd) for p in (_path_of(w, program in _FILE_PROGRAMS) for w in arguments) if p]
    if program == "sed":
        verb = "edited" if any(w.startswith("-i") or w == "--in-place" for w in arguments) else "read"
    if program in ("cp", "mv") and len(paths) >= 2:
        first, last = ("read", "wrote") if program == "cp" else ("moved", "moved")
        return found + [Touch(p, first) for p in paths[:-1]] + [Touch(paths[-1], last)]
    return [Touch(p, "wrote" if program == "tee" else verb) for p in paths] + found


def command_touches(command: str, workdir: str = "") -> list[Touch]:
    """Return what a shell command line did to the paths and URLs on it, in order.

    Paths stay as written, relative ones relative to the directory the call
    ran in (``workdir``), with any ``cd`` on the line applied: ``cd src && cat
    a.ts`` touches ``src/a.ts``. A patch on the line (``apply_patch <<EOF``)
    counts as a patch; heredoc bodies and the text of SWE-agent's ``edit``
    are content, not paths.
    """
    if _has_patch(command):
        return patch_touches(command)
    line = command.split("<<", 1)[0]
    if line.lstrip().startswith("edit"):  # SWE-agent's ``edit N:M`` carries the new text after its first line
        line = line.split("\n", 1)[0]
    found = [Touch(url, "fetched") for url in _URL.findall(line)]
    cwd = ""
    # ``2>&1`` joins two streams and names no file
    for words in _segments(_tokens(_FD_DUP.sub(" ", line).replace("\n", " ; "))):
        if words[0] == "cd":
            cwd = _cd(words[1] if len(words) > 1 else None, cwd, workdir)
        elif words[0] in _SHELLS and any(w in ("-c", "-lc", "-ic") for w in words[1:3]):
            found += [Touch(_resolve(t.target, cwd), t.verb) for t in command_touches(words[-1], workdir)]
        else:
            found += _segment_touches(words, cwd)
    return found


def _command_line(value: Any) -> str:
    """Return the shell line of a command argument: a string, or an argv list (``["bash", "-lc", "cat a"]``)."""
    if isinstance(value, str):
        return value
    argv = _strings(value)
    if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc", "-ic"):
        return argv[-1]
    return shlex.join(argv) if argv and all("\n" not in a for a in argv) else "\n".join(argv)


def _walk(args: dict, depth: int = 0) -> list[tuple[str | None, str, Any]]:
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
        words = _words(key)
        named = "".join(words) in _WORKDIR_KEYS or has_command and kind == "path" and words[-1] in _DIR_WORDS
        if named and isinstance(value, str) and _one_line(value):
            return value.strip()
    return ""


def touches(name: str, args: Any) -> list[Touch]:
    """Return what one tool call did: (path or URL, verb) for everything it read, changed, ran and fetched.

    ``name`` is the tool's name (a namespace is ignored), ``args`` its
    arguments. The verb of an argument path comes from an editor's
    sub-command (``{"command": "view", "path": ...}``) or the tool's name
    (``read_file`` -> read, ``replace`` -> edited); the tool's name itself
    when it says nothing more.
    """
    if isinstance(args, str):  # a free-form tool input (Codex's custom ``apply_patch``)
        return patch_touches(args) if _has_patch(args) else []
    if not isinstance(args, dict):
        return []
    short = _tool_name(name)
    fields = _walk(args)
    commands = [line for kind, _, v in fields if kind == "command" and (line := _command_line(v).strip())]
    operation = commands[0] if len(commands) == 1 and _OPERATION.fullmatch(commands[0]) else ""
    verb = _verb_of(operation, short) if operation else _verb_of(short)
    workdir = _workdir(fields, bool(commands) and not operation)
    patch_tool = bool(set(_words(short)) & _PATCH_WORDS)
    found: list[Touch] = []
    for kind, key, value in fields:
        for text in _strings(value):
            text = text.strip()
            if kind == "command" or text == workdir:
                continue
            if kind in ("path", "loose") and _one_line(text) and (kind == "path" or _looks_like_path(text)):
                found.append(
                    Touch(text, "fetched") if _URL.fullmatch(text) else Touch(text, _key_verb(key, verb) or short)
                )
            elif kind == "url" and _one_line(text):
                found.append(Touch(text, "fetched"))
            elif (patch_tool or set(_words(key)) & _PATCH_WORDS) and _has_patch(text):
                found += patch_touches(text)
    for command in commands:
        if command != operation:
            found += command_touches(command, workdir)
    return found


def _key_verb(key: str, verb: str | None) -> str | None:
    """Return the verb for one path argument: a move's source and destination are both moved."""
    if verb in ("moved", "wrote") and _words(key)[:1] and _words(key)[0] in ("source", "src", "from", "old"):
        return "moved" if verb == "moved" else "read"
    return verb


# --- the trail of a conversation ----------------------------------------------------------------


def _call_entries(call: dict, result: str) -> list[str]:
    """Return the trail entries of one tool call; its shell command comes last."""
    args = call.get("args")
    found = [f"{t.target} ({t.verb})" for t in touches(call.get("name") or "tool", args)]
    fields = _walk(args) if isinstance(args, dict) else []
    lines = [line for kind, _, v in fields if kind == "command" and (line := _command_line(v).strip())]
    for line in lines:
        if len(lines) == 1 and _OPERATION.fullmatch(line) and found:
            continue  # an editor's sub-command: the path's verb already says it
        first, _, rest = line.partition("\n")
        shown = " ".join(first.split())[:200] + (" ..." if rest.strip() or len(first) > 200 else "")
        status = _EXIT.findall(result[-2000:])
        # last, so that newest first the command comes before the paths it used
        found.append(f"$ {shown}" + (f" (exit {status[-1]})" if status else ""))
    return found


def _items(messages: Sequence[BaseMessage]) -> list[str]:
    """Return the trail entries of every tool call of the messages, oldest first."""
    items: list[str] = []
    for r in tool_rounds(messages):
        results = {messages[j].tool_call_id: text_of(messages[j]) for j in r.result_indices}
        for call in tool_calls_of(messages[r.call_index]):
            items += _call_entries(call, results.get(call.get("id") or "", ""))
    return items


def split_entry(entry: str) -> tuple[str, list[str]]:
    """Return a trail entry's key (the path, URL or ``$ command``) and its details (verbs, or the exit status)."""
    entry = entry.strip()
    match = _ENTRY_DETAILS.match(entry)
    # a folder's line is one entry: its details are not verbs (only a line with "files" in them can be one)
    if not match or "files" in match.group(2) and (_GROUP.match(entry) or counted_files(entry)):
        return entry, []
    return match.group(1), [d.strip() for d in match.group(2).split(",") if d.strip()]


def merge_entries(entries: Sequence[str]) -> list[str]:
    """Return the trail entries (newest first) with one entry per path, URL or command.

    A path's verbs are merged (newest first); a command keeps the exit status
    of its newest run.
    """
    merged: dict[str, list[str]] = {}
    for entry in entries:
        key, details = split_entry(entry)
        if key not in merged:
            merged[key] = details
        elif not key.startswith("$ "):
            merged[key] += [d for d in details if d not in merged[key]]
    return [f"{key} ({', '.join(details)})" if details else key for key, details in merged.items()]


def tool_artifacts(messages: Sequence[BaseMessage]) -> list[str]:
    """Return the artifact trail of the messages' tool calls, newest first, one entry per path, URL or command.

    A path entry is ``"<path> (<verbs>)"`` with what the calls did to it
    (``edited``, ``wrote``, ``deleted``, ``moved``, ``read``, ``searched``,
    ``ran``, ``used``; the tool's name when it says nothing more), a URL
    entry ``"<url> (fetched)"`` and a command entry ``"$ <command> (exit N)"``
    (the status when its newest result shows one). Built from the calls
    themselves, so the trail survives whatever an LLM writes.
    """
    return merge_entries(_items(messages)[::-1])


# --- bounding the trail -------------------------------------------------------------------------


def _is_change(entry: str) -> bool:
    return bool(set(split_entry(entry)[1]) & set(CHANGE_VERBS))


def counted_files(entry: str) -> tuple[str, int, int] | None:
    """Return (folder, changed files, other files) of a folder's counted line of the trail, else None."""
    match = _COUNTED.match(entry.strip())
    if not match or not (match.group(2) or match.group(3)):
        return None
    return match.group(1), int(match.group(2) or 0), int(match.group(3) or 0)


def _counted_line(folder: str, changed: int, other: int) -> str:
    parts = ([f"{changed} changed files"] if changed else []) + ([f"{other} other files"] if other else [])
    return f"{folder}/ ({', '.join(parts)})"


def _split_folder(key: str) -> tuple[str | None, str]:
    """Return (folder, name) of a path or URL, with ``key == folder + "/" + name`` (folder ``.`` and the key as the name
    for a bare name or ``./name``)."""
    cut = key.rstrip("/").rfind("/")
    if cut < 0:
        return ".", key
    folder = key[:cut]
    if folder.endswith(":/") or folder.endswith(":"):  # ``https://host`` is as far up as a URL goes
        return None, key
    if folder == ".":  # ``./name`` keeps its ``./`` (a group line gives back the key it came from)
        return ".", key
    return folder, key[cut + 1 :]


def _parent(folder: str) -> str | None:
    if folder in (".", "") or "/" not in folder and folder.startswith("~"):
        return None
    if "://" in folder and "/" not in folder.split("://", 1)[1]:
        return None
    if "/" not in folder:
        return "."
    return folder.rsplit("/", 1)[0]


def _merge_folders(folders: Sequence[str], room: int) -> tuple[dict[str, str], list[str]]:
    """Return where each folder ends up, and the folders left in order, once the deepest are merged into their parents.

    The deepest folder (the latest of equals) moves into its parent until at
    most ``room`` are left or none can move. A heap keeps it O(n log n) in
    the folders (picking the deepest by a scan was quadratic).
    """
    rank = {f: i for i, f in enumerate(folders)}
    left: dict[str, None] = dict.fromkeys(folders)
    into: dict[str, str] = {}

    def push(f: str) -> None:
        if _parent(f) is not None:
            heapq.heappush(heap, (-(f.count("/") + (f != ".")), -rank[f], f))

    heap: list = []
    for f in folders:
        push(f)
    while len(left) > room and heap:
        folder = heapq.heappop(heap)[2]
        parent = _parent(folder)
        del left[folder]
        into[folder] = parent
        if parent not in left:
            left[parent] = None
            rank.setdefault(parent, len(rank))
            push(parent)

    def final(f: str) -> str:
        while f in into:
            f = into[f]
        return f

    return {f: final(f) for f in folders}, list(left)


def group_paths(entries: Sequence[str], room: int) -> list[str]:
    """Return path entries in at most ``room`` lines (when it can): the paths of one folder share a line.

    A shared line is ``<folder>/ (<N> files: <name>, <name>, ...)`` with
    every name under the folder, newest first; the deepest folders are merged
    into their parents until the lines fit. A folder with one path keeps its
    entry as it was. ``expand_group`` reads a line back to its paths.
    """
    keys = [split_entry(e)[0] for e in entries]
    # a URL at its host's root (``https://host``) has no folder: it is its own bucket, at the top
    homes = [folder if folder is not None else key for key in keys for folder in (_split_folder(key)[0],)]
    where, left = _merge_folders(list(dict.fromkeys(homes)), room)
    buckets: dict[str, list[int]] = {f: [] for f in left}
    for i, home in enumerate(homes):
        buckets[where[home]].append(i)

    def name(key: str, folder: str) -> str:
        return key[len(folder) + 1 :] if folder != "." and key.startswith(folder + "/") else key

    lines = []
    for folder, members in buckets.items():
        if len(members) == 1:
            lines.append(entries[members[0]])
        else:
            shown = ", ".join(name(keys[i], folder) for i in members)
            lines.append(f"{folder}/ ({len(members)} files: {shown})")
    return lines


def expand_group(line: str) -> list[str]:
    """Return the paths of a folder's line of the trail (``src/ (2 files: a.py, b.py)``); [] for any other line."""
    match = _GROUP.match(line.strip())
    if not match:
        return []
    folder = match.group(1)
    names = [n.strip() for n in match.group(3).split(", ") if n.strip()]
    return [n if folder == "." else f"{folder}/{n}" for n in names]


def _bound_lines(entries: Sequence[str], limit: int, changes: set[str]) -> tuple[list[str], int]:
    if len(entries) <= limit:
        return list(entries), 0
    commands = [e for e in entries if e.startswith("$ ")]
    recent, older = commands[: max(1, limit // 10)], commands[max(1, limit // 10) :]
    changed = [e for e in entries if e in changes]
    reads = [e for e in entries if not e.startswith("$ ") and e not in changes]
    room = limit - len(changed) - len(recent)
    grouped = group_paths(reads, max(room, 1)) if len(reads) > room else []
    kept_older = older[: max(0, room - len(grouped or reads))]
    keep = set(changed) | set(recent) | set(kept_older) | set([] if grouped else reads)
    return [e for e in entries if e in keep] + grouped, len(older) - len(kept_older)


def _counted_lines(
    entries: Sequence[str], changes: set[str], max_tokens: int, size: Callable[[Sequence[str]], int]
) -> tuple[list[str], int]:
    """Return the trail in one line of each kind with the files of the costliest folders counted, until it fits.

    The other files (read, searched, run) of the folders whose lines take the
    most tokens are counted first, then the changed files the same way, so a
    changed file keeps its own line longest. When every file is counted and
    the lines are still too many, the deepest folders merge into their
    parents, their counts added up. A count carried from an earlier summary
    joins its folder's line as soon as that folder is counted.
    """
    homes: dict[str, tuple[str, int, int]] = {}  # entry -> (its folder, changed files, other files it stands for)
    units: dict[str, tuple] = {}  # entry -> the units (folder, changed?) whose counting counts it
    costs: dict[tuple[str, bool], int] = {}  # unit -> the tokens its entries take
    for e in entries:
        if e.startswith("$ "):
            continue
        counted = counted_files(e)
        home = counted[0] if counted else _split_folder(split_entry(e)[0])[0]
        if home is not None:
            homes[e] = counted or (home, *((1, 0) if e in changes else (0, 1)))
            units[e] = ((home, False), (home, True)) if counted else ((home, e in changes),)
            costs[units[e][-1]] = costs.get(units[e][-1], 0) + size([e])
    order = sorted(costs, key=lambda u: (u[1], -costs[u]))  # stable: the newest first among equals

    def render(k: int, where: dict[str, str] | None = None) -> tuple[list[str], int]:
        chosen, where = set(order[:k]), where or {}
        gone = [e for e in entries if e in units and any(u in chosen for u in units[e])]
        counts: dict[str, list[int]] = {}  # in the trail's order: the folder touched last first
        for e in gone:
            home, changed, other = homes[e]
            total = counts.setdefault(where.get(home, home), [0, 0])
            total[0] += changed
            total[1] += other
        left = set(gone)
        lines, dropped = _bound_lines([e for e in entries if e not in left], 1, changes)
        return lines + [_counted_line(f, *n) for f, n in counts.items()], dropped

    low, high = 1, len(order)
    while low < high:  # fewer tokens with every unit counted, the costliest first
        mid = (low + high) // 2
        low, high = (low, mid) if size(render(mid)[0]) <= max_tokens else (mid + 1, high)
    best = render(low)
    room = len({u[0] for u in order})
    while size(best[0]) > max_tokens and room > 1:
        room = room * 3 // 4
        where, _ = _merge_folders(list(dict.fromkeys(h[0] for h in homes.values())), room)
        best = render(len(order), where)
    return best


def bound_trail(
    entries: Sequence[str],
    limit: int,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> tuple[list[str], int]:
    """Return the trail in about ``limit`` lines (and ``max_tokens`` tokens), and how many older commands were left out.

    Every changed path keeps its own line while the token bound allows. Then
    the newest commands (a tenth of the bound: what was run last and whether
    it passed); then the other paths and URLs, each on its line while they
    fit, else grouped by folder (``group_paths``) so that none is lost; older
    commands fill what room is left. Newest first within each kind. Over
    ``max_tokens`` (counted by ``count_tokens``) the line bound shrinks by a
    quarter at a time: older commands leave first, then more paths share a
    folder's line. When even one line of each kind is over it, the files of
    the costliest folders are counted, changed ones too
    (``src/pkg/ (412 changed files, 30 other files)``), until it fits.
    Linear in the entries (each one's tokens counted once).
    """
    changes = {e for e in entries if _is_change(e) or counted_files(e)}  # a carried count holds changed files
    best = _bound_lines(entries, limit, changes)
    if max_tokens is None or count_tokens is None:
        return best
    tokens: dict[str, int] = {}

    def size(lines: Sequence[str]) -> int:
        total = 0
        for e in lines:
            n = tokens.get(e)
            if n is None:
                n = tokens[e] = count_tokens(e) + 2
            total += n
        return total

    smallest = size(best[0])
    while limit > 1 and smallest > max_tokens:
        limit = limit * 3 // 4
        tried = _bound_lines(entries, limit, changes)
        if size(tried[0]) < smallest:  # merging folders into their parents can lengthen the names: keep the shortest
            best, smallest = tried, size(tried[0])
    if smallest > max_tokens:
        counted = _counted_lines(entries, changes, max_tokens, size)
        if size(counted[0]) < smallest:
            best = counted
    return best
