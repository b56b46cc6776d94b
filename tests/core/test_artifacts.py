"""The artifact trail on other agents' tools: what the summary names after the calls are compacted.

Each test builds the tool calls an agent makes (Codex's ``shell_command`` and
``apply_patch``, OpenCode's ``read``/``edit``/``write`` with ``filePath``,
Gemini CLI's ``read_file``/``replace``/``run_shell_command``, MCP tools with a
namespace) and checks the ARTIFACTS section a compaction writes. The long
sessions are the synthetic ones of tests/data/agent_shapes (see its README),
checked against the answer key written beside them.
"""

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_compaction.core.config import FidelityConfig
from langgraph_compaction.core.summary import build_summary_message, extractive_summary, section
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.core.touches import touches
from langgraph_compaction.core.trail import expand_group, parse_line
from langgraph_compaction.trajectories import load_trajectory

SHAPES = Path(__file__).resolve().parents[1] / "data" / "agent_shapes"


def _calls(*specs):
    """Return an assistant message calling tools and the results: specs are (name, args, result)."""
    calls = [{"name": n, "args": a, "id": f"c{i}-{n}"} for i, (n, a, _) in enumerate(specs)]
    results = [ToolMessage(r, tool_call_id=c["id"], name=c["name"]) for c, (_, _, r) in zip(calls, specs, strict=False)]
    return [AIMessage("", tool_calls=calls), *results]


def _trail(*specs) -> list[str]:
    """Return the trail lines of the ARTIFACTS section a compaction of these calls writes."""
    messages = [HumanMessage("Fix the flush race.", id="u1"), *_calls(*specs)]
    artifacts = section(extractive_summary(messages), "ARTIFACTS")
    return [line[2:] for line in artifacts.splitlines() if line.startswith("- ")]


def test_opencode_file_path_arguments_are_named_with_what_was_done():
    trail = _trail(
        (
            "read",
            {"filePath": "/home/dev/app/src/checkpoints/fsStore.ts", "offset": 0, "limit": 2000},
            "<file>...</file>",
        ),
        (
            "edit",
            {
                "filePath": "/home/dev/app/src/checkpoints/fsStore.ts",
                "oldString": "write(",
                "newString": "writeAtomic(",
            },
            "ok",
        ),
        ("write", {"filePath": "/home/dev/app/src/checkpoints/layout.ts", "content": "export const v = 2;\n"}, "ok"),
    )
    assert trail == [
        "/home/dev/app/src/checkpoints/layout.ts (wrote)",
        "/home/dev/app/src/checkpoints/fsStore.ts (edited, read)",
    ]


def test_codex_patches_name_every_changed_file_and_shell_paths_stay_relative_to_the_workdir():
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: src/checkpoints/layout.ts",
            "+export const layout = 2;",
            "*** Update File: src/checkpoints/store.ts",
            "*** Move to: src/checkpoints/baseStore.ts",
            "@@ export async function flush(",
            "-  await store.write(batch);",
            "+  await store.writeAtomic(batch);",
            "*** Delete File: src/checkpoints/memoryStore.ts",
            "*** End Patch",
        ]
    )
    trail = _trail(
        ("shell_command", {"command": "sed -n '1,240p' src/checkpoints/fsStore.ts", "workdir": "/repo"}, "..."),
        ("shell_command", {"command": "cd src/sync && cat queue.ts worker.ts | head -n 80", "workdir": "/repo"}, "..."),
        (
            "shell_command",
            {"command": "cd /repo/tests && npx vitest run sync/queue.test.ts 2>&1 | tail -n 30", "workdir": "/repo"},
            "exit code 0",
        ),
        ("apply_patch", {"input": patch}, "Success."),
    )
    assert trail[:4] == [
        "src/checkpoints/memoryStore.ts (deleted)",
        "src/checkpoints/baseStore.ts (moved)",
        "src/checkpoints/store.ts (moved)",
        "src/checkpoints/layout.ts (wrote)",
    ]
    assert "tests/sync/queue.test.ts (ran)" in trail
    assert "src/sync/worker.ts (read)" in trail and "src/sync/queue.ts (read)" in trail
    assert "src/checkpoints/fsStore.ts (read)" in trail
    assert not any(line.startswith("/repo") for line in trail)  # the workdir frames the paths; it is not one


