"""Token estimation: accuracy against o200k on real samples, message overheads, and the memoising counter."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
from pathlib import Path

import bpe_openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from langgraph_compaction.core.tokens import (
    MEDIA_TOKENS,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    TokenCounter,
    estimate_text_tokens,
    estimate_tokens,
    fingerprint,
    message_tokens,
    seed_estimate_tokens,
    seed_text_tokens,
)

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "token_samples"
O200K = bpe_openai.get_encoding("o200k_base")


def o200k(text: str) -> int:
    return len(O200K.encode_ordinary(text))


def _read(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


_TOOL_OUTPUT = json.loads(_read("tool_output.json"))
CATEGORIES = {
    "english_prose": _read("english_prose.txt"),
    "python_source": _read("python_source.py.txt"),
    "json_pretty": json.dumps(_TOOL_OUTPUT, indent=2, ensure_ascii=False),
    "json_compact": json.dumps(_TOOL_OUTPUT, separators=(",", ":"), ensure_ascii=False),
    "chinese": _read("chinese.txt"),
    "test_log": _read("test_log.txt"),
    "agent_transcript": _read("agent_transcript.txt"),
}


def ratio(estimator, text: str) -> float:
    return estimator(text) / o200k(text)


# --- Text estimator accuracy --------------------------------------------------------


@pytest.mark.parametrize("category", CATEGORIES)
def test_estimate_is_within_ten_percent_of_o200k(category):
    assert 0.90 <= ratio(estimate_text_tokens, CATEGORIES[category]) <= 1.10


@pytest.mark.parametrize("category", CATEGORIES)
def test_estimate_holds_on_message_sized_paragraphs(category):
    paragraphs = [p for p in CATEGORIES[category].split("\n\n") if p.strip()]
    estimated = sum(estimate_text_tokens(p) for p in paragraphs)
    actual = sum(o200k(p) for p in paragraphs)
    assert 0.90 <= estimated / actual <= 1.10


def test_seed_and_len_over_4_rules_miss_by_far_more():
    # The rules the default replaced: ceil(len / 2.5) and the common len / 4.
    assert ratio(seed_text_tokens, CATEGORIES["english_prose"]) > 1.5
    assert ratio(seed_text_tokens, CATEGORIES["python_source"]) > 1.5
    assert ratio(seed_text_tokens, CATEGORIES["chinese"]) < 0.6
    assert ratio(lambda t: len(t) / 4, CATEGORIES["chinese"]) < 0.4
    assert ratio(lambda t: len(t) / 4, CATEGORIES["json_pretty"]) < 0.8


def test_seed_text_tokens_is_ceil_len_over_2_5():
    assert [seed_text_tokens("x" * n) for n in (0, 1, 5, 6, 10, 11)] == [0, 1, 2, 3, 4, 5]


def test_empty_text_is_zero_and_any_other_text_at_least_one():
    assert estimate_text_tokens("") == 0
    assert all(1 <= estimate_text_tokens(t) <= 2 for t in (" ", "\n", "a", "\x00", "\ud800"))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("\n".join(hashlib.sha256(b"%d" % n).hexdigest() for n in range(60)), id="sha256"),
        pytest.param(base64.b64encode(random.Random(0).randbytes(3000)).decode(), id="base64"),
        pytest.param(" ".join(str(n * 7919) for n in range(400)), id="numbers"),
        pytest.param("\x1b[1m\x1b[31mFAILED\x1b[0m tests/test_x.py::test_a - assert 1 == 2\n" * 30, id="ansi"),
        pytest.param("Привет! Как дела? Это проверка оценки токенов для русского текста. " * 20, id="cyrillic"),
        pytest.param("deploy done 🎉🚀 thanks 🙏 " * 40, id="emoji"),
    ],
)
def test_estimate_does_not_badly_undercount_unusual_text(text):
    assert 0.85 <= ratio(estimate_text_tokens, text) <= 1.5


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_estimate_never_raises(text):
    tokens = estimate_text_tokens(text)
    assert tokens >= (1 if text else 0)


# --- message_tokens ----------------------------------------------------------------


def test_plain_message_is_text_plus_overhead():
    assert message_tokens(HumanMessage("Fix the failing tests")) == MESSAGE_OVERHEAD + estimate_text_tokens(
        "Fix the failing tests"
    )
    tool = ToolMessage("3 passed", tool_call_id="call_1")
    assert message_tokens(tool) == MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + estimate_text_tokens("3 passed")


def test_tool_call_arguments_are_counted():
    args = {"path": "notes/execution_model.md", "content": CATEGORIES["english_prose"][:4000]}
    call = AIMessage("", tool_calls=[{"name": "write_file", "args": args, "id": "call_1"}])
    tokens = message_tokens(call)
    assert tokens > 800
    assert tokens >= 0.9 * o200k(json.dumps(args, ensure_ascii=False))
    bare = message_tokens(AIMessage(""))
    assert tokens - bare == TOOL_CALL_OVERHEAD + estimate_text_tokens(
        "write_file " + json.dumps(args, ensure_ascii=False)
    )


def test_invalid_tool_calls_count_their_raw_arguments():
    raw = '{"query": "token estimation", "limit": 10'  # truncated JSON
    message = AIMessage("", invalid_tool_calls=[{"name": "search", "args": raw, "id": "c1", "error": "bad json"}])
    assert message_tokens(message) == MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD + estimate_text_tokens("search " + raw)


def test_tool_use_block_duplicated_in_tool_calls_counts_once():
    block = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "src/app.py"}}
    call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": "toolu_1"}
    both = AIMessage(content=[{"type": "text", "text": "Reading it."}, block], tool_calls=[call])
    block_only = AIMessage(content=[{"type": "text", "text": "Reading it."}, block])
    assert message_tokens(both) == message_tokens(block_only)
    assert message_tokens(both) == MESSAGE_OVERHEAD + estimate_text_tokens("Reading it.") + TOOL_CALL_OVERHEAD + (
        estimate_text_tokens('read_file {"path": "src/app.py"}')
    )


def test_name_is_counted():
    assert message_tokens(HumanMessage("hi", name="alice")) == message_tokens(HumanMessage("hi")) + (
        estimate_text_tokens("alice")
    )


@pytest.mark.parametrize(
    "image",
    [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 20_000}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 20_000}},
        {"type": "image", "base64": "iVBORw0KGgo" * 20_000, "mime_type": "image/png"},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": "JVBERi0xLjQK" * 20_000}},
    ],
    ids=["openai", "anthropic", "standard", "file"],
)
def test_media_blocks_cost_a_constant_not_their_base64_length(image):
    message = HumanMessage(content=[{"type": "text", "text": "What does this show?"}, image])
    assert message_tokens(message) == MESSAGE_OVERHEAD + estimate_text_tokens("What does this show?") + MEDIA_TOKENS


def test_reasoning_and_tool_result_blocks_are_counted():
    thinking = "The failure is in the discount rounding, not in the fixture."
    ai = AIMessage(content=[{"type": "thinking", "thinking": thinking, "signature": "EqQBCgIYAhIM" * 100}])
    assert message_tokens(ai) == MESSAGE_OVERHEAD + estimate_text_tokens(thinking)  # the signature is not text
    reasoning = AIMessage(content=[{"type": "reasoning", "reasoning": thinking, "id": "rs_1"}])
    assert message_tokens(reasoning) == message_tokens(ai)
    log = CATEGORIES["test_log"][:2000]
    nested = HumanMessage(
        content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": log}]}]
    )
    flat = HumanMessage(content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": log}])
    assert (
        message_tokens(nested)
        == message_tokens(flat)
        == (MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + estimate_text_tokens(log))
    )


class _Opaque:
    def __str__(self) -> str:
        return "opaque object"


_circular: list = []
_circular.append(_circular)


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage.model_construct(content=None, id="none"),
        HumanMessage("nul\x00bytes\x00inside"),
        HumanMessage("emoji 👨‍👩‍👧‍👦 🏳️‍🌈 and a lone surrogate \ud800"),
        HumanMessage("טקסט מימין לשמאל עם English ו-العربية"),
        HumanMessage.model_construct(
            content=["plain string block", {"no_type": 1}, {"type": "text", "text": None}, 42]
        ),
        HumanMessage.model_construct(content=[[[["deep"]]] * 3, _Opaque(), {"type": "weird", "x": _Opaque()}]),
        HumanMessage.model_construct(content=[_circular, {"type": "text", "text": "ok", "extra": {"a": _circular}}]),
        AIMessage.model_construct(
            content="",
            tool_calls=[
                {"name": "f", "args": "not a dict", "id": "1"},
                {"name": None, "args": {"when": _Opaque(), "ids": {1, 2}}, "id": ["unhashable"]},
                "not a dict at all",
            ],
            invalid_tool_calls=[{"name": "g", "args": None, "id": None}],
        ),
        ToolMessage.model_construct(content={"unexpected": "dict content"}, tool_call_id="x", name=7),
    ],
    ids=["none", "nul", "emoji", "rtl", "mixed-list", "deep-and-opaque", "circular", "odd-tool-calls", "dict-content"],
)
def test_odd_messages_never_raise(message):
    assert message_tokens(message) >= MESSAGE_OVERHEAD
    assert message_tokens(message, seed_text_tokens) >= MESSAGE_OVERHEAD
    assert TokenCounter().message(message) == message_tokens(message)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "text", "content", "input", "args", "name", "id", "source", "thinking"])
            | st.text(max_size=8),
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=st.lists(_json_values, max_size=4),
    calls=st.lists(st.dictionaries(st.sampled_from(["name", "args", "id", "x"]), _json_values), max_size=3),
)
def test_arbitrary_content_blocks_never_raise(content, calls):
    message = AIMessage.model_construct(content=content, tool_calls=calls, invalid_tool_calls=calls)
    assert message_tokens(message) >= MESSAGE_OVERHEAD


# --- TokenCounter --------------------------------------------------------------------


def _conversation() -> list[BaseMessage]:
    transcript = CATEGORIES["agent_transcript"]
    return [
        SystemMessage("You are a careful coding agent.", id="sys"),
        HumanMessage(CATEGORIES["english_prose"][:3000], id="u1"),
        AIMessage(
            "Reading the module first.",
            tool_calls=[{"name": "read_file", "args": {"path": "textwrap.py"}, "id": "call_1"}],
            id="a1",
        ),
        ToolMessage(CATEGORIES["python_source"], tool_call_id="call_1", id="t1"),
        HumanMessage(content=[{"type": "text", "text": CATEGORIES["chinese"]}], id="u2"),
        AIMessage(transcript, id="a2"),
    ]


def _fresh(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Return equal messages as new objects, as a checkpointer would deserialise them."""
    return messages_from_dict(messages_to_dict(messages))


