"""The design document's worked examples, figure for figure."""

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_compaction import CompactionConfig
from langgraph_compaction.core.layers import prune_tool_results, truncate_arguments
from langgraph_compaction.core.plan import find_cutoff
from langgraph_compaction.core.tokens import seed_estimate_tokens


def _chat(n, prefix="m"):
    return [(HumanMessage if i % 2 == 0 else AIMessage)(content=f"turn {i}", id=f"{prefix}{i}") for i in range(n)]


def _seed_counts():
    # 80 messages, 120,000 tokens: tokens(msgs[40:]) = 60000, [60:] = 30000, [70:] = 12000,
    # [73:] = 9000, [74:] = 7000, [75:] = 5000 -- the numbers of the design's binary search.
    counts = [1500] * 40 + [1500] * 20 + [1800] * 10 + [1000] * 3 + [2000, 2000] + [1000] * 5
    assert len(counts) == 80 and sum(counts) == 120_000
    assert sum(counts[40:]) == 60_000 and sum(counts[60:]) == 30_000 and sum(counts[70:]) == 12_000
    assert sum(counts[73:]) == 9_000 and sum(counts[74:]) == 7_000 and sum(counts[75:]) == 5_000
    return counts


def test_binary_search_example_cuts_at_74():
    cut = find_cutoff(_chat(80), _seed_counts(), keep_tokens=8_000, keep_messages=20)
    assert cut.cutoff == 74
    assert cut.evict == tuple(range(74))


def test_tool_pair_example_moves_cut_from_75_to_73():
    messages = _chat(73) + [
        AIMessage(
            content="",
            id="a73",
            tool_calls=[
                {"name": "bash", "args": {"cmd": "ls"}, "id": "t1"},
                {"name": "bash", "args": {"cmd": "pwd"}, "id": "t2"},
            ],
        ),
        HumanMessage(content="(a user note logged between call and results)", id="u74"),
        ToolMessage(content="a b c", tool_call_id="t1", id="r75"),
        ToolMessage(content="/work", tool_call_id="t2", id="r76"),
        AIMessage(content="done", id="a77"),
        HumanMessage(content="thanks", id="u78"),
        AIMessage(content="you're welcome", id="a79"),
    ]
    counts = [1500] * 73 + [2000, 2000, 1000, 1000, 1000, 1000, 1000]
    assert sum(counts[75:]) <= 8_000 < sum(counts[74:]) + 2_000  # the raw search lands on 75, a TOOL message
    cut = find_cutoff(messages, counts, keep_tokens=8_000, keep_messages=20)
    assert cut.cutoff == 73
    assert cut.kept_human is None  # the latest human message (u78) is in the tail


def test_unknown_window_keeps_the_last_20_messages():
    cut = find_cutoff(_chat(60), [100] * 60, keep_tokens=0, keep_messages=20)
    assert cut.cutoff == 40


def _bash_history(tool_name):
    messages = [SystemMessage(content="You are a coding agent.", id="sys")]
    for i in range(10):
        messages.append(HumanMessage(content=f"step {i}", id=f"u{i}"))
        messages.append(
            AIMessage(content="", id=f"a{i}", tool_calls=[{"name": tool_name, "args": {"cmd": "make"}, "id": f"c{i}"}])
        )
        messages.append(
            ToolMessage(content=("x" * 2500) + ("y" * 2500), tool_call_id=f"c{i}", name=tool_name, id=f"r{i}")
        )
    recent = [HumanMessage(content="recent " + "z" * 100_000, id="recent")]  # fills the 40k protected window
    return messages + recent


def test_prune_example_ten_bash_results_become_head_marker_tail():
    messages = _bash_history("bash")
    counts = [seed_estimate_tokens([m]) for m in messages]
    edits = prune_tool_results(messages, counts, CompactionConfig().prune)
    assert sorted(m.id for m in edits.values()) == sorted(f"r{i}" for i in range(10))
    for m in edits.values():
        assert m.content == "x" * 1000 + "\n\n...(3000 chars pruned)...\n\n" + "y" * 1000
    # each result is ~2,000 tokens by the design's estimator; together 20,000 >= minimum_tokens
    assert sum(counts[i] for i, m in enumerate(messages) if m.id in {e.id for e in edits.values()}) >= 20_000


def test_prune_example_read_file_results_are_never_pruned():
    messages = _bash_history("read_file")
    counts = [seed_estimate_tokens([m]) for m in messages]
    assert prune_tool_results(messages, counts, CompactionConfig().prune) == {}


def test_prune_skips_when_less_than_minimum_tokens_can_be_freed():
    messages = _bash_history("bash")[:7] + [HumanMessage(content="z" * 100_000, id="recent")]
    counts = [seed_estimate_tokens([m]) for m in messages]
    assert prune_tool_results(messages, counts, CompactionConfig().prune) == {}


def test_write_file_argument_of_5000_chars_keeps_20_chars_and_marker():
    content = "def main():\n" + "    pass\n" * 600
    messages = [
        HumanMessage(content="write the file", id="u0"),
        AIMessage(
            content="",
            id="a0",
            tool_calls=[{"name": "write_file", "args": {"path": "src/app.py", "content": content}, "id": "w0"}],
        ),
        ToolMessage(content="ok", tool_call_id="w0", id="r0"),
    ] + _chat(30)
    edits = truncate_arguments(messages, total_tokens=10_000, cfg=CompactionConfig().truncate_args)
    new = edits[1]
    assert new.id == "a0"
    assert new.tool_calls[0]["args"]["content"] == content[:20] + "...(argument truncated)"
    assert new.tool_calls[0]["args"]["path"] == "src/app.py"


def test_truncation_leaves_the_last_20_messages_alone():
    content = "x" * 5000
    messages = (
        _chat(10)
        + [
            AIMessage(
                content="", id="a0", tool_calls=[{"name": "write_file", "args": {"content": content}, "id": "w0"}]
            ),
            ToolMessage(content="ok", tool_call_id="w0", id="r0"),
        ]
        + _chat(15, "late")
    )
    assert truncate_arguments(messages, total_tokens=0, cfg=CompactionConfig().truncate_args) == {}
