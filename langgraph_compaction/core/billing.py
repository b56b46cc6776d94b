"""What a provider bills for a request's input under prompt caching: the prices and the cache that serves a prefix.

Providers cache the longest prefix of a request that matches an earlier
request and bill it at a fraction of the price. `PrefixCache` says how many
tokens of a request the cache serves (the longest run of leading messages
identical to the start of one of the last `CACHE_DEPTH` requests; message
granularity stands in for the providers' 128-token blocks) and `Pricing.bill`
what the request then costs, in full-price token equivalents.

>>> cache = PrefixCache(min_tokens=0)
>>> cache.read(["system", "ask"], [900, 100])
0
>>> cache.read(["system", "ask", "call", "result"], [900, 100, 50, 950])
1000
>>> OPENAI.bill(tokens=2_000, cached=1_000)
1100.0

Pure functions; nothing here imports langgraph.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .caching import CACHE_DEPTH, cached_prefix

#: The price of a cached input token, a full-price one being 1 (OpenAI's gpt-5 family and Anthropic alike).
CACHED_PRICE = 0.1
#: OpenAI caches the prefix of a request of at least this many tokens.
CACHE_MIN_TOKENS = 1_024


@dataclass(frozen=True)
class Pricing:
    """A provider's input prices, relative to a full-price input token.

    Args:
        uncached: the price of an input token the cache did not serve (Anthropic
            bills it as a cache write, 1.25).
        cached: the price of a token read from the cache.
    """

    uncached: float = 1.0
    cached: float = CACHED_PRICE

    def bill(self, tokens: float, cached: float) -> float:
        """Return what a request of ``tokens`` input tokens, ``cached`` of them read from the cache, costs.

        Args:
            tokens: the request's input tokens, cached ones included.
            cached: how many of them the cache served.
        """
        return (tokens - cached) * self.uncached + cached * self.cached


#: OpenAI, gpt-5 family: automatic caching, cache reads at `CACHED_PRICE`, no write surcharge.
OPENAI = Pricing()
#: Anthropic: ``cache_control`` breakpoints, reads at `CACHED_PRICE`, every uncached token written at 1.25.
ANTHROPIC = Pricing(uncached=1.25)
#: The price lists the benchmarks report, by provider.
PRICES = {"openai": OPENAI, "anthropic": ANTHROPIC}


def cache_read(tokens: int, prefix: int, min_tokens: int = CACHE_MIN_TOKENS) -> int:
    """Return the tokens the cache serves of a ``tokens``-token request whose first ``prefix`` tokens it holds.

    Args:
        tokens: the request's input tokens.
        prefix: the tokens of its leading messages the cache holds.
        min_tokens: the smallest request the provider caches at all.
    """
    return prefix if tokens >= min_tokens else 0


class PrefixCache:
    """A provider's prompt cache over a sequence of requests: each ``read`` returns the tokens it serves.

    Args:
        depth: how many earlier requests the cache holds.
        min_tokens: the smallest request it serves anything of (OpenAI: 1,024).
    """

    def __init__(self, depth: int = CACHE_DEPTH, min_tokens: int = CACHE_MIN_TOKENS) -> None:
        self.depth = depth
        self.min_tokens = min_tokens
        self._recent: list[list[Hashable]] = []

    def read(self, keys: Sequence[Hashable], sizes: Sequence[int]) -> int:
        """Return the tokens the cache serves of a request, then remember the request.

        Args:
            keys: what the provider compares of each message, in order (e.g. `caching.cache_key`).
            sizes: the tokens of each message.
        """
        shared = cached_prefix(keys, self._recent)
        self._recent = [*self._recent, list(keys)][-self.depth :]
        return cache_read(sum(sizes), sum(sizes[:shared]), self.min_tokens)