def test_estimate_tokens_sums_message_tokens():
    messages = _conversation()
    assert estimate_tokens(messages) == sum(message_tokens(m) for m in messages)
    assert seed_estimate_tokens(messages) == sum(message_tokens(m, seed_text_tokens) for m in messages)
    # The seed rule over-counts this English-and-code-heavy conversation.
    assert seed_estimate_tokens(messages) > estimate_tokens(messages)


def test_cached_counts_equal_uncached_counts():
    messages = _conversation()
    counter = TokenCounter()
    expected = [message_tokens(m) for m in messages]
    assert counter.counts(messages) == expected
    assert counter.counts(_fresh(messages)) == expected
    assert counter.total(_fresh(messages)) == sum(expected) == estimate_tokens(messages)


def test_second_pass_over_deserialised_copies_does_no_counting():
    calls: list[str] = []

    def text_tokens(text: str) -> int:
        calls.append(text)
        return estimate_text_tokens(text)

    counter = TokenCounter(text_tokens=text_tokens)
    messages = _conversation()
    first = counter.counts(messages)
    assert calls
    calls.clear()
    assert counter.counts(_fresh(messages)) == first
    assert calls == []


def test_user_counter_is_called_once_per_message_across_calls():
    seen: list[list[str]] = []

    def model_counter(messages: list[BaseMessage]) -> int:
        seen.append([m.id for m in messages])
        return 100 * len(messages)

    counter = TokenCounter(model_counter)
    messages = _conversation()
    assert counter.counts(messages) == [100] * len(messages)
    assert counter.counts(_fresh(messages)) == [100] * len(messages)
    assert counter.total(_fresh(messages)) == 100 * len(messages)
    assert seen == [[m.id] for m in messages]


