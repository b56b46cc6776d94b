"""Layers 1 and 2, figure for figure: each table row is the input, the action and the figure expected.

Tokens are characters here (``conftest.tokens``).
"""

from __future__ import annotations

import datetime
import json

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langgraph_compaction.core.config import MicroCompactConfig, PruneConfig, TruncateArgsConfig
from langgraph_compaction.core.layers import (
    MICRO_PLACEHOLDER,
    SUPERSEDED_MARK,
    micro_compact,
    prune_preview,
    prune_tool_results,
    settled_from,
    superseded_results,
    truncate_arguments,
)

from .conftest import ai, call, chat, counts, human, result

# --- layer 1: long arguments of old tool calls -----------------------------------------------------------------------

#: Layer 1 from 5 messages or 1,000 tokens, the newest message protected.
TRUNCATE = TruncateArgsConfig(trigger_messages=5, trigger_tokens=1_000, keep_messages=1, max_arg_length=100)


def _writes(content: str, *more: BaseMessage) -> list[BaseMessage]:
    """Return a request, a write_file call of ``content`` and its result, ``more``, and a last request."""
    return [
        human("h0"),
        ai("a1", 0, calls=[call("w", "write_file", path="a.py", content=content)]),
        result("t2", "w", 2),
        *more,
        human("h3"),
    ]


@pytest.mark.parametrize(
    ("messages", "total_tokens", "config", "edited"),
    [
        # from trigger_messages messages or trigger_tokens tokens
        (_writes("x" * 101), 999, {}, []),
        (_writes("x" * 101), 1_000, {}, [1]),
        (_writes("x" * 101, human("h")), 0, {}, [1]),
        # never in the newest keep_messages
        (_writes("x" * 101), 1_000, {"keep_messages": 2}, [1]),
        (_writes("x" * 101), 1_000, {"keep_messages": 3}, []),
        (_writes("x" * 101), 1_000, {"keep_messages": 0}, [1]),
        # strings longer than max_arg_length
        (_writes("x" * 100), 1_000, {}, []),
        (_writes("x" * 100), 1_000, {"max_arg_length": 99}, [1]),
        (_writes("x" * 101), 1_000, {"enabled": False}, []),
        # a history shorter than the protected window
        ([_writes("x" * 101)[1]], 1_000, {}, []),
    ],
)
def test_layer_1_shortens_long_arguments_of_old_calls(messages, total_tokens, config, edited):
    assert list(truncate_arguments(messages, total_tokens, TRUNCATE.model_copy(update=config))) == edited


@pytest.mark.parametrize(
    ("config", "content"),
    [
        ({}, "0123456789" * 2 + "...(argument truncated)"),  # the first keep_chars (20) characters and the marker
        ({"keep_chars": 3}, "012...(argument truncated)"),
        ({"keep_chars": 0, "truncation_text": "[cut]"}, "[cut]"),
    ],
)
def test_a_shortened_argument_is_its_first_characters_and_the_marker(config, content):
    messages = _writes("0123456789" * 20)
    (edit,) = truncate_arguments(messages, 1_000, TRUNCATE.model_copy(update=config)).values()
    assert edit.id == "a1"
    assert edit.tool_calls == [{**messages[1].tool_calls[0], "args": {"path": "a.py", "content": content}}]


def test_layer_1_reaches_into_nested_arguments_and_leaves_other_values():
    args = {"files": [{"path": "a.py", "content": "x" * 150}, "y" * 150, "short"], "count": 7, "flag": None}
    messages = [ai("a0", 0, calls=[{"name": "write_many", "args": args, "id": "c"}]), *chat(5)]
    (edit,) = truncate_arguments(messages, 0, TRUNCATE).values()
    cut = "...(argument truncated)"
    assert edit.tool_calls[0]["args"] == {
        "files": [{"path": "a.py", "content": "x" * 20 + cut}, "y" * 20 + cut, "short"],
        "count": 7,
        "flag": None,
    }


