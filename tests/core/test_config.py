"""The original harness's dynamic-threshold examples, the config's validation, and its earlier spellings."""

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
    budget = CompactionConfig(summary={"target_ratio": 0.9}, fidelity={"request_tokens": 200}).resolve(Small())
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
    by_count = CompactionConfig(context_window=128_000, keep_by="messages").resolve()
    assert (by_count.keep_tokens, by_count.keep_messages) == (0, 20)  # the tail is the last 20 messages


def test_defaults_are_the_original_harness_table():
    cfg = CompactionConfig()
    assert (cfg.trigger_messages, cfg.reserved, cfg.keep_messages) == (50, 20_000, 20)
    assert (cfg.keep_tokens_min, cfg.keep_tokens_max, cfg.keep_tokens_ratio) == (2_000, 8_000, 0.25)
    assert (cfg.truncate_args.trigger_messages, cfg.truncate_args.trigger_tokens) == (25, 40_000)
    assert (cfg.truncate_args.keep_messages, cfg.truncate_args.max_arg_length) == (20, 2_000)
    assert (cfg.prune.protect_tokens, cfg.prune.minimum_tokens, cfg.prune.max_output_chars) == (40_000, 20_000, 2_000)
    # the harness's four retrieval tools plus recall, which returns evicted messages
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
        ({"trigger_tokens": -3}, "trigger_tokens"),
        ({"keep_by": "turns"}, "keep_by"),
        ({"keep_by": "messages", "keep_tokens": 3_000}, "keep_tokens"),
        ({"summary": {"timeout": 0}}, "summary.timeout"),
        ({"background": {"start": 1.5}}, "background.start"),
        ({"guards": {"breaker_failures": 0}}, "guards.breaker_failures"),
        ({"memory": {"colour": "red"}}, "memory.colour"),
        ({"context_window": -5}, "context_window"),
        ({"memory": {"timezone": "Mars/Olympus"}}, "memory.timezone"),
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


def test_derived_sizes_are_spelled_none():
    config = CompactionConfig(context_window=128_000)
    assert (config.trigger_tokens, config.keep_tokens, config.working_set_tokens) == (None, None, None)
    budget = config.resolve()
    assert (budget.trigger_tokens, budget.keep_tokens, budget.working_set_tokens) == (108_000, 2_000, 6_000)
    assert CompactionConfig(context_window=128_000, working_set_tokens=0).resolve().working_set_tokens == 0


def test_the_groups_are_set_as_dicts_or_instances():
    from langgraph_compaction.core.config import BackgroundConfig, GuardsConfig, MemoryConfig, SummaryConfig

    config = CompactionConfig(
        background={"start": 0.7},
        summary=SummaryConfig(timeout=30, target_ratio=0.5),
        memory=MemoryConfig(timezone="Asia/Shanghai"),
        guards={"breaker_failures": 5},
    )
    assert config.background == BackgroundConfig(start=0.7) and config.background.enabled
    assert (config.summary.timeout, config.memory.timezone, config.guards) == (
        30,
        "Asia/Shanghai",
        GuardsConfig(breaker_failures=5),
    )
    assert CompactionConfig(context_window=100_000, summary={"target_ratio": 0.5}).resolve().target_tokens == 40_000


def test_a_bad_summary_prompt_names_the_setting_and_the_fix():
    with pytest.raises(ValidationError) as err:
        CompactionConfig(summary={"prompt": "Summarize the conversation."})
    message = str(err.value)
    assert "summary.prompt lacks the {messages} placeholder" in message
    assert "summary.instructions" in message


# -- one spelling per setting


@pytest.mark.parametrize(
    ("flat", "home"),
    [
        ({"summary_timeout": 60}, r"summary\.timeout, given as summary=\{'timeout': \.\.\.\}"),
        ({"timezone": "Europe/Paris"}, r"memory\.timezone, given as memory=\{'timezone': \.\.\.\}"),
        ({"background_start": 0.8}, r"background\.start, given as background=\{'start': \.\.\.\}"),
        ({"breaker_failures": 5}, r"guards\.breaker_failures, given as guards=\{'breaker_failures': \.\.\.\}"),
    ],
)
def test_a_groups_setting_given_at_the_top_is_refused_naming_its_group(flat, home):
    with pytest.raises(ValidationError, match=f"{next(iter(flat))} is not a top-level setting: it is {home}"):
        CompactionConfig(context_window=32_000, **flat)


def test_a_derived_size_is_none_and_a_number_below_its_range_is_refused():
    assert CompactionConfig(context_window=128_000).keep_tokens is None
    for name, number in (("keep_tokens", -1), ("keep_tokens", 0), ("trigger_tokens", 0), ("context_window", 0)):
        with pytest.raises(ValidationError, match=name):
            CompactionConfig(**{name: number})


def test_a_bool_background_is_background_enabled():
    assert CompactionConfig(context_window=32_000, background=True).background.enabled
    off = CompactionConfig(background=False)
    assert not off.background.enabled and not off.background  # `if config.background:` reads as a bool
    assert off.background.start == 0.85


def test_model_copy_updates_the_stated_group_and_validates():
    config = CompactionConfig(summary={"instructions": "Be brief."}, background={"start": 0.8})
    copy = config.model_copy(update={"summary": {"timeout": 9}, "background": False})
    assert (copy.summary.timeout, copy.summary.instructions) == (9, "Be brief.")
    assert (copy.background.enabled, copy.background.start) == (False, 0.8)
    with pytest.raises(ValidationError, match="keep_tokens_min"):
        config.model_copy(update={"keep_tokens_min": 9_000})
    with pytest.raises(ValidationError, match="summary.timeout"):
        config.model_copy(update={"summary_timeout": 9})


def test_a_runs_keep_tokens_in_its_context_wins_over_a_config_that_keeps_messages():
    from dataclasses import dataclass

    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph

    from langgraph_compaction import CompactionState, add_compaction, is_summary
    from langgraph_compaction.testing import ScriptedModel

    @dataclass
    class Context:
        keep_tokens: int | None = None

    def agent(state):
        return {"messages": [AIMessage("Checked the invoices and their totals. " * 100)]}

    builder = StateGraph(CompactionState, context_schema=Context)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    config = CompactionConfig(
        context_window=20_000, trigger_tokens=6_000, keep_by="messages", keep_messages=2, background=False
    )
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config)
    graph = builder.compile()
    state: dict = {"messages": []}
    for t in range(20):
        turn = [*state["messages"], HumanMessage(f"Turn {t}: and the next invoice?")]
        state = graph.invoke({**state, "messages": turn}, context=Context(keep_tokens=2_500))
    messages = state["messages"]
    assert any(is_summary(m) for m in messages)
    kept = messages[next(i for i, m in enumerate(messages) if is_summary(m)) + 1 :]
    assert len(kept) > 3  # about 2,500 tokens of tail, not the config's last 2 messages


def test_the_examples_in_the_settings_docstrings_hold():
    import doctest

    from langgraph_compaction.core import config, langchain_args

    assert [doctest.testmod(module).failed for module in (config, langchain_args)] == [0, 0]
