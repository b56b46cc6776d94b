"""Write the synthetic agent-shape sessions of this folder, and what each tool call touched.

Run ``python tests/data/agent_shapes/make_shapes.py`` to write them again; the
output is the same every time (a fixed seed). Each session is a ``.jsonl``
file in OpenAI chat format (one message a line, as in ``../trajectories``),
and ``<name>.touched.json`` maps every tool-call id to the paths it changed
and the paths it read, as the agent named them (relative ones relative to the
directory the call ran in, after any ``cd``): the answer key of the fidelity
benchmark, written here next to the calls rather than read back from them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).parent

FOLDERS = {
    "src/checkpoints": [
        "fsStore.ts",
        "store.ts",
        "index.ts",
        "types.ts",
        "memoryStore.ts",
        "sqliteStore.ts",
        "migrate.ts",
    ],
    "src/api": ["server.ts", "routes.ts", "auth.ts", "errors.ts", "handlers.ts", "schema.ts"],
    "src/api/middleware": ["cors.ts", "rateLimit.ts", "session.ts", "logging.ts"],
    "src/cli": ["main.ts", "args.ts", "commands.ts", "output.ts"],
    "src/utils": ["paths.ts", "retry.ts", "hash.ts", "clock.ts", "json.ts", "env.ts"],
    "src/sync": ["queue.ts", "worker.ts", "conflict.ts", "protocol.ts"],
    "tests/checkpoints": ["fsStore.test.ts", "store.test.ts", "migrate.test.ts"],
    "tests/api": ["routes.test.ts", "auth.test.ts", "rateLimit.test.ts"],
    "tests/sync": ["queue.test.ts", "worker.test.ts"],
    "docs": ["architecture.md", "checkpoints.md", "api.md", "sync.md"],
    "scripts": ["release.sh", "bench.ts", "seed.ts"],
    ".": ["package.json", "tsconfig.json", "README.md", "CHANGELOG.md"],
}
FILES = [name if folder == "." else f"{folder}/{name}" for folder, names in FOLDERS.items() for name in names]
REQUESTS = [
    "The checkpoint store loses writes when two workers flush at once. Find why and fix it. Never edit files under vendor/.",
    "Now add a migration that rewrites old checkpoints to the new layout, with tests.",
    "Rate limiting should be per session, not per IP. Do not change the public route names.",
    "Rename the sync queue's retry helper and update every caller; always run the full test suite after a change.",
    "Move the checkpoint types into their own module and update the docs.",
    "Clean up: delete the dead memory store and the old seed script, then summarise what changed.",
]
SYSTEM = {
    "codex_rollout": "You are Codex, a coding agent running in the Codex CLI on the user's computer.",
    "opencode_export": "You are opencode, an interactive CLI tool that helps users with software engineering tasks.",
    "gemini_cli_chat": "You are an interactive CLI agent (Gemini CLI) specializing in software engineering tasks.",
    "mcp_tools": "You are an assistant with tools from several MCP servers (filesystem, git, github).",
}


def _body(rng: random.Random, path: str, lines: int) -> str:
    """Return a plausible file listing for a tool result: numbered TypeScript-ish lines."""
    words = ["const", "export", "function", "await", "return", "if", "store", "flush", "queue", "session", "path"]
    return (
        "\n".join(
            f"{i + 1:>5}\t{' '.join(rng.choice(words) for _ in range(rng.randint(4, 11)))};" for i in range(lines)
        )
        + f"\n// end of {path}"
    )


class Session:
    """One session being written: messages in OpenAI format, and the answer key by tool-call id."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = random.Random(seed)
        self.records: list[dict] = [{"role": "system", "content": SYSTEM[name.split("_long")[0]]}]
        self.touched: dict[str, dict[str, list[str]]] = {}
        self.calls = 0

    def user(self, text: str) -> None:
        self.records.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        self.records.append({"role": "assistant", "content": text})

    def call(self, tool: str, args: object, result: str, *, changed=(), read=()) -> None:
        """Add one assistant turn with one tool call and its result, and what the call touched."""
        self.calls += 1
        call_id = f"call_{self.name[:3]}_{self.calls:05d}"
        arguments = args if isinstance(args, str) else json.dumps(args)
        self.records.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}],
            }
        )
        self.records.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": result})
        self.touched[call_id] = {"changed": list(dict.fromkeys(changed)), "read": list(dict.fromkeys(read))}

    def listing(self, path: str) -> str:
        return _body(self.rng, path, self.rng.randint(25, 70))

    def write(self) -> None:
        with (HERE / f"{self.name}.jsonl").open("w", encoding="utf-8") as fh:
            for record in self.records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        (HERE / f"{self.name}.touched.json").write_text(json.dumps(self.touched, indent=1) + "\n", encoding="utf-8")


