"""A scripted chat model for tests, benchmarks, notebooks and offline use: part of the public API.

``ScriptedModel`` answers the package's three prompts the way a careful LLM
would (a four-section summary; memory bullets or ``NO_REPLY``; a merged
MEMORY.md) without a network, after an optional fixed latency; any other
prompt gets ``reply``. It can be told to fail in the ways real models fail.
Use it wherever a chat model is wanted and no API key is at hand::

    from langgraph_compaction.testing import ScriptedModel
    add_compaction(builder, before="agent", model=ScriptedModel())

It also holds the provider checks a test asserts with: ``openai_violations``,
``anthropic_violations`` and ``view_violations`` return the reasons a provider
would reject a message list (empty when it would accept it).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

from ..core.validation import anthropic_violations, openai_violations, view_violations
from ..memory.ledger import normalize_bullet, parse_bullets

__all__ = [
    "ScriptedModel",
    "anthropic_violations",
    "openai_violations",
    "scripted_consolidation",
    "scripted_memories",
    "scripted_summary",
    "tool_call",
    "view_violations",
]

_USER_BLOCK = re.compile(r"^\[user\]\n(.*?)(?=\n\n\[|\Z)", re.MULTILINE | re.DOTALL)
_PATH = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.\w{1,5}")

Reply = str | Exception | Callable[[str], str]


def tool_call(name: str, **args: Any) -> AIMessage:
    """Return an assistant message that calls tool ``name`` with ``args``: one scripted step of an agent.

    ``ScriptedModel(reply=[tool_call("read_log", service="billing"), "Billing looks healthy."])`` reads a
    log, then answers, request after request (the model gives each call a fresh id).

    Args:
        name: The tool to call.
        **args: The call's arguments.
    """
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{name}"}])


def _prompt_text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)


def scripted_summary(prompt: str, target_words: int = 350) -> str:
    """Return a four-section summary of a summary prompt's ``<messages>`` block, about ``target_words`` long.

    Args:
        prompt: The summary prompt, as the summarizer is sent it.
        target_words: About how many words the summary has.
    """
    body = prompt.split("<messages>", 1)[-1]
    requests = [r.strip() for r in _USER_BLOCK.findall(body) if r.strip()]
    paths = list(dict.fromkeys(_PATH.findall(body)))[:15]
    intent = requests[-1][:400] if requests else "Continue the task in progress."
    words = re.findall(r"[A-Za-z_]{5,}", body)
    topics = " ".join(dict.fromkeys(w.lower() for w in words[-400:]))
    filler = " ".join(topics.split()[: max(0, target_words - 60)])
    return (
        f"## SESSION INTENT\n{intent}\n\n"
        f"## SUMMARY\nThe conversation covered {len(requests)} user requests. Topics: {filler}\n\n"
        "## ARTIFACTS\n" + ("\n".join(f"- {p}" for p in paths) or "None") + "\n\n"
        "## NEXT STEPS\nContinue with the latest request and verify the result."
    )


def scripted_memories(prompt: str) -> str:
    """Return memory bullets for a memory prompt, or ``NO_REPLY`` when its conversation has no user text.

    Args:
        prompt: The memory prompt, as the flush sends it.
    """
    conversation = prompt.split("<conversation>", 1)[-1]
    requests = [r.strip().splitlines()[0][:160] for r in _USER_BLOCK.findall(conversation) if r.strip()]
    if not requests:
        return "NO_REPLY"
    return "\n".join(f"- The user asked: {r}" for r in requests[-3:])


def scripted_consolidation(prompt: str) -> str:
    """Answer a consolidation prompt: MEMORY.md's bullets plus the new ones, duplicates dropped.

    Args:
        prompt: The consolidation prompt, as ``consolidate_memory`` sends it.
    """
    seen: set[str] = set()
    kept = []
    for block in ("memory_md", "new_entries"):
        text = prompt.split(f"<{block}>", 1)[-1].split(f"</{block}>", 1)[0]
        for bullet in parse_bullets(text):
            if normalize_bullet(bullet) not in seen:
                seen.add(normalize_bullet(bullet))
                kept.append(bullet)
    return "<memory>\n## Requests and preferences\n" + "".join(f"- {b}\n" for b in kept) + "</memory>"


class ScriptedModel(BaseChatModel):
    """A chat model that answers compaction prompts deterministically (optionally slowly or wrongly).

    An answer (``summary``, ``memory``, ``consolidation``, ``reply``) is a
    string, an exception to raise, or a function of the prompt. A reply's tool
    calls get fresh ids at every answer, and ``bind_tools`` returns the model
    itself (the script decides the calls). Each attribute below is also a
    keyword of the constructor.

    Attributes:
        latency: Seconds that pass before each answer.
        summary: The answer to the summary prompt; None: a four-section
            summary of the prompt's messages (``scripted_summary``).
        memory: The answer to the memory prompt; None: bullets of the user's
            requests (``scripted_memories``).
        consolidation: The answer to the consolidation prompt; None: ``reply``
            when it is given, else the merged bullets (``scripted_consolidation``).
        reply: The answer to any other prompt; also an ``AIMessage`` (tool
            calls included) or a list of answers taken in turn, round and
            round: a scripted agent.
        summary_words: About how many words the default summary has.
        calls: Where every prompt the model is sent is recorded.
    """

    latency: float = 0.0
    summary: Any | None = None
    memory: Any | None = None
    consolidation: Any | None = None
    reply: Any = "OK."
    summary_words: int = 350
    calls: list = Field(default_factory=list)
    _replies: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        """Return this model: its script, not the tools, decides what it calls."""
        return self

    def _next_reply(self) -> Any:
        """Return the next scripted reply: ``reply`` itself, or the next item of a list of replies."""
        if not isinstance(self.reply, (list, tuple)):
            return self.reply
        chosen = self.reply[self._replies % len(self.reply)]
        self._replies += 1
        return chosen

    def _answer(self, prompt: str) -> AIMessage:
        self.calls.append(prompt)
        if "Context Extraction Assistant" in prompt:
            chosen = self.summary if self.summary is not None else (lambda p: scripted_summary(p, self.summary_words))
        elif "memory extraction assistant" in prompt:
            chosen = self.memory if self.memory is not None else scripted_memories
        elif "memory consolidation assistant" in prompt:
            default = self.reply if "reply" in self.model_fields_set else scripted_consolidation
            chosen = self.consolidation if self.consolidation is not None else default
        else:
            chosen = self._next_reply()
        if isinstance(chosen, BaseException):
            # the same instance is raised again and again: without this its traceback grows by every
            # frame it passes and keeps them (and their prompts) alive
            raise chosen.with_traceback(None)
        answer = chosen(prompt) if callable(chosen) else chosen
        if not isinstance(answer, AIMessage):
            return AIMessage(content=answer)
        # a scripted call answered twice under one id would be a reused call id, which providers reject
        fresh = [{**call, "id": f"call_{len(self.calls)}_{k}"} for k, call in enumerate(answer.tool_calls)]
        return answer.model_copy(update={"tool_calls": fresh, "id": None})

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.latency:
            time.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=self._answer(_prompt_text(messages)))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.latency:
            await asyncio.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=self._answer(_prompt_text(messages)))])
