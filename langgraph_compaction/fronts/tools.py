"""The agent's tools over what compaction keeps: memory search and reads, transcript search and recall, compact.

``make_compaction_tools(storage)`` returns seven LangChain tools, sync and
async, for ``ToolNode`` / ``create_agent`` (``names=`` picks some of them,
`TOOL_NAMES` in this order):

- ``memory_search(query, max_results=10)``: BM25-ranked lines of MEMORY.md
  and the daily ledgers, each with ``path#line``, date and text;
- ``memory_get(path, start_line=1, end_line=None)``: a line range of a memory
  file; paths outside the memory folder are refused before anything is read;
- ``session_search(query, max_results=10)``: BM25 over this thread's
  offloaded transcript, each hit with its message id;
- ``recall(message_ids, page=1)``: evicted messages back by id, in full,
  size-capped and paginated; a summary's id gives the messages it replaced;
- ``compact(focus=None)``: ask for compaction before the next model call;
- ``pin(text)`` / ``unpin(text)``: keep a rule or a fact verbatim in every
  later summary (the pins of ``pin_constraint``), up to
  ``FidelityConfig.max_pins`` at a time, within the pins' token budget
  (``core.pins``: ``pin_tokens`` each, ``pins_tokens`` in all).

The thread, the user and the store come from the tool runtime (thread id
from the run's ``configurable``, or the run's own transcript when it has
none; user from ``runtime.context.user_id`` else ``configurable["user_id"]``);
``storage=None`` uses the graph's store, else the process's in-memory
storage (``engine.setup.storage_for``), as the compaction does. Pass the
same storage as to ``add_compaction``. What the four reading tools answer is in ``fronts.search``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command

from ..core.config import CompactionConfig, FidelityConfig
from ..core.pins import pin_budget
from ..core.plan import find_cutoff
from ..core.tokens import TokenCounter
from ..engine.run import run_thread_id, run_user_id, state_value
from ..engine.setup import storage_for
from ..storage import CompactionStorage, open_storage
from .pinning import pin_answer, unpin_answer
from .search import (
    MAX_LINES,
    MAX_RESULTS,
    PAGE_CHARS,
    SEMANTIC_NAMESPACE,
    SNIPPET_CHARS,
    merge_rankings,
    rank,
    read_memory,
    recall_messages,
    search_memory,
    search_session,
    semantic_store,
    snippet,
)

__all__ = [
    # what the tools answer lives in fronts.search; these names stay importable from here
    "MAX_LINES",
    "MAX_RESULTS",
    "NOT_WIRED",
    "PAGE_CHARS",
    "SEMANTIC_NAMESPACE",
    "SNIPPET_CHARS",
    "TOOL_NAMES",
    "chosen_tools",
    "compact_answer",
    "compaction_wired",
    "make_compaction_tools",
    "merge_rankings",
    "rank",
    "read_memory",
    "recall_messages",
    "search_memory",
    "search_session",
    "semantic_store",
    "snippet",
]

logger = logging.getLogger("langgraph_compaction")

NOT_WIRED = (
    "Error: compact is not available here: no compaction runs in front of this agent's model (the graph was "
    "built without add_compaction, CompactionMiddleware or make_pre_model_hook), so nothing would be compacted. "
    "Carry on without it."
)
#: The agent's tools, in the order ``make_compaction_tools`` returns them.
TOOL_NAMES = ("memory_search", "memory_get", "session_search", "recall", "compact", "pin", "unpin")


def chosen_tools(names: Any, field: str = "names") -> tuple[str, ...]:
    """Return the tool names a builder picked (None: all of `TOOL_NAMES`), in `TOOL_NAMES`' order.

    Args:
        names: the names picked, or None.
        field: the argument they were given as, named in the error.

    Raises:
        ValueError: a name that is not one of `TOOL_NAMES`, or a single string instead of a list of names.
    """
    if names is None:
        return TOOL_NAMES
    if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)):
        raise ValueError(
            f"{field}={names!r} is not a list of tool names: pass e.g. {field}=('recall', 'compact'), from {TOOL_NAMES}"
        )
    unknown = [n for n in names if n not in TOOL_NAMES]
    if unknown:
        raise ValueError(f"{field}: {unknown} are not compaction tools; pick from {TOOL_NAMES}")
    return tuple(n for n in TOOL_NAMES if n in names)


def compact_answer(messages: Sequence[BaseMessage], focus: str | None, config: CompactionConfig | None) -> str | None:
    """Return what ``compact`` tells the agent will happen, or None when there is nothing to compact.

    With the agent's ``config`` the count is the one the gate will use;
    without it the check only asks whether any earlier message can go.
    """
    counter = TokenCounter(config.token_counter if config else None)
    counts = counter.counts(messages)
    try:
        budget = config.resolve() if config else None
    except ValueError:  # a share of a window only the agent's model reports: the tail is counted by messages
        budget = None
    cut = find_cutoff(messages, counts, budget.keep_tokens if budget else 0, budget.keep_messages if budget else 1)
    if cut is None:
        return None
    about = f" (about {len(cut.evict)} messages, ~{sum(counts[i] for i in cut.evict):,} tokens)" if config else ""
    focused = f", focusing on: {focus}" if focus else ""
    return (
        f"Compaction requested: before your next step the earlier conversation{about} will be replaced by a "
        f"summary{focused}. The most recent messages stay as they are; the full history stays in the transcript, "
        "and recall(message_ids) brings any message back."
    )


# --- the tool shell --------------------------------------------------------------


@dataclass
class _Where:
    storage: CompactionStorage
    thread_id: str
    user_id: str
    messages: list[BaseMessage]


def compaction_wired(state: Any) -> bool:
    """Return True when a compaction gate has run on this state (it marks ``compaction["wired"]``)."""
    value = state_value(state, "compaction")
    return isinstance(value, dict) and value.get("wired") is True


def _where(runtime: Any, storage: CompactionStorage | None) -> _Where:
    config: RunnableConfig = getattr(runtime, "config", None) or RunnableConfig()
    store = getattr(runtime, "store", None)
    chosen = storage_for(storage, store)
    state = getattr(runtime, "state", None)
    messages = state_value(state, "messages") or []
    user = run_user_id(runtime, config)
    return _Where(chosen, run_thread_id(config, state, user)[0], user, list(messages))


def _tool(name: str, storage: CompactionStorage | None, answer: Callable[..., str], signature_of: Callable) -> BaseTool:
    """Return a sync+async tool named ``name``: the schema and description come from ``signature_of``."""

    @functools.wraps(signature_of)
    def run(*args: Any, runtime: ToolRuntime[Any, Any], **kwargs: Any) -> str:
        where = _where(runtime, storage)
        try:
            return answer(where, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a broken file or store is the agent's information, not a crash
            logger.warning("%s failed: %s", name, exc, exc_info=exc)
            return f"Error: {name} could not read the compaction storage: {type(exc).__name__}: {exc}"[:1000]

    @functools.wraps(signature_of)
    async def arun(*args: Any, runtime: ToolRuntime[Any, Any], **kwargs: Any) -> str:
        return await asyncio.to_thread(functools.partial(run, *args, runtime=runtime, **kwargs))

    return StructuredTool.from_function(func=run, coroutine=arun, name=name)


def make_compaction_tools(
    storage: Any = None,
    *,
    config: CompactionConfig | None = None,
    window: int | None = None,
    names: Sequence[str] | None = None,
) -> list[BaseTool]:
    """Return the agent's tools, in this order: memory_search, memory_get, session_search, recall, compact, pin, unpin.

    Args:
        storage: What ``add_compaction`` was given (a directory, a LangGraph ``BaseStore`` or a storage object);
            None uses the graph's store at run time, else the process's in-memory storage.
        config: The agent's ``CompactionConfig``: ``compact`` says how much will be summarized, and ``pin``
            keeps to ``fidelity.max_pins`` and to the pins' token budget (``core.pins``).
        window: The model's context window the pins' budget derives from; None: ``config.context_window``.
        names: The tools to return, from `TOOL_NAMES` (e.g. ``("recall", "compact")``); None: all seven.

    Raises:
        ValueError: ``names`` holds a name that is not one of `TOOL_NAMES`.
    """
    picked = chosen_tools(names)
    opened = open_storage(storage)
    fidelity = config.fidelity if config else FidelityConfig()
    max_pins = fidelity.max_pins
    budget = pin_budget(fidelity, window or (config.context_window if config else None))

    def memory_search(query: str, max_results: int = 10, *, runtime: ToolRuntime[Any, Any]) -> str:
        """Search long-term memory (MEMORY.md and the daily memory ledgers) for facts, decisions and preferences.

        Returns the best-matching lines, each as path#line [date] text.
        """
        raise NotImplementedError  # a signature only: _tool answers the call

    def memory_get(
        path: str, start_line: int = 1, end_line: int | None = None, *, runtime: ToolRuntime[Any, Any]
    ) -> str:
        """Read lines start_line..end_line of a memory file ('MEMORY.md' or 'memory/YYYY-MM-DD.md')."""
        raise NotImplementedError  # a signature only: _tool answers the call

    def session_search(query: str, max_results: int = 10, *, runtime: ToolRuntime[Any, Any]) -> str:
        """Search the full history of this conversation, including messages compacted out of your context.

        Returns the matching messages with their ids; recall them in full with recall.
        """
        raise NotImplementedError  # a signature only: _tool answers the call

    def recall(message_ids: list[str], page: int = 1, *, runtime: ToolRuntime[Any, Any]) -> str:
        """Return earlier messages of this conversation in full, by id (from session_search or a summary).

        A summary's id returns the messages that summary replaced, in order.
        """
        raise NotImplementedError  # a signature only: _tool answers the call

    def compact(focus: str | None = None, *, runtime: ToolRuntime[Any, Any]) -> Command:
        """Compact the conversation now: earlier messages are replaced by a summary before your next step.

        focus: what the summary must preserve in detail (optional).
        """
        call_id = runtime.tool_call_id or ""
        if not compaction_wired(getattr(runtime, "state", None)):
            # without a gate the request would be written nowhere useful: say so, to the model and the log
            logger.warning("the compact tool was called, but no compaction runs in front of this agent's model")
            return Command(
                update={"messages": [ToolMessage(NOT_WIRED, tool_call_id=call_id, name="compact", status="error")]}
            )
        messages = _where(runtime, opened).messages
        text = compact_answer(messages, focus, config)
        if text is None:
            note = "Nothing to compact: the conversation is already as short as compaction can make it."
            return Command(update={"messages": [ToolMessage(note, tool_call_id=call_id, name="compact")]})
        return Command(
            update={
                "compaction": {"manual": {"focus": focus}},
                "messages": [ToolMessage(text, tool_call_id=call_id, name="compact")],
            }
        )

    async def acompact(focus: str | None = None, *, runtime: ToolRuntime[Any, Any]) -> Command:
        return compact(focus, runtime=runtime)

    def _pins_command(
        runtime: ToolRuntime[Any, Any], name: str, answer: Callable[[Any], tuple[str, dict | None]]
    ) -> Command:
        call_id = runtime.tool_call_id or ""
        state = getattr(runtime, "state", None)
        if not compaction_wired(state):  # no compaction state to keep the pin in, and no summary to keep it in
            return Command(
                update={
                    "messages": [
                        ToolMessage(
                            NOT_WIRED.replace("compact is", f"{name} is"),
                            tool_call_id=call_id,
                            name=name,
                            status="error",
                        )
                    ]
                }
            )
        text, update = answer(state)
        message = ToolMessage(
            text, tool_call_id=call_id, name=name, **({"status": "error"} if text.startswith("Error") else {})
        )
        return Command(update={"messages": [message], **({"compaction": update} if update else {})})

    def pin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        """Pin a rule or a fact: it stays word for word in every later summary of this conversation until unpinned.

        text: the rule or fact, as it must be kept (e.g. 'Never push to main.').
        """
        return _pins_command(runtime, "pin", lambda state: pin_answer(state, text, max_pins, budget))

    async def apin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        return pin(text, runtime=runtime)

    def unpin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        """Unpin a rule or fact pinned before (give its text, or its id 'pin-...'): later summaries may drop it."""
        return _pins_command(runtime, "unpin", lambda state: unpin_answer(state, text))

    async def aunpin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        return unpin(text, runtime=runtime)

    tools = [
        _tool("memory_search", opened, lambda w, *a, **k: search_memory(w.storage, w.user_id, *a, **k), memory_search),
        _tool("memory_get", opened, lambda w, *a, **k: read_memory(w.storage, w.user_id, *a, **k), memory_get),
        _tool(
            "session_search",
            opened,
            lambda w, query, max_results=10: search_session(
                w.storage, w.thread_id, query, max_results, in_context=[m.id for m in w.messages]
            ),
            session_search,
        ),
        _tool("recall", opened, lambda w, *a, **k: recall_messages(w.storage, w.thread_id, *a, **k), recall),
        StructuredTool.from_function(func=compact, coroutine=acompact, name="compact"),
        StructuredTool.from_function(func=pin, coroutine=apin, name="pin"),
        StructuredTool.from_function(func=unpin, coroutine=aunpin, name="unpin"),
    ]
    return [t for t in tools if t.name in picked]
