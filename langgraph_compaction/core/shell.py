"""What a shell command line reads and changes: the paths of each command on it, with ``cd`` followed.

Redirections (``>``, ``>>``, ``<``), ``tee``, ``cp``, ``mv``, ``rm``,
``sed -i`` and ``git rm``/``git mv`` change files; ``cat``, ``sed -n``,
``head`` and the like read them; a ``cd`` on the line moves the directory the
later paths are relative to; ``bash -c '...'`` is read inside. A ``sed -n
'a,bp'`` read says which lines it shows. Pure functions; nothing here imports
langgraph.

>>> command_touches("cd src && sed -n '1,40p' store.ts > out.txt")
[Touch(target='src/store.ts', verb='read', lines=(1, 40)), Touch(target='src/out.txt', verb='wrote', lines=None)]
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator
from typing import Any

from .verbs import INSPECTED, URL, Touch, has_patch, has_revision_dots, looks_like_path, patch_touches, strings, verb_of

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
    "diff": INSPECTED,
    "show": INSPECTED,
    "log": INSPECTED,
    "blame": "read",
    "add": "used",
    "checkout": "edited",
    "restore": "edited",
    "ls-files": "searched",
    "grep": "searched",
    "status": INSPECTED,
}
#: Programs whose output is about a file, not its text (a count, a diff, its metadata).
_INSPECTING = frozenset({"wc", "stat", "du", "diff", "file", "cmp", "md5sum", "sha256sum"})
#: Programs whose operands are text or API routes (``echo a/b``, ``gh api repos/o/r``), not files.
_TEXT_PROGRAMS = frozenset({"echo", "printf", "gh", "export"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "xargs"})
_LINE_SUFFIX = re.compile(r"(?::\d+){1,2}$")
_SEGMENT_BREAK = frozenset({"&&", "||", ";", "|", "&", "(", ")"})
_FD_DUP = re.compile(r"\d*>&\d+")
_REDIRECT = re.compile(r"^(\d*|&)(>>?|<)(.*)$")
#: ``sed -n`` scripts that print one range of lines: ``1,120p``, ``40p``, ``10,$p``.
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")


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
    return (
        token if looks_like_path(token) or bare and _BARE_WORD.match(token) and not has_revision_dots(token) else None
    )


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


def _program_words(words: list[str]) -> list[str]:
    """Return a command's words without the prefixes that run it (``sudo``, ``env``, ``A=1``)."""
    while words and (words[0] in _PREFIXES or re.match(r"^\w+=", words[0])):
        words = words[1:]
    return words


def _redirections(words: Iterator[str], cwd: str) -> tuple[list[Touch], list[str]]:
    """Return the files a command's redirections read and write, and its other arguments."""
    found: list[Touch] = []
    arguments: list[str] = []
    for word in words:
        redirect = _REDIRECT.match(word)
        if redirect and redirect.group(1) != "&" and not redirect.group(3).startswith("&"):
            target = redirect.group(3) or next(words, "")
            if target and target != "/dev/null" and _path_of(target) is not None:
                found.append(Touch(_resolve(target, cwd), "read" if redirect.group(2) == "<" else "wrote"))
            continue
        arguments.append(word)
    return found, arguments


def _operands(program: str, arguments: list[str]) -> tuple[str, str, list[str]] | None:
    """Return (program, verb, the words that may be paths) of a command, or None when it names no files."""
    verb = verb_of(program) or "used"
    if program in _TEXT_PROGRAMS:
        return None
    if program == "git":
        sub, arguments = _git_operands(arguments)
        if sub not in _GIT_VERBS:  # push, rebase, switch ... name branches and remotes (``origin/main``), not files
            return None
        program, verb = ("mv" if sub == "mv" else "git"), _GIT_VERBS[sub]
        if sub == "show" and any(":" in w and not w.startswith("-") for w in arguments):
            # ``HEAD~1:src/a.ts`` is the file's text as it was at a revision
            arguments = [w.split(":", 1)[1] if ":" in w and not w.startswith("-") else w for w in arguments]
            verb = "read"
    elif program in _INSPECTING:
        verb = INSPECTED
    # a script or pattern comes first unless a flag gives it, or ``rg --files`` takes none
    if program in _SCRIPTED and not {"-e", "-f", "--regexp", "--expression", "--files"} & set(arguments):
        operands = [w for w in arguments if not w.startswith("-") and not w.isdigit()]
        arguments = [w for w in arguments if w is not operands[0]] if operands else arguments
    if program == "sed":
        verb = "edited" if any(w.startswith("-i") or w == "--in-place" for w in arguments) else "read"
    return program, verb, arguments