def _patch(changes: list[tuple[str, str, str]]) -> str:
    """Return a Codex ``apply_patch`` body for (kind, path, move-to) changes."""
    lines = ["*** Begin Patch"]
    for kind, path, moved in changes:
        lines.append(f"*** {kind} File: {path}")
        if moved:
            lines.append(f"*** Move to: {moved}")
        if kind == "Add":
            lines += ["+export const value = 1;", "+export default value;"]
        elif kind == "Update":
            lines += [
                "@@ export async function flush(",
                "-  await store.write(batch);",
                "+  await store.writeAtomic(batch);",
            ]
    lines.append("*** End Patch")
    return "\n".join(lines)


def codex_step(s: Session, rng: random.Random) -> None:
    """One Codex rollout step: ``shell_command`` with a ``workdir``, or ``apply_patch``."""
    path = rng.choice(FILES)
    folder, _, name = path.rpartition("/")
    roll = rng.random()
    if roll < 0.3:
        s.call(
            "shell_command",
            {"command": f"sed -n '1,{rng.choice([80, 160, 240])}p' {path}", "workdir": "/repo", "timeout_ms": 10000},
            s.listing(path),
            read=[path],
        )
    elif roll < 0.42 and folder:
        other = rng.choice(FOLDERS[folder])
        s.call(
            "shell_command",
            {"command": f"cd {folder} && cat {name} {other} | head -n 120", "workdir": "/repo"},
            s.listing(path),
            read=[path, f"{folder}/{other}"],
        )
    elif roll < 0.55:
        hits = rng.sample(FILES, 4)
        out = "\n".join(f"{h}:{rng.randint(1, 300)}:  await store.flush()" for h in hits)
        s.call(
            "shell_command",
            {"command": f"rg -n 'flush\\(' {folder or '.'}", "workdir": "/repo"},
            out,
            read=[folder] if folder else [],
        )
    elif roll < 0.62:
        a, b = rng.sample(FILES, 2)
        s.call(
            "shell_command",
            {"command": f"git diff --stat -- {a} {b}", "workdir": "/repo"},
            f" {a} | 4 ++--\n {b} | 2 +-\n",
            read=[a, b],
        )
    elif roll < 0.7:
        test = rng.choice([f for f in FILES if f.endswith(".test.ts")])
        s.call(
            "shell_command",
            {"command": f"npx vitest run {test} 2>&1 | tail -n 30", "workdir": "/repo"},
            "Test Files  1 passed (1)\n     Tests  9 passed (9)\nexit code 0",
            read=[test],
        )
    elif roll < 0.76:
        log = f"logs/run-{s.calls}.txt"
        s.call(
            "shell_command",
            {"command": f"npm run build > {log} 2>&1; tail -n 5 {log}", "workdir": "/repo"},
            "built in 2.1s",
            changed=[log],
        )
    elif roll < 0.92:
        targets = rng.sample([f for f in FILES if f.startswith("src/")], rng.randint(1, 3))
        s.call(
            "apply_patch",
            {"input": _patch([("Update", t, "") for t in targets])},
            "Success. Updated the following files:\n" + "\n".join(f"M {t}" for t in targets),
            changed=targets,
        )
    elif roll < 0.96:
        new = f"src/checkpoints/layout_v{s.calls}.ts"
        s.call(
            "apply_patch",
            {"input": _patch([("Add", new, "")])},
            f"Success. Updated the following files:\nA {new}",
            changed=[new],
        )
    else:
        old = rng.choice(FILES)
        new = old.replace(".ts", f".v{s.calls}.ts") if old.endswith(".ts") else old + f".{s.calls}"
        s.call(
            "apply_patch",
            {"input": _patch([("Update", old, new)])},
            f"Success. Updated the following files:\nM {new}",
            changed=[old, new],
        )


