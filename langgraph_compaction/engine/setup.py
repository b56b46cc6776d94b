"""What every stage of one compaction setup shares: the settings, the models, the storage, the counter, the budget.

``Setup`` is built once by the engine and handed to the stage functions; it
holds no state of a thread (that is the ``compaction`` record) and nothing a
stage changes, apart from ``fixed_tokens``, which the middleware learns from
the agent's first request.

A setup given no storage writes where the run can keep it (``storage_for``):
the store the graph runs with, else one in-memory store of the process
(``process_storage``), said once in a warning that names ``storage=``.

``EngineOptions`` is what a setup is built from: the arguments every front
takes for the engine, gathered once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from ..core.calibration import fixed_tokens
from ..core.config import Budget, CompactionConfig, model_context_window
from ..core.native import anthropic_model, for_model
from ..core.tokens import TokenCounter
from ..core.view import context_status, model_view
from ..storage import CompactionStorage, StoreStorage, open_storage
from .events import emit_event
from .state import CompactionRecord, read_compaction

DEFAULT_STORAGE_WARNING = (
    "no storage= and no store: the transcript of evicted messages and the memory are kept in this process's "
    "memory only (an InMemoryStore), lost when it exits; pass storage= (a directory or a LangGraph BaseStore) "
    "or compile the graph with a store to keep them"
)
_process_storage: list[StoreStorage] = []  # one, made on first use
_process_lock = threading.Lock()


def process_storage() -> StoreStorage:
    """Return the storage of a run given none and run without a store: one ``InMemoryStore`` for the process.

    It keeps every evicted message and memory for as long as the process
    runs, so ``recall`` and the search tools still answer; the first use
    logs ``DEFAULT_STORAGE_WARNING`` and streams it as an event.
    """
    with _process_lock:
        first = not _process_storage
        if first:
            from langgraph.store.memory import InMemoryStore

            _process_storage.append(StoreStorage(InMemoryStore()))
    if first:
        emit_event({"stage": "storage", "warning": DEFAULT_STORAGE_WARNING})
    return _process_storage[0]


def storage_for(storage: CompactionStorage | None, store: Any) -> CompactionStorage:
    """Return where a run writes: ``storage`` when given, else the LangGraph ``store``, else ``process_storage``."""
    if storage is not None:
        return storage
    return StoreStorage(store) if store is not None else process_storage()


def is_agent_model(model: Any, agent_model: Any) -> bool:
    """Return True when ``model`` is the agent's model: ``agent_model`` itself or the model it binds tools to."""
    while agent_model is not None and model is not None:
        if agent_model is model:
            return True
        agent_model = getattr(agent_model, "bound", None)
    return False


def _head(system_prompt: Any) -> list[BaseMessage]:
    if isinstance(system_prompt, SystemMessage):
        return [system_prompt]
    return [SystemMessage(system_prompt)] if isinstance(system_prompt, str) and system_prompt else []


@dataclass(frozen=True)
class EngineOptions:
    """What one compaction setup is built from: the arguments every front passes the engine, in one object.

    Attributes:
        before: The node compaction runs in front of (the agent's model node).
        model: The summarizer (a chat model), or None for extractive summaries.
        config: The settings (``CompactionConfig()`` when None).
        storage: A directory, a LangGraph ``BaseStore``, a storage object, or None to use the store the graph runs
            with (``runtime.store``), else one in-memory store of the process (``storage_for``).
        flush_model: The model that extracts memories (None: ``model``).
        agent_model: The model ``before`` calls, tools bound; counted in every request.
        system_prompt: What ``before`` puts in front of the messages; counted in every request.
    """

    before: str
    model: Any
    config: CompactionConfig | None = None
    storage: Any = None
    flush_model: Any = None
    agent_model: Any = None
    system_prompt: Any = None