def _sed_lines(program: str, words: list[str]) -> tuple[int, int | None] | None:
    """Return the lines a ``sed -n 'a,bp'`` read prints, else None (the whole file, or not such a read)."""
    if program != "sed" or "-n" not in words:
        return None
    scripts = [w for w in words[1:] if not w.startswith("-")]
    match = _SED_RANGE.match(scripts[0]) if scripts else None
    if not match:
        return None
    first = int(match.group(1))
    last = match.group(2)
    return first, (None if last == "$" else int(last) if last else first)


def _segment_touches(words: list[str], cwd: str) -> list[Touch]:
    """Return what one simple command did to the paths on it."""
    words = _program_words(words)
    if not words:
        return []
    program = posixpath.basename(words[0])
    found, arguments = _redirections(iter(words[1:]), cwd)
    operands = _operands(program, arguments)
    if operands is None:
        return found
    program, verb, arguments = operands
    paths = [_resolve(p, cwd) for p in (_path_of(w, program in _FILE_PROGRAMS) for w in arguments) if p]
    if program in ("cp", "mv") and len(paths) >= 2:
        first, last = ("read", "wrote") if program == "cp" else ("moved", "moved")
        return found + [Touch(p, first) for p in paths[:-1]] + [Touch(paths[-1], last)]
    lines = _sed_lines(program, words) if verb == "read" else None
    return [Touch(p, "wrote" if program == "tee" else verb, lines) for p in paths] + found


def command_touches(command: str, workdir: str = "") -> list[Touch]:
    """Return what a shell command line did to the paths and URLs on it, in order.

    Paths stay as written, relative ones relative to the directory the call
    ran in (``workdir``), with any ``cd`` on the line applied: ``cd src && cat
    a.ts`` touches ``src/a.ts``. A patch on the line (``apply_patch <<EOF``)
    counts as a patch; heredoc bodies and the text of SWE-agent's ``edit``
    are content, not paths.
    """
    if has_patch(command):
        return patch_touches(command)
    line = command.split("<<", 1)[0]
    if line.lstrip().startswith("edit"):  # SWE-agent's ``edit N:M`` carries the new text after its first line
        line = line.split("\n", 1)[0]
    found = [Touch(url, "fetched") for url in URL.findall(line)]
    cwd = ""
    # ``2>&1`` joins two streams and names no file
    for words in _segments(_tokens(_FD_DUP.sub(" ", line).replace("\n", " ; "))):
        if words[0] == "cd":
            cwd = _cd(words[1] if len(words) > 1 else None, cwd, workdir)
        elif words[0] in _SHELLS and any(w in ("-c", "-lc", "-ic") for w in words[1:3]):
            found += [Touch(_resolve(t.target, cwd), t.verb, t.lines) for t in command_touches(words[-1], workdir)]
        else:
            found += _segment_touches(words, cwd)
    return found


def command_line(value: Any) -> str:
    """Return the shell line of a command argument: a string, or an argv list (``["bash", "-lc", "cat a"]``)."""
    if isinstance(value, str):
        return value
    argv = strings(value)
    if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc", "-ic"):
        return argv[-1]
    return shlex.join(argv) if argv and all("\n" not in a for a in argv) else "\n".join(argv)