def test_unified_diffs_in_an_argument_and_on_a_shell_line_are_changes():
    diff = "diff --git a/src/api/auth.ts b/src/api/auth.ts\n--- a/src/api/auth.ts\n+++ b/src/api/auth.ts\n@@ -1 +1 @@\n-a\n+b\n"
    new = "--- /dev/null\n+++ b/docs/sync.md\n@@ -0,0 +1 @@\n+# Sync\n"
    trail = _trail(
        ("mcp__git__git_apply", {"repo_path": "/srv/project", "diff": diff}, "Applied."),
        ("Bash", {"command": f"git apply <<'EOF'\n{new}EOF"}, "ok"),
    )
    assert "src/api/auth.ts (edited)" in trail and "docs/sync.md (wrote)" in trail
    assert not any(line.startswith("/srv/project ") for line in trail)


def test_gemini_cli_and_mcp_tools_are_read_by_meaning_not_by_one_agents_names():
    trail = _trail(
        ("read_file", {"absolute_path": "/Users/dev/proj/src/api/server.ts"}, "..."),
        ("read_many_files", {"paths": ["src/utils/retry.ts", "src/utils/clock.ts"]}, "..."),
        ("replace", {"file_path": "/Users/dev/proj/src/utils/retry.ts", "old_string": "3", "new_string": "5"}, "ok"),
        (
            "run_shell_command",
            {"command": "wc -l queue.ts", "directory": "src/sync", "description": "size"},
            "80 queue.ts",
        ),
        ("mcp__filesystem__move_file", {"source": "/srv/p/src/a.ts", "destination": "/srv/p/src/b.ts"}, "moved"),
        ("github__get_file_contents", {"owner": "acme", "repo": "checkpointer", "path": "docs/api.md"}, "..."),
        ("mcp__filesystem__edit_file", {"path": "/srv/p/src/c.ts", "edits": [{"oldText": "a", "newText": "b"}]}, "ok"),
    )
    assert trail == [
        "/srv/p/src/c.ts (edited)",
        "docs/api.md (read)",
        "/srv/p/src/b.ts (moved)",
        "/srv/p/src/a.ts (moved)",
        "$ wc -l queue.ts",
        "queue.ts (inspected)",  # relative to the directory the command ran in; wc shows a count, not the text
        "/Users/dev/proj/src/utils/retry.ts (edited, read)",  # read as src/utils/retry.ts: one file, spelled once
        "src/utils/clock.ts (read)",
        "/Users/dev/proj/src/api/server.ts (read)",
    ]


def test_shell_lines_tell_writes_from_reads():
    found = touches(
        "Bash",
        {
            "command": "sed -n 1,5p a.py; sed -i s/x/y/ b.py && cp c.py d/c.py && mv e.py f.py; rm -f g.py; "
            "make > build.log 2>&1; curl -s https://x.dev/v1 | tee out/v1.json; grep -rn 'def flush' src/ lib/h.py"
        },
    )
    assert [(t.target, t.verb) for t in found] == [
        ("https://x.dev/v1", "fetched"),
        ("a.py", "read"),
        ("b.py", "edited"),
        ("c.py", "read"),
        ("d/c.py", "wrote"),
        ("e.py", "moved"),
        ("f.py", "moved"),
        ("g.py", "deleted"),
        ("build.log", "wrote"),
        ("out/v1.json", "wrote"),
        ("src/", "searched"),
        ("lib/h.py", "searched"),
    ]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("search_direct_flight", {"origin": "JFK", "destination": "LAX", "date": "2024-05-01"}),
        ("deploy", {"target": "production", "profile": "dev"}),
        ("write", {"filePath": "notes.md", "content": "--- a/x.py\n+++ b/x.py\n"}),  # a diff as a file's content
        ("Bash", {"command": "git log HEAD..origin/main --oneline 2>&1 | head -n 5"}),
        ("Bash", {"command": "git -C /repo push origin feature/x && gh api repos/o/r/pulls && echo a/b"}),
    ],
)
def test_what_is_not_a_path_stays_out_of_the_trail(name, args):
    assert [t.target for t in touches(name, args)] == (["notes.md"] if name == "write" else [])