def test_layer_1_rewrites_the_providers_raw_tool_calls_and_content_blocks():
    long_args = {"path": "a.py", "content": "x" * 150}
    content = [
        {"type": "text", "text": "Writing it."},
        {"type": "tool_use", "id": "w", "name": "write_file", "input": long_args},
        {"type": "tool_use", "id": "v", "name": "view", "input": {"path": "b.py"}},
    ]
    raw = [
        {"id": "w", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(long_args)}},
        {"id": "other", "type": "function", "function": {"name": "noop", "arguments": "{}"}},
    ]
    message = AIMessage(
        content,
        id="a0",
        tool_calls=[call("w", "write_file", **long_args), call("v", "view", path="b.py")],
        additional_kwargs={"tool_calls": raw, "refusal": None},
    )
    (edit,) = truncate_arguments([message, *chat(5)], 0, TRUNCATE).values()
    short = {"path": "a.py", "content": "x" * 20 + "...(argument truncated)"}
    assert edit.content == [content[0], {**content[1], "input": short}, content[2]]
    assert edit.tool_calls[0]["args"] == short and edit.tool_calls[1]["args"] == {"path": "b.py"}
    assert edit.additional_kwargs == {
        "tool_calls": [
            {"id": "w", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(short)}},
            raw[1],
        ],
        "refusal": None,
    }


def test_short_arguments_are_left_alone_however_many():
    content = [{"type": "text", "text": "t" * 300}, {"type": "tool_use", "id": "v", "name": "view", "input": {}}]
    message = AIMessage(content, id="a0", tool_calls=[call("v", "view", path="b.py")])
    assert truncate_arguments([message, *chat(5)], 0, TRUNCATE) == {}
    many = ai("a0", 0, calls=[call("m", "write_many", items=["short"] * 30, count=7, flag=None)])
    assert truncate_arguments([many, *chat(5)], 0, TRUNCATE) == {}


def test_each_call_of_a_message_is_shortened_on_its_own():
    long_first = ai("a0", 0, calls=[call("w", "write_file", content="x" * 101), call("v", "view", path="b.py")])
    (edit,) = truncate_arguments([long_first, *chat(5)], 0, TRUNCATE).values()
    assert [c["args"] for c in edit.tool_calls] == [{"content": "x" * 20 + "...(argument truncated)"}, {"path": "b.py"}]


def test_the_raw_arguments_stay_readable_json():
    raw = [{"id": "w", "type": "function"}]
    message = AIMessage(
        "", id="a0", tool_calls=[call("w", "write_file", content="é" * 150)], additional_kwargs={"tool_calls": raw}
    )
    (edit,) = truncate_arguments([message, *chat(5)], 0, TRUNCATE).values()
    arguments = '{"content": "' + "é" * 20 + '...(argument truncated)"}'
    assert edit.additional_kwargs["tool_calls"] == [
        {"id": "w", "type": "function", "function": {"arguments": arguments}}
    ]


def test_layer_1_starts_at_the_settled_index():
    messages = _writes("x" * 101)
    assert list(truncate_arguments(messages, 1_000, TRUNCATE, start=1)) == [1]
    assert truncate_arguments(messages, 1_000, TRUNCATE, start=2) == {}


# --- layer 2: pruning old large results ------------------------------------------------------------------------------

PRUNE = PruneConfig(protect_tokens=200, minimum_tokens=1_000, max_output_chars=100, excluded_tools=frozenset({"look"}))


def _outputs(*results: ToolMessage) -> list[BaseMessage]:
    """Return a request, each result after the call it answers, and a last exchange of 200 tokens."""
    out: list[BaseMessage] = [human("h0")]
    for r in results:
        out += [ai(f"a-{r.id}", 0, calls=[call(r.tool_call_id, r.name or "bash")]), r]
    return [*out, human("h8"), ai("a9")]


