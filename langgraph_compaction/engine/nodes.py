"""The compaction nodes: one object holding the four stages of the card's graph, bound to one setup.

Each stage has its module (``gate``, ``offload``, ``flush``, ``summarize``,
and ``background`` for a compaction prepared next to the agent)
and is written once, as a generator of effects that ``effects.EffectDriver``
runs synchronously or asynchronously; ``CompactionNodes`` composes them with
what every stage shares: the models, the storage, the budget and the
thread's run. Every front (graph nodes, middleware, prebuilt hook,
functional helper) drives this one engine.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from ..core.calibration import fixed_tokens
from ..core.config import Budget, CompactionConfig
from ..core.tokens import TokenCounter
from ..core.view import context_status, model_view
from ..storage import StoreStorage, open_storage
from .background import BackgroundStage
from .effects import (
    CONTEXT_THRESHOLDS,
    RUN_THREAD,
    EffectDriver,
    Run,
    advance,
    context_value,
    current_runtime,
    run_thread_id,
    run_user_id,
    state_value,
)
from .events import describe_error, emit_event
from .flush import FLUSH, FlushStage
from .gate import GATE, GateStage, Memo
from .offload import OFFLOAD, OffloadStage
from .state import read_compaction
from .summarize import SUMMARIZE, SummarizeStage

# the names the fronts and the rest of the engine have always imported from here
__all__ = [
    "FLUSH",
    "GATE",
    "OFFLOAD",
    "SUMMARIZE",
    "CompactionNodes",
    "RUN_THREAD",
    "Run",
    "advance",
    "current_runtime",
    "describe_error",
    "emit_event",
    "run_thread_id",
    "run_user_id",
    "state_value",
]


def _is_agent_model(model: Any, agent_model: Any) -> bool:
    """Return True when ``model`` is the agent's model: ``agent_model`` itself or the model it binds tools to."""
    while agent_model is not None and model is not None:
        if agent_model is model:
            return True
        agent_model = getattr(agent_model, "bound", None)
    return False


class CompactionNodes(GateStage, BackgroundStage, OffloadStage, FlushStage, SummarizeStage, EffectDriver):
    """The four nodes (gate, flush, offload, summarize) and the gate's router, bound to one setup.

    ``before`` is the node compaction runs in front of (the agent's model
    node); ``model`` summarizes, ``flush_model`` (default: ``model``)
    extracts memories; ``storage`` is a directory, a ``BaseStore``, or None
    to use the store the graph runs with (``runtime.store``) when there is one.
    ``agent_model`` (tools bound) and ``system_prompt`` are what ``before``
    sends besides the messages; both are counted in every request.
    """

    def __init__(
        self,
        *,
        before: str,
        model: Any,
        config: CompactionConfig | None = None,
        storage: Any = None,
        flush_model: Any = None,
        agent_model: Any = None,
        system_prompt: Any = None,
    ) -> None:
        self.before = before
        self.config = config or CompactionConfig()
        self.model = model
        self.flush_model = flush_model or model
        self.storage = open_storage(storage)
        self._window_model = agent_model if agent_model is not None else model
        self.budget: Budget = self.config.resolve(self._window_model)
        self.counter = TokenCounter(self.config.token_counter)
        self._memos: dict[str, Memo] = {}
        self._memo_lock = threading.Lock()
        # what every request carries besides ``messages``: the node's system prompt and bound tool schemas
        self.fixed_tokens = fixed_tokens(agent_model, system_prompt)
        # A summarizer or flush model that is the agent's model is sent the agent's own request (system prompt,
        # tools, messages up to the cut, unchanged) plus an instruction: the provider's prompt cache serves that
        # prefix, where a re-rendered transcript is billed in full. Another model gets the rendered transcript.
        self._agent_model = agent_model
        self._head = (
            [SystemMessage(system_prompt)]
            if isinstance(system_prompt, str) and system_prompt
            else ([system_prompt] if isinstance(system_prompt, SystemMessage) else [])
        )
        self._summary_shares_cache = _is_agent_model(model, agent_model)
        self._flush_shares_cache = _is_agent_model(self.flush_model, agent_model)
        # one breaker per model: the flush shares the summarizer's when both call the same model
        same = self.flush_model is self.model or (self._flush_shares_cache and self._summary_shares_cache)
        self._flush_breaker = "breaker" if same else "flush_breaker"

    # -- where a run happens
    def _run(self, config: RunnableConfig, state: Any) -> Run:
        """Return where a step over ``state`` runs: its thread (see ``run_thread_id``), user, storage and budget."""
        runtime = current_runtime()
        storage = self.storage
        if storage is None and getattr(runtime, "store", None) is not None:
            storage = StoreStorage(runtime.store)
        user = run_user_id(runtime, config)
        thread, threadless = run_thread_id(config, state, user)
        return Run(
            thread_id=thread, user_id=user, storage=storage, budget=self._budget_for(runtime), threadless=threadless
        )

    def _budget_for(self, runtime: Any) -> Budget:
        """Return the budget with the run context's thresholds applied (a bad value raises, naming the field)."""
        if getattr(runtime, "context", None) is None:
            return self.budget
        overrides = {k: v for k in CONTEXT_THRESHOLDS if (v := context_value(runtime, k)) is not None}
        if not overrides:
            return self.budget
        return type(self.config).model_validate({**dict(self.config), **overrides}).resolve(self._window_model)

    def messages_of(self, state: Any, compaction: dict | None = None) -> list[BaseMessage]:
        """Return the messages compaction works on and the model is sent: the state's, or in view mode their view."""
        messages = list(state_value(state, "messages") or [])
        if self.config.mode != "view":
            return messages
        compaction = compaction if compaction is not None else read_compaction(state_value(state, "compaction"))
        return model_view(messages, compaction.get("view"), compaction.get("view_edits"))

    def sends_other_messages(self) -> bool:
        """Return True when the model is sent other messages than the state's (view mode, the context status)."""
        return self.config.mode == "view" or self.config.context_status

    def model_messages(self, state: Any) -> list[BaseMessage]:
        """Return what the model is sent: ``messages_of``, then the context status line when it is on."""
        compaction = read_compaction(state_value(state, "compaction"))
        messages = self.messages_of(state, compaction)
        if not self.config.context_status:
            return messages
        counts = compaction.get("counts") or {}
        status = context_status(
            self.counter.total(messages) + self.fixed_tokens,
            self.budget.hard_limit,
            counts.get("summarize", 0) + counts.get("extractive", 0),
            compaction.get("offload_path"),
        )
        return [*messages, status]
