"""The working set, table by table: each function of ``core.working_set`` pinned to its exact output.

Pure functions on hand-made messages: no graph, no model, no I/O.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_compaction.core.conversation import ToolRound, tool_rounds
from langgraph_compaction.core.working_set import (
    NAMED_LEFT_OUT,
    WorkingFile,
    _by_path,
    _in_view,
    _latest_reads_first,
    _round_keepable,
    keep_working_set,
    shown_again,
    working_set,
    working_set_note,
)

STALE_WORD = "stale: changed since this read"
IN_CONTEXT = "Working set: the latest read of each of these files is still in context: "
GONE = (
    "Files read earlier whose latest read this summary replaced (newest first): read the file again, "
    "or recall(message_ids=[...]) with the id shown to get that read back"
)
GONE_STALE = GONE + " (it is stale: the file changed since)"


# --- building messages ----------------------------------------------------------------------------------------------


def call(call_id: str, name: str, args: dict) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}], id=f"a-{call_id}")


def result(call_id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, id=f"t-{call_id}")


def tool(call_id: str, name: str, args: dict) -> list:
    """Return one answered round: the call and its result."""
    return [call(call_id, name, args), result(call_id)]


def read(call_id: str, path: str, lines: tuple[int, int] | None = None) -> list:
    """Return a ``Read`` of the whole file, or of the lines ``(first, last)``."""
    args: dict = {"file_path": path}
    if lines is not None:
        args |= {"offset": lines[0], "limit": lines[1] - lines[0] + 1}
    return tool(call_id, "Read", args)


def edit(call_id: str, path: str) -> list:
    return tool(call_id, "Edit", {"file_path": path, "old_string": "1", "new_string": "2"})


def write(call_id: str, path: str) -> list:
    return tool(call_id, "Write", {"file_path": path, "content": "x = 1"})


def shell(call_id: str, command: str) -> list:
    return tool(call_id, "Bash", {"command": command})


def parallel(call_id: str, calls: list[tuple[str, str, dict]], answered: list[str]) -> list:
    """Return one assistant message with several calls, then the results of ``answered`` in that order."""
    message = AIMessage(
        "", tool_calls=[{"name": name, "args": args, "id": i} for i, name, args in calls], id=f"a-{call_id}"
    )
    return [message, *(result(i) for i in answered)]


def seen(files: list[WorkingFile]) -> list[tuple]:
    """Return each file as (path, lines, read, touched, read round's call, edit rounds' calls)."""
    return [
        (f.path, f.lines, f.read, f.touched, f.read_round.call_index, tuple(e.call_index for e in f.edits))
        for f in files
    ]


def wf(path: str, read_at: int, lines=None, *, stale: bool = False, touched: int = 0) -> WorkingFile:
    """Return a working file read by the round (read_at - 1, result read_at), with one edit round when stale."""
    r = ToolRound(read_at - 1, (read_at,), (f"c{read_at}",))
    edits = (ToolRound(read_at + 1, (read_at + 2,), ("e",)),) if stale else ()
    return WorkingFile(path, read_at, r, edits, touched or read_at - 1, lines)


# --- WorkingFile ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "shown"),
    [
        (None, ""),
        ((1, 120), "lines 1-120"),
        ((121, 240), "lines 121-240"),
        ((7, 7), "lines 7-7"),
        ((241, None), "lines 241-end"),
        ((1, None), "lines 1-end"),
    ],
)
def test_a_read_names_the_lines_it_shows_and_nothing_for_the_whole_file(lines, shown):
    assert wf("x.py", 2, lines).shown == shown


@pytest.mark.parametrize(("edits", "stale"), [(0, False), (1, True), (2, True)])
def test_a_read_is_stale_exactly_when_an_edit_came_after_it(edits, stale):
    rounds = tuple(ToolRound(10 + 2 * n, (11 + 2 * n,), (f"e{n}",)) for n in range(edits))
    f = WorkingFile("a.py", 2, ToolRound(1, (2,), ("r",)), rounds, 1)
    assert f.stale is stale


@pytest.mark.parametrize(
    ("call_index", "results", "indices"),
    [
        (1, (2,), [1, 2]),
        (3, (5, 4), [3, 4, 5]),
        (3, (4, 6, 5), [3, 4, 5, 6]),
        (7, (), [7]),
        (2, (3, 3), [2, 3]),
    ],
)
def test_the_messages_of_a_read_are_its_call_and_results_sorted_once_each(call_index, results, indices):
    f = WorkingFile("a.py", results[0] if results else call_index, ToolRound(call_index, results, ("c",)))
    assert f.indices() == indices


def test_a_working_file_defaults_to_no_edits_touched_zero_and_the_whole_file():
    f = WorkingFile("a.py", 2, ToolRound(1, (2,), ("r",)))
    assert (f.edits, f.touched, f.lines, f.shown, f.stale) == ((), 0, None, "", False)


# --- _covers --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outer", "inner", "covers"),
    [
        # the whole file shows everything; a page never shows the whole file, a read from line 1 to the end does
        (None, None, True),
        (None, (1, 10), True),
        (None, (5, None), True),
        ((1, None), None, True),
        ((2, None), None, False),
        ((1, 10), None, False),
        # pages with both ends
        ((1, 10), (1, 10), True),
        ((1, 10), (2, 10), True),
        ((1, 10), (1, 9), True),
        ((1, 10), (3, 7), True),
        ((2, 10), (1, 10), False),
        ((1, 10), (1, 11), False),
        ((2, 9), (1, 10), False),
        ((5, 5), (5, 5), True),
        ((5, 5), (5, 6), False),
        ((5, 5), (4, 5), False),
        ((1, 10), (11, 20), False),
        ((11, 20), (1, 10), False),
        # to the end of the file
        ((1, None), (1, None), True),
        ((1, None), (3, None), True),
        ((3, None), (3, None), True),
        ((3, None), (2, None), False),
        ((1, None), (1, 99), True),
        ((3, None), (3, 4), True),
        ((4, None), (3, 99), False),
        ((1, 10), (1, None), False),
        ((1, 99), (5, None), False),
    ],
)
def test_a_read_covers_another_when_its_lines_include_them(outer, inner, covers):
    assert shown_again(inner, [outer]) is covers


@pytest.mark.parametrize(
    ("later", "lines", "shown"),
    [
        ([(5, 20), (1, 6)], (1, 10), True),  # overlapping
        ([(1, 5), (6, 10)], (1, 10), True),  # adjacent
        ([(1, 5), (7, 10)], (1, 10), False),  # line 6 not shown again
        ([(6, None), (1, 5)], None, True),  # together from line 1 to the end: the whole file
        ([(2, None), (3, 9)], None, False),
        ([(1, 4), (3, 8), (8, 12)], (2, 11), True),
        ([], (1, 10), False),
    ],
)
def test_reads_together_show_a_page_again_when_their_lines_include_it(later, lines, shown):
    assert shown_again(lines, later) is shown


# --- working_set ----------------------------------------------------------------------------------------------------


def test_no_tool_call_no_read_no_working_set():
    assert working_set([]) == []
    assert working_set([HumanMessage("hi", id="h"), AIMessage("hello", id="a")]) == []
    assert working_set([HumanMessage("go", id="h"), *shell("p", "pytest -q")]) == []


def test_files_come_newest_touched_first_with_the_index_of_their_result_and_call():
    messages = [HumanMessage("go", id="h"), *read("r1", "a.py"), *read("r2", "b.py"), *read("r3", "c.py")]
    assert seen(working_set(messages)) == [
        ("c.py", None, 6, 5, 5, ()),
        ("b.py", None, 4, 3, 3, ()),
        ("a.py", None, 2, 1, 1, ()),
    ]


def test_a_read_again_replaces_the_earlier_read_and_moves_the_file_to_the_front():
    messages = [HumanMessage("go", id="h"), *read("r1", "a.py"), *read("r2", "b.py"), *read("r3", "./a.py")]
    assert seen(working_set(messages)) == [("a.py", None, 6, 5, 5, ()), ("b.py", None, 4, 3, 3, ())]


def test_the_same_page_read_again_replaces_the_earlier_one():
    messages = [*read("r1", "x.py", (1, 10)), *read("r2", "y.py"), *read("r3", "x.py", (1, 10))]
    assert seen(working_set(messages)) == [("x.py", (1, 10), 5, 4, 4, ()), ("y.py", None, 3, 2, 2, ())]


@pytest.mark.parametrize(
    ("first", "then", "left"),
    [
        # a read that shows the earlier lines replaces them
        ((1, 10), None, [None]),
        ((1, 10), (1, 20), [(1, 20)]),
        ((5, 10), (1, 10), [(1, 10)]),
        ((5, 10), (5, None), [(5, None)]),
        # a narrower or other read does not: both stay, the newest first
        (None, (1, 10), [(1, 10), None]),
        ((1, 20), (5, 10), [(5, 10), (1, 20)]),
        ((1, 10), (11, 20), [(11, 20), (1, 10)]),
        ((1, 10), (2, 20), [(2, 20), (1, 10)]),
        ((5, None), (1, 10), [(1, 10), (5, None)]),
        ((1, 10), (1, 9), [(1, 9), (1, 10)]),
    ],
)
def test_a_read_replaces_the_earlier_reads_it_covers_and_no_others(first, then, left):
    messages = [HumanMessage("go", id="h")]
    messages += read("r1", "x.py", first) if first is None or first[1] is not None else _read_to_end("r1", first[0])
    messages += read("r2", "x.py", then) if then is None or then[1] is not None else _read_to_end("r2", then[0])
    assert [f.lines for f in working_set(messages)] == left


def _read_to_end(call_id: str, first: int) -> list:
    return tool(call_id, "Read", {"file_path": "x.py", "offset": first})


def test_a_read_of_one_file_leaves_the_reads_of_the_others():
    messages = [*read("r1", "a.py", (1, 10)), *read("r2", "b.py"), *read("r3", "ab.py")]
    assert [(f.path, f.lines) for f in working_set(messages)] == [("ab.py", None), ("b.py", None), ("a.py", (1, 10))]


def test_the_whole_file_read_after_its_pages_takes_their_place():
    messages = [*read("r1", "x.py", (1, 10)), *read("r2", "x.py", (11, 20)), *read("r3", "x.py")]
    assert seen(working_set(messages)) == [("x.py", None, 5, 4, 4, ())]


def test_sed_pages_are_read_as_lines_from_the_shell():
    messages = [*shell("s1", "sed -n '1,40p' x.py"), *shell("s2", "sed -n '41,$p' x.py")]
    assert [(f.path, f.lines, f.shown) for f in working_set(messages)] == [
        ("x.py", (41, None), "lines 41-end"),
        ("x.py", (1, 40), "lines 1-40"),
    ]


@pytest.mark.parametrize(
    "command",
    [
        "git diff -- x.py",
        "git log --oneline -- x.py",
        "wc -l x.py",
        "stat x.py",
        "diff x.py y.py",
        "git show HEAD --stat",
    ],
)
def test_a_command_that_shows_no_text_of_the_file_is_no_read_of_it(command):
    # a count, a diff or a log is not the file: the page read before stays the file's read
    messages = [*read("r1", "x.py", (1, 10)), *shell("s1", command)]
    assert seen(working_set(messages)) == [("x.py", (1, 10), 1, 0, 0, ())]


def test_a_file_at_a_revision_is_a_read_of_its_text():
    messages = [*shell("s1", "git show HEAD~1:x.py"), *shell("s2", "git blame -L 1,5 y.py")]
    assert [(f.path, f.read) for f in working_set(messages)] == [("y.py", 3), ("x.py", 1)]


@pytest.mark.parametrize("change", [edit, write])
def test_an_edit_or_write_after_a_read_makes_every_read_of_the_file_stale_and_touches_it(change):
    messages = [
        HumanMessage("go", id="h"),
        *read("r1", "a.py", (1, 10)),
        *read("r2", "a.py", (11, 20)),
        *read("r3", "b.py"),
        *change("e1", "./a.py"),
    ]
    files = working_set(messages)
    assert seen(files) == [
        ("a.py", (11, 20), 4, 7, 3, (7,)),
        ("a.py", (1, 10), 2, 7, 1, (7,)),
        ("b.py", None, 6, 5, 5, ()),
    ]
    assert [f.stale for f in files] == [True, True, False]


def test_edits_since_a_read_are_kept_oldest_first_and_a_read_again_clears_them():
    messages = [*read("r1", "a.py"), *edit("e1", "a.py"), *read("r2", "b.py"), *write("e2", "a.py")]
    assert seen(working_set(messages)) == [("a.py", None, 1, 6, 0, (2, 6)), ("b.py", None, 5, 4, 4, ())]
    messages += read("r3", "a.py")
    assert seen(working_set(messages)) == [("a.py", None, 9, 8, 8, ()), ("b.py", None, 5, 4, 4, ())]


def test_two_changes_of_a_file_in_one_round_count_as_one_edit():
    messages = [
        *read("r1", "a.py"),
        *parallel(
            "e",
            [
                ("e1", "Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"}),
                ("e2", "Write", {"file_path": "a.py", "content": "x"}),
            ],
            ["e1", "e2"],
        ),
    ]
    assert seen(working_set(messages)) == [("a.py", None, 1, 2, 0, (2,))]


def test_an_edit_before_the_read_in_the_same_round_leaves_the_read_fresh():
    messages = [
        *read("r0", "a.py"),
        *parallel(
            "er",
            [
                ("e1", "Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"}),
                ("r1", "Read", {"file_path": "a.py"}),
            ],
            ["e1", "r1"],
        ),
    ]
    assert seen(working_set(messages)) == [("a.py", None, 4, 2, 2, ())]


@pytest.mark.parametrize(
    "round_",
    [
        [
            ("r1", "Read", {"file_path": "a.py"}),
            ("e1", "Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"}),
        ],
        [("r1", "Bash", {"command": "sed -n '1,5p' a.py && sed -i s/x/y/ a.py"})],
    ],
    ids=["parallel calls", "one shell line"],
)
def test_a_read_then_an_edit_in_the_same_round_leaves_the_read_stale(round_):
    messages = [HumanMessage("fix a.py", id="h"), *parallel("re", round_, [c[0] for c in round_])]
    (found,) = working_set(messages)
    assert (found.path, found.stale, [e.call_index for e in found.edits]) == ("a.py", True, [1])


def test_a_change_to_a_file_never_read_adds_nothing():
    messages = [*edit("e1", "a.py"), *write("w1", "b.py"), *read("r1", "c.py"), *edit("e2", "d.py")]
    assert seen(working_set(messages)) == [("c.py", None, 5, 4, 4, ())]


@pytest.mark.parametrize(
    ("command", "left"),
    [
        ("rm a.py", ["b.py"]),
        ("rm -f ./a.py", ["b.py"]),
        ("mv a.py c.py", ["b.py"]),
        ("mv b.py a.py", []),
        ("rm b.py", ["a.py"]),
        ("rm c.py", ["b.py", "a.py"]),
    ],
)
def test_a_deleted_or_moved_file_leaves_the_working_set_with_all_its_pages(command, left):
    messages = [*read("r1", "a.py", (1, 10)), *read("r2", "a.py", (11, 20)), *read("r3", "b.py"), *shell("x", command)]
    assert [f.path for f in working_set(messages) if f.path != "a.py" or f.lines == (11, 20)] == left
    assert sum(f.path == "a.py" for f in working_set(messages)) == (2 if "a.py" in left else 0)


def test_a_read_without_a_result_is_ignored():
    messages = [HumanMessage("go", id="h"), call("r1", "Read", {"file_path": "a.py"})]
    assert working_set(messages) == []
    messages += [result("other")]
    assert working_set(messages) == []


def test_a_read_without_a_result_does_not_replace_the_earlier_read():
    messages = [*read("r1", "a.py"), call("r2", "Read", {"file_path": "a.py"})]
    assert seen(working_set(messages)) == [("a.py", None, 1, 0, 0, ())]


def test_each_read_of_a_round_points_at_its_own_result_whatever_their_order():
    messages = [
        HumanMessage("go", id="h"),
        *parallel(
            "rr",
            [("ra", "Read", {"file_path": "a.py"}), ("rb", "Read", {"file_path": "b.py"})],
            ["rb", "ra"],
        ),
    ]
    files = working_set(messages)
    assert seen(files) == [("b.py", None, 2, 1, 1, ()), ("a.py", None, 3, 1, 1, ())]
    assert [messages[f.read].id for f in files] == ["t-rb", "t-ra"]
    assert [f.read_round.result_indices for f in files] == [(2, 3), (2, 3)]


def test_a_read_of_a_round_with_one_call_unanswered_still_counts_for_the_answered_one():
    messages = parallel("rr", [("ra", "Read", {"file_path": "a.py"}), ("rb", "Read", {"file_path": "b.py"})], ["rb"])
    assert seen(working_set(messages)) == [("b.py", None, 1, 0, 0, ())]


def test_one_shell_read_of_two_files_gives_both_the_same_result():
    messages = [*shell("c", "cat a.py b.py")]
    assert seen(working_set(messages)) == [("b.py", None, 1, 0, 0, ()), ("a.py", None, 1, 0, 0, ())]


def test_a_copy_by_redirection_reads_the_source_and_makes_the_destination_stale_touched_last():
    messages = [*read("r1", "b.py"), *shell("c", "cat a.py > b.py")]
    assert seen(working_set(messages)) == [("b.py", None, 1, 2, 0, (2,)), ("a.py", None, 3, 2, 2, ())]


# --- _round_keepable ------------------------------------------------------------------------------------------------


THINKING = [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "go"}]


def _keepable(messages, humans=frozenset(), thinking=False, at=None) -> bool:
    rounds = {r.call_index: r for r in tool_rounds(messages)}
    r = rounds[at] if at is not None else next(iter(rounds.values()))
    return _round_keepable(messages, r, set(humans), thinking)


@pytest.mark.parametrize(
    ("messages", "keepable"),
    [
        # one call answered right after it
        ([HumanMessage("go", id="h"), *read("r1", "a.py")], True),
        # two calls, both answered right after, in any order
        (
            parallel(
                "rr", [("ra", "Read", {"file_path": "a.py"}), ("rb", "Read", {"file_path": "b.py"})], ["rb", "ra"]
            ),
            True,
        ),
        # two calls, one answered
        (parallel("rr", [("ra", "Read", {"file_path": "a.py"}), ("rb", "Read", {"file_path": "b.py"})], ["ra"]), False),
        # a message between the call and its result
        ([call("r1", "Read", {"file_path": "a.py"}), HumanMessage("wait", id="h"), result("r1")], False),
        (
            [
                *parallel("rr", [("ra", "Read", {"file_path": "a.py"}), ("rb", "Read", {"file_path": "b.py"})], ["ra"]),
                SystemMessage("note", id="s"),
                result("rb"),
            ],
            False,
        ),
    ],
)
def test_a_round_stays_alone_only_when_every_call_is_answered_right_after_it(messages, keepable):
    assert _keepable(messages) is keepable


def test_a_round_is_judged_by_its_own_indices_not_the_first_round():
    messages = [HumanMessage("go", id="h"), *read("r1", "a.py"), *read("r2", "b.py")]
    assert _keepable(messages, at=3) is True
    assert _round_keepable(messages, ToolRound(3, (4,), ("r2",)), set(), False) is True
    assert _round_keepable(messages, ToolRound(3, (5,), ("r2",)), set(), False) is False
    assert _round_keepable(messages, ToolRound(3, (4, 5), ("r2",)), set(), False) is False
    assert _round_keepable(messages, ToolRound(3, (4, 5), ("r2", "x")), set(), False) is True
    assert _round_keepable(messages, ToolRound(3, (), ()), set(), False) is True


@pytest.mark.parametrize(
    ("opens_thinking", "humans", "thinking", "keepable"),
    [
        # without extended thinking no turn rule applies
        (False, set(), False, True),
        (False, {0}, False, True),
        # under extended thinking: a round that opens thinking, or one before a human message that stays
        (True, set(), True, True),
        (False, {5}, True, True),
        (False, {2}, True, True),
        (False, {0, 5}, True, True),
        (False, set(), True, False),
        (False, {0}, True, False),
        (False, {1}, True, False),  # a human at the call's own index is not after it
    ],
)
def test_under_thinking_a_round_stays_alone_only_when_it_opens_thinking_or_a_human_follows(
    opens_thinking, humans, thinking, keepable
):
    first = AIMessage(
        THINKING if opens_thinking else "",
        tool_calls=[{"name": "Read", "args": {"file_path": "a.py"}, "id": "r1"}],
        id="a-r1",
    )
    messages = [HumanMessage("go", id="h"), first, result("r1"), HumanMessage("next", id="h2")]
    assert _keepable(messages, humans=humans, thinking=thinking) is keepable


# --- _latest_reads_first --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "order"),
    [
        ([], []),
        ([("a", 2)], [("a", 2)]),
        ([("a", 4), ("b", 2)], [("a", 4), ("b", 2)]),
        # pages: the latest read of each file first, in the given order, then the other pages in the given order
        ([("x", 6), ("x", 4), ("y", 8), ("x", 2)], [("x", 6), ("y", 8), ("x", 4), ("x", 2)]),
        ([("x", 2), ("y", 5), ("x", 4)], [("y", 5), ("x", 4), ("x", 2)]),
        ([("x", 2), ("x", 6), ("y", 5), ("x", 4)], [("x", 6), ("y", 5), ("x", 2), ("x", 4)]),
        ([("x", 2), ("y", 3), ("y", 9), ("x", 8)], [("y", 9), ("x", 8), ("x", 2), ("y", 3)]),
    ],
)
def test_each_files_latest_read_comes_first_then_its_other_pages(files, order):
    given = [wf(path, at, (at, at + 1)) for path, at in files]
    assert [(f.path, f.read) for f in _latest_reads_first(given)] == order


def test_of_two_reads_at_the_same_index_the_first_listed_is_the_latest():
    a, b = wf("x", 4, (1, 2)), wf("x", 4, (3, 4))
    assert [f.lines for f in _latest_reads_first([a, b])] == [(1, 2), (3, 4)]
    assert [f.lines for f in _latest_reads_first([b, a])] == [(3, 4), (1, 2)]


# --- keep_working_set -----------------------------------------------------------------------------------------------


def _three_files() -> tuple[list, list[int]]:
    """Return reads of a.py, b.py, c.py (the messages 1-2, 3-4, 5-6) costing 10+20, 5+15, 1+9 tokens, and a request."""
    messages = [
        HumanMessage("go", id="h"),
        *read("r1", "a.py"),
        *read("r2", "b.py"),
        *read("r3", "c.py"),
        HumanMessage("next", id="h2"),
    ]
    return messages, [100, 10, 20, 5, 15, 1, 9, 100]


@pytest.mark.parametrize(
    ("budget", "kept"),
    [
        # newest first: c (10), b (20), a (30)
        (60, {1, 2, 3, 4, 5, 6}),
        (61, {1, 2, 3, 4, 5, 6}),
        (59, {3, 4, 5, 6}),  # a does not fit after c and b
        (30, {3, 4, 5, 6}),
        (29, {5, 6}),  # b does not fit after c, nor a
        (10, {5, 6}),
        (9, set()),
        (0, set()),
    ],
)
def test_the_newest_files_are_kept_while_their_reads_fit_the_budget_exactly(budget, kept):
    messages, counts = _three_files()
    assert keep_working_set(messages, counts, budget) == frozenset(kept)
    assert keep_working_set(messages, counts, budget, evict=list(range(8))) == frozenset(kept)


@pytest.mark.parametrize(
    ("counts", "budget", "kept"),
    [
        # c does not fit: neither do the older b and a, though they would
        ([0, 10, 10, 10, 10, 50, 50, 0], 40, set()),
        ([0, 10, 10, 10, 10, 50, 50, 0], 100, {5, 6}),
        # c fits, b does not: a does not come in after it
        ([0, 10, 10, 30, 30, 5, 5, 0], 30, {5, 6}),
        ([0, 10, 10, 30, 30, 5, 5, 0], 80, {3, 4, 5, 6}),
        # a free read (no tokens) always fits
        ([0, 0, 0, 30, 30, 5, 5, 0], 10, {1, 2, 5, 6}),
        ([0, 0, 0, 30, 30, 5, 5, 0], 0, {1, 2}),
    ],
)
def test_no_older_file_comes_in_after_a_newer_one_that_does_not_fit(counts, budget, kept):
    messages, _ = _three_files()
    assert keep_working_set(messages, counts, budget) == frozenset(kept)
    assert keep_working_set(messages, counts, budget, evict=list(range(8))) == frozenset(kept)


def test_the_other_pages_of_a_file_whose_latest_read_is_left_out_are_left_out_too():
    messages = [*read("r1", "x.py", (1, 10)), *read("r2", "x.py", (11, 20)), *read("r3", "y.py")]
    counts = [5, 5, 5, 20, 5, 5]
    # y (10) fits, x's latest read (11-20: 25) does not; its page 1-10 (10) would, but an edit of x needs both
    assert keep_working_set(messages, counts, 25) == frozenset({4, 5})
    assert keep_working_set(messages, counts, 35) == frozenset({2, 3, 4, 5})
    assert keep_working_set(messages, counts, 45) == frozenset(range(6))


@pytest.mark.parametrize(
    ("evict", "budget", "kept"),
    [
        # c's read is in the tail (not evicted): it costs nothing and is not returned
        ([0, 1, 2, 3, 4], 50, {1, 2, 3, 4}),
        ([0, 1, 2, 3, 4], 49, {3, 4}),
        ([0, 1, 2, 3, 4], 20, {3, 4}),
        ([0, 1, 2, 3, 4], 19, set()),
        # only c's call is evicted: its result is in the tail
        ([0, 1, 2, 3, 4, 5], 21, {3, 4, 5}),
        ([0, 1, 2, 3, 4, 5], 20, {5}),
        ([0, 1, 2, 3, 4, 5], 0, set()),
        # nothing evicted: nothing to keep
        ([], 1000, set()),
    ],
)
def test_reads_outside_the_evicted_messages_cost_nothing_and_are_not_returned(evict, budget, kept):
    messages, counts = _three_files()
    counts = [0, 15, 15, 10, 10, 1, 100, 0]
    assert keep_working_set(messages, counts, budget, evict) == frozenset(kept)


def test_a_read_shared_by_two_files_is_counted_once():
    # c.py read alone, then a.py and b.py by one shell call: the shell read counts once for both
    messages = [*read("r1", "c.py"), *shell("cat", "cat a.py b.py")]
    counts = [10, 10, 10, 10]
    assert keep_working_set(messages, counts, 40) == frozenset({0, 1, 2, 3})
    assert keep_working_set(messages, counts, 39) == frozenset({2, 3})


def test_the_budget_is_used_up_by_every_read_kept_not_only_the_last():
    messages, _ = _three_files()
    counts = [0, 5, 5, 5, 5, 5, 5, 0]
    assert keep_working_set(messages, counts, 25) == frozenset({3, 4, 5, 6})
    assert keep_working_set(messages, counts, 30) == frozenset({1, 2, 3, 4, 5, 6})


def test_the_latest_read_of_each_file_is_kept_before_the_earlier_pages_of_another():
    messages = [
        *read("r1", "x.py", (1, 10)),
        *read("r2", "x.py", (11, 20)),
        *read("r3", "y.py"),
        *edit("e1", "x.py"),
    ]
    counts = [5, 5, 5, 5, 5, 5, 1, 1]
    # newest touched: x 11-20, x 1-10 (both edited last), then y; latest first: x 11-20, y, then x 1-10
    assert keep_working_set(messages, counts, 20) == frozenset({2, 3, 4, 5})
    assert keep_working_set(messages, counts, 19) == frozenset({2, 3})
    assert keep_working_set(messages, counts, 30) == frozenset({0, 1, 2, 3, 4, 5})


def _interleaved() -> tuple[list, list[int]]:
    """Return a read of a.py whose result comes after another message (1-3), then a read of b.py (4-5)."""
    messages = [
        HumanMessage("go", id="h"),
        call("r1", "Read", {"file_path": "a.py"}),
        HumanMessage("and b", id="h2"),
        result("r1"),
        *read("r2", "b.py"),
        HumanMessage("next", id="h3"),
    ]
    return messages, [1] * len(messages)


def test_a_read_that_cannot_stay_alone_is_skipped_only_when_the_order_is_checked():
    messages, counts = _interleaved()
    assert keep_working_set(messages, counts, 100) == frozenset({1, 3, 4, 5})  # evict None: no order checked
    assert keep_working_set(messages, counts, 100, list(range(7))) == frozenset({4, 5})
    assert keep_working_set(messages, counts, 100, [0, 1, 2, 3, 4, 5]) == frozenset({4, 5})
    # skipped, it costs nothing: the budget of one read is enough for the other
    assert keep_working_set(messages, counts, 2, list(range(7))) == frozenset({4, 5})


def test_an_older_read_still_comes_in_after_a_newer_one_that_cannot_stay_alone():
    messages = [
        HumanMessage("go", id="h"),
        *read("r1", "a.py"),
        call("r2", "Read", {"file_path": "b.py"}),
        HumanMessage("and c", id="h2"),
        result("r2"),
        HumanMessage("next", id="h3"),
    ]
    counts = [1] * len(messages)
    assert [f.path for f in working_set(messages)] == ["b.py", "a.py"]
    assert keep_working_set(messages, counts, 100, list(range(7))) == frozenset({1, 2})
    assert keep_working_set(messages, counts, 100) == frozenset({1, 2, 3, 5})


def test_an_unkeepable_read_left_in_the_tail_stays_without_a_check():
    messages, counts = _interleaved()
    # a.py's call and result are not evicted: nothing of it to keep, and nothing to check
    assert keep_working_set(messages, counts, 100, [0, 2, 4, 5]) == frozenset({4, 5})


def _thinking_session() -> list:
    return [
        HumanMessage("fix it", id="h"),
        AIMessage(THINKING, id="a0"),
        *read("r0", "a.py"),  # a later assistant message of the turn: no thinking
        HumanMessage("and now?", id="h2"),
    ]


@pytest.mark.parametrize(
    ("evict", "kept"),
    [
        (None, {2, 3}),  # no order checked
        ([0, 1, 2, 3], {2, 3}),  # the request after it stays
        ([0, 1, 2, 3, 4], set()),  # it would open the turn in progress without thinking
        ([1, 2, 3, 4], set()),  # the human message before it does not help
        ([2, 3, 4], set()),
    ],
)
def test_under_thinking_a_read_stays_only_when_a_kept_human_message_follows_it(evict, kept):
    messages = _thinking_session()
    assert keep_working_set(messages, [10] * 5, 1_000, evict) == frozenset(kept)


def test_a_read_that_opens_thinking_itself_may_stay_at_the_end():
    messages = [
        HumanMessage("fix it", id="h"),
        AIMessage(THINKING, tool_calls=[{"name": "Read", "args": {"file_path": "a.py"}, "id": "r0"}], id="a-r0"),
        result("r0"),
    ]
    assert keep_working_set(messages, [10] * 3, 1_000, [0, 1, 2]) == frozenset({1, 2})


def test_without_thinking_a_read_at_the_end_stays():
    messages = [HumanMessage("fix it", id="h"), *read("r0", "a.py")]
    assert keep_working_set(messages, [10] * 3, 1_000, [0, 1, 2]) == frozenset({1, 2})


def test_no_read_keeps_nothing():
    messages = [HumanMessage("go", id="h"), *shell("p", "pytest -q")]
    assert keep_working_set(messages, [5, 5, 5], 1_000) == frozenset()
    assert keep_working_set(messages, [5, 5, 5], 1_000, [0, 1, 2]) == frozenset()


# --- working_set_note -----------------------------------------------------------------------------------------------


def _session() -> list:
    """Return reads of a.py (result 2), x.py lines 1-10 (4) and 11-20 (6), b.py (8), then an edit of b.py."""
    return [
        HumanMessage("go", id="h"),
        *read("r1", "a.py"),
        *read("p1", "x.py", (1, 10)),
        *read("p2", "x.py", (11, 20)),
        *read("r2", "b.py"),
        *edit("e1", "b.py"),
    ]


@pytest.mark.parametrize(
    ("evict_ids", "note"),
    [
        (set(), IN_CONTEXT + f"b.py ({STALE_WORD}), x.py (lines 1-10, 11-20), a.py."),
        (
            {"t-r1"},
            IN_CONTEXT + f"b.py ({STALE_WORD}), x.py (lines 1-10, 11-20).\n" + GONE + ":\n- a.py (read in t-r1)",
        ),
        (
            {"t-p1", "a-p1", "h"},
            IN_CONTEXT
            + f"b.py ({STALE_WORD}), x.py (lines 11-20), a.py.\n"
            + GONE
            + ":\n- x.py lines 1-10 (read in t-p1)",
        ),
        (
            {"t-r2"},
            IN_CONTEXT + "x.py (lines 1-10, 11-20), a.py.\n" + GONE_STALE + ":\n- b.py (read in t-r2; changed since)",
        ),
        (
            {"t-r1", "t-p1", "t-p2", "t-r2"},
            GONE_STALE
            + ":\n- b.py (read in t-r2; changed since)\n- x.py lines 11-20 (read in t-p2)\n"
            + "- x.py lines 1-10 (read in t-p1)\n- a.py (read in t-r1)",
        ),
        # the ids of calls do not take a read: the result shows the file
        ({"a-r1", "a-p1", "a-p2", "a-r2"}, IN_CONTEXT + f"b.py ({STALE_WORD}), x.py (lines 1-10, 11-20), a.py."),
    ],
)
def test_the_note_names_the_files_in_context_and_those_the_summary_took(evict_ids, note):
    assert working_set_note(_session(), evict_ids) == note


def test_the_note_is_empty_when_no_file_was_read():
    assert working_set_note([], set()) == ""
    assert working_set_note([HumanMessage("go", id="h"), *shell("p", "pytest -q"), *edit("e", "a.py")], {"t-p"}) == ""


def test_a_page_read_to_the_end_is_named_so():
    messages = [*tool("r1", "Read", {"file_path": "x.py", "offset": 41}), *read("r2", "y.py")]
    assert (
        working_set_note(messages, {"t-r1"}) == IN_CONTEXT + "y.py.\n" + GONE + ":\n- x.py lines 41-end (read in t-r1)"
    )
    assert working_set_note(messages, set()) == IN_CONTEXT + "y.py, x.py (lines 41-end)."


def _many(n: int, stale: set[int] = frozenset()) -> list:
    """Return n files read (f0.py oldest), the ones in ``stale`` edited after all the reads."""
    messages: list = [HumanMessage("go", id="h")]
    for i in range(n):
        messages += read(f"r{i}", f"f{i}.py")
    for i in sorted(stale):
        messages += edit(f"e{i}", f"f{i}.py")
    return messages


def _gone_lines(n: int, stale: set[int] = frozenset()) -> list[str]:
    # newest touched first: the edited files (the last edited first), then the others, newest read first
    order = sorted(stale, reverse=True) + [i for i in range(n - 1, -1, -1) if i not in stale]
    return [f"- f{i}.py (read in t-r{i}{'; changed since' if i in stale else ''})" for i in order]


@pytest.mark.parametrize("n", [1, 2, NAMED_LEFT_OUT - 1, NAMED_LEFT_OUT])
def test_up_to_ten_files_left_out_are_all_named(n):
    messages = _many(n)
    note = working_set_note(messages, {f"t-r{i}" for i in range(n)})
    assert note == "\n".join([GONE + ":", *_gone_lines(n)])
    assert len(note.splitlines()) == n + 1


@pytest.mark.parametrize(("n", "more"), [(NAMED_LEFT_OUT + 1, 1), (NAMED_LEFT_OUT + 2, 2), (NAMED_LEFT_OUT + 15, 15)])
def test_past_ten_files_left_out_the_note_names_the_newest_ten_and_counts_the_others(n, more):
    messages = _many(n)
    note = working_set_note(messages, {f"t-r{i}" for i in range(n)})
    assert note == "\n".join(
        [GONE + ":", *_gone_lines(n)[:NAMED_LEFT_OUT], f"- ... and {more} more, named in ARTIFACTS"]
    )


def test_ten_is_the_number_of_files_left_out_a_summary_names():
    assert NAMED_LEFT_OUT == 10


def test_the_note_says_stale_only_when_a_named_file_changed_since_its_read():
    n = NAMED_LEFT_OUT + 1
    # f0.py, the oldest, edited before f1..f10 are read: it is the eleventh, not named
    messages = [HumanMessage("go", id="h"), *read("r0", "f0.py"), *edit("e0", "f0.py")]
    for i in range(1, n):
        messages += read(f"r{i}", f"f{i}.py")
    note = working_set_note(messages, {f"t-r{i}" for i in range(n)})
    assert note == "\n".join(
        [
            GONE + ":",
            *(f"- f{i}.py (read in t-r{i})" for i in range(n - 1, 0, -1)),
            "- ... and 1 more, named in ARTIFACTS",
        ]
    )
    # the tenth named is stale
    messages += edit("e1", "f1.py")
    note = working_set_note(messages, {f"t-r{i}" for i in range(n)})
    assert note.splitlines()[0] == GONE_STALE + ":"
    assert note.splitlines()[1:] == [
        "- f1.py (read in t-r1; changed since)",
        *(f"- f{i}.py (read in t-r{i})" for i in range(n - 1, 1, -1)),
        "- ... and 1 more, named in ARTIFACTS",
    ]


def test_stale_files_left_out_are_named_newest_touched_first():
    messages = _many(4, stale={0, 2})
    assert working_set_note(messages, {f"t-r{i}" for i in range(4)}) == "\n".join(
        [
            GONE_STALE + ":",
            "- f2.py (read in t-r2; changed since)",
            "- f0.py (read in t-r0; changed since)",
            "- f3.py (read in t-r3)",
            "- f1.py (read in t-r1)",
        ]
    )


def test_kept_and_left_out_files_each_have_their_line():
    messages = _many(3, stale={1})
    assert working_set_note(messages, {"t-r1"}) == (
        IN_CONTEXT + "f2.py, f0.py.\n" + GONE_STALE + ":\n- f1.py (read in t-r1; changed since)"
    )
    assert working_set_note(messages, {"t-r0", "t-r2"}) == (
        IN_CONTEXT + f"f1.py ({STALE_WORD}).\n" + GONE + ":\n- f2.py (read in t-r2)\n- f0.py (read in t-r0)"
    )


# --- _by_path and _in_view ------------------------------------------------------------------------------------------


def test_reads_are_grouped_by_file_in_the_order_each_file_first_comes():
    x1, y, x2, z, y2 = wf("x", 8, (11, 20)), wf("y", 6), wf("x", 4, (1, 10)), wf("z", 2), wf("y", 12, (1, 5))
    grouped = _by_path([x1, y, x2, z, y2])
    assert list(grouped) == ["x", "y", "z"]
    assert grouped == {"x": [x1, x2], "y": [y, y2], "z": [z]}
    assert _by_path([]) == {}


@pytest.mark.parametrize(
    ("reads", "named"),
    [
        # the whole file
        ([(None, False)], "x.py"),
        ([(None, True)], f"x.py ({STALE_WORD})"),
        # pages, sorted by their lines
        ([((1, 10), False)], "x.py (lines 1-10)"),
        ([((11, 20), False), ((1, 10), False)], "x.py (lines 1-10, 11-20)"),
        ([((241, None), False), ((121, 240), False), ((1, 120), False)], "x.py (lines 1-120, 121-240, 241-end)"),
        ([((5, 9), False), ((5, 6), False)], "x.py (lines 5-6, 5-9)"),
        ([((11, 20), True), ((1, 10), False)], f"x.py (lines 1-10, 11-20; {STALE_WORD})"),
        ([((1, 10), False), ((11, 20), True)], f"x.py (lines 1-10, 11-20; {STALE_WORD})"),
        # the whole file and pages: the path alone (the whole file is in view)
        ([((1, 10), False), (None, False)], "x.py"),
        ([(None, False), ((1, 10), False), ((11, 20), False)], "x.py"),
        ([((1, 10), True), (None, False)], f"x.py ({STALE_WORD})"),
        ([(None, True), ((1, 10), False)], f"x.py ({STALE_WORD})"),
    ],
)
def test_a_kept_file_is_named_with_the_lines_in_view_and_whether_it_is_stale(reads, named):
    files = [wf("x.py", 2 * n + 2, lines, stale=stale) for n, (lines, stale) in enumerate(reads)]
    assert _in_view("x.py", files) == named


def test_the_docstring_example_gives_a_stale_read_at_index_two():
    messages = [
        HumanMessage("fix a.py", id="h"),
        AIMessage("", tool_calls=[{"name": "Read", "args": {"file_path": "a.py"}, "id": "r1"}], id="a1"),
        ToolMessage("def f(): ...", tool_call_id="r1", id="t1"),
        *edit("e1", "a.py"),
    ]
    assert [(f.path, f.read, f.stale, f.touched) for f in working_set(messages)] == [("a.py", 2, True, 3)]