@pytest.mark.parametrize(
    ("config", "pruned"),
    [
        # outside the newest protect_tokens: the last 200 tokens (h8, a9) are exactly the protected window
        ({}, [2]),
        ({"protect_tokens": 200 + 1_000 - 1}, [2]),
        ({"protect_tokens": 200 + 1_000}, []),
        # only when the candidates hold minimum_tokens
        ({"minimum_tokens": 1_001}, []),
        ({"minimum_tokens": 0}, [2]),
        # results longer than max_output_chars
        ({"max_output_chars": 999}, [2]),
        ({"max_output_chars": 1_000}, []),
        ({"enabled": False}, []),
    ],
)
def test_layer_2_prunes_old_large_results(config, pruned):
    messages = _outputs(result("t2", "c", 1_000, name="bash"))
    assert list(prune_tool_results(messages, counts(messages), PRUNE.model_copy(update=config))) == pruned


@pytest.mark.parametrize(
    ("size", "max_chars", "head", "removed", "tail"),
    [
        (1_000, 100, 50, 900, 50),  # half of max_output_chars from the head, half from the tail
        (1_000, 101, 50, 900, 50),
        (150, 100, 50, 50, 50),
        (80, 100, 50, 0, 30),  # shorter than the two halves: nothing repeated
        (40, 100, 40, 0, 0),
    ],
)
def test_a_pruned_result_is_its_head_a_marker_and_its_tail(size, max_chars, head, removed, tail):
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    assert (
        prune_preview(text, max_chars)
        == f"{text[:head]}\n\n...({removed} chars pruned)...\n\n{text[size - tail :] if tail else ''}"
    )


def test_a_pruned_result_keeps_its_id_and_is_not_pruned_again():
    messages = _outputs(result("t2", "c", 1_000, name="bash"))
    (edit,) = prune_tool_results(messages, counts(messages), PRUNE).values()
    assert (edit.id, edit.tool_call_id, edit.content) == ("t2", "c", prune_preview("r" * 1_000, 100))
    again = [*messages[:2], edit.model_copy(update={"content": edit.content + "r" * 1_000}), *messages[3:]]
    assert prune_tool_results(again, counts(again), PRUNE.model_copy(update={"minimum_tokens": 0})) == {}


@pytest.mark.parametrize(
    ("results", "config", "pruned"),
    [
        # retrieval tools are never pruned: by the call's name, or the result's own when it answers no call
        ([result("t2", "c", 1_000, name="look")], {}, []),
        ([result("t2", "c", 1_000)], {"excluded_tools": frozenset({"bash"})}, []),
        # the minimum counts what can be pruned once they are left out
        ([result("t2", "c", 1_000), result("t4", "d", 1_000, name="look")], {"minimum_tokens": 1_001}, []),
        ([result("t2", "c", 1_000), result("t4", "d", 1_000, name="look")], {"minimum_tokens": 1_000}, [2]),
        ([result("t2", "c", 1_000), result("t4", "d", 1_000)], {"minimum_tokens": 2_000}, [2, 4]),
    ],
)
def test_layer_2_leaves_the_results_of_excluded_tools(results, config, pruned):
    messages = _outputs(*results)
    assert list(prune_tool_results(messages, counts(messages), PRUNE.model_copy(update=config))) == pruned


@pytest.mark.parametrize(("protect_tokens", "pruned"), [(100, [0]), (1_100, [])])
def test_layer_2_reaches_the_first_message_unless_everything_is_protected(protect_tokens, pruned):
    messages = [ToolMessage("r" * 1_000, tool_call_id="x", name="bash", id="t0"), human("h1")]
    config = PRUNE.model_copy(update={"protect_tokens": protect_tokens})
    assert list(prune_tool_results(messages, counts(messages), config)) == pruned


def test_a_result_that_answers_no_call_is_excluded_by_its_own_name():
    messages = [human("h0"), ToolMessage("r" * 1_000, tool_call_id="x", name="look", id="t1"), *chat(2)]
    assert prune_tool_results(messages, counts(messages), PRUNE) == {}
    named = [*messages[:1], messages[1].model_copy(update={"name": "bash"}), *messages[2:]]
    assert list(prune_tool_results(named, counts(named), PRUNE)) == [1]


