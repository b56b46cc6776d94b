"""A ledger of model requests under prompt caching, and the reads each edit needs: for tests and benchmarks.

``CacheLedger`` records every model request of a run in order (the agent's
calls and the side calls: summarizer, flush model), each as its list of
messages, with the prefix a provider's cache would serve: the longest run of
leading messages identical to the start of one of the last ``CACHE_DEPTH``
requests (message granularity stands in for the providers' 128-token blocks).
Tokens per message: o200k over the message's JSON (``message_key``), plus 4;
counting needs the optional ``bpe-openai``, imported on the first count.
``figures()`` gives the input, the cached tokens, the breaks and the billed cost
at each pricing of ``core.billing``. ``RecordingModel`` is a scripted model that
adds each request it gets to a ledger.

``working_set_edits`` finds every edit of a file the agent read before, and
``read_in_view`` says whether that read was in the context the model was given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult

from ..core.billing import CACHED_PRICE, OPENAI, PRICES, PrefixCache
from ..core.caching import CACHE_DEPTH, cache_key, common_prefix
from ..core.conversation import tool_calls_of
from ..core.touches import normalise_path, touches
from . import ScriptedModel
from .agents import o200k_tokens

__all__ = [
    "CACHE_DEPTH",
    "CacheLedger",
    "RecordingModel",
    "Request",
    "WorkingSetEdit",
    "message_key",
    "read_in_view",
    "working_set_edits",
]


def message_key(message: BaseMessage) -> str:
    """Return the message as the provider sees it (`cache_key`: role, content, calls, call id, name), as JSON."""
    role, content, calls, call_id, name = cache_key(message)
    record: dict[str, Any] = {"role": role, "content": content}
    if calls:
        record["tool_calls"] = [{"name": n, "args": a, "id": i} for n, a, i in calls]
    if call_id:
        record["tool_call_id"] = call_id
    if name:
        record["name"] = name
    return json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class Request:
    """One model request as billed: who sent it, its tokens, and how many of them the cache served."""

    kind: str  # "agent" or "side" (summarizer, flush)
    tokens: int
    cached: int
    extends_previous: bool
    after_side: bool = False  # the first agent request after a summarizer or flush call (a summary's break)
    new: int = 0  # tokens of the messages the previous agent request did not have


@dataclass
class CacheLedger:
    """Every model request of one replay, in order, with its cached prefix.

    ``add`` takes a request's messages; the cache is the last ``CACHE_DEPTH``
    requests. Token counts are memoised per distinct message.
    """

    requests: list[Request] = field(default_factory=list)
    # every request's shared prefix counts, however short: a few of each trajectory's first calls are under 1,024
    _cache: PrefixCache = field(default_factory=lambda: PrefixCache(min_tokens=0))
    _tokens: dict[str, int] = field(default_factory=dict)
    _last_agent: list[str] | None = None

    def count(self, key: str) -> int:
        """Return the tokens of one message key (memoised)."""
        tokens = self._tokens.get(key)
        if tokens is None:
            tokens = self._tokens[key] = o200k_tokens(key) + 4
        return tokens

    def add(self, kind: str, messages: Sequence[BaseMessage]) -> Request:
        keys = [message_key(m) for m in messages]
        sizes = [self.count(k) for k in keys]
        cached = self._cache.read(keys, sizes)
        extends = (
            kind != "agent"
            or self._last_agent is None
            or common_prefix(keys, self._last_agent) == len(self._last_agent)
        )
        after_side = kind == "agent" and bool(self.requests) and self.requests[-1].kind == "side"
        before = set(self._last_agent or ())
        new = sum(size for key, size in zip(keys, sizes, strict=True) if key not in before) if kind == "agent" else 0
        request = Request(kind, sum(sizes), cached, extends, after_side, new)
        self.requests.append(request)
        if kind == "agent":
            self._last_agent = keys
        return request

    def figures(self) -> dict:
        """Return input, cached, breaks and billed cost (both pricings), for the agent's calls and the side calls."""
        out: dict[str, Any] = {}
        for kind in ("agent", "side"):
            chosen = [r for r in self.requests if r.kind == kind]
            out[f"{kind}_calls"] = len(chosen)
            out[f"{kind}_input"] = sum(r.tokens for r in chosen)
            out[f"{kind}_cached"] = sum(r.cached for r in chosen)
        out["breaks"] = sum(1 for r in self.requests if r.kind == "agent" and not r.extends_previous)
        # a break right after a summarizer call is the summary's own; the others are layer 1-2 edits
        # (which the engine makes only when they repay) or summaries made without a model call
        out["summary_breaks"] = sum(
            1 for r in self.requests if r.kind == "agent" and not r.extends_previous and r.after_side
        )
        out["edit_breaks_repaid"] = self._repaid_edit_breaks()
        for name, pricing in PRICES.items():
            out[f"billed_{name}"] = round(sum(pricing.bill(r.tokens, r.cached) for r in self.requests))
        out["billed_per_call"] = [round(OPENAI.bill(r.tokens, r.cached)) for r in self.requests if r.kind == "agent"]
        return out

    def _repaid_edit_breaks(self) -> int:
        """Return how many breaks not at a summary (layer 1-2 edits) repaid themselves before the next break.

        An edit re-bills what followed it: ``0.9 ×`` the request's uncached
        tokens that were not new. It saves ``0.1 ×`` the tokens it removed on
        every later agent call until the next break (the rule of
        ``plan.edit_repays``, checked on what happened).
        """
        agent = [r for r in self.requests if r.kind == "agent"]
        repaid = 0
        for k in range(1, len(agent)):
            r = agent[k]
            if r.extends_previous or r.after_side:
                continue
            later = next((j for j in range(k + 1, len(agent)) if not agent[j].extends_previous), len(agent)) - k - 1
            rebilled = r.tokens - r.cached - r.new
            saved = agent[k - 1].tokens + r.new - r.tokens
            repaid += (1 - CACHED_PRICE) * rebilled <= CACHED_PRICE * saved * later
        return repaid


