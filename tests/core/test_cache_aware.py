"""Cache-aware compaction: edits that repay their prompt-cache break, and summarizer requests the cache serves."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage, ToolMessage

from langgraph_compaction import CompactionConfig
from langgraph_compaction.core.plan import cache_aware_edits, edit_repays
from langgraph_compaction.testing.agents import ScriptedAgent, compaction_graph, drive, trajectory_turns
from langgraph_compaction.testing.ledger import CacheLedger, RecordingModel

TRAJECTORY = Path(__file__).resolve().parents[1] / "data" / "trajectories" / "oh_claude35_swebv_django-11087.jsonl"
#: The replay measure's budget: a 60k window, a trigger of 40k tokens or 50 messages, 8k kept.
CONFIG = CompactionConfig(context_window=60_000, trigger_tokens=40_000, keep_tokens=8_000, trigger_messages=50)


def test_an_edit_repays_after_nine_times_its_suffix_over_its_saving():
    # saving 1,000 tokens ahead of 10,000: 9,000 re-billed once, 100 saved per later call
    assert not edit_repays(1_000, 10_000, 89)
    assert edit_repays(1_000, 10_000, 90)
    assert not edit_repays(0, 0, 1_000)


def test_with_a_summary_only_the_edits_of_messages_that_stay_are_made():
    edits = {1: HumanMessage("a"), 5: HumanMessage("b"), 9: HumanMessage("c")}
    kept = cache_aware_edits(edits, [10] * 12, [5] * 12, evict=(0, 1, 2, 3, 4, 5), calls_ahead=0)
    assert list(kept) == [9]


def test_without_a_summary_an_edit_that_does_not_repay_waits():
    edits = {2: ToolMessage("x", tool_call_id="c", id="t")}
    original, edited = [1_000, 1_000, 5_000, 20_000], [1_000, 1_000, 500, 20_000]
    assert cache_aware_edits(edits, original, edited, evict=None, calls_ahead=10) == {}
    assert cache_aware_edits(edits, original, edited, evict=None, calls_ahead=41) == edits


def test_summarizer_and_flush_requests_start_with_the_agents_own_messages(tmp_path):
    requests: list[tuple[str, list]] = []

    class Ledger(CacheLedger):
        def add(self, kind, messages):
            requests.append((kind, list(messages)))
            return super().add(kind, messages)

    ledger = Ledger()
    summarizer = RecordingModel(ledger=ledger, reply="OK.")
    agent = ScriptedAgent(measure=False, observe=lambda view: ledger.add("agent", view))
    graph = compaction_graph(agent, summarizer, CONFIG, storage=tmp_path).compile()
    drive(graph, agent, trajectory_turns(TRAJECTORY))
    side = [(i, m) for i, (kind, m) in enumerate(requests) if kind == "side"]
    assert side, "the trajectory compacts at this budget"
    for i, messages in side:
        last_agent = next(m for kind, m in reversed(requests[:i]) if kind == "agent")
        prefix, instruction = messages[:-1], messages[-1]
        assert prefix, "the agent's messages come first, not a rendered transcript"
        # unchanged: the same objects' content, role and tool calls, in the same order as the agent sent them
        assert [(m.type, m.content, getattr(m, "tool_calls", None)) for m in prefix] == [
            (m.type, m.content, getattr(m, "tool_calls", None)) for m in last_agent[: len(prefix)]
        ]
        assert isinstance(instruction, HumanMessage)
        assert (
            "Context Extraction Assistant" in instruction.content
            or "memory extraction assistant" in instruction.content
        )
    figures = ledger.figures()
    assert figures["side_cached"] >= 0.8 * figures["side_input"]


def test_anthropic_requests_carry_breakpoints_on_the_system_prompt_the_summary_and_the_newest_message():
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import AIMessage, SystemMessage

    from langgraph_compaction.core.caching import with_cache_breakpoints
    from langgraph_compaction.core.summary import build_summary_message

    call = {"name": "bash", "args": {"cmd": "pytest"}, "id": "toolu_1"}
    messages = [
        SystemMessage("You are a coding agent.", id="s"),
        build_summary_message("## SESSION INTENT\nFix the build.\n\n## SUMMARY\nRan the tests."),
        HumanMessage("Go on.", id="h"),
        AIMessage("Running the tests.", tool_calls=[call], id="a"),
        ToolMessage("3 passed", tool_call_id="toolu_1", name="bash", id="t"),
    ]
    marked = with_cache_breakpoints(messages)
    assert [m.id for m in marked] == [m.id for m in messages]
    assert marked[2] is messages[2] and marked[3] is messages[3]  # unmarked messages are passed through
    payload = ChatAnthropic(model="claude-sonnet-4-5", api_key="not-used")._get_request_payload(marked)
    assert payload["system"][-1]["cache_control"] == {"type": "ephemeral"}
    summary_turn, *_, newest = payload["messages"]
    assert summary_turn["content"][0]["cache_control"] == {"type": "ephemeral"}  # the summary, first block of the turn
    assert newest["content"][-1]["type"] == "tool_result" and newest["content"][-1]["cache_control"] == {
        "type": "ephemeral"
    }
    marks = [b for m in payload["messages"] for b in m["content"] if isinstance(b, dict) and "cache_control" in b]
    assert len(marks) + 1 <= 4  # Anthropic accepts at most four breakpoints per request


def _pruning_plan(prompt_cache: bool, calls: int = 1):
    """Plan one call whose only edit is layer 2 on an old 10k-token result, ``calls`` calls of this turn's size before a summary.

    The edit saves ~9.7k tokens ahead of a ~20.6k suffix: 0.9 x 20.6k re-billed once against 0.1 x 9.7k per
    later call, so it repays after ~19 calls.
    """
    from langchain_core.messages import AIMessage

    from langgraph_compaction import CompactionConfig
    from langgraph_compaction.core.plan import plan_compaction
    from langgraph_compaction.core.tokens import TokenCounter

    messages = [
        HumanMessage("Read the log.", id="u1"),
        AIMessage("", tool_calls=[{"name": "shell", "args": {"command": "cat build.log"}, "id": "c1"}], id="a1"),
        ToolMessage("build step ok\n" * 3_000, tool_call_id="c1", name="shell", id="t1"),
        HumanMessage("Now explain the design. " * 2_000, id="u2"),
        AIMessage("The design, in detail. " * 1_500, id="a2"),
    ]
    counter = TokenCounter()
    counts = counter.counts(messages)
    config = CompactionConfig(
        trigger_tokens=sum(counts) + calls * counts[-1],
        keep_tokens=2_000,
        trigger_messages=0,
        prune={"protect_tokens": 0, "minimum_tokens": 0},
        prompt_cache=prompt_cache,
        working_set_tokens=0,  # the log is the file the agent read last: the working set would keep it whole
    )
    return plan_compaction(messages, counts, config.resolve(), config, counter.message)


def test_an_edit_that_does_not_repay_waits_under_prompt_caching_and_is_made_without_it():
    cached, uncached = _pruning_plan(True), _pruning_plan(False)
    assert cached.edits == {} and cached.reason is None  # ~2 calls ahead: it would never repay
    assert list(uncached.edits) == [2] and uncached.layer_counts == {"prune": 1}
    assert uncached.tokens_after_layers < cached.tokens_after_layers


def test_an_edit_must_repay_within_half_the_calls_forecast_before_the_next_summary():
    # forecast ~31 calls: it would repay after ~19 of them, but not within half; at ~51 it does
    assert _pruning_plan(True, calls=30).edits == {}
    assert list(_pruning_plan(True, calls=50).edits) == [2]