def test_layer_2_starts_at_the_settled_index():
    messages = _outputs(result("t2", "c", 1_000))
    assert list(prune_tool_results(messages, counts(messages), PRUNE, start=2)) == [2]
    assert prune_tool_results(messages, counts(messages), PRUNE, start=3) == {}


# --- layer 2: superseded results -------------------------------------------------------------------------------------


def _calls(*steps: tuple) -> list[BaseMessage]:
    """Return a history of one call per step, ``(tool, args, result size[, status])``, each answered."""
    out: list[BaseMessage] = [human("h")]
    for n, (tool, args, size, *status) in enumerate(steps):
        out.append(ai(f"a{n}", 0, calls=[call(f"c{n}", tool, **args)]))
        out.append(result(f"t{n}", f"c{n}", size, name=tool, status=status[0] if status else "success"))
    return out


STATUS = ("bash", {"cmd": "git status"}, 400)
PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch"
READ_A = ("read_file", {"path": "a.py"}, 400)


@pytest.mark.parametrize(
    ("steps", "superseded"),
    [
        # the same call again: the older result points at the newer
        ([STATUS, STATUS], {"t0": "t1"}),
        ([STATUS, STATUS, STATUS], {"t0": "t2", "t1": "t2"}),
        ([READ_A, ("bash", {"cmd": "ls"}, 400), READ_A], {"t0": "t2"}),
        # not the same call: another tool, other arguments
        ([STATUS, ("shell", {"cmd": "git status"}, 400)], {}),
        ([READ_A, ("read_file", {"path": "b.py"}, 400)], {}),
        # the newer call failed: the older result is the one that stands
        ([STATUS, (*STATUS, "error")], {}),
        ([STATUS, STATUS, (*STATUS, "error")], {"t0": "t1"}),
        # the file changed in between: the older read showed another file
        ([READ_A, ("edit_file", {"path": "a.py", "old": "x", "new": "y"}, 10), READ_A], {}),
        ([READ_A, ("bash", {"cmd": "rm a.py"}, 10), READ_A], {}),
        # one file, two spellings: the edit of ./a.py (or src/../a.py) changed the a.py the reads showed
        ([READ_A, ("edit_file", {"path": "./a.py", "old": "x", "new": "y"}, 10), READ_A], {}),
        ([READ_A, ("bash", {"cmd": "sed -i s/x/y/ src/../a.py"}, 10), READ_A], {}),
        (
            [
                ("read_file", {"path": ".//a.py"}, 400),
                ("edit_file", {"path": "a.py", "old": "x", "new": "y"}, 10),
                ("read_file", {"path": ".//a.py"}, 400),
            ],
            {},
        ),
        ([READ_A, READ_A, ("write_file", {"path": "a.py", "content": "z"}, 10), READ_A], {"t0": "t1"}),
        ([READ_A, ("edit_file", {"path": "b.py", "old": "x", "new": "y"}, 10), READ_A], {"t0": "t2"}),
        ([READ_A, ("read_file", {"path": "a.py"}, 10), READ_A], {"t0": "t2"}),
        ([("bash", {"cmd": "ls"}, 400), STATUS, STATUS], {"t1": "t2"}),
        # a change before the older read is no reason
        ([("edit_file", {"path": "a.py", "old": "x", "new": "y"}, 10), READ_A, READ_A], {"t1": "t2"}),
        # a patch applied again: the calls themselves changed the file
        ([("apply_patch", {"text": PATCH}, 400), ("apply_patch", {"text": PATCH}, 400)], {}),
        # a call without files is superseded whatever changed
        ([STATUS, ("edit_file", {"path": "a.py", "old": "x", "new": "y"}, 10), STATUS], {"t0": "t2"}),
        # results no longer than their marker stay
        ([("bash", {"cmd": "git status"}, 150), STATUS], {}),
    ],
)
def test_a_result_superseded_by_the_same_call_becomes_a_marker(steps, superseded):
    messages = _calls(*steps)
    edits = superseded_results(messages)
    assert {messages[i].id: m.content.split("message ")[1].split(" ")[0] for i, m in edits.items()} == superseded