def test_cache_misses_when_content_tool_calls_name_or_type_change():
    seen: list[BaseMessage] = []
    counter = TokenCounter(lambda ms: seen.extend(ms) or len(seen))
    base = AIMessage("draft", id="m")
    variants = [
        base,
        AIMessage("final", id="m"),
        AIMessage("draft", id="m", name="planner"),
        AIMessage("draft", id="m", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        AIMessage(content=[{"type": "text", "text": "draft"}], id="m"),
        HumanMessage("draft", id="m"),
    ]
    assert counter.counts(variants) == [1, 2, 3, 4, 5, 6]
    assert counter.counts(_fresh(variants)) == [1, 2, 3, 4, 5, 6]
    assert len(seen) == len(variants)


def _call(name: str = "read", args: object = None, call_id: str = "c1") -> dict:
    return {"name": name, "args": {"path": "a.py"} if args is None else args, "id": call_id}


# Each pair differs in one place and keeps every length: a count keyed on lengths would not see it.
_SAME_LENGTH_EDITS = {
    "str content": (HumanMessage("draft", id="m"), HumanMessage("final", id="m")),
    "tool result": (ToolMessage("exit 0", tool_call_id="c1", id="m"), ToolMessage("exit 1", tool_call_id="c1", id="m")),
    "name": (HumanMessage("hi", name="alpha", id="m"), HumanMessage("hi", name="gamma", id="m")),
    "tool-call arguments": (
        AIMessage("", tool_calls=[_call()], id="m"),
        AIMessage("", tool_calls=[_call(args={"path": "b.py"})], id="m"),
    ),
    "nested tool-call arguments": (
        AIMessage("", tool_calls=[_call(args={"edits": [{"old": "x = 1", "new": "x = 2"}]})], id="m"),
        AIMessage("", tool_calls=[_call(args={"edits": [{"old": "x = 1", "new": "x = 3"}]})], id="m"),
    ),
    "tool-call name": (AIMessage("", tool_calls=[_call()], id="m"), AIMessage("", tool_calls=[_call("load")], id="m")),
    "tool-call id": (
        AIMessage("", tool_calls=[_call()], id="m"),
        AIMessage("", tool_calls=[_call(call_id="c2")], id="m"),
    ),
    "second tool call": (
        AIMessage("", tool_calls=[_call(), _call(call_id="c2")], id="m"),
        AIMessage("", tool_calls=[_call(), _call(args={"path": "b.py"}, call_id="c2")], id="m"),
    ),
    "block text": (
        AIMessage([{"type": "text", "text": "draft"}], id="m"),
        AIMessage([{"type": "text", "text": "final"}], id="m"),
    ),
    "tool_use block input": (
        AIMessage([{"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}}], id="m"),
        AIMessage([{"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "b.py"}}], id="m"),
    ),
    "invalid tool-call arguments": (
        AIMessage("", invalid_tool_calls=[{"name": "f", "args": "{'p': 1", "id": "c1", "error": None}], id="m"),
        AIMessage("", invalid_tool_calls=[{"name": "f", "args": "{'p': 2", "id": "c1", "error": None}], id="m"),
    ),
}


@pytest.mark.parametrize("before, after", list(_SAME_LENGTH_EDITS.values()), ids=list(_SAME_LENGTH_EDITS))
def test_a_same_length_edit_changes_the_fingerprint_and_is_recounted(before, after):
    assert fingerprint(before) != fingerprint(after)
    # a copy restored from a checkpoint keeps its fingerprint, or every gate call would count everything again
    assert fingerprint(_fresh([before])[0]) == fingerprint(before)
    assert fingerprint(_fresh([after])[0]) == fingerprint(after)
    seen: list[BaseMessage] = []
    counter = TokenCounter(lambda ms: seen.extend(ms) or len(seen))
    assert counter.counts(_fresh([before])) == [1]
    assert counter.counts(_fresh([after])) == [2]
    assert counter.counts(_fresh([before])) == [1]


def test_an_argument_of_another_type_but_an_equal_value_changes_the_fingerprint():
    # 1, 1.0 and True are equal and hash alike, but a provider is sent 1, 1.0 and true
    messages = [AIMessage("", tool_calls=[_call(args={"limit": value})], id="m") for value in (1, 1.0, True)]
    assert len({fingerprint(m) for m in messages}) == 3


def test_the_fingerprint_tells_the_message_type_and_id_apart():
    assert fingerprint(HumanMessage("same", id="m")) != fingerprint(SystemMessage("same", id="m"))
    assert fingerprint(HumanMessage("same", id="m")) != fingerprint(HumanMessage("same", id="n"))


def test_messages_without_id_are_not_cached():
    seen: list[BaseMessage] = []
    counter = TokenCounter(lambda ms: seen.extend(ms) or 1)
    message = HumanMessage("no id")
    counter.message(message)
    counter.message(message)
    assert len(seen) == 2


def test_cache_is_bounded_and_drops_its_oldest_half():
    seen: list[str] = []
    counter = TokenCounter(lambda ms: seen.extend(m.id for m in ms) or 1)
    counter.max_entries = 4
    messages = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(10)]
    counter.counts(messages)
    seen.clear()
    counter.counts(messages[-3:])
    assert seen == []  # the newest entries survived
    counter.message(messages[0])
    assert seen == ["m0"]  # the oldest were dropped


def test_counter_total_tracks_o200k_on_a_conversation():
    # Content tokens of a whole conversation (overheads removed) vs o200k of its texts.
    messages = _conversation()
    texts = [m.content if isinstance(m.content, str) else m.content[0]["text"] for m in messages]
    overheads = len(messages) * MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + TOOL_CALL_OVERHEAD
    call_text = estimate_text_tokens('read_file {"path": "textwrap.py"}')
    content = TokenCounter().total(messages) - overheads - call_text
    assert math.isclose(content, sum(o200k(t) for t in texts), rel_tol=0.10)
