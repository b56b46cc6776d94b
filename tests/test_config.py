"""The design's dynamic-threshold examples and the config's validation."""

import pytest
from pydantic import ValidationError

from langgraph_compaction import CompactionConfig


def test_gpt4o_window_gives_trigger_108000_keep_8000_without_prompt_caching():
    budget = CompactionConfig(context_window=128_000, prompt_cache=False).resolve()
    assert (budget.trigger_tokens, budget.keep_tokens) == (108_000, 8_000)


def test_claude_window_gives_trigger_180000_keep_8000_without_prompt_caching():
    budget = CompactionConfig(context_window=200_000, prompt_cache=False).resolve()
    assert (budget.trigger_tokens, budget.keep_tokens) == (180_000, 8_000)


@pytest.mark.parametrize("window", [60_000, 128_000, 200_000, 1_000_000])
def test_under_prompt_caching_the_derived_tail_is_the_smallest_one(window):
    # the tail is billed in full after every summary and read on every call until the next: keep_tokens_min
    assert CompactionConfig(context_window=window).resolve().keep_tokens == 2_000
    assert CompactionConfig(context_window=window, keep_tokens_min=3_000).resolve().keep_tokens == 3_000
    assert CompactionConfig(context_window=window, keep_tokens=8_000).resolve().keep_tokens == 8_000  # explicit wins


def test_unknown_window_falls_back_to_160000_and_20_messages():
    budget = CompactionConfig().resolve()
    assert budget.trigger_tokens == 160_000
    assert budget.keep_tokens == 0 and budget.keep_messages == 20


def test_small_window_scales_the_reserve_and_the_keep_down():
    budget = CompactionConfig(context_window=16_000).resolve()
    assert budget.trigger_tokens == 8_000  # the reserve is at most half the window
    # 2,000 would leave no room for a ~3,000-token summary under the target (4,800)
    assert budget.keep_tokens == 1_800 and budget.keep_tokens + 3_000 <= budget.target_tokens
    # the trigger grows with the window: 24k no longer gets 24,000 - 20,000 = 4,000
    assert CompactionConfig(context_window=24_000).resolve().trigger_tokens == 12_000


WINDOWS = sorted(
    {int(1_000 * 1.05**k) for k in range(142)} | {1_000, 4_000, 10_833, 20_001, 40_000, 128_000, 1_000_000}
)


def test_every_window_from_1000_to_1000000_gets_a_working_budget_or_a_clear_error():
    smallest = CompactionConfig().smallest_window()
    assert 10_000 < smallest < 12_000 and WINDOWS[0] == 1_000 and WINDOWS[-1] >= 1_000_000
    for window in WINDOWS:
        try:
            budget = CompactionConfig(context_window=window).resolve()
        except ValidationError as err:
            assert window < smallest
            assert (
                "context_window" in str(err) and f"{smallest:,}" in str(err) and "fidelity.request_tokens" in str(err)
            )
            continue
        assert window >= smallest
        assert (
            250 <= budget.keep_tokens
            and budget.keep_tokens + 3_000 <= budget.target_tokens < budget.trigger_tokens < window
        )


def test_a_window_the_model_reports_is_checked_like_a_configured_one():
    class Small:
        profile = {"max_input_tokens": 4_000}

    with pytest.raises(ValidationError, match="context_window"):
        CompactionConfig().resolve(Small())
    # lowering the summary's share makes a 4,000-token window work
    budget = CompactionConfig(target_ratio=0.9, fidelity={"request_tokens": 200}).resolve(Small())
    assert (budget.trigger_tokens, budget.keep_tokens) == (2_000, 600)


@pytest.mark.parametrize("window", [11_000, 16_000, 30_000])
def test_a_small_window_chat_runs_without_refusals_or_a_summary_every_turn(window):
    from langchain_core.exceptions import ContextOverflowError
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph

    from langgraph_compaction import CompactionState, add_compaction
    from langgraph_compaction.core.tokens import estimate_tokens
    from langgraph_compaction.testing import ScriptedModel

    sizes = []

    def agent(state):  # refuses, like a provider, a request over the window
        sizes.append(estimate_tokens(state["messages"]))
        if sizes[-1] > window:
            raise ContextOverflowError("prompt is too long")
        return {"messages": [AIMessage("Here is the answer, with the reasoning behind it. " * 8)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=ScriptedModel(), config=CompactionConfig(context_window=window))
    graph = builder.compile()
    state: dict = {"messages": []}
    for t in range(120):
        state = graph.invoke(
            {**state, "messages": [*state["messages"], HumanMessage(f"Turn {t}: and the next invoice?")]}
        )
    assert max(sizes) <= window and len(sizes) == 120  # no refusal, no retry
    assert state["compaction"]["counts"].get("summarize", 0) <= 120 // 6


def test_window_from_model_profile():
    class Model:
        profile = {"max_input_tokens": 128_000}

    assert CompactionConfig().resolve(Model()).trigger_tokens == 108_000


def test_static_values_win_over_dynamic_rules():
    budget = CompactionConfig(context_window=128_000, trigger_tokens=50_000, keep_tokens=3_000).resolve()
    assert (budget.trigger_tokens, budget.keep_tokens) == (50_000, 3_000)
    assert CompactionConfig(context_window=128_000, keep_tokens=0).resolve().keep_tokens == 0


def test_defaults_are_the_design_table():
    cfg = CompactionConfig()
    assert (cfg.trigger_messages, cfg.reserved, cfg.keep_messages) == (50, 20_000, 20)
    assert (cfg.keep_tokens_min, cfg.keep_tokens_max, cfg.keep_tokens_ratio) == (2_000, 8_000, 0.25)
    assert (cfg.truncate_args.trigger_messages, cfg.truncate_args.trigger_tokens) == (25, 40_000)
    assert (cfg.truncate_args.keep_messages, cfg.truncate_args.max_arg_length) == (20, 2_000)
    assert (cfg.prune.protect_tokens, cfg.prune.minimum_tokens, cfg.prune.max_output_chars) == (40_000, 20_000, 2_000)
    # the design's four retrieval tools plus recall, which returns evicted messages
    assert cfg.prune.excluded_tools == {"read_file", "memory_search", "memory_get", "session_search", "recall"}
    assert (cfg.micro.keep_recent, cfg.micro.min_chars) == (3, 100)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"keep_tokens_min": 9_000, "keep_tokens_max": 8_000}, "keep_tokens_min"),
        ({"keep_tokens_ratio": 0}, "keep_tokens_ratio"),
        ({"keep_tokens_ratio": 1.5}, "keep_tokens_ratio"),
        ({"reserved": -1}, "reserved"),
        ({"keep_tokens": -2}, "keep_tokens"),
        ({"context_window": -5}, "context_window"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"keep_messages": 0}, "keep_messages"),
    ],
)
def test_impossible_values_raise_an_error_naming_the_field(kwargs, field):
    with pytest.raises(ValidationError) as err:
        CompactionConfig(**kwargs)
    assert field in str(err.value)


def test_unknown_field_is_refused():
    with pytest.raises(ValidationError, match="trigger_tokenz"):
        CompactionConfig(trigger_tokenz=5)