def test_the_superseded_marker_names_the_newer_result_and_how_to_recall_the_older():
    messages = _calls(STATUS, STATUS)
    (edit,) = superseded_results(messages).values()
    assert (edit.id, edit.tool_call_id) == ("t0", "c0")
    assert edit.content == SUPERSEDED_MARK.format(tool="bash", newer="t1", call_id="c1", chars=400, own="t0")
    assert edit.content == (
        "[Superseded: `bash` was called again with the same arguments; the newer result is message t1 "
        '(tool_call_id c1). This older output (400 chars) is in the transcript: recall(["t0"]).]'
    )


@pytest.mark.parametrize(("size", "superseded"), [(180, []), (181, [2])])
def test_a_result_no_longer_than_its_marker_stays(size, superseded):
    # the marker naming t1 for 180 characters is 180 characters long
    marker = SUPERSEDED_MARK.format(tool="bash", newer="t1", call_id="c1", chars=180, own="t0")
    assert len(marker) == 180
    assert list(superseded_results(_calls(("bash", {"cmd": "git status"}, size), STATUS))) == superseded


def test_results_already_shortened_are_passed_over_and_older_ones_still_superseded():
    messages = _calls(STATUS, STATUS, STATUS)
    messages[4] = messages[4].model_copy(update={"content": MICRO_PLACEHOLDER.format(tool="bash", chars=400)})
    assert [m.id for m in superseded_results(messages).values()] == ["t0"]


def test_arguments_json_cannot_write_are_compared_as_text():
    at = {"when": datetime.datetime(2026, 1, 1)}
    messages = [_unvalidated("a0", call("c0", "log", **at)), result("t0", "c0", 400)]
    messages += [_unvalidated("a1", call("c1", "log", **at)), result("t1", "c1", 400)]
    assert list(superseded_results(messages)) == [1]


def test_a_change_in_the_newer_calls_own_message_keeps_the_older_read():
    messages = _calls(READ_A)
    messages.append(
        ai("a1", 0, calls=[call("e", "edit_file", path="a.py", old="x", new="y"), call("r", "read_file", path="a.py")])
    )
    messages += [result("te", "e", 10), result("tr", "r", 400)]
    assert superseded_results(messages) == {}


def test_arguments_in_another_order_are_the_same_call():
    messages = _calls(("grep", {"pattern": "x", "path": "src"}, 400), ("grep", {"path": "src", "pattern": "x"}, 400))
    assert list(superseded_results(messages)) == [2]


def _unvalidated(id: str, tool_call: dict) -> AIMessage:
    """Return an assistant message holding a call as a provider's parser may leave it (keys of mixed types)."""
    return AIMessage("", id=id).model_copy(update={"tool_calls": [tool_call]})


@pytest.mark.parametrize(
    "messages",
    [
        # keys json cannot order: never deduplicated
        [
            _unvalidated("a0", {"name": "t", "args": {1: "x", "b": 2}, "id": "c0"}),
            result("t0", "c0", 400),
            _unvalidated("a1", {"name": "t", "args": {1: "x", "b": 2}, "id": "c1"}),
            result("t1", "c1", 400),
        ],
        # results of calls without an id, or answering no call
        [
            AIMessage("", id="a0", tool_calls=[{"name": "t", "args": {}, "id": None}]),
            result("t0", "c0", 400),
            AIMessage("", id="a1", tool_calls=[{"name": "t", "args": {}, "id": None}]),
            result("t1", "c0", 400),
        ],
        # already shortened by layer 2
        [
            *_calls(STATUS)[:2],
            ToolMessage(MICRO_PLACEHOLDER.format(tool="bash", chars=900) + "r" * 300, tool_call_id="c0", id="t0"),
            *_calls(STATUS, STATUS)[3:],
        ],
    ],
)
def test_what_is_never_deduplicated(messages):
    assert superseded_results(messages) == {}


