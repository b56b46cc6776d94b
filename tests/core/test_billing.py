"""One billing model: what a provider bills for a request's input under prompt caching.

The demo's totals, the thread's ``usage`` event, the cost benchmark and the engine's rule for edits that break the
cache all bill through ``core.billing``: a cached token at 0.1 of a full-price one (OpenAI gpt-5, Anthropic reads),
Anthropic's uncached tokens at 1.25 (a cache write).
"""

import doctest

import pytest

from langgraph_compaction.core import billing, calibration, plan
from langgraph_compaction.core.billing import ANTHROPIC, CACHED_PRICE, OPENAI, PRICES, PrefixCache, cache_read


def test_the_modules_examples_hold():
    assert doctest.testmod(billing).failed == 0


@pytest.mark.parametrize(
    "pricing, tokens, cached, billed",
    [
        (OPENAI, 10_000, 0, 10_000),
        (OPENAI, 10_000, 9_000, 1_000 + 900),
        (OPENAI, 10_000, 10_000, 1_000),
        (ANTHROPIC, 10_000, 0, 12_500),
        (ANTHROPIC, 10_000, 9_000, 1_250 + 900),
    ],
)
def test_a_request_bills_its_uncached_tokens_in_full_and_its_cached_ones_at_a_tenth(pricing, tokens, cached, billed):
    assert pricing.bill(tokens, cached) == pytest.approx(billed)


def test_the_cached_price_is_the_one_every_bill_uses():
    assert CACHED_PRICE == 0.1 and set(PRICES) == {"openai", "anthropic"}
    assert all(p.cached == CACHED_PRICE for p in PRICES.values())
    # the thread's usage event and the engine's repay rule read the same price
    usage = calibration.add_usage({}, 10_000, {"cache_read": 9_000})
    assert calibration.billed_input(usage) == pytest.approx(1_900)
    assert plan.CACHED_PRICE is CACHED_PRICE


@pytest.mark.parametrize("tokens, served", [(1_023, 0), (1_024, 1_000), (50_000, 1_000)])
def test_openai_serves_nothing_of_a_request_under_1024_tokens(tokens, served):
    assert cache_read(tokens, 1_000) == served
    assert cache_read(tokens, 1_000, min_tokens=0) == 1_000


def test_the_cache_serves_the_longest_prefix_shared_with_one_of_the_last_four_requests():
    cache = PrefixCache()
    sizes = {"sys": 2_000, "a": 100, "b": 100, "c": 100, "d": 100, "e": 100}
    read = lambda *keys: cache.read(keys, [sizes[k] for k in keys])  # noqa: E731
    assert read("sys", "a") == 0  # nothing cached yet
    assert read("sys", "a", "b") == 2_100  # the previous request is its prefix
    assert read("sys", "b") == 2_000  # a changed message ends the shared run
    for key in "cde":
        read(key)  # three short requests: ("sys", "a", "b") is now the fifth most recent
    assert read("sys", "a", "b", "c") == 2_000  # ("sys", "b") is still held; ("sys", "a", "b") is not
