"""The working-set measure: which reads an edit needs in view, a file's latest read or every page of it."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from benchmarks.measures.working_set import paged_edits


def _turns(*calls: tuple[str, dict]) -> list[tuple[list, AIMessage]]:
    """Return the turns of ``calls`` in order, each answered at the start of the next turn."""
    turns = []
    for n, (name, args) in enumerate(calls):
        pending = [ToolMessage(f"result {n - 1}", tool_call_id=f"c{n - 1}", id=f"t{n - 1}")] if n else []
        turns.append((pending, AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{n}"}], id=f"a{n}")))
    return turns


def _pages(turns) -> list[tuple[int, list[str]]]:
    return [(call, [m.id for m in shown]) for call, shown in paged_edits(turns)]


def test_an_edit_needs_every_page_read_and_not_a_diff_or_a_count():
    turns = _turns(
        ("read_file", {"absolute_path": "/p/a.ts", "offset": 0, "limit": 200}),
        ("read_file", {"absolute_path": "/p/a.ts", "offset": 200, "limit": 200}),
        ("shell", {"command": ["bash", "-lc", "git diff -- /p/a.ts && wc -l /p/a.ts"]}),
        ("replace", {"file_path": "/p/a.ts", "old_string": "a", "new_string": "b"}),
    )
    assert _pages(turns) == [(3, ["t0", "t1"])]


def test_a_read_that_shows_the_lines_again_replaces_the_pages_it_covers():
    turns = _turns(
        ("Read", {"file_path": "a.py", "offset": 1, "limit": 10}),
        ("Read", {"file_path": "a.py", "offset": 11, "limit": 10}),
        ("shell", {"command": "sed -n '1,15p' a.py"}),
        ("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}),
        ("Read", {"file_path": "a.py"}),
        ("Edit", {"file_path": "a.py", "old_string": "b", "new_string": "c"}),
        ("shell", {"command": "rm a.py"}),
        ("Write", {"file_path": "a.py", "content": "new"}),
    )
    # lines 1-15 replace the page 1-10 only; the whole file replaces both; a deleted file has no read
    assert _pages(turns) == [(3, ["t1", "t2"]), (5, ["t4"])]


def test_a_page_whose_lines_later_reads_show_again_together_is_not_needed():
    turns = _turns(
        ("Read", {"file_path": "a.py", "offset": 1, "limit": 10}),
        ("Read", {"file_path": "a.py", "offset": 5, "limit": 16}),
        ("shell", {"command": "sed -n '1,6p' a.py"}),
        ("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}),
    )
    # lines 1-10: 5-20 and then 1-6 showed them again, neither alone
    assert _pages(turns) == [(3, ["t1", "t2"])]
