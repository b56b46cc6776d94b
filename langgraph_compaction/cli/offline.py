"""The demo's offline agent: the scripted workload, reporting its usage as OpenAI's automatic prompt caching would.

Without ``OPENAI_API_KEY`` the demo's agent is `workload.scripted_round`.
Each reply carries the ``usage_metadata`` an OpenAI model would report
(`PromptCache`), so the thread's calibration and the billed figures see cache
reads offline too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage

from ..core.billing import PrefixCache
from ..core.caching import cache_key
from ..core.conversation import latest_user_index
from ..core.tokens import TokenCounter
from .workload import scripted_round


class PromptCache:
    """OpenAI's automatic prompt caching, as the offline agent's ``usage_metadata`` reports it.

    The cache is `billing.PrefixCache` over the messages' `cache_key`, each
    message counted with ``counter``: a request's cached prefix is its longest
    run of leading messages identical to the start of one of the last four
    requests, and a request under 1,024 tokens reads nothing.

    Args:
        counter: the token counter whose counts the replies report.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cache = PrefixCache()

    def usage(self, messages: Sequence[BaseMessage], reply: AIMessage) -> dict:
        """Return the ``usage_metadata`` of ``reply`` to the request ``messages``, and remember the request.

        Args:
            messages: the request.
            reply: the agent's answer to it (its tokens are the output).
        """
        counts = self.counter.counts(list(messages))
        cached = self._cache.read([cache_key(m) for m in messages], counts)
        tokens, output = sum(counts), self.counter.message(reply)
        return {
            "input_tokens": tokens,
            "output_tokens": output,
            "total_tokens": tokens + output,
            "input_token_details": {"cache_read": cached},
        }


def offline_agent(seed: int, counter: TokenCounter, steps: dict[str, int]) -> Callable[[list[BaseMessage]], AIMessage]:
    """Return the scripted agent: given the messages it is sent, its next round of the current request.

    Args:
        seed: the workload's seed.
        counter: the token counter its usage reports count with.
        steps: the replies each request (by message id) has had; kept outside
            the messages because compaction may evict a request's first rounds.
    """
    cache = PromptCache(counter)

    def decide(messages: list[BaseMessage]) -> AIMessage:
        request = messages[latest_user_index(messages) or 0]  # a demo request is always there
        turn = int(str(request.content).split()[1].rstrip(":")) - 1
        key = str(request.id)
        step = steps.get(key, 0)
        steps[key] = step + 1
        reply = scripted_round(turn, step, seed)
        return reply.model_copy(update={"usage_metadata": cache.usage(messages, reply)})

    return decide
