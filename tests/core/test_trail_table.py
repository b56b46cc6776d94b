"""The artifact trail, rule by rule: each case a row, each figure the exact line or number the trail gives.

``trail`` reads the entries from the tool calls and a previous summary's
lines; ``trail_bound`` fits them to the summary's lines and tokens. Tokens
here are words (``len(text.split())``) so each bound is easy to count by hand;
a line costs its words plus 2, as in ``bound_trail``.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_compaction.core.trail import (
    WORK_HALF_LIFE,
    FolderLine,
    TrailEntry,
    counted_files,
    entry_key,
    expand_group,
    merge_entries,
    parse_line,
    tool_trail,
)
from langgraph_compaction.core.trail_bound import (
    WORK_SHARE,
    _bound_lines,
    _merge_folders,
    _own_share,
    _parent,
    _split_folder,
    bound_trail,
    group_paths,
    worked_on,
)

E = TrailEntry


def words(text: str) -> int:
    return len(text.split())


def rendered(lines) -> list[str]:
    return [line.render() for line in lines]


def cost(lines) -> int:
    return sum(words(line.render()) + 2 for line in lines)


# --- entries and their lines -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, line, change, counted",
    [
        (E("src/a.py"), "src/a.py", False, False),
        (E("src/a.py", ("read", "edited")), "src/a.py (read, edited)", True, False),
        (E("src/a.py", ("read",)), "src/a.py (read)", False, False),
        (E("src/a.py", ("moved",)), "src/a.py (moved)", True, False),
        (E("src/a.py", ("deleted",)), "src/a.py (deleted)", True, False),
        (E("$ pytest", ("exit 1",)), "$ pytest (exit 1)", False, False),
        (E("src/pkg/", (), 0, 0.0, 12, 0), "src/pkg/ (12 changed files)", True, True),
        (E("src/pkg/", (), 0, 0.0, 0, 3), "src/pkg/ (3 other files)", True, True),
        (E("src/pkg/", (), 0, 0.0, 12, 3), "src/pkg/ (12 changed files, 3 other files)", True, True),
    ],
)
def test_an_entry_renders_its_verbs_or_counts_and_says_whether_it_is_a_change(entry, line, change, counted):
    assert entry.render() == line
    assert entry.is_change is change and entry.is_counted is counted
    assert entry.is_command is line.startswith("$ ")


def test_a_folder_line_names_its_files_newest_first_with_their_count():
    assert FolderLine("src", ("b.py", "a.py")).render() == "src/ (2 files: b.py, a.py)"
    assert FolderLine(".", ("x.py", "lib/y.py", "z.md")).render() == "./ (3 files: x.py, lib/y.py, z.md)"
    # the first ``changed`` names are changed files
    assert FolderLine("src", ("b.py", "a.py"), 2).render() == "src/ (2 changed files: b.py, a.py)"
    assert FolderLine("src", ("b.py", "a.py"), 1).render() == "src/ (2 files, the first 1 changed: b.py, a.py)"


def test_a_counted_folder_is_not_the_same_thing_as_the_folder_itself():
    assert E("d/", (), 0, 0.0, 1, 0).ident == (True, "d/")
    assert E("d/").ident == (False, "d/")


def _round(n: int, calls: list[tuple[str, dict]], results: list[str]) -> list:
    ids = [f"c{n}{k}" for k in range(len(calls))]
    call_dicts = [{"name": name, "args": args, "id": i} for (name, args), i in zip(calls, ids, strict=True)]
    return [
        AIMessage("", tool_calls=call_dicts, id=f"a{n}"),
        *[ToolMessage(text, tool_call_id=i, id=f"t{i}") for text, i in zip(results, ids, strict=True)],
    ]


def test_the_trail_of_tool_calls_is_newest_first_with_verbs_uses_and_weights_that_halve_with_age():
    messages = [
        HumanMessage("fix a.py", id="h"),
        *_round(1, [("Read", {"file_path": "src/a.py"})], ["code"]),
        *_round(
            2,
            [
                ("Edit", {"file_path": "./src/a.py", "old_string": "x", "new_string": "y"}),
                ("Read", {"path": "src/b.py"}),
            ],
            ["ok", "b"],
        ),
        *_round(3, [("Bash", {"command": "pytest -q"})], ["1 failed\nexit code 1"]),
        *_round(4, [("Bash", {"command": "pytest -q"})], ["Process exited with code 0"]),
        *_round(5, [("Bash", {"command": "cat src/a.py"})], ["..."]),
    ]
    trail = tool_trail(messages)
    # six calls; the newest is 0 calls back: src/a.py was touched 0, 4 and 5 calls back
    age = lambda *back: sum(0.5 ** (b / WORK_HALF_LIFE) for b in back)  # noqa: E731
    assert [(e.key, e.details, e.uses) for e in trail] == [
        ("$ cat src/a.py", (), 1),
        ("src/a.py", ("read", "edited"), 3),
        ("$ pytest -q", ("exit 0",), 2),
        ("src/b.py", ("read",), 1),
    ]
    assert [e.weight for e in trail] == pytest.approx([age(0), age(0, 4, 5), age(1, 2), age(3)], rel=1e-12)


@pytest.mark.parametrize(
    "spellings, keys",
    [
        # a file read by its absolute path and run relative to the project's root is one entry, spelled absolute
        (["/p/src/a.ts", "src/a.ts"], [("/p/src/a.ts", ("read", "ran"))]),
        (["src/a.ts", "/p/src/a.ts"], [("/p/src/a.ts", ("ran", "read"))]),
        # the root is the one most files share: /p, not /p/src for the one file there
        (
            ["/p/src/a.ts", "src/a.ts", "/p/src/b.ts", "src/b.ts", "/p/src/c.ts", "c.ts"],
            [
                ("/p/src/a.ts", ("read", "ran")),
                ("/p/src/b.ts", ("read", "ran")),
                ("/p/src/c.ts", ("read",)),
                ("c.ts", ("ran",)),
            ],
        ),
        # no absolute spelling of the file: the relative one stays
        (["/p/src/a.ts", "lib/b.ts"], [("/p/src/a.ts", ("read",)), ("lib/b.ts", ("ran",))]),
        (["/p/a.ts", "../a.ts"], [("/p/a.ts", ("read",)), ("../a.ts", ("ran",))]),
    ],
)
def test_a_file_spelled_absolute_and_relative_to_the_projects_root_is_one_entry(spellings, keys):
    # a previous summary's absolute spelling, read back, takes in the new calls' relative one too
    assert [(e.key, e.details) for e in merge_entries([E("src/a.ts", ("ran",)), E("/p/src/a.ts", ("read",))])] == [
        ("/p/src/a.ts", ("ran", "read"))
    ]
    calls = [
        ("read", {"filePath": path}) if path.startswith("/") else ("bash", {"command": f"pytest {path}"})
        for path in spellings
    ]
    messages = [m for n, call in enumerate(calls) for m in _round(n, [call], ["ok"])]
    got = [(e.key, e.details) for e in tool_trail(messages) if not e.is_command]
    assert sorted(got) == sorted((key, details[::-1]) for key, details in keys)


@pytest.mark.parametrize(
    "command, result, entry",
    [
        ("pytest -q", "exit code 1", ("$ pytest -q", ("exit 1",))),
        ("make all", "Exited with code 2", ("$ make all", ("exit 2",))),
        ("tox -e py", "returncode=3", ("$ tox -e py", ("exit 3",))),
        ("npm test", "return code: -1", ("$ npm test", ("exit -1",))),
        ("git status", "exit status 0", ("$ git status", ("exit 0",))),
        ("go test", "exited with 5", ("$ go test", ("exit 5",))),
        ("echo hi", "hi", ("$ echo hi", ())),
        ("a   b\t c", "exit code 1\nthen exit code 4", ("$ a b c", ("exit 4",))),  # the last status shown
        ("pytest -q\ncat log", "", ("$ pytest -q ...", ())),  # a script: its first line, marked as cut
        ("pytest -q\n   ", "", ("$ pytest -q", ())),
        ("echo " + "x" * 195, "", ("$ echo " + "x" * 195, ())),  # 200 characters
        ("echo " + "x" * 196, "", ("$ echo " + "x" * 195 + " ...", ())),
    ],
)
def test_a_command_keeps_its_first_line_and_the_last_exit_status_its_result_shows(command, result, entry):
    trail = tool_trail(_round(1, [("Bash", {"command": command})], [result]))
    assert [(e.key, e.details) for e in trail if e.is_command] == [entry]


def test_an_exit_status_is_read_from_the_last_2000_characters_of_the_result_only():
    early = "exit code 7\n" + "." * 2_000
    assert [e.details for e in tool_trail(_round(1, [("Bash", {"command": "make all"})], [early]))] == [()]
    late = "." * 1_985 + "exit code 7"
    assert [e.details for e in tool_trail(_round(1, [("Bash", {"command": "make all"})], [late]))] == [("exit 7",)]


def test_merged_entries_keep_the_first_spelling_and_status_and_add_up_uses_weights_and_counts():
    merged = merge_entries(
        [
            E("a", ("read",), 1, 1.0),
            E("$ x", ("exit 1",), 1, 0.5),
            E("a", ("edited", "read"), 2, 0.25),
            E("$ x", ("exit 0",), 3, 1.0),
            E("d/", (), 0, 0.0, 1, 2),
            E("d/", (), 0, 0.0, 3, 4),
            E("d/", ("read",)),
        ]
    )
    assert [(e.key, e.details, e.uses, e.weight, e.changed_files, e.other_files) for e in merged] == [
        ("a", ("read", "edited"), 3, 1.25, 0, 0),
        ("$ x", ("exit 1",), 4, 1.5, 0, 0),
        ("d/", (), 0, 0.0, 4, 6),
        ("d/", ("read",), 0, 0.0, 0, 0),
    ]


@pytest.mark.parametrize(
    "line, entries, key, group, counted",
    [
        ("src/ (2 files: a.py, b.py)", [("src/a.py", (), 0, 0)] + [("src/b.py", (), 0, 0)], None, 2, None),
        ("./ (2 files: a.py, lib/b.py)", [("a.py", (), 0, 0), ("lib/b.py", (), 0, 0)], None, 2, None),
        ("  src/ (1 files: a.py)  ", [("src/a.py", (), 0, 0)], "src/a.py", 1, None),
        (
            "src/ (2 changed files: a.py, b.py)",
            [("src/a.py", ("changed",), 0, 0), ("src/b.py", ("changed",), 0, 0)],
            None,
            2,
            None,
        ),
        (
            "src/ (3 files, the first 2 changed: a.py, b.py, c.py)",
            [("src/a.py", ("changed",), 0, 0), ("src/b.py", ("changed",), 0, 0), ("src/c.py", (), 0, 0)],
            None,
            3,
            None,
        ),
        ("src/pkg/ (12 changed files)", [("src/pkg/", (), 12, 0)], None, 0, ("src/pkg", 12, 0)),
        ("src/pkg/ (3 other files)", [("src/pkg/", (), 0, 3)], None, 0, ("src/pkg", 0, 3)),
        ("src/ (12 changed files, 3 other files)", [("src/", (), 12, 3)], None, 0, ("src", 12, 3)),
        ("a.py (read, edited)", [("a.py", ("read", "edited"), 0, 0)], "a.py", 0, None),
        ("a.py ( read ,, edited )", [("a.py", ("read", "edited"), 0, 0)], "a.py", 0, None),
        ("$ pytest (exit 1)", [("$ pytest", ("exit 1",), 0, 0)], "$ pytest", 0, None),
        ("plain words", [("plain words", (), 0, 0)], "plain words", 0, None),
        ("x ()", [("x", (), 0, 0)], "x", 0, None),
        ("src/ (files)", [("src/", ("files",), 0, 0)], "src/", 0, None),  # "files" alone is a verb, not a count
        ("src/ (0 files: )", [], None, 0, None),
        (
            "notes (2 files: a, b) extra",
            [("notes (2 files: a, b) extra", (), 0, 0)],
            "notes (2 files: a, b) extra",
            0,
            None,
        ),
    ],
)
def test_a_previous_summarys_line_reads_back_as_the_entries_it_stands_for(line, entries, key, group, counted):
    found = parse_line(line)
    assert [(e.key, e.details, e.changed_files, e.other_files) for e in found] == entries
    assert entry_key(line) == (key if key is not None else line.strip())
    assert expand_group(line) == ([e.key for e in found] if group else [])
    assert counted_files(line) == counted


# --- folders -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, folder",
    [
        ("a.py", (".", "a.py")),
        ("./a.py", (".", "./a.py")),
        ("src/a.py", ("src", "a.py")),
        ("src/b/c.py", ("src/b", "c.py")),
        ("src/", (".", "src/")),
        ("src/b/", ("src", "b/")),
        ("/abs/x.py", ("/abs", "x.py")),
        ("https://host/x", ("https://host", "x")),
        ("https://host", (None, "https://host")),
        ("file:/x", (None, "file:/x")),
        ("s3://bucket/k", ("s3://bucket", "k")),
    ],
)
def test_a_key_splits_into_its_folder_and_name_and_a_hosts_root_has_no_folder(key, folder):
    assert _split_folder(key) == folder


@pytest.mark.parametrize(
    "folder, parent",
    [
        (".", None),
        ("", None),
        ("~", None),
        ("~x", None),
        ("~/a", "~"),
        ("src", "."),
        ("src/b", "src"),
        ("src/b/c", "src/b"),
        ("/abs", ""),
        ("https://host", None),
        ("https://host/a", "https://host"),
    ],
)
def test_a_folder_moves_up_to_its_parent_until_the_top(folder, parent):
    assert _parent(folder) == parent


@pytest.mark.parametrize(
    "room, where, left",
    [
        (4, {"a/b/c": "a/b/c", "a/b": "a/b", "x": "x", "a/d": "a/d"}, ["a/b/c", "a/b", "x", "a/d"]),
        (3, {"a/b/c": "a/b", "a/b": "a/b", "x": "x", "a/d": "a/d"}, ["a/b", "x", "a/d"]),
        # of equals the latest moves first: a/d before a/b
        (2, {"a/b/c": "a", "a/b": "a", "x": "x", "a/d": "a"}, ["x", "a"]),
        (1, {"a/b/c": ".", "a/b": ".", "x": ".", "a/d": "."}, ["."]),
        (0, {"a/b/c": ".", "a/b": ".", "x": ".", "a/d": "."}, ["."]),  # none can move further
    ],
)
def test_the_deepest_folders_merge_into_their_parents_until_the_room_is_met(room, where, left):
    assert _merge_folders(["a/b/c", "a/b", "x", "a/d"], room) == (where, left)


def test_a_depth_one_folder_outranks_the_top_and_a_host_never_merges():
    assert _merge_folders(["src", "."], 1) == ({"src": ".", ".": "."}, ["."])
    assert _merge_folders(["https://h", "https://g"], 1) == (
        {"https://h": "https://h", "https://g": "https://g"},
        ["https://h", "https://g"],
    )


READS = [
    E("src/a.py", ("read",)),
    E("src/b.py", ("read",)),
    E("lib/c.py", ("read",)),
    E("src/d/e.py", ("read",)),
    E("x.py", ("read",)),
]


@pytest.mark.parametrize(
    "room, lines",
    [
        (1, ["./ (5 files: src/a.py, src/b.py, lib/c.py, src/d/e.py, x.py)"]),
        (2, ["src/ (3 files: a.py, b.py, d/e.py)", "./ (2 files: lib/c.py, x.py)"]),
        (3, ["src/ (3 files: a.py, b.py, d/e.py)", "lib/c.py (read)", "x.py (read)"]),
        (4, ["src/ (2 files: a.py, b.py)", "lib/c.py (read)", "src/d/e.py (read)", "x.py (read)"]),
        (5, ["src/ (2 files: a.py, b.py)", "lib/c.py (read)", "src/d/e.py (read)", "x.py (read)"]),
    ],
)
def test_paths_share_their_folders_line_and_a_folder_of_one_keeps_its_entry(room, lines):
    assert rendered(group_paths(READS, room)) == lines


def test_changed_files_come_first_on_their_folders_line_and_the_line_counts_them():
    mixed = [
        E("src/a.py", ("read",)),
        E("src/b.py", ("edited",)),
        E("src/c.py", ("changed",)),
        E("lib/d.py", ("wrote",)),
    ]
    assert rendered(group_paths(mixed, 1)) == [
        "./ (4 files, the first 3 changed: src/b.py, src/c.py, lib/d.py, src/a.py)"
    ]
    assert rendered(group_paths(mixed, 2)) == [
        "src/ (3 files, the first 2 changed: b.py, c.py, a.py)",
        "lib/d.py (wrote)",
    ]
    assert E("src/c.py", ("changed",)).is_change  # read back from a folder's line, it stays a change


def test_a_url_at_its_hosts_root_is_a_line_of_its_own():
    urls = [E("https://h", ("fetched",)), E("https://h/a", ("fetched",)), E("https://h/b", ("fetched",))]
    assert rendered(group_paths(urls, 1)) == ["https://h (fetched)", "https://h/ (2 files: a, b)"]


# --- the lines bound ---------------------------------------------------------------------------------------------


def test_the_files_worked_on_are_touched_twice_or_more_heaviest_first_and_never_commands():
    entries = [E("a", (), 1, 5.0), E("b", (), 2, 1.0), E("c", (), 3, 2.0), E("$ ls", (), 5, 9.0), E("d", (), 2, 2.0)]
    assert [e.key for e in worked_on(entries)] == ["c", "d", "b"]


TRAIL = [
    E("$ c1", ("exit 0",)),
    E("src/a.py", ("edited",)),
    E("src/r1.py", ("read",)),
    E("$ c2"),
    E("src/r2.py", ("read",)),
    E("lib/r3.py", ("read",)),
    E("$ c3"),
    E("$ c4"),
]


#: Every entry of ``TRAIL`` on its own line, in its order.
TRAIL_LINES = [
    "$ c1 (exit 0)",
    "src/a.py (edited)",
    "src/r1.py (read)",
    "$ c2",
    "src/r2.py (read)",
    "lib/r3.py (read)",
    "$ c3",
    "$ c4",
]
ONE_GROUP = ["$ c1 (exit 0)", "src/a.py (edited)", "./ (3 files: src/r1.py, src/r2.py, lib/r3.py)"]


@pytest.mark.parametrize(
    "limit, lines, dropped",
    [
        (9, TRAIL_LINES, 0),
        (8, TRAIL_LINES, 0),
        (7, TRAIL_LINES[:7], 1),
        (6, TRAIL_LINES[:6], 2),
        (5, ["$ c1 (exit 0)", "src/a.py (edited)", "src/r1.py (read)", "src/r2.py (read)", "lib/r3.py (read)"], 3),
        (4, ["$ c1 (exit 0)", "src/a.py (edited)", "src/ (2 files: r1.py, r2.py)", "lib/r3.py (read)"], 3),
        (3, ONE_GROUP, 3),
        (1, ONE_GROUP, 3),
    ],
)
def test_older_commands_leave_first_then_reads_share_a_line_and_changes_always_stay(limit, lines, dropped):
    got, left_out = _bound_lines(TRAIL, limit)
    assert (rendered(got), left_out) == (lines, dropped)
    assert bound_trail(TRAIL, limit) == (got, left_out)


def test_the_newest_tenth_of_the_room_is_commands_whatever_else_there_is():
    commands = [E(f"$ c{k}") for k in range(30)]
    changes = [E(f"f{k}.py", ("edited",)) for k in range(30)]
    got, left_out = _bound_lines(commands + changes, 20)
    assert rendered(got) == ["$ c0", "$ c1"] + [f"f{k}.py (edited)" for k in range(30)]
    assert left_out == 28


def test_the_files_worked_on_keep_their_lines_in_half_the_room_when_reads_are_grouped():
    reads = [E(f"src/r{k}.py", ("read",), 3 if k in (2, 4, 5) else 1, float(k)) for k in range(8)]
    # room 4: two own lines (the heaviest), the other six grouped in the two lines left
    got, _ = _bound_lines(reads, 4)
    assert rendered(got) == [
        "src/r4.py (read)",
        "src/r5.py (read)",
        "src/ (6 files: r0.py, r1.py, r2.py, r3.py, r6.py, r7.py)",
    ]
    got, _ = _bound_lines(reads, 4, own=[reads[0]])
    assert rendered(got) == ["src/r0.py (read)", "src/ (7 files: r1.py, r2.py, r3.py, r4.py, r5.py, r6.py, r7.py)"]


# --- the token bound ---------------------------------------------------------------------------------------------

WORK = [
    E("$ make", ("exit 0",)),
    E("src/a.py", ("edited",)),
    E("src/b.py", ("edited",)),
    E("lib/x.py", ("read",)),
    E("lib/y.py", ("read",)),
    E("docs/r.md", ("read",)),
    E("$ old"),
]
EVERY = [
    "$ make (exit 0)",
    "src/a.py (edited)",
    "src/b.py (edited)",
    "lib/x.py (read)",
    "lib/y.py (read)",
    "docs/r.md (read)",
    "$ old",
]
GROUPED = [
    "$ make (exit 0)",
    "src/a.py (edited)",
    "src/b.py (edited)",
    "lib/ (2 files: x.py, y.py)",
    "docs/r.md (read)",
]
TOP = ["$ make (exit 0)", "src/a.py (edited)", "src/b.py (edited)", "./ (3 files: lib/x.py, lib/y.py, docs/r.md)"]
#: changed files share their folder's line too, named first, before any file is counted
SHARED = ["$ make (exit 0)", "./ (5 files, the first 2 changed: src/a.py, src/b.py, lib/x.py, lib/y.py, docs/r.md)"]
COUNTED = ["$ make (exit 0)", "src/ (2 changed files)", "./ (3 other files)"]
ALL_COUNTED = ["$ make (exit 0)", "./ (2 changed files, 3 other files)"]


@pytest.mark.parametrize(
    "max_tokens, lines, dropped",
    [
        (None, EVERY, 0),
        (100, EVERY, 0),
        (30, EVERY, 0),  # the whole trail costs 30: at the bound it stays whole
        (29, GROUPED, 1),  # 25
        (25, GROUPED, 1),
        (24, TOP, 1),  # 22
        (22, TOP, 1),
        (21, SHARED, 1),  # 20
        (20, SHARED, 1),
        (19, COUNTED, 1),  # 18
        (18, COUNTED, 1),
        (17, ALL_COUNTED, 1),  # 15: the smallest there is, over any smaller bound
        (1, ALL_COUNTED, 1),
    ],
)
def test_over_its_tokens_the_trail_groups_reads_then_changes_then_counts_folders_changed_files_last(
    max_tokens, lines, dropped
):
    got, left_out = bound_trail(WORK, 10, max_tokens, words)
    assert (rendered(got), left_out) == (lines, dropped)
    if max_tokens is not None and max_tokens >= 15:
        assert cost(got) <= max_tokens


def test_without_a_token_counter_the_token_bound_is_not_applied():
    assert rendered(bound_trail(WORK, 10, 1, None)[0]) == EVERY


HOT = [*WORK[:3], E("lib/x.py", ("read",), 3, 3.0), *WORK[4:]]


@pytest.mark.parametrize(
    "max_tokens, lines",
    [
        (30, EVERY),
        (20, SHARED),  # with its own line, lib/x.py would make it 24
        # lib/x.py's line costs 4 tokens: it keeps it while 4 <= WORK_SHARE * max_tokens
        (8, ["$ make (exit 0)", "lib/x.py (read)", "./ (2 changed files, 2 other files)"]),
        (7, ALL_COUNTED),
    ],
)
def test_a_file_worked_on_keeps_its_line_in_its_share_when_folders_are_counted(max_tokens, lines):
    assert rendered(bound_trail(HOT, 10, max_tokens, words)[0]) == lines


@pytest.mark.parametrize(
    "limit, lines",
    [
        (6, EVERY[:6]),
        (
            5,
            [
                "$ make (exit 0)",
                "src/a.py (edited)",
                "src/b.py (edited)",
                "lib/x.py (read)",
                "./ (2 files: lib/y.py, docs/r.md)",
            ],
        ),
        (4, TOP),
    ],
)
def test_a_file_worked_on_keeps_its_line_when_reads_are_grouped(limit, lines):
    assert rendered(bound_trail(HOT, limit)[0]) == lines


def test_the_own_share_stops_at_the_first_file_past_it():
    hot = [E("a/one.py", ("read",), 2, 5.0), E("b/two three.py", ("read",), 2, 4.0), E("c.py", ("read",), 2, 3.0)]
    size = lambda lines: sum(words(line.render()) + 2 for line in lines)  # noqa: E731
    assert [e.key for e in _own_share(hot, 4, size)] == ["a/one.py"]
    assert [e.key for e in _own_share(hot, 8, size)] == ["a/one.py"]  # two.py's 5 more make 9: it stops there
    assert [e.key for e in _own_share(hot, 9, size)] == ["a/one.py", "b/two three.py"]
    assert [e.key for e in _own_share(hot, 3, size)] == []
    assert WORK_SHARE == 0.5


def test_a_count_carried_from_an_earlier_summary_joins_its_folders_count():
    carried = [*WORK[:6], E("lib/", (), 0, 0.0, 40, 2)]
    got, _ = bound_trail(carried, 10, 30, words)
    assert rendered(got) == [  # the carried count keeps its line while the files are named
        "$ make (exit 0)",
        "lib/ (40 changed files, 2 other files)",
        "./ (5 files, the first 2 changed: src/a.py, src/b.py, lib/x.py, lib/y.py, docs/r.md)",
    ]
    got, _ = bound_trail(carried, 10, 28, words)
    assert rendered(got) == [
        "$ make (exit 0)",
        "src/ (2 changed files)",
        "lib/ (40 changed files, 4 other files)",  # the 40 and 2 carried, lib/x.py and lib/y.py
        "docs/ (1 other files)",
    ]
    got, _ = bound_trail(carried, 10, 20, words)
    assert rendered(got) == ["$ make (exit 0)", "./ (42 changed files, 5 other files)"]