@dataclass(frozen=True)
class WorkingSetEdit:
    """One edit of a file the agent read before: the call whose reply makes it, and the file's latest read then."""

    call: int
    path: str
    read: ToolMessage


def working_set_edits(turns: Sequence[tuple[Sequence[BaseMessage], BaseMessage]]) -> list[WorkingSetEdit]:
    """Return every edit of a file after a read of it, with that file's latest read before the call that edits.

    Reads and edits are what ``touches.touches`` reads from the calls (verb
    ``read``; ``edited`` or ``wrote``); ``./a.py`` and ``a.py`` are one file.
    A read counts from its result on.
    """
    latest: dict[str, ToolMessage] = {}
    reading: dict[str, list[str]] = {}  # call id -> the paths it reads, until its result arrives
    found: list[WorkingSetEdit] = []
    for k, (pending, reply) in enumerate(turns):
        for m in pending:
            if isinstance(m, ToolMessage):
                for path in reading.pop(m.tool_call_id, ()):
                    latest[path] = m
        for call in tool_calls_of(reply):
            done = touches(call.get("name") or "tool", call.get("args"))
            for t in done:
                path = normalise_path(t.target)
                if t.verb in ("edited", "wrote") and path in latest:
                    found.append(WorkingSetEdit(k, path, latest[path]))
                elif t.verb in ("deleted", "moved"):
                    latest.pop(path, None)
            reading[call.get("id") or ""] = [normalise_path(t.target) for t in done if t.verb == "read"]
    return found


def read_in_view(edit: WorkingSetEdit, view: Sequence[BaseMessage]) -> bool:
    """Return True when the edit's read is in the view whole: the same result message, content unshortened."""
    return any(m.id == edit.read.id and isinstance(m, ToolMessage) and m.content == edit.read.content for m in view)


class RecordingModel(ScriptedModel):
    """The scripted summarizer that also hands every request's messages to ``ledger`` as a side request."""

    ledger: Any = None

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.ledger.add("side", messages)
        return super()._generate(messages, stop, run_manager, **kwargs)
