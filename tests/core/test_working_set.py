"""The working set: the file the agent is editing is still in front of it after every compaction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.conversation import is_summary, text_of
from langgraph_compaction.core.plan import plan_compaction
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.core.validation import anthropic_violations, openai_violations
from langgraph_compaction.core.working_set import keep_working_set, working_set, working_set_note
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.ledger import read_in_view, working_set_edits

BODY = "".join(f"def handler_{i}(event):\n    return event['value'] * {i}\n" for i in range(40))


def _round(call_id: str, name: str, args: dict, result: str) -> list:
    return [
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}], id=f"a-{call_id}"),
        ToolMessage(result, tool_call_id=call_id, name=name, id=f"t-{call_id}"),
    ]


def test_reads_of_any_agents_tools_are_found_and_an_edit_since_makes_a_read_stale():
    messages = [
        HumanMessage("fix the handlers", id="h"),
        *_round("r1", "Read", {"file_path": "src/a.py"}, BODY),
        *_round("r2", "shell", {"command": "cat src/b.py"}, BODY),
        *_round("r3", "str_replace_editor", {"command": "view", "path": "src/c.py"}, BODY),
        *_round("r4", "mcp__filesystem__read_file", {"path": "./src/d.py"}, BODY),
        *_round("r5", "bash", {"command": "sed -n '1,40p' src/e.py"}, BODY),
        *_round("e1", "Edit", {"file_path": "src/a.py", "old_string": "1", "new_string": "2"}, "ok"),
        *_round("x1", "bash", {"command": "rm src/b.py"}, ""),
        *_round("w1", "Write", {"file_path": "src/new.py", "content": "x = 1"}, "ok"),  # written, never read
    ]
    files = working_set(messages)
    # newest touched first; the deleted file left; the written one was never read
    assert [f.path for f in files] == ["src/a.py", "src/e.py", "src/d.py", "src/c.py"]
    assert [f.stale for f in files] == [True, False, False, False]
    assert messages[files[0].read].id == "t-r1" and files[0].edits[0].call_index == 11


def _session(reads: int, filler_calls: int) -> list:
    """Return a session: ``reads`` files read (about 700 tokens each), then ``filler_calls`` test runs."""
    messages = [SystemMessage("You are a coding agent.", id="sys"), HumanMessage("fix the handlers", id="h")]
    for i in range(reads):
        messages += _round(f"r{i}", "Read", {"file_path": f"src/f{i}.py"}, BODY)
    for i in range(filler_calls):
        messages += _round(f"p{i}", "Bash", {"command": "pytest -q"}, "F" * 40 + "\n" + "log line\n" * 200)
    return messages


def _plan(messages, **settings):
    counter = TokenCounter()
    config = CompactionConfig(
        context_window=60_000,
        trigger_tokens=8_000,
        keep_tokens=1_000,
        trigger_messages=0,
        fidelity={"request_tokens": 500},
        **settings,
    )
    return plan_compaction(messages, counter.counts(messages), config.resolve(), config, counter.message), counter


def test_the_cut_keeps_the_latest_read_of_each_working_file_with_its_call_in_an_order_providers_accept():
    messages = _session(reads=2, filler_calls=20)
    plan, _ = _plan(messages, working_set_tokens=3_000)
    assert plan.summarize
    kept = [messages[i].id for i in plan.cut.working_set]
    assert kept == ["a-r0", "t-r0", "a-r1", "t-r1"]
    evicted = {messages[i].id for i in plan.cut.evict}
    assert not evicted & set(kept)
    view = [m for m in messages if m.id not in evicted]
    view.insert(1, HumanMessage("## SUMMARY\n...", id="s"))
    assert openai_violations(view) == [] and anthropic_violations(view) == []
    # off: the reads go with the summary
    off, _ = _plan(messages, working_set_tokens=0)
    assert off.cut.working_set == () and {"t-r0", "t-r1"} <= {messages[i].id for i in off.cut.evict}


def test_over_the_budget_the_most_recently_touched_files_win_and_the_summary_names_the_others():
    messages = _session(reads=3, filler_calls=20)
    counter = TokenCounter()
    one_read = sum(counter.counts(messages[2:4]))
    plan, _ = _plan(messages, working_set_tokens=one_read + 10)
    assert [messages[i].id for i in plan.cut.working_set] == ["a-r2", "t-r2"]  # the newest read
    note = working_set_note(messages, {messages[i].id for i in plan.cut.evict})
    assert "still in context: src/f2.py" in note
    assert "- src/f1.py (read in t-r1)" in note and "- src/f0.py (read in t-r0)" in note
    assert "recall(message_ids=" in note


def test_a_read_kept_alone_must_not_break_pairing_or_open_a_non_thinking_turn():
    thinking = AIMessage(
        [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "go"}], id="a0"
    )
    messages = [
        HumanMessage("fix it", id="h"),
        thinking,
        *_round("r0", "Read", {"file_path": "a.py"}, BODY),  # a later assistant message of the turn: no thinking
        HumanMessage("and now?", id="h2"),
    ]
    counts = [10] * len(messages)
    evict = [0, 1, 2, 3]
    # a kept request after it: the read is not in the turn in progress
    assert keep_working_set(messages, counts, 1_000, evict) == {2, 3}
    # nothing kept after it: it would open the turn in progress without thinking
    assert keep_working_set(messages[:4], counts[:4], 1_000, evict) == frozenset()


def test_layers_1_2_never_shorten_what_the_working_set_keeps():
    messages = _session(reads=1, filler_calls=2) + [HumanMessage("go on", id="h2")]
    messages[3] = messages[3].model_copy(update={"content": BODY * 8})  # a long read: layer 2 would prune it
    prune = {"protect_tokens": 0, "minimum_tokens": 0}
    pruned, _ = _plan(messages, working_set_tokens=0, prompt_cache=False, prune=prune)
    assert 3 in pruned.edits
    kept, _ = _plan(messages, working_set_tokens=20_000, prompt_cache=False, prune=prune)
    assert 3 not in kept.edits


@pytest.mark.parametrize("mode", ["rewrite", "view"])
def test_after_a_compaction_the_read_of_the_file_being_edited_follows_the_summary(mode):
    views: list[list] = []
    script = iter(
        [AIMessage("", tool_calls=[{"name": "Read", "args": {"file_path": "src/app.py"}, "id": "r0"}], id="a-r0")]
        + [
            AIMessage("", tool_calls=[{"name": "Bash", "args": {"command": "pytest -q"}, "id": f"p{i}"}], id=f"a-p{i}")
            for i in range(61)
        ]
    )

    def agent(state):
        views.append(list(state["messages"]))
        return {"messages": [next(script)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    config = CompactionConfig(
        context_window=60_000,
        trigger_tokens=8_000,
        keep_tokens=800,
        trigger_messages=0,
        working_set_tokens=2_000,
        mode=mode,
    )
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config)
    graph = builder.compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [HumanMessage("fix src/app.py", id="h")]}, run)
    graph.invoke({"messages": [ToolMessage(BODY, tool_call_id="r0", name="Read", id="t-r0")]}, run)
    for i in range(60):
        graph.invoke(
            {"messages": [ToolMessage("log line\n" * 60, tool_call_id=f"p{i}", name="Bash", id=f"t-p{i}")]}, run
        )
    compacted = [v for v in views if any(is_summary(m) for m in v)]
    assert compacted, "the session compacts"
    for view in compacted:
        ids = [m.id for m in view]
        assert ids[ids.index("a-r0") + 1] == "t-r0" and ids.index("a-r0") > next(
            i for i, m in enumerate(view) if is_summary(m)
        )
        assert next(m for m in view if m.id == "t-r0").content == BODY  # whole
        assert openai_violations(view) == [] and anthropic_violations(view) == []
    summary = next(m for m in compacted[-1] if is_summary(m))
    assert "Working set: the latest read of each of these files is still in context: src/app.py" in text_of(summary)


def test_the_measure_counts_each_edit_after_a_read_against_the_view_the_model_was_given():
    # a hand-made session: read a.py, read b.py, edit a.py, edit b.py, read a.py again, edit a.py
    def call(call_id, name, args):
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}], id=f"a-{call_id}")

    def result(call_id, text):
        return ToolMessage(text, tool_call_id=call_id, id=f"t-{call_id}")

    turns = [
        ([HumanMessage("fix a and b", id="h")], call("r1", "Read", {"file_path": "a.py"})),
        ([result("r1", "A1")], call("r2", "bash", {"command": "cat ./b.py"})),
        ([result("r2", "B1")], call("e1", "Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"})),
        ([result("e1", "ok")], call("e2", "str_replace_editor", {"command": "str_replace", "path": "b.py"})),
        ([result("e2", "ok")], call("r3", "Read", {"file_path": "a.py"})),
        ([result("r3", "A2")], call("e3", "Write", {"file_path": "a.py", "content": "x"})),
    ]
    edits = working_set_edits(turns)
    assert [(e.call, e.path, e.read.id) for e in edits] == [
        (2, "a.py", "t-r1"),
        (3, "b.py", "t-r2"),
        (5, "a.py", "t-r3"),
    ]
    history = [m for pending, reply in turns for m in (*pending, reply)]
    # the view of the last call lost the second read of a.py to a summary; the first one is there but is not the latest
    view = [m for m in history if m.id not in ("a-r3", "t-r3")]
    assert not read_in_view(edits[2], view)
    assert read_in_view(edits[0], view) and read_in_view(edits[1], view)
    shortened = [m.model_copy(update={"content": "A"}) if m.id == "t-r1" else m for m in view]
    assert not read_in_view(edits[0], shortened)  # a read pruned by a layer is not whole


def test_the_derived_budget_follows_the_window_and_zero_turns_it_off():
    assert CompactionConfig(context_window=60_000).resolve().working_set_tokens == 6_000
    assert (
        CompactionConfig(context_window=128_000).resolve().working_set_tokens == 6_000
    )  # files do not grow with the window
    assert CompactionConfig(context_window=24_000).resolve().working_set_tokens == 1_800
    assert (
        CompactionConfig(context_window=40_000, keep_tokens=8_000).resolve().working_set_tokens == 1_000
    )  # what the target leaves
    assert CompactionConfig(context_window=60_000, working_set_tokens=0).resolve().working_set_tokens == 0
    assert CompactionConfig(context_window=60_000, working_set_tokens=5_000).resolve().working_set_tokens == 5_000


def test_the_python_blocks_of_the_working_set_page_run_as_written(capsys):
    page = (Path(__file__).resolve().parents[2] / "docs" / "working-set.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/working-set.md", "exec"), {})
        printed = capsys.readouterr().out.splitlines()
        # each block says what it prints in its comments
        shown = [line[2:] for line in block.splitlines() if line.startswith("# ")]
        shown += [line.split("# ", 1)[1] for line in block.splitlines() if line.startswith("print(") and "# " in line]
        assert printed == shown


PAGE = "".join(f"v{i} = {i}\n" for i in range(120))  # 120 short lines


def _paged_session(page_call, filler_calls: int = 20) -> list:
    """Return a session reading src/x.py in three pages of 120 lines (``page_call(first, last)``), then tests."""
    messages = [SystemMessage("You are a coding agent.", id="sys"), HumanMessage("fix x.py", id="h")]
    for n, first in enumerate((1, 121, 241)):
        name, args = page_call(first, first + 119)
        messages += _round(f"r{n}", name, args, PAGE)
    for i in range(filler_calls):
        messages += _round(f"p{i}", "Bash", {"command": "pytest -q"}, "F" * 40 + "\n" + "log line\n" * 200)
    return messages


PAGED_READS = {
    "Read offset/limit": lambda a, b: ("Read", {"file_path": "src/x.py", "offset": a, "limit": b - a + 1}),
    "sed -n": lambda a, b: ("Bash", {"command": f"sed -n '{a},{b}p' src/x.py"}),
}


@pytest.mark.parametrize("page_call", PAGED_READS.values(), ids=PAGED_READS.keys())
def test_every_page_of_a_file_read_in_pages_stays_and_the_summary_says_which_lines(page_call):
    messages = _paged_session(page_call)
    plan, _ = _plan(messages, working_set_tokens=5_000)
    assert plan.summarize
    kept = {messages[i].id for i in plan.cut.working_set}
    assert {"t-r0", "t-r1", "t-r2"} <= kept  # the first 120 lines too, not only the last page
    note = working_set_note(messages, {messages[i].id for i in plan.cut.evict})
    assert "still in context: src/x.py (lines 1-120, 121-240, 241-360)" in note


def test_a_page_left_out_is_named_with_its_lines_and_the_pages_in_view_are_the_ones_kept():
    messages = _paged_session(PAGED_READS["Read offset/limit"])
    one_page = sum(TokenCounter().counts(messages[2:4]))
    plan, _ = _plan(messages, working_set_tokens=one_page + 10)
    assert [messages[i].id for i in plan.cut.working_set] == ["a-r2", "t-r2"]
    note = working_set_note(messages, {messages[i].id for i in plan.cut.evict})
    assert "still in context: src/x.py (lines 241-360)." in note
    assert "- src/x.py lines 1-120 (read in t-r0)" in note and "- src/x.py lines 121-240 (read in t-r1)" in note


def test_a_read_of_the_whole_file_replaces_its_pages_and_an_edit_makes_every_page_stale():
    messages = _paged_session(PAGED_READS["sed -n"], filler_calls=0)
    edit = _round("e1", "Edit", {"file_path": "./src/x.py", "old_string": "v1 = 1", "new_string": "v1 = 2"}, "ok")
    assert [(f.lines, f.stale) for f in working_set(messages + edit)] == [
        ((241, 360), True),
        ((121, 240), True),
        ((1, 120), True),
    ]
    whole = _round("r9", "Read", {"file_path": "src/x.py"}, PAGE * 3)
    assert [(f.path, f.lines, f.stale) for f in working_set(messages + edit + whole)] == [("src/x.py", None, False)]


def test_each_files_latest_read_comes_before_the_earlier_pages_of_another():
    # src/x.py read in three pages, then src/y.py read and edited: with room for two reads, y's latest read and
    # x's latest page stay, not x's first two pages (an edit needs the read it edits from in front of it)
    messages = _paged_session(PAGED_READS["Read offset/limit"], filler_calls=0)
    messages += _round("y", "Read", {"file_path": "src/y.py"}, PAGE)
    messages += _round(
        "x-edit", "Edit", {"file_path": "src/x.py", "old_string": "v1 = 1", "new_string": "v1 = 2"}, "ok"
    )
    for i in range(20):
        messages += _round(f"p{i}", "Bash", {"command": "pytest -q"}, "F" * 40 + "\n" + "log line\n" * 200)
    two_reads = 2 * sum(TokenCounter().counts(messages[2:4])) + 10
    plan, _ = _plan(messages, working_set_tokens=two_reads)
    kept = {messages[i].id for i in plan.cut.working_set}
    assert {"t-y", "t-r2"} <= kept and not {"t-r0", "t-r1"} & kept


LOG = "F" * 40 + "\n" + "log line of a long test run\n" * 400  # about 2,800 tokens


def _parallel_session(*, second: tuple[str, dict, str]) -> list:
    """Return a session: a round reading src/a.py in parallel with ``second`` (name, args, result), then tests."""
    name, args, result = second
    messages = [SystemMessage("You are a coding agent.", id="sys"), HumanMessage("fix a.py", id="h")]
    calls = [
        {"name": "Read", "args": {"file_path": "src/a.py"}, "id": "ra"},
        {"name": name, "args": args, "id": "rb"},
    ]
    messages += [
        AIMessage("", tool_calls=calls, id="a-par"),
        ToolMessage(BODY, tool_call_id="ra", name="Read", id="t-ra"),
        ToolMessage(result, tool_call_id="rb", name=name, id="t-rb"),
    ]
    for i in range(20):
        messages += _round(f"p{i}", "Bash", {"command": "pytest -q"}, "F" * 40 + "\n" + "log line\n" * 200)
    return messages


def test_two_files_read_in_one_round_stay_whole_when_both_fit():
    messages = _parallel_session(second=("Read", {"file_path": "src/b.py"}, BODY))
    counts = TokenCounter().counts(messages)
    plan, _ = _plan(messages, working_set_tokens=sum(counts[2:5]) + 10)
    assert [messages[i].id for i in plan.cut.working_set] == ["a-par", "t-ra", "t-rb"]
    assert not {3, 4} & set(plan.edits)  # neither read is shortened


def test_layers_1_2_may_shorten_a_result_kept_only_to_answer_its_call():
    messages = _parallel_session(second=("Bash", {"command": "pytest -q tests/test_a.py"}, LOG))
    protected = keep_working_set(messages, TokenCounter().counts(messages), 5_000)
    assert {2, 3} <= protected and 4 not in protected


def test_a_page_whose_lines_later_reads_show_again_together_leaves_the_set():
    messages = [
        HumanMessage("fix x.py", id="h"),
        *_round("r0", "Bash", {"command": "sed -n '1,10p' src/x.py"}, PAGE),
        *_round("r1", "Bash", {"command": "sed -n '5,20p' src/x.py"}, PAGE),
        *_round("r2", "Bash", {"command": "sed -n '1,6p' src/x.py"}, PAGE),
    ]
    assert [f.lines for f in working_set(messages)] == [(1, 6), (5, 20)]
    # a read from line 1 to the end shows what a read of the whole file showed
    whole = messages[:1] + _round("w", "Read", {"file_path": "src/x.py"}, PAGE)
    to_end = whole + _round("e", "Read", {"file_path": "src/x.py", "offset": 1}, PAGE)
    assert [(f.lines, to_end[f.read].id) for f in working_set(to_end)] == [((1, None), "t-e")]