@dataclass
class Setup:
    """One compaction setup: ``before`` is the node it runs in front of, ``model`` summarizes.

    ``flush_model`` (default: ``model``) extracts memories; ``storage`` is the
    opened storage (None: ``storage_for`` at run time); ``agent_model``
    (tools bound) and ``head`` (the system prompt) are what ``before`` sends
    besides the messages, counted in ``fixed_tokens``.
    """

    before: str
    config: CompactionConfig
    model: Any
    flush_model: Any
    storage: CompactionStorage | None
    agent_model: Any
    head: list[BaseMessage]
    budget: Budget
    counter: TokenCounter
    #: What every request carries besides ``messages``: the system prompt and bound tool schemas.
    fixed_tokens: int
    #: A summarizer or memory model that is the agent's model is sent the agent's own request up to the cut plus an
    #: instruction, so the provider's prompt cache serves that prefix; another model gets the rendered transcript.
    summary_shares_cache: bool = False
    flush_shares_cache: bool = False
    #: The record key of the memory model's breaker: the summarizer's own when both call the same model.
    flush_breaker: str = "flush_breaker"
    window_model: Any = field(default=None, repr=False)

    @classmethod
    def build(cls, options: EngineOptions) -> Setup:
        """Return the setup of ``options`` (the storage opened, the budget resolved for the agent's window)."""
        model, agent_model, system_prompt = options.model, options.agent_model, options.system_prompt
        config = options.config or CompactionConfig()
        flush_model = options.flush_model or model
        window_model = agent_model if agent_model is not None else model
        summary_shares = is_agent_model(model, agent_model)
        flush_shares = is_agent_model(flush_model, agent_model)
        same = flush_model is model or (flush_shares and summary_shares)
        return cls(
            before=options.before,
            config=config,
            model=model,
            flush_model=flush_model,
            storage=open_storage(options.storage),
            agent_model=agent_model,
            head=_head(system_prompt),
            budget=config.resolve(window_model),
            counter=TokenCounter(config.token_counter),
            fixed_tokens=fixed_tokens(agent_model, system_prompt),
            summary_shares_cache=summary_shares,
            flush_shares_cache=flush_shares,
            flush_breaker="breaker" if same else "flush_breaker",
            window_model=window_model,
        )

    def messages_of(self, messages: Sequence[BaseMessage], record: CompactionRecord) -> list[BaseMessage]:
        """Return the messages compaction works on and the model is sent: the state's, or in view mode their view."""
        if self.config.mode != "view":
            return list(messages)
        return model_view(messages, record["view"], record["view_edits"])

    def reads_native(self, model: Any = None) -> bool:
        """Return True when the agent's ``model`` (default: ``agent_model``) is sent a provider's compaction blocks."""
        return bool(self.config.summary.native) and anthropic_model(model or self.agent_model) is not None

    def sends_other_messages(self, model: Any = None) -> bool:
        """Return True when the model is sent other messages than the state's: view mode, the status, native blocks."""
        return self.config.mode == "view" or self.config.context_status or self.reads_native(model)

    def model_messages(self, messages: Sequence[BaseMessage], raw_record: Any, model: Any = None) -> list[BaseMessage]:
        """Return what the agent's ``model`` (default: ``agent_model``) is sent.

        That is ``messages_of``; each summary the model's own Anthropic model
        wrote as its compaction block (``core.native.for_model``); then the
        context status line when it is on.
        """
        record = read_compaction(raw_record)
        view = self.messages_of(messages, record)
        if self.reads_native(model):
            view = for_model(view, model or self.agent_model)
        if not self.config.context_status:
            return view
        counts = record["counts"]
        status = context_status(
            self.counter.total(view) + self.fixed_tokens,
            self.budget.hard_limit,
            counts.get("summarize", 0) + counts.get("extractive", 0),
            record["offload_path"],
        )
        return [*view, status]

    def summarizer_window(self) -> int:
        """Return the summarizer's window: configured, reported by the model, the agent's, else the fallback trigger."""
        return (
            self.config.summary.context_window
            or model_context_window(self.model)
            or self.budget.context_window
            or self.config.fallback_trigger_tokens
        )
