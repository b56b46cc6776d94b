"""What one tool call touched, rule by rule, in the shapes long sessions of other agents use.

Each row is a call as Codex, Copilot, OpenCode or Gemini CLI sends it, and
the exact (path, verb, lines) list ``touches`` reads from it.
"""

from __future__ import annotations

import pytest

from langgraph_compaction.core.touches import Touch, touches

ROOT = "/home/dev/ckpt"


def shell(line: str) -> dict:
    """Return Codex's ``shell`` arguments for one line: an argv run by bash in the project's folder."""
    return {"command": ["bash", "-lc", line], "workdir": ROOT, "timeout_ms": 120000}


@pytest.mark.parametrize(
    "name, args, expected",
    [
        # git show REV:path shows the file as it was at REV
        ("shell", shell("git show HEAD:src/a.ts | head -n 60"), [Touch("src/a.ts", "read")]),
        ("shell", shell("git show HEAD~2:./docs/x.md"), [Touch("./docs/x.md", "read")]),
        ("shell", shell("cd pkg && git show origin/main:src/b.py"), [Touch("pkg/src/b.py", "read")]),
        ("shell", shell("git show abc123 --stat"), []),
        # rg --files takes no pattern: every operand is a folder it lists
        ("shell", shell("rg --files services/worker | rg -i store"), [Touch("services/worker", "searched")]),
        ("shell", shell("rg --files src tests"), [Touch("src", "searched"), Touch("tests", "searched")]),
        ("shell", shell("rg -n 'flush\\(' packages/core"), [Touch("packages/core", "searched")]),
        # OpenCode's multiedit changes its file, as Claude Code's MultiEdit does
        (
            "multiedit",
            {"filePath": f"{ROOT}/a.ts", "edits": [{"oldString": "a", "newString": "b"}]},
            [Touch(f"{ROOT}/a.ts", "edited")],
        ),
        ("MultiEdit", {"file_path": "a.ts", "edits": []}, [Touch("a.ts", "edited")]),
        # pipelines and paged reads of a shell line
        ("shell", shell("cd pkg && nl -ba a.ts | sed -n '1,160p'"), [Touch("pkg/a.ts", "read")]),
        ("shell", shell("sed -n '201,320p' src/a.ts"), [Touch("src/a.ts", "read", (201, 320))]),
        # commands whose output is not the file's text inspect it: their result is no read of the file
        (
            "shell",
            shell("git diff -- src/a.ts src/b.ts"),
            [Touch("src/a.ts", "inspected"), Touch("src/b.ts", "inspected")],
        ),
        ("shell", shell("git log --oneline -3 -- src/a.ts"), [Touch("src/a.ts", "inspected")]),
        ("shell", shell("git status --short src/"), [Touch("src/", "inspected")]),
        (
            "shell",
            shell("wc -l src/a.ts && stat src/b.ts"),
            [Touch("src/a.ts", "inspected"), Touch("src/b.ts", "inspected")],
        ),
        ("shell", shell("diff src/a.ts src/b.ts"), [Touch("src/a.ts", "inspected"), Touch("src/b.ts", "inspected")]),
        ("shell", shell("git blame -L 1,20 src/a.ts"), [Touch("src/a.ts", "read")]),
        ("shell", shell("head -n 40 src/a.ts | wc -l"), [Touch("src/a.ts", "read")]),
        # Copilot's and Gemini CLI's paged reads
        (
            "read_file",
            {"filePath": f"{ROOT}/a.ts", "startLine": 201, "endLine": 400},
            [Touch(f"{ROOT}/a.ts", "read", (201, 400))],
        ),
        (
            "read_file",
            {"absolute_path": f"{ROOT}/a.ts", "offset": 200, "limit": 200},
            [Touch(f"{ROOT}/a.ts", "read", (200, 399))],
        ),
        # Copilot's get_errors names the files it checks in a list
        (
            "get_errors",
            {"filePaths": [f"{ROOT}/a.ts", f"{ROOT}/b.ts"]},
            [Touch(f"{ROOT}/a.ts", "read"), Touch(f"{ROOT}/b.ts", "read")],
        ),
    ],
)
def test_a_call_of_a_long_session_touches_the_paths_its_agent_named(name, args, expected):
    assert touches(name, args) == expected