def _truth(name: str) -> dict:
    return json.loads((SHAPES / f"{name}.touched.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name", ["codex_rollout", "opencode_export", "gemini_cli_chat", "mcp_tools", "codex_rollout_long"]
)
def test_every_call_of_the_agent_shapes_yields_the_paths_of_its_answer_key(name):
    messages = load_trajectory(SHAPES / f"{name}.jsonl")
    truth = _truth(name)
    calls = [c for m in messages for c in getattr(m, "tool_calls", None) or []]
    assert len(calls) == len(truth) >= 160
    for call in calls:
        found = touches(call["name"], call["args"])
        expected = truth[call["id"]]
        assert set(expected["read"] + expected["changed"]) <= {t.target for t in found}, call
        assert set(expected["changed"]) <= {
            t.target for t in found if t.verb in ("edited", "wrote", "deleted", "moved")
        }, call


def _findable(artifacts: str) -> tuple[set[str], set[str]]:
    """Return the paths an ARTIFACTS section names (folder lines read back), and those it names as changed."""
    named, changed = set(), set()
    for line in artifacts.splitlines():
        if line.startswith("- "):
            entry = line[2:]
            paths = expand_group(entry) or [entry.rsplit(" (", 1)[0]]
            named.update(paths)
            if any(
                f"{verb}" in entry.rsplit(" (", 1)[-1] for verb in ("edited", "wrote", "deleted", "moved", "changed")
            ) and not expand_group(entry):
                changed.update(paths)
            # changed files sharing their folder's line, named first
            changed.update(e.key for e in parse_line(entry) if "changed" in e.details and expand_group(entry))
    return named, changed


def _unaccounted(paths: set[str], named: set[str], artifacts: str) -> set[str]:
    """Return the paths an ARTIFACTS section neither names nor counts on their folder's line (``src/ (40 changed files)``)."""
    from langgraph_compaction.core.trail import counted_files

    folders = {c[0] for line in artifacts.splitlines() if line.startswith("- ") and (c := counted_files(line[2:]))}
    under = lambda p: "." in folders or any(p[:i] in folders for i, ch in enumerate(p) if ch == "/")  # noqa: E731
    return {p for p in paths if p not in named and not under(p)}


def test_a_2000_path_session_compacted_three_times_accounts_for_every_changed_file_and_every_path():
    # 272 changed files take 2,770 tokens on their own lines: over the 1,200-token trail the largest folders are
    # counted, so every changed file is named as changed or counted on its folder's line
    messages = load_trajectory(SHAPES / "codex_rollout_long.jsonl")
    truth = _truth("codex_rollout_long")
    assert sum(len(v["read"]) + len(v["changed"]) for v in truth.values()) >= 2000
    limit = FidelityConfig().max_artifacts
    cuts = [len(messages) // 3, 2 * len(messages) // 3, len(messages) - 1]
    summary, start, seen = None, 0, []
    for cut in cuts:
        while messages[cut].type == "tool":  # never split a call from its result
            cut += 1
        chunk = ([summary] if summary else []) + messages[start:cut]
        text = extractive_summary(chunk)
        seen += [c["id"] for m in messages[start:cut] for c in getattr(m, "tool_calls", None) or []]
        artifacts = section(text, "ARTIFACTS")
        named, changed = _findable(artifacts)
        expected_changed = {p for i in seen for p in truth[i]["changed"]}
        expected = expected_changed | {p for i in seen for p in truth[i]["read"]}
        assert _unaccounted(expected_changed, changed, artifacts) == set()
        assert _unaccounted(expected, named, artifacts) == set()
        assert len([line for line in artifacts.splitlines() if line.startswith("- ")]) <= limit
        assert estimate_text_tokens(artifacts) <= FidelityConfig().trail_tokens + 150  # the trail and its header
        summary, start = build_summary_message(text), cut


def test_a_trail_over_its_token_budget_drops_older_commands_first_and_keeps_every_changed_file():
    from langgraph_compaction.core.tokens import estimate_text_tokens

    specs = [
        ("apply_patch", {"input": f"*** Begin Patch\n*** Update File: src/mod{i}.py\n@@\n-a\n+b\n*** End Patch"}, "ok")
        for i in range(10)
    ]
    specs += [
        ("shell_command", {"command": f"make check-{i} VERBOSE=1 JOBS=8 TARGET=service-{i} PROFILE=ci"}, "Exit code: 0")
        for i in range(120)
    ]
    messages = [HumanMessage("Fix the flush race.", id="u1"), *_calls(*specs)]

    def trail(settings: FidelityConfig) -> str:
        return section(extractive_summary(messages, settings=settings), "ARTIFACTS")

    budget = 500
    unbounded, bounded = trail(FidelityConfig(trail_tokens=None)), trail(FidelityConfig(trail_tokens=budget))
    assert estimate_text_tokens(unbounded) > 2 * budget  # the budget has work to do
    assert estimate_text_tokens(bounded) <= budget
    named, changed = _findable(bounded)
    assert {f"src/mod{i}.py" for i in range(10)} <= changed
    assert "$ make check-119 VERBOSE=1 JOBS=8 TARGET=service-119 PROFILE=ci" in named  # the newest command stays
    assert "older commands not shown" in bounded


def test_a_long_session_trail_over_its_token_budget_keeps_to_it_and_still_accounts_for_every_path():
    from langgraph_compaction.core.tokens import estimate_text_tokens

    messages = load_trajectory(SHAPES / "codex_rollout_long.jsonl")
    truth = _truth("codex_rollout_long")
    seen = [c["id"] for m in messages for c in getattr(m, "tool_calls", None) or []]
    settings = FidelityConfig(max_artifacts=300)  # lines enough for 4,000+ tokens: the token budget bounds it
    artifacts = section(extractive_summary(messages, settings=settings), "ARTIFACTS")
    unbounded = section(
        extractive_summary(messages, settings=settings.model_copy(update={"trail_tokens": None})), "ARTIFACTS"
    )
    assert estimate_text_tokens(artifacts) <= settings.trail_tokens + 150 < estimate_text_tokens(unbounded)
    named, changed = _findable(artifacts)
    assert _unaccounted({p for i in seen for p in truth[i]["changed"]}, changed, artifacts) == set()
    assert _unaccounted({p for i in seen for p in truth[i]["read"]}, named, artifacts) == set()


def test_a_folder_line_gives_back_dot_slash_paths_as_they_were_written():
    from langgraph_compaction.core.trail import TrailEntry
    from langgraph_compaction.core.trail_bound import group_paths

    entries = [TrailEntry(p, ("read",)) for p in ("./session", "./main.go", "notes.md", "cmd/a.go", "cmd/b.go")]
    lines = group_paths(entries, 1)
    assert {p for line in lines for p in expand_group(line.render())} == {
        "./session",
        "./main.go",
        "notes.md",
        "cmd/a.go",
        "cmd/b.go",
    }


def test_one_file_spelled_two_ways_is_one_entry_of_the_trail():
    trail = _trail(
        ("Read", {"file_path": "src/billing.py"}, "def charge(): ..."),
        ("Edit", {"file_path": "./src/billing.py", "old_string": "charge", "new_string": "bill"}, "ok"),
        ("Bash", {"command": "cat src//billing.py && sed -n 1,5p lib/../src/billing.py"}, "def bill(): ..."),
    )
    assert trail == ["$ cat src//billing.py && sed -n 1,5p lib/../src/billing.py", "src/billing.py (read, edited)"]
