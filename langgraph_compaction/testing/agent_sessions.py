"""Long synthetic sessions of other coding agents, with the answer key of what every tool call touched.

``long_session(agent, seed)`` writes one deterministic session of 500+ tool
calls in the tool vocabulary of one agent, as a real long session looks:
tasks that each focus on a few folders of a monorepo (the same files read,
read again in pages and edited), searches, test runs, diffs, new files, and
rounds of parallel calls; the agent pages on through and edits mostly the
files it read last. The vocabularies (``AGENTS``):

- ``codex``: ``shell`` with an argv (``["bash", "-lc", "cd pkg && sed -n
  '1,200p' a.ts | head -n 80"]``) and a ``workdir``, ``rg``, ``nl -ba ... |
  sed -n``, ``git diff -- path``, ``git show HEAD:path``, and
  ``apply_patch`` with ``*** Update File:`` / ``*** Add File:`` headers;
- ``copilot``: ``read_file`` with ``filePath``/``startLine``/``endLine``,
  ``replace_string_in_file``, ``create_file``, ``grep_search``,
  ``file_search``, ``list_dir``, ``get_errors`` (``filePaths``),
  ``run_in_terminal``, ``apply_patch`` with absolute paths;
- ``opencode``: ``read`` with ``filePath``/``offset``/``limit``, ``edit``,
  ``write``, ``multiedit``, ``glob`` and ``grep`` with ``path``, ``list``,
  ``bash``;
- ``gemini``: ``read_file`` with ``absolute_path``/``offset``/``limit``,
  ``read_many_files`` (``paths``), ``replace`` and ``write_file`` with
  ``file_path``, ``glob``, ``search_file_content``, ``list_directory``,
  ``run_shell_command`` with a ``directory``.

The answer key maps each tool-call id to the paths the call ``changed`` and
the paths it ``read``, as the agent named them (relative ones relative to the
directory the call ran in, after any ``cd``): it is written next to the call,
never read back from it. Records are OpenAI chat messages, one per line of
``<name>.jsonl`` (``write_session``), as ``trajectories.load_trajectory``
reads them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AGENTS", "Session", "long_session", "write_session"]

#: The monorepo the sessions work on: folder -> file names (about 200 files in 30 folders, 4 levels deep).
TREE: dict[str, list[str]] = {
    "packages/core/src": ["index.ts", "store.ts", "types.ts", "flush.ts", "lock.ts", "queue.ts", "errors.ts"],
    "packages/core/src/storage": ["fsStorage.ts", "sqliteStorage.ts", "memoryStorage.ts", "s3Storage.ts", "codec.ts"],
    "packages/core/src/storage/migrations": ["v1_initial.ts", "v2_layout.ts", "v3_indexes.ts", "runner.ts"],
    "packages/core/src/sync": ["worker.ts", "conflict.ts", "protocol.ts", "backoff.ts", "heartbeat.ts"],
    "packages/core/test": ["store.test.ts", "flush.test.ts", "lock.test.ts", "queue.test.ts", "conflict.test.ts"],
    "packages/core/test/storage": ["fsStorage.test.ts", "sqliteStorage.test.ts", "codec.test.ts"],
    "packages/server/src": ["app.ts", "routes.ts", "auth.ts", "session.ts", "config.ts", "errors.ts"],
    "packages/server/src/middleware": ["cors.ts", "rateLimit.ts", "logging.ts", "requestId.ts", "compression.ts"],
    "packages/server/src/handlers": ["checkpoints.ts", "threads.ts", "health.ts", "admin.ts", "webhooks.ts"],
    "packages/server/test": ["routes.test.ts", "auth.test.ts", "rateLimit.test.ts", "handlers.test.ts"],
    "packages/cli/src": ["main.ts", "args.ts", "output.ts", "commands.ts", "prompt.ts"],
    "packages/cli/src/commands": ["init.ts", "migrate.ts", "inspect.ts", "export.ts", "serve.ts"],
    "packages/cli/test": ["args.test.ts", "commands.test.ts"],
    "packages/web/src/components": ["ThreadList.tsx", "ThreadView.tsx", "Sidebar.tsx", "Header.tsx", "Diff.tsx"],
    "packages/web/src/hooks": ["useThreads.ts", "useCheckpoint.ts", "useAuth.ts"],
    "packages/web/src/pages": ["index.tsx", "thread.tsx", "settings.tsx", "login.tsx"],
    "services/worker/worker": ["__init__.py", "tasks.py", "config.py", "db.py", "retry.py", "metrics.py"],
    "services/worker/worker/handlers": ["__init__.py", "compact.py", "export.py", "cleanup.py"],
    "services/worker/tests": ["test_tasks.py", "test_db.py", "test_retry.py", "conftest.py"],
    "docs": ["architecture.md", "storage.md", "sync.md", "api.md", "cli.md", "deploy.md"],
    "docs/adr": ["0001-storage.md", "0002-sync-protocol.md", "0003-rate-limits.md"],
    "scripts": ["release.sh", "bench.ts", "seed.ts", "check-licenses.sh"],
    ".github/workflows": ["ci.yml", "release.yml"],
    ".": ["package.json", "tsconfig.json", "README.md", "CHANGELOG.md", "pnpm-workspace.yaml", ".eslintrc.json"],
}
FILES = [name if folder == "." else f"{folder}/{name}" for folder, names in TREE.items() for name in names]
TESTS = [f for f in FILES if ".test." in f or "/test_" in f]
#: Where each agent's project lives (the absolute paths its tools take, its shell's ``workdir``).
ROOTS = {
    "codex": "/home/dev/ckpt",
    "copilot": "/Users/dev/src/ckpt",
    "opencode": "/home/dev/ckpt",
    "gemini": "/work/ckpt",
}
SYSTEM = {
    "codex": "You are Codex, a coding agent running in the Codex CLI on the user's computer.",
    "copilot": "You are GitHub Copilot, an AI programming assistant working in the user's VS Code workspace.",
    "opencode": "You are opencode, an interactive CLI tool that helps users with software engineering tasks.",
    "gemini": "You are an interactive CLI agent (Gemini CLI) specializing in software engineering tasks.",
}
REQUESTS = [
    "Checkpoints written by two workers at once get lost; find why and fix it in packages/core.",
    "Add a v4 storage migration that compacts old checkpoints, with tests.",
    "Rate limiting must be per session, not per IP. Do not rename public routes.",
    "The worker's retry helper retries forever on auth errors; make it stop and add a test.",
    "Add an `inspect` CLI command that prints a thread's checkpoints as a table.",
    "The thread list in the web app re-renders on every poll; fix it.",
    "Document the sync protocol and the new migration in docs/.",
    "Clean up: remove the dead memory storage and update the changelog.",
]
WORDS = ["const", "export", "function", "await", "return", "if", "store", "flush", "queue", "session", "path", "lock"]


@dataclass
class Session:
    """One session being written: OpenAI chat records, and the answer key by tool-call id."""

    agent: str
    rng: random.Random
    records: list[dict] = field(default_factory=list)
    touched: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    calls: int = 0

    def listing(self, path: str, first: int = 1, lines: int | None = None) -> str:
        """Return a numbered file listing as a read tool shows it."""
        count = lines or self.rng.randint(40, 160)
        body = (
            f"{first + i:>6}\t{' '.join(self.rng.choice(WORDS) for _ in range(self.rng.randint(4, 10)))};"
            for i in range(count)
        )
        return "\n".join(body) + f"\n// {path}"

    def round(self, calls: list[tuple[str, dict | str, str, list[str], list[str]]]) -> None:
        """Add one assistant turn with ``calls`` (tool, args, result, changed, read), in parallel, and their results."""
        made = []
        for tool, args, result, changed, read in calls:
            self.calls += 1
            call_id = f"call_{self.agent}_{self.calls:05d}"
            arguments = args if isinstance(args, str) else json.dumps(args)
            made.append((call_id, tool, arguments, result))
            self.touched[call_id] = {"changed": list(dict.fromkeys(changed)), "read": list(dict.fromkeys(read))}
        self.records.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": t, "arguments": a}} for i, t, a, _ in made
                ],
            }
        )
        self.records += [{"role": "tool", "tool_call_id": i, "name": t, "content": r} for i, t, _, r in made]


Call = tuple[str, dict | str, str, list[str], list[str]]


def _patch(changes: list[tuple[str, str]]) -> str:
    """Return an ``apply_patch`` body for (kind, path) changes, kind ``Update`` or ``Add``."""
    lines = ["*** Begin Patch"]
    for kind, path in changes:
        lines.append(f"*** {kind} File: {path}")
        lines += (
            ["+export const value = 1;"]
            if kind == "Add"
            else [
                "@@ export async function flush(",
                "-  await store.write(batch);",
                "+  await store.writeAtomic(batch);",
            ]
        )
    return "\n".join([*lines, "*** End Patch"])


def _split(path: str) -> tuple[str, str]:
    folder, _, name = path.rpartition("/")
    return folder, name


# --- each agent's calls for one action ----------------------------------------------------------


def _codex(s: Session, action: str, paths: list[str]) -> Call:
    rng, root, path = s.rng, ROOTS["codex"], paths[0]
    folder, name = _split(path)

    def shell(line: str, result: str, read: list[str]) -> Call:
        return "shell", {"command": ["bash", "-lc", line], "workdir": root, "timeout_ms": 120000}, result, [], read

    if action == "read":
        form = rng.randrange(4)
        if form == 0:
            return shell(f"sed -n '1,200p' {path}", s.listing(path, 1, 200), [path])
        if form == 1 and folder:
            return shell(f"cd {folder} && nl -ba {name} | sed -n '1,160p'", s.listing(path, 1, 160), [path])
        if form == 2:
            return shell(f"cat {path}", s.listing(path), [path])
        return shell(f"sed -n '1,120p' {path} | head -n 120", s.listing(path, 1, 120), [path])
    if action == "page":
        first = rng.choice([121, 201, 241])
        return shell(f"sed -n '{first},{first + 119}p' {path}", s.listing(path, first, 120), [path])
    if action == "search":
        where, searched = (folder, [folder]) if folder else (".", [])  # the project's root is no artifact
        out = "\n".join(f"{p}:{rng.randint(1, 300)}:  await flush(batch)" for p in paths[1:4])
        form = rng.randrange(3)
        if form == 0:
            return shell(f"rg -n 'flush\\(' {where}", out, searched)
        if form == 1:
            return shell(f"rg --files {where} | rg -i store", out, searched)
        return shell(f"grep -rn 'writeAtomic' {where} --include='*.ts' | head -n 20", out, searched)
    if action == "edit":
        targets = paths[: rng.choice([1, 1, 2, 3])]
        return (
            "apply_patch",
            {"input": _patch([("Update", t) for t in targets])},
            "Success. Updated the following files:\n" + "\n".join(f"M {t}" for t in targets),
            targets,
            [],
        )
    if action == "write":
        return (
            "apply_patch",
            {"input": _patch([("Add", path)])},
            f"Success. Updated the following files:\nA {path}",
            [path],
            [],
        )
    if action == "diff":
        if rng.random() < 0.5:
            return shell(f"git diff -- {' '.join(paths[:2])}", f"diff --git a/{path} b/{path}\n@@ -1 +1 @@", paths[:2])
        return shell(f"git show HEAD:{path} | head -n 60", s.listing(path, 1, 60), [path])
    test = paths[0]
    return shell(f"pnpm vitest run {test} 2>&1 | tail -n 20", "Test Files  1 passed (1)\nexit code 0", [test])


def _copilot(s: Session, action: str, paths: list[str]) -> Call:
    rng, root, path = s.rng, ROOTS["copilot"], paths[0]
    full = f"{root}/{path}"
    folder = _split(path)[0] or "."
    if action == "read":
        return "read_file", {"filePath": full, "startLine": 1, "endLine": 200}, s.listing(path, 1, 200), [], [full]
    if action == "page":
        first = rng.choice([201, 401])
        args = {"filePath": full, "startLine": first, "endLine": first + 199}
        return "read_file", args, s.listing(path, first, 200), [], [full]
    if action == "search":
        if rng.random() < 0.5:
            args = {"query": "writeAtomic", "includePattern": f"{folder}/**", "isRegexp": False}
            return "grep_search", args, "\n".join(f"{root}/{p}:12" for p in paths[1:4]), [], []
        return "list_dir", {"path": f"{root}/{folder}"}, "\n".join(TREE.get(folder, [])), [], [f"{root}/{folder}"]
    if action == "edit":
        if rng.random() < 0.3:
            targets = [f"{root}/{p}" for p in paths[:2]]
            body = {"input": _patch([("Update", t) for t in targets]), "explanation": "Make the flush atomic"}
            return "apply_patch", body, "The patch was applied.", targets, []
        args = {"filePath": full, "oldString": "store.write(batch)", "newString": "store.writeAtomic(batch)"}
        return "replace_string_in_file", args, f"The following files were successfully edited:\n{full}", [full], []
    if action == "write":
        return "create_file", {"filePath": full, "content": "export {};\n"}, f"Created {full}", [full], []
    if action == "diff":
        checked = [f"{root}/{p}" for p in paths[:2]]
        return "get_errors", {"filePaths": checked}, "No errors found.", [], checked
    args = {
        "command": f"cd {root} && pnpm vitest run {paths[0]}",
        "explanation": "Run the tests",
        "isBackground": False,
    }
    return "run_in_terminal", args, "Test Files  1 passed (1)", [], [paths[0]]


def _opencode(s: Session, action: str, paths: list[str]) -> Call:
    rng, root, path = s.rng, ROOTS["opencode"], paths[0]
    full = f"{root}/{path}"
    folder = _split(path)[0] or "."
    if action == "read":
        return "read", {"filePath": full}, "<file>\n" + s.listing(path) + "\n</file>", [], [full]
    if action == "page":
        offset = rng.choice([200, 400])
        args = {"filePath": full, "offset": offset, "limit": 200}
        return "read", args, "<file>\n" + s.listing(path, offset + 1, 200) + "\n</file>", [], [full]
    if action == "search":
        if rng.random() < 0.5:
            args = {"pattern": "writeAtomic", "path": f"{root}/{folder}", "include": "*.ts"}
            return (
                "grep",
                args,
                f"Found 3 matches\n{full}:\n  Line 41: await store.writeAtomic(batch)",
                [],
                [f"{root}/{folder}"],
            )
        return (
            "glob",
            {"pattern": "**/*.test.ts", "path": f"{root}/{folder}"},
            "\n".join(TESTS[:5]),
            [],
            [f"{root}/{folder}"],
        )
    if action == "edit":
        if rng.random() < 0.3:
            edits = [{"oldString": "write(", "newString": "writeAtomic("}, {"oldString": "a", "newString": "b"}]
            return "multiedit", {"filePath": full, "edits": edits}, "Applied 2 edits.", [full], []
        args = {
            "filePath": full,
            "oldString": "await store.write(batch)",
            "newString": "await store.writeAtomic(batch)",
        }
        return "edit", args, "Edit applied successfully.", [full], []
    if action == "write":
        return "write", {"filePath": full, "content": "export {};\n"}, "Wrote file successfully.", [full], []
    if action == "diff":
        args = {"command": f"git diff -- {' '.join(paths[:2])}", "description": "Show the changes"}
        return "bash", args, f"diff --git a/{path} b/{path}", [], paths[:2]
    args = {"command": f"pnpm vitest run {paths[0]}", "description": "Run the tests of the file"}
    return "bash", args, "9 pass\n0 fail", [], [paths[0]]


def _gemini(s: Session, action: str, paths: list[str]) -> Call:
    rng, root, path = s.rng, ROOTS["gemini"], paths[0]
    full = f"{root}/{path}"
    folder, name = _split(path)
    if action == "read":
        if rng.random() < 0.2 and len(paths) > 2:
            many = [f"{root}/{p}" for p in paths[:3]]
            body = "\n".join(f"--- {m} ---\n{s.listing(m, 1, 40)}" for m in many)
            return "read_many_files", {"paths": many}, body, [], many
        return "read_file", {"absolute_path": full}, s.listing(path), [], [full]
    if action == "page":
        offset = rng.choice([200, 400])
        args = {"absolute_path": full, "offset": offset, "limit": 200}
        return "read_file", args, s.listing(path, offset + 1, 200), [], [full]
    if action == "search":
        if rng.random() < 0.5:
            args = {"pattern": "writeAtomic", "path": f"{root}/{folder or '.'}"}
            return "search_file_content", args, f"Found 2 matches in {full}", [], [f"{root}/{folder or '.'}"]
        listed = f"{root}/{folder}" if folder else root
        return "list_directory", {"path": listed}, "\n".join(TREE.get(folder or ".", [])), [], [listed]
    if action == "edit":
        args = {"file_path": full, "old_string": "retry(3)", "new_string": "retry({ attempts: 3 })"}
        return "replace", args, f"Successfully modified file: {full} (1 replacements).", [full], []
    if action == "write":
        args = {"file_path": full, "content": "export {};\n"}
        return "write_file", args, f"Successfully created and wrote to new file: {full}.", [full], []
    if action == "diff" and folder:
        args = {"command": f"git diff --stat -- {name} && wc -l {name}", "directory": folder, "description": "Diff"}
        return "run_shell_command", args, f" {name} | 4 ++--", [], [name]
    args = {"command": f"npx vitest run {paths[0]}", "description": "Run the tests"}
    return "run_shell_command", args, "Tests 12 passed", [], [paths[0]]


AGENTS: dict[str, Callable[[Session, str, list[str]], Call]] = {
    "codex": _codex,
    "copilot": _copilot,
    "opencode": _opencode,
    "gemini": _gemini,
}
#: What the agent does next, and how often: reads and re-reads, pages, searches, edits, tests, diffs, new files.
ACTIONS = {"read": 30, "page": 10, "search": 12, "edit": 22, "test": 10, "diff": 8, "write": 3, "parallel": 5}


def _focus(rng: random.Random) -> list[str]:
    """Return the files one task works on: most of one folder and its neighbours, a few from anywhere."""
    folder = rng.choice([f for f in TREE if f != "."])
    near = [f for f in FILES if f.startswith(folder.rsplit("/", 1)[0] + "/")]
    return rng.sample(near, min(len(near), rng.randint(6, 12))) + rng.sample(FILES, 3)


def _pick(rng: random.Random, focus: list[str], count: int) -> list[str]:
    """Return ``count`` files, the task's first ones most often (as an agent keeps going back to a few files)."""
    chosen: list[str] = []
    while len(chosen) < count:
        path = focus[min(int(rng.expovariate(0.35)), len(focus) - 1)] if rng.random() < 0.85 else rng.choice(FILES)
        if path not in chosen:
            chosen.append(path)
    return chosen


