"""The design's dynamic-threshold examples and the config's validation."""

import pytest
from pydantic import ValidationError

from langgraph_compaction import CompactionConfig


def test_gpt4o_window_gives_trigger_108000_keep_8000():
    budget = CompactionConfig(context_window=128_000).resolve()
    assert (budget.trigger_tokens, budget.keep_tokens) == (108_000, 8_000)


def test_claude_window_gives_trigger_180000_keep_8000():
    budget = CompactionConfig(context_window=200_000).resolve()
    assert (budget.trigger_tokens, budget.keep_tokens) == (180_000, 8_000)


def test_unknown_window_falls_back_to_160000_and_20_messages():
    budget = CompactionConfig().resolve()
    assert budget.trigger_tokens == 160_000
    assert budget.keep_tokens == 0 and budget.keep_messages == 20


def test_small_window_clamps_trigger_to_half_and_keep_to_minimum():
    budget = CompactionConfig(context_window=16_000).resolve()
    assert budget.trigger_tokens == 8_000  # 16000 - 20000 <= 0 -> 16000 // 2
    assert budget.keep_tokens == 2_000  # max(2000, negative usable * 0.25)


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