def test_an_unnamed_call_is_the_same_call_as_another_unnamed_one():
    messages = [
        AIMessage("", id="a0", tool_calls=[{"name": "", "args": {"q": 1}, "id": "c0"}]),
        result("t0", "c0", 400),
        AIMessage("", id="a1", tool_calls=[{"name": "", "args": {"q": 1}, "id": "c1"}]),
        result("t1", "c1", 400),
    ]
    (edit,) = superseded_results(messages).values()
    assert edit.content.startswith("[Superseded: `` was called again")


# --- micro-compaction: all but the newest results, in batches --------------------------------------------------------

MICRO = MicroCompactConfig(enabled=True, keep_recent=2, min_chars=100, minimum_tokens=300)


def _results(*sizes: int) -> list[BaseMessage]:
    """Return a request and one bash round per size: ``t0``, ``t1``, ... of that many tokens."""
    return _calls(*[("bash", {"cmd": f"step {n}"}, size) for n, size in enumerate(sizes)])


@pytest.mark.parametrize(
    ("sizes", "config", "cleared"),
    [
        # all but the keep_recent newest results
        ((200, 200, 200, 200), {}, ["t0", "t1"]),
        ((200, 200, 200, 200), {"keep_recent": 0}, ["t0", "t1", "t2", "t3"]),
        ((200, 200, 200, 200), {"keep_recent": 3, "minimum_tokens": 0}, ["t0"]),
        ((200, 200, 200, 200), {"keep_recent": 4}, []),
        # results longer than min_chars
        ((200, 100, 200, 200), {"minimum_tokens": 0}, ["t0"]),
        ((200, 101, 200, 200), {"minimum_tokens": 0}, ["t0", "t1"]),
        # only when the cleared results hold minimum_tokens together
        ((200, 200, 200, 200), {"minimum_tokens": 400}, ["t0", "t1"]),
        ((200, 200, 200, 200), {"minimum_tokens": 401}, []),
        ((200, 200, 200, 200), {"enabled": False}, []),
    ],
)
def test_micro_compaction_clears_all_but_the_newest_results(sizes, config, cleared):
    messages = _results(*sizes)
    edits = micro_compact(messages, counts(messages), MICRO.model_copy(update=config), frozenset())
    assert [m.id for m in edits.values()] == cleared
    for i, m in edits.items():
        assert m.content == MICRO_PLACEHOLDER.format(tool="bash", chars=sizes[int(m.id[1:])])
        assert m.tool_call_id == messages[i].tool_call_id


def test_micro_compaction_never_splits_a_parallel_batch():
    batch = ai("a", 0, calls=[call("p", "bash", cmd="a"), call("q", "bash", cmd="b")])
    messages = [*_results(200, 200), batch, result("tp", "p", 200), result("tq", "q", 200), human("h")]
    edits = micro_compact(messages, counts(messages), MICRO.model_copy(update={"keep_recent": 1}), frozenset())
    assert [m.id for m in edits.values()] == ["t0", "t1"]


def test_micro_compaction_leaves_excluded_shortened_and_settled_results():
    messages = _results(200, 200, 200, 200, 200)
    config = MICRO.model_copy(update={"minimum_tokens": 0})
    assert [m.id for m in micro_compact(messages, counts(messages), config, frozenset(), start=5).values()] == ["t2"]
    assert [m.id for m in micro_compact(messages, counts(messages), config, frozenset(), start=4).values()] == [
        "t1",
        "t2",
    ]
    named = _calls(("look", {"cmd": "step 0"}, 200), *[("bash", {"cmd": f"step {n}"}, 200) for n in range(1, 5)])
    assert [m.id for m in micro_compact(named, counts(named), config, frozenset({"look"})).values()] == ["t1", "t2"]
    cleared = [*messages[:2], messages[2].model_copy(update={"content": MICRO_PLACEHOLDER + "r" * 200}), *messages[3:]]
    assert [m.id for m in micro_compact(cleared, counts(cleared), config, frozenset()).values()] == ["t1", "t2"]


# --- the settled scan ------------------------------------------------------------------------------------------------

