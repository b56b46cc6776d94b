"""``compact_messages``: one compaction pass over a message list, for the functional API and any framework.

An ``@entrypoint`` keeps its own history; before each model call it passes
the history and the ``compaction`` value of the previous call, keeps what
comes back and sends the view::

    result = compact_messages(history, model=summarizer, thread_id=thread, state=compaction, storage="./.compaction")
    history, compaction = result.messages, result.state
    reply = llm.invoke(result.view)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

from ..core.config import CompactionConfig
from ..core.langchain_args import ContextSize, Trigger, settings_with
from ..engine.jobs import BackgroundJobs
from ..engine.nodes import CompactionEngine, PassResult
from ..engine.passes import added_messages, stable_ids
from ..engine.setup import EngineOptions
from ..engine.state import CompactionRecord, read_compaction
from .models import named_models

#: Each call builds its engine anew; a summary one call starts preparing in the background is applied by a later
#: call of the same thread, so the calls of this process share their background jobs.
_JOBS = BackgroundJobs()


@dataclass
class CompactionResult:
    """What to keep (``messages``), what to send (``view``), what to pass back next time (``state``), what happened.

    In the default rewrite mode ``view`` is ``messages``; in view mode
    (``CompactionConfig(mode="view")``) ``messages`` is the whole history and
    ``view`` the summary and the recent tail. With
    ``CompactionConfig(context_status=True)`` ``view`` ends with the status line.
    """

    messages: list[BaseMessage]
    state: CompactionRecord
    events: list[dict]
    view: list[BaseMessage]


def _prepare(messages: Sequence[BaseMessage], thread_id: Any, state: Any, options: EngineOptions):
    if thread_id is None or str(thread_id) == "":
        raise ValueError(
            "thread_id is required: it names the transcript and keys the summaries; pass e.g. thread_id='user-42'"
        )
    if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of messages, not {type(messages).__name__}")
    nodes = CompactionEngine(named_models(options), jobs=_JOBS)
    # the transcript and the summaries refer to messages by id: an id-less message gets the same one at every call
    values = {
        "messages": added_messages(stable_ids(convert_to_messages(list(messages)))),
        "compaction": read_compaction(state),
    }
    return nodes, values, nodes.where({"configurable": {"thread_id": str(thread_id)}}, values)


def _finish(nodes: CompactionEngine, result: PassResult) -> CompactionResult:
    state = read_compaction(result.state["compaction"])
    view = nodes.model_messages(result.state)
    return CompactionResult(messages=result.messages, state=state, events=result.events, view=view)


def compact_messages(
    messages: Sequence[BaseMessage],
    *,
    model: Any,
    config: CompactionConfig | None = None,
    storage: Any = None,
    thread_id: Any,
    state: dict | None = None,
    agent_model: Any = None,
    system_prompt: Any = None,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    token_counter: Callable[..., int] | None = None,
    summary_prompt: str | None = None,
) -> CompactionResult:
    """Return the messages after one compaction pass, the ``compaction`` state to pass back, and the events.

    Messages without an id (OpenAI-style dicts too) get one derived from
    their content and the id of the message before them, the same at every
    call and never one an earlier message of the thread had. Compaction failures are
    recorded in the events and never lose a message.

    Args:
        messages: The whole history (messages or OpenAI-style dicts).
        model: Summarizes and extracts memories: a chat model, a name resolved
            as LangChain's ``init_chat_model`` does (``"openai:gpt-4o-mini"``),
            or None for extractive summaries.
        config: The settings; None for the defaults.
        storage: A directory, a ``BaseStore``, or None for the store of the
            surrounding LangGraph run, else an in-memory store of the process
            (``engine.setup.storage_for``); it receives the transcript and the memory ledger.
        thread_id: Names the transcript and keys the summaries.
        state: The previous result's ``.state`` (None the first time), so summaries chain.
        agent_model: The model the messages are sent to, tools bound: counted too.
        system_prompt: What is put in front of the messages at the call: counted too.
        trigger: When to compact, in LangChain's words, as ``CompactionMiddleware`` takes it.
        keep: The tail a compaction keeps, as ``CompactionMiddleware`` takes it.
        token_counter: Counts a list of messages, as ``CompactionMiddleware`` takes it.
        summary_prompt: The summarizer's prompt, as ``CompactionMiddleware`` takes it.

    Raises:
        ValueError: no ``thread_id``, a model name that names no model, a bad
            ``trigger`` or ``keep``, or an argument that contradicts ``config``.
    """
    config = settings_with(
        config, trigger=trigger, keep=keep, token_counter=token_counter, summary_prompt=summary_prompt
    )
    options = EngineOptions("model", model, config, storage, agent_model=agent_model, system_prompt=system_prompt)
    nodes, values, run = _prepare(messages, thread_id, state, options)
    return _finish(nodes, nodes.run_pass(values, run))


async def acompact_messages(
    messages: Sequence[BaseMessage],
    *,
    model: Any,
    config: CompactionConfig | None = None,
    storage: Any = None,
    thread_id: Any,
    state: dict | None = None,
    agent_model: Any = None,
    system_prompt: Any = None,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    token_counter: Callable[..., int] | None = None,
    summary_prompt: str | None = None,
) -> CompactionResult:
    """Return ``compact_messages``'s result, calling the models with ``await``.

    Args:
        messages: See ``compact_messages``; every argument means the same.
        model: See ``compact_messages``.
        config: See ``compact_messages``.
        storage: See ``compact_messages``.
        thread_id: See ``compact_messages``.
        state: See ``compact_messages``.
        agent_model: See ``compact_messages``.
        system_prompt: See ``compact_messages``.
        trigger: See ``compact_messages``.
        keep: See ``compact_messages``.
        token_counter: See ``compact_messages``.
        summary_prompt: See ``compact_messages``.
    """
    config = settings_with(
        config, trigger=trigger, keep=keep, token_counter=token_counter, summary_prompt=summary_prompt
    )
    options = EngineOptions("model", model, config, storage, agent_model=agent_model, system_prompt=system_prompt)
    nodes, values, run = _prepare(messages, thread_id, state, options)
    return _finish(nodes, await nodes.arun_pass(values, run))
