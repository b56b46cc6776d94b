"""Hostile and broken input: each shape has a defined outcome, handled or a clear error naming the field.

The agent here answers with plain text, so whatever shape a caller put in the
state stays there; compaction is forced every few turns. "Handled" means: the
model node runs on every turn, compaction adds no provider violation that the
input did not already have (invariant 1), every message stays in the state or
the transcript as it was added (2), and nothing is written twice (4).
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from pydantic import ValidationError
from support.checked import CheckedThread, events

from langgraph_compaction import CompactionConfig, CompactionState, FileStorage, add_compaction
from langgraph_compaction.testing import ScriptedModel

# compaction about every other turn: a small token trigger and a message trigger
# blocking: these tests look at the compaction of a known turn
FORCED = CompactionConfig(
    context_window=60_000, trigger_tokens=3_000, keep_tokens=600, trigger_messages=8, background=False
)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII=" * 200


class TextAgent:
    """A model node that answers every view with plain text and records the views per thread."""

    def __init__(self) -> None:
        self.views: dict[str, list] = {}

    def __call__(self, state: dict, config: RunnableConfig) -> dict:
        thread = config["configurable"]["thread_id"]
        self.views.setdefault(thread, []).append(list(state["messages"]))
        n = len(self.views[thread])  # fixed ids: the outcome of these tests must not depend on random ones
        return {"messages": [AIMessage(content=f"Noted ({n}). " + "detail " * 60, id=f"reply-{n}")]}

    def calls(self, thread: str) -> int:
        return len(self.views.get(thread, []))


def _graph(tmp_path, config=FORCED, summarizer=None):
    agent = TextAgent()
    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=summarizer or ScriptedModel(), config=config, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    return graph, CheckedThread(graph, agent, FileStorage(tmp_path))


def _padding(turn: int) -> HumanMessage:
    # a fixed id: the summary's closing line names the id range, and random ids of varying token counts
    # would move a borderline "does the summary shrink the context" decision from run to run
    return HumanMessage(content=f"Turn {turn}: carry on with the task. " + "context " * 150, id=f"turn-{turn}")


def converse(tmp_path, first: list, turns: int = 6, config=FORCED, summarizer=None):
    """Feed ``first`` as the first input, then ordinary turns; return (thread, final values)."""
    graph, thread = _graph(tmp_path, config, summarizer)
    graph.invoke({"messages": [SystemMessage("You are helpful.", id="sys"), *first]}, thread.config)
    for t in range(1, turns):
        graph.invoke({"messages": [_padding(t)]}, thread.config)
    assert thread.agent.calls("t") == turns  # the model node ran on every turn
    assert thread.check() == []
    values = thread.values()
    assert events(values, stage="summarize", layer="summarize"), "compaction never ran"
    return thread, values


def _transcript_of(tmp_path) -> dict:
    return {
        json.loads(line)["data"]["id"]: json.loads(line)
        for line in (tmp_path / "sessions" / "t.jsonl").read_text().splitlines()
    }


def test_messages_without_ids_get_ids_and_reach_the_transcript_once(tmp_path):
    thread, values = converse(tmp_path, [HumanMessage("no id here " + "w " * 300), AIMessage("nor here")])
    ids = [m.id for m in thread.ledger.history]
    assert all(ids) and len(ids) == len(set(ids))


def test_duplicate_ids_in_one_input_keep_the_later_message(tmp_path):
    # LangGraph's add_messages rule: a repeated id replaces the earlier message in place
    thread, values = converse(
        tmp_path, [HumanMessage("first version", id="dup"), HumanMessage("second version " + "w " * 300, id="dup")]
    )
    record = _transcript_of(tmp_path)["dup"]
    assert record["data"]["content"].startswith("second version")
    assert sum(m.id == "dup" for m in thread.ledger.history) == 1


def test_orphan_tool_result_in_the_input_passes_through_and_is_offloaded(tmp_path):
    thread, values = converse(
        tmp_path,
        [HumanMessage("look at this"), ToolMessage("a result nobody asked for", tool_call_id="ghost", id="orphan")],
    )
    assert "orphan" in _transcript_of(tmp_path)  # evicted with its prefix, kept on disk


def test_a_call_never_answered_passes_through_and_is_offloaded(tmp_path):
    call = AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "ls"}, "id": "never"}], id="unanswered")
    thread, values = converse(tmp_path, [HumanMessage("run ls"), call, HumanMessage("never mind " + "w " * 200)])
    assert "unanswered" in _transcript_of(tmp_path)


def test_reused_tool_call_ids_stay_paired_by_position(tmp_path):
    rounds = []
    for k in range(4):  # the same id for four different calls, as in a real airline log
        rounds += [
            AIMessage("", tool_calls=[{"name": "get_user", "args": {"k": k}, "id": "call_1"}], id=f"a{k}"),
            ToolMessage(f"user record {k} " + "r " * 200, tool_call_id="call_1", id=f"r{k}"),
        ]
    converse(tmp_path, [HumanMessage("look me up"), *rounds, AIMessage("found you")], turns=8)


def test_anthropic_content_blocks_round_trip_and_base64_stays_out_of_the_prompt(tmp_path):
    summarizer = ScriptedModel()
    assistant = AIMessage(
        content=[
            {"type": "thinking", "thinking": "I should read the file.", "signature": "sig=="},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {"path": "a.py"}},
        ],
        tool_calls=[{"name": "read_file", "args": {"path": "a.py"}, "id": "tu1"}],
        id="blocks-ai",
    )
    result = ToolMessage(
        content=[
            {"type": "text", "text": "print(1)"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
        tool_call_id="tu1",
        id="blocks-tool",
    )
    human = HumanMessage(
        content=[
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
        id="blocks-human",
    )
    thread, values = converse(tmp_path, [human, assistant, result], summarizer=summarizer)
    records = _transcript_of(tmp_path)
    assert {"blocks-ai", "blocks-tool", "blocks-human"} <= set(records)
    assert summarizer.calls and all(PNG[:200] not in prompt for prompt in summarizer.calls)


@pytest.mark.parametrize(
    "content", ["", [], [{"type": "text", "text": ""}]], ids=["empty-str", "empty-list", "empty-block"]
)
def test_empty_content_is_handled(tmp_path, content):
    converse(
        tmp_path,
        [HumanMessage("start " + "w " * 300), AIMessage(content=content), HumanMessage(content=content or "x")],
    )


def test_content_none_is_refused_by_the_message_itself_naming_content():
    with pytest.raises(ValidationError, match="content"):
        HumanMessage(content=None)


def test_a_message_larger_than_the_keep_budget_is_kept_or_evicted_whole(tmp_path):
    huge = ToolMessage("line of output\n" * 3_000, tool_call_id="big", id="huge-result")
    call = AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "cat log"}, "id": "big"}], id="big-call")
    thread, values = converse(tmp_path, [HumanMessage("show the log"), call, huge], turns=6)
    kept = {m.id: m for m in values["messages"]}
    assert ("huge-result" in kept) == ("big-call" in kept)  # never split from its call


def test_a_latest_request_larger_than_the_window_is_kept_verbatim(tmp_path):
    config = CompactionConfig(context_window=6_000, trigger_tokens=3_000, keep_tokens=600, trigger_messages=8)
    graph, thread = _graph(tmp_path, config)
    graph.invoke(
        {"messages": [SystemMessage("You are helpful.", id="sys"), HumanMessage("hello", id="hello")]}, thread.config
    )
    for t in range(1, 4):
        graph.invoke({"messages": [_padding(t)]}, thread.config)
    giant = HumanMessage("please review: " + "token " * 9_000, id="giant")
    graph.invoke({"messages": [giant]}, thread.config)
    assert thread.agent.calls("t") == 5
    assert thread.check() == []
    last_view = thread.agent.views["t"][-1]
    assert any(m.id == "giant" and m.content == giant.content for m in last_view)  # never cut or dropped
    assert last_view[0].id == "sys"
    # invariant 3: the compaction that could not get under the trigger says why, naming the message (whether
    # it committed a summary or found that one would not shrink the context and kept the history)
    last = [e for e in events(thread.values(), stage="summarize") if "over_budget" in e][-1]
    assert "giant" in last["over_budget"] and last["tokens_after"] > 3_000


def test_a_hundred_parallel_calls_in_one_turn_stay_together(tmp_path):
    calls = [{"name": "read_file", "args": {"path": f"src/f{i}.py"}, "id": f"p{i}"} for i in range(100)]
    batch = [AIMessage("", tool_calls=calls, id="fanout")] + [
        ToolMessage(f"contents of f{i} " + "c " * 40, tool_call_id=f"p{i}", id=f"pr{i}") for i in range(100)
    ]
    thread, values = converse(tmp_path, [HumanMessage("read them all"), *batch, AIMessage("read 100 files")])
    kept = {m.id for m in values["messages"]}
    assert len({f"pr{i}" for i in range(100)} & kept) in (0, 100)


def test_non_string_tool_arguments_are_handled(tmp_path):
    args = {
        "n": 5,
        "ratio": 0.5,
        "flag": True,
        "none": None,
        "nested": {"a": [1, 2, {"b": "c"}]},
        "big": list(range(3000)),
    }
    call = AIMessage("", tool_calls=[{"name": "compute", "args": args, "id": "ns"}], id="ns-call")
    thread, values = converse(
        tmp_path, [HumanMessage("compute"), call, ToolMessage("42", tool_call_id="ns", id="ns-result")]
    )
    assert (
        _transcript_of(tmp_path)["ns-call"]["data"]["tool_calls"][0]["args"] == args
    )  # the original, not a truncation


def test_invalid_json_tool_arguments_are_kept_and_rendered(tmp_path):
    summarizer = ScriptedModel()
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "bash",
                "args": '{"cmd": "ls',
                "id": "bad1",
                "error": "Unterminated string",
                "type": "invalid_tool_call",
            }
        ],
        id="bad-call",
    )
    converse(
        tmp_path,
        [HumanMessage("list files " + "w " * 200), bad, HumanMessage("that call was broken")],
        summarizer=summarizer,
    )
    assert any('{"cmd": "ls' in p for p in summarizer.calls)


def test_cjk_emoji_rtl_and_nul_round_trip_byte_for_byte(tmp_path):
    text = "修复登录模块 🙂👩‍💻 مرحبا بالعالم \u202etxt.exe\u202c NUL:\x00: end " + "字" * 400
    thread, values = converse(tmp_path, [HumanMessage(text, id="unicode"), AIMessage(text, id="unicode-ai")])
    assert _transcript_of(tmp_path)["unicode"]["data"]["content"] == text


def test_a_lone_surrogate_round_trips_through_the_transcript(tmp_path):
    # (LangGraph's checkpoint serializer turns it into "?" in the state; the transcript keeps what it is given)
    storage = FileStorage(tmp_path)
    records = messages_to_dict([HumanMessage("half an emoji: \ud83d", id="s1")])
    storage.append_transcript("t", records)
    storage.append_transcript("t", records)
    assert storage.read_transcript("t") == records


@pytest.mark.parametrize(
    "garbage",
    [
        "not a dict",
        {"offloaded_ids": "oops", "counts": [1, 2], "events": "x", "pending": "yes", "flushed_ids": {"a": 1}},
        {"pending": {"evict_ids": 5, "reason": 3}},
        {"pending": {"evict_ids": ["no-such-id"], "reason": "tokens"}},
        {"summary_id": 42, "manual": ["focus"], "last_error": {"x": 1}},
    ],
    ids=["string", "wrong-types", "bad-pending", "stale-pending", "odd-scalars"],
)
def test_a_compaction_key_edited_into_wrong_types_is_repaired(tmp_path, garbage):
    graph, thread = _graph(tmp_path)
    graph.invoke(
        {"messages": [SystemMessage("You are helpful.", id="sys"), HumanMessage("hi", id="hi")]}, thread.config
    )
    graph.update_state(thread.config, {"compaction": garbage})  # what a Studio state edit can do
    for t in range(1, 6):
        graph.invoke({"messages": [_padding(t)]}, thread.config)
    assert thread.agent.calls("t") == 6
    assert thread.check() == []
    values = thread.values()
    assert isinstance(values["compaction"]["counts"], dict) and isinstance(values["compaction"]["events"], list)
    assert events(values, stage="summarize")  # compaction still runs on the repaired state


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"context_window": -1}, "context_window"),
        ({"trigger_tokens": -5}, "trigger_tokens"),
        ({"keep_messages": 0}, "keep_messages"),
        ({"keep_tokens": -2}, "keep_tokens"),
        ({"keep_tokens_min": 9_000, "keep_tokens_max": 8_000}, "keep_tokens_min"),
        ({"keep_tokens_ratio": 0}, "keep_tokens_ratio"),
        ({"keep_tokens_ratio": 1.5}, "keep_tokens_ratio"),
        ({"summary": {"timeout": 0}}, "summary.timeout"),
        ({"summary_timeout": 0}, "summary.timeout"),  # a group's setting at the top: the error names the group
        ({"memory": {"timezone": "Mars/Olympus"}}, "timezone"),
        ({"trigger_tokens": 1_000, "keep_tokens": 5_000}, "keep_tokens"),
        ({"context_window": "big"}, "context_window"),
        ({"triger_tokens": 5}, "triger_tokens"),
    ],
)
def test_impossible_config_raises_an_error_naming_the_field(kwargs, field):
    with pytest.raises(ValidationError, match=field):
        CompactionConfig(**kwargs)