def opencode_step(s: Session, rng: random.Random) -> None:
    """One OpenCode step: ``read``/``edit``/``write`` with ``filePath``, ``list``, ``grep``, ``bash``."""
    path = rng.choice(FILES)
    absolute = f"/home/dev/app/{path}"
    roll = rng.random()
    if roll < 0.4:
        s.call(
            "read",
            {"filePath": absolute, "offset": 0, "limit": 2000},
            "<file>\n" + s.listing(path) + "\n</file>",
            read=[absolute],
        )
    elif roll < 0.6:
        s.call(
            "edit",
            {
                "filePath": absolute,
                "oldString": "await store.write(batch)",
                "newString": "await store.writeAtomic(batch)",
            },
            "Edit applied successfully.",
            changed=[absolute],
        )
    elif roll < 0.67:
        new = f"/home/dev/app/src/checkpoints/layout_v{s.calls}.ts"
        s.call(
            "write",
            {"filePath": new, "content": "export const layout = 2;\n"},
            "Wrote file successfully.",
            changed=[new],
        )
    elif roll < 0.75:
        folder = f"/home/dev/app/{path.rpartition('/')[0] or '.'}".rstrip("/.")
        s.call("list", {"path": folder}, "\n".join(FOLDERS.get(path.rpartition("/")[0] or ".", [])), read=[folder])
    elif roll < 0.85:
        s.call(
            "grep",
            {"pattern": "writeAtomic", "path": "/home/dev/app/src", "include": "*.ts"},
            f"Found 3 matches\n{absolute}:\n  Line 41: await store.writeAtomic(batch)",
            read=["/home/dev/app/src"],
        )
    else:
        test = rng.choice([f for f in FILES if f.endswith(".test.ts")])
        s.call(
            "bash",
            {"command": f"bun test {test}", "description": "Run the tests of the file"},
            "9 pass\n0 fail\nexit code 0",
            read=[test],
        )


def gemini_step(s: Session, rng: random.Random) -> None:
    """One Gemini CLI step: ``read_file`` (absolute_path), ``read_many_files``, ``replace``, ``write_file``, shell."""
    path = rng.choice(FILES)
    absolute = f"/Users/dev/proj/{path}"
    roll = rng.random()
    if roll < 0.35:
        s.call("read_file", {"absolute_path": absolute}, s.listing(path), read=[absolute])
    elif roll < 0.45:
        many = rng.sample(FILES, 3)
        s.call(
            "read_many_files", {"paths": many}, "\n".join(f"--- {m} ---\n{s.listing(m)[:400]}" for m in many), read=many
        )
    elif roll < 0.62:
        s.call(
            "replace",
            {
                "file_path": absolute,
                "old_string": "retry(3)",
                "new_string": "retry({ attempts: 3 })",
                "expected_replacements": 1,
            },
            f"Successfully modified file: {absolute} (1 replacements).",
            changed=[absolute],
        )
    elif roll < 0.68:
        new = f"/Users/dev/proj/docs/notes_{s.calls}.md"
        s.call(
            "write_file",
            {"file_path": new, "content": "# Notes\n\n- flush is atomic now\n"},
            f"Successfully created and wrote to new file: {new}.",
            changed=[new],
        )
    elif roll < 0.76:
        folder = f"/Users/dev/proj/{path.rpartition('/')[0]}" if "/" in path else "/Users/dev/proj"
        s.call(
            "list_directory",
            {"path": folder},
            "\n".join(FOLDERS.get(path.rpartition("/")[0] or ".", [])),
            read=[folder],
        )
    elif roll < 0.82:
        s.call(
            "search_file_content",
            {"pattern": "flush\\(", "path": "src/sync"},
            "Found 2 matches in src/sync/queue.ts",
            read=["src/sync"],
        )
    else:
        folder, _, name = path.rpartition("/")
        if folder:
            s.call(
                "run_shell_command",
                {
                    "command": f"wc -l {name} && git log --oneline -3 -- {name}",
                    "directory": folder,
                    "description": "Size and history",
                },
                "120 " + name + "\nabc123 fix flush",
                read=[name],
            )
        else:
            s.call(
                "run_shell_command",
                {"command": "npm test -- --run tests/sync/queue.test.ts", "description": "Run the queue tests"},
                "Tests 12 passed\nexit code 0",
                read=["tests/sync/queue.test.ts"],
            )