ON = {"truncate": TRUNCATE, "prune": PRUNE, "micro": MICRO}


def _long_call(size: int) -> AIMessage:
    """Return a write_file call whose content argument is ``size`` characters."""
    return ai("a", 0, calls=[call("w", "write_file", content="x" * size)])


@pytest.mark.parametrize(
    ("messages", "start", "settings", "settled"),
    [
        (chat(4), 0, {}, 4),  # nothing layers 1-2 could edit
        # a call with a long argument, while layer 1 runs
        ([human("h"), _long_call(101), *chat(2)], 0, {}, 1),
        ([human("h"), _long_call(70), *chat(2)], 0, {}, 4),
        ([human("h"), _long_call(101), *chat(2)], 2, {}, 4),
        ([human("h"), _long_call(101), *chat(2)], 0, {"truncate": TruncateArgsConfig(enabled=False)}, 4),
        # a result over max_output_chars (pruning) or min_chars (micro-compaction)
        ([human("h"), result("t", "c", 101)], 0, {"micro": MicroCompactConfig()}, 1),
        ([human("h"), result("t", "c", 100)], 0, {"micro": MicroCompactConfig()}, 2),
        ([human("h"), result("t", "c", 101)], 0, {"prune": PruneConfig(enabled=False)}, 1),
        ([human("h"), result("t", "c", 100)], 0, {"prune": PruneConfig(enabled=False)}, 2),
        (
            [human("h"), result("t", "c", 101)],
            0,
            {"prune": PruneConfig(enabled=False), "micro": MicroCompactConfig()},
            2,
        ),
        # excluded tools and results already shortened are final
        ([human("h"), result("t", "c", 500, name="look")], 0, {}, 2),
        ([human("h"), result("t", "c", 500, name="bash")], 0, {}, 1),
        ([human("h"), result("t", "c", 500, name="look"), result("u", "d", 500, name="bash")], 0, {}, 2),
        (
            [human("h"), ToolMessage(prune_preview("r" * 500, 100), tool_call_id="c", id="t")],
            0,
            {"micro": MicroCompactConfig()},
            2,
        ),
        ([human("h"), ToolMessage(prune_preview("r" * 500, 100), tool_call_id="c", id="t")], 0, {}, 1),
        (
            [human("h"), ToolMessage(MICRO_PLACEHOLDER + "r" * 500, tool_call_id="c", id="t")],
            0,
            {"prune": PruneConfig(enabled=False)},
            2,
        ),
    ],
)
def test_the_scan_settles_before_the_first_message_layers_1_2_may_still_edit(messages, start, settings, settled):
    assert settled_from(messages, start, **{**ON, **settings}) == settled


def test_block_content_is_measured_by_its_text():
    blocks = [{"type": "text", "text": "r" * 60}, {"type": "text", "text": "r" * 60}]
    messages = [human("h"), ToolMessage(blocks, tool_call_id="c", id="t")]
    assert settled_from(messages, 0, **ON) == 1
    short = [human("h"), ToolMessage(blocks[:1], tool_call_id="c", id="t")]
    assert settled_from(short, 0, **ON) == 2
    content = [{"type": "tool_use", "id": "w", "name": "write_file", "input": {"content": "x" * 101}}]
    calls = [human("h"), AIMessage(content, id="a", tool_calls=[call("w", "write_file", content="x" * 101)])]
    assert settled_from(calls, 0, **ON) == 1
    plain = [human("h"), AIMessage([{"type": "text", "text": "hello"}], id="a")]
    assert settled_from(plain, 0, **ON) == 2


def test_an_empty_history_needs_nothing():
    assert truncate_arguments([], 0, TRUNCATE) == {}
    assert prune_tool_results([], [], PRUNE) == {}
    assert superseded_results([]) == {}
    assert micro_compact([], [], MICRO, frozenset()) == {}
    assert settled_from([], 0, **ON) == 0


def test_a_human_message_is_never_edited():
    assert settled_from([HumanMessage("x" * 5_000, id="h")], 0, **ON) == 1
