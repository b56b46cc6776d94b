"""``compact_messages``: one compaction pass over a message list, for the functional API and any framework.

An ``@entrypoint`` keeps its own history; before each model call it passes
the history and the ``compaction`` value of the previous call, keeps what
comes back and sends the view::

    result = compact_messages(history, model=summarizer, thread_id=thread, state=compaction, storage="./.compaction")
    history, compaction = result.messages, result.state
    reply = llm.invoke(result.view)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langgraph.graph.message import add_messages

from ..core.config import CompactionConfig
from ..engine.jobs import BackgroundJobs
from ..engine.nodes import CompactionEngine, PassResult
from ..engine.passes import stable_ids
from ..engine.state import read_compaction


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
    state: dict
    events: list[dict]
    view: list[BaseMessage]


def _prepare(messages: Sequence[BaseMessage], thread_id: Any, state: Any, **settings: Any):
    if thread_id is None or str(thread_id) == "":
        raise ValueError(
            "thread_id is required: it names the transcript and keys the summaries; pass e.g. thread_id='user-42'"
        )
    if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of messages, not {type(messages).__name__}")
    nodes = CompactionEngine(before="model", jobs=_JOBS, **settings)
    # the transcript and the summaries refer to messages by id: an id-less message gets the same one at every call
    values = {
        "messages": add_messages([], stable_ids(convert_to_messages(list(messages)))),
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
) -> CompactionResult:
    """Return the messages after one compaction pass, the ``compaction`` state to pass back, and the events.

    ``model`` summarizes and extracts memories; ``storage`` (a directory, a
    ``BaseStore``, or None for the store of the surrounding LangGraph run)
    receives the transcript and the memory ledger. ``state`` is the previous
    result's ``.state`` (None the first time), so summaries chain.
    ``agent_model`` (the model the messages are sent to, tools bound) and
    ``system_prompt`` (put in front of them at the call) are counted too.
    Messages without an id (OpenAI-style dicts too) get one derived from their
    place and content, the same at every call. Compaction failures are recorded in the
    events and never lose a message.
    """
    nodes, values, run = _prepare(
        messages,
        thread_id,
        state,
        model=model,
        config=config,
        storage=storage,
        agent_model=agent_model,
        system_prompt=system_prompt,
    )
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
) -> CompactionResult:
    """Return ``compact_messages``'s result, calling the models with ``await``."""
    nodes, values, run = _prepare(
        messages,
        thread_id,
        state,
        model=model,
        config=config,
        storage=storage,
        agent_model=agent_model,
        system_prompt=system_prompt,
    )
    return _finish(nodes, await nodes.arun_pass(values, run))