def long_session(agent: str, seed: int = 0, calls: int = 560) -> Session:
    """Return a session of about ``calls`` tool calls in ``agent``'s vocabulary (``AGENTS``), the same every time."""
    s = Session(agent, random.Random(f"{agent}-{seed}"))
    s.records.append({"role": "system", "content": SYSTEM[agent]})
    step = AGENTS[agent]
    per_task = max(1, calls // len(REQUESTS))
    focus: list[str] = []
    recent: list[str] = []  # the files read last, newest first: an agent pages on and edits what it just read
    made = 0
    while s.calls < calls:
        if s.calls >= made * per_task and made < len(REQUESTS):
            s.records.append({"role": "user", "content": REQUESTS[made]})
            focus, made = _focus(s.rng), made + 1
        action = s.rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
        if action == "parallel":  # a round of parallel reads of the task's files
            read = _pick(s.rng, focus, s.rng.randint(2, 5))
            s.round([step(s, "read", [p, *_pick(s.rng, focus, 2)]) for p in read])
            recent = [*read, *(p for p in recent if p not in read)][:6]
            continue
        paths = (
            _pick(s.rng, [p for p in focus if p in TESTS] or TESTS, 1) if action == "test" else _pick(s.rng, focus, 4)
        )
        if action in ("edit", "page") and recent and s.rng.random() < 0.85:
            paths = [recent[min(int(s.rng.expovariate(1.2)), len(recent) - 1)], *paths[1:]]
        if action in ("read", "page"):
            recent = [paths[0], *(p for p in recent if p != paths[0])][:6]
        if action == "write":
            folder = _split(paths[0])[0] or "packages/core/src"
            paths = [f"{folder}/added_{s.calls}.{paths[0].rsplit('.', 1)[-1]}"]
        s.round([step(s, action, paths)])
        if s.rng.random() < 0.06:
            s.records.append({"role": "assistant", "content": "Checked that; moving on to the next file."})
    s.records.append({"role": "assistant", "content": "Done: the changes are in place and the tests pass."})
    return s


def write_session(folder: Path, agent: str, seed: int = 0, calls: int = 560) -> Path:
    """Write ``<agent>_long.jsonl`` and its answer key ``<agent>_long.touched.json`` into ``folder``."""
    s = long_session(agent, seed, calls)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{agent}_long.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in s.records), encoding="utf-8")
    path.with_suffix(".touched.json").write_text(json.dumps(s.touched, indent=1) + "\n", encoding="utf-8")
    return path