def mcp_step(s: Session, rng: random.Random) -> None:
    """One step through MCP tools: namespaced names (``mcp__server__tool``, ``server__tool``)."""
    path = rng.choice(FILES)
    absolute = f"/srv/project/{path}"
    roll = rng.random()
    if roll < 0.3:
        s.call("mcp__filesystem__read_text_file", {"path": absolute, "head": 200}, s.listing(path), read=[absolute])
    elif roll < 0.4:
        many = [f"/srv/project/{p}" for p in rng.sample(FILES, 3)]
        s.call(
            "mcp__filesystem__read_multiple_files",
            {"paths": many},
            "\n\n".join(f"{m}:\n{s.listing(m)[:300]}" for m in many),
            read=many,
        )
    elif roll < 0.55:
        s.call(
            "mcp__filesystem__edit_file",
            {"path": absolute, "edits": [{"oldText": "retry(3)", "newText": "retry(5)"}], "dryRun": False},
            "```diff\n--- a\n+++ b\n@@\n-retry(3)\n+retry(5)\n```",
            changed=[absolute],
        )
    elif roll < 0.6:
        new = absolute.replace(".ts", f".moved{s.calls}.ts") if absolute.endswith(".ts") else absolute + f".{s.calls}"
        s.call(
            "mcp__filesystem__move_file",
            {"source": absolute, "destination": new},
            f"Successfully moved {absolute} to {new}",
            changed=[absolute, new],
        )
    elif roll < 0.68:
        s.call(
            "github__get_file_contents",
            {"owner": "acme", "repo": "checkpointer", "path": path, "branch": "main"},
            s.listing(path),
            read=[path],
        )
    elif roll < 0.74:
        target = rng.choice([f for f in FILES if f.startswith("docs/")])
        s.call(
            "github__create_or_update_file",
            {
                "owner": "acme",
                "repo": "checkpointer",
                "path": target,
                "content": "# Docs\n",
                "message": "docs: flush",
                "branch": "fix/flush",
            },
            '{"commit": {"sha": "9f1c"}}',
            changed=[target],
        )
    elif roll < 0.82:
        a = rng.choice([f for f in FILES if f.startswith("src/")])
        diff = f"diff --git a/{a} b/{a}\n--- a/{a}\n+++ b/{a}\n@@ -40,3 +40,3 @@\n-  await store.write(batch);\n+  await store.writeAtomic(batch);\n"
        s.call("mcp__git__git_apply", {"repo_path": "/srv/project", "diff": diff}, "Applied.", changed=[a])
    elif roll < 0.9:
        s.call(
            "mcp__filesystem__list_directory",
            {"path": "/srv/project/" + (path.rpartition("/")[0] or "")},
            "[FILE] a.ts\n[DIR] sub",
            read=["/srv/project/" + (path.rpartition("/")[0] or "")],
        )
    else:
        s.call(
            "mcp__filesystem__search_files",
            {"path": "/srv/project/src", "pattern": "*.ts", "excludePatterns": ["node_modules"]},
            "\n".join(f"/srv/project/{f}" for f in FILES[:6]),
            read=["/srv/project/src"],
        )


STEPS: dict[str, Callable[[Session, random.Random], None]] = {
    "codex_rollout": codex_step,
    "opencode_export": opencode_step,
    "gemini_cli_chat": gemini_step,
    "mcp_tools": mcp_step,
}


def session(name: str, kind: str, calls: int, seed: int) -> Session:
    """Return a session of ``calls`` tool calls of one agent's shape, with the requests spread over it."""
    s = Session(name, seed)
    step = STEPS[kind]
    per_request = max(1, calls // len(REQUESTS))
    for i in range(calls):
        if i % per_request == 0 and i // per_request < len(REQUESTS):
            s.user(REQUESTS[i // per_request])
        step(s, s.rng)
        if s.rng.random() < 0.08:
            s.say("Checked that; continuing with the next file.")
    s.say("Done: the changes are in place and the tests pass.")
    return s


def main() -> None:
    for kind in STEPS:
        session(kind, kind, 160, seed=len(kind)).write()
    # a long session: 2,000+ path mentions, more than any bound on the trail holds one by one
    session("codex_rollout_long", "codex_rollout", 1550, seed=7).write()


if __name__ == "__main__":
    main()
