"""The compaction engine: the public interface every front calls, composed of the stage modules.

``CompactionEngine`` holds one setup (``setup.Setup``: the settings, the
models, the storage, the counter, the budget), the gate's memory of the
threads it saw (``gate.Memos``) and the background jobs it owns
(``jobs.BackgroundJobs``). Each stage is a module of functions over what it
uses (``gate``, ``offload``, ``flush``, ``summarize``, ``background``); the
engine reads a step's state once, hands the stage its messages and its
``compaction`` record, and drives the step with the one driver pair
(``driver.drive`` / ``driver.adrive``). The graph front runs the four stages
as nodes (``gate``, ``flush``, ``offload``, ``summarize`` and the gate's
``route``); the other fronts run the whole pass (``run_pass``); overflow
recovery wraps the agent's model call (``recover``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from ..core.config import Budget, CompactionConfig
from ..core.plan import CompactionPlan
from ..core.repair import answer_unanswered
from .driver import Performer, adrive, drive, guarded
from .effects import Steps
from .events import failed_update
from .flush import FLUSH, flush_result
from .gate import GATE, Memo, Memos, gate_steps, plan_for
from .jobs import BackgroundJobs
from .native import refuse_on_demand, refuse_threshold
from .offload import OFFLOAD, offload_result
from .overflow import recovery_steps
from .passes import message_writes, pass_steps, stage_name, update_delta
from .results import FlushResult, OffloadResult, SummaryResult, rendered
from .run import CONTEXT_THRESHOLDS, Run, context_value, current_runtime, run_thread_id, run_user_id, state_value
from .setup import EngineOptions, Setup, storage_for
from .state import GraphUpdate, read_compaction
from .summarize import SUMMARIZE, summary_result

__all__ = ["FLUSH", "GATE", "OFFLOAD", "SUMMARIZE", "CompactionEngine", "PassResult"]


@dataclass
class PassResult:
    """What one compaction pass did: ``update`` applies it, ``state`` is the state after it."""

    update: GraphUpdate
    state: Any
    events: list[dict[str, Any]]

    @property
    def messages(self) -> list[Any]:
        """Return the state's messages after the pass (in view mode the whole history, not what the model is sent)."""
        return list(state_value(self.state, "messages") or [])


def combined(updates: Sequence[Mapping[str, Any]]) -> GraphUpdate:
    """Return one state update equal to applying ``updates`` in order."""
    update: GraphUpdate = {}
    writes = [m for u in updates for m in (u.get("messages") or [])]
    if writes:
        # a rewrite (the summary) makes every earlier edit part of it: what follows the last one is the history
        update["messages"] = message_writes(writes)
    if any(u.get("compaction") for u in updates):  # {"pending": None} alone is a write too
        update["compaction"] = update_delta(list(updates))
    return update


class CompactionEngine:
    """The compaction of one setup, for every front: the stages as graph nodes, the whole pass, overflow recovery.

    Args:
        options: What the setup is built from (``setup.EngineOptions``); None builds them from ``fields``.
        jobs: The background jobs this engine starts and applies (its own when None); a front that builds an
            engine per call shares one registry between them.
        fields: ``EngineOptions``'s fields, as keywords, when ``options`` is None.
    """

    def __init__(
        self, options: EngineOptions | None = None, /, *, jobs: BackgroundJobs | None = None, **fields: Any
    ) -> None:
        options = options if options is not None else EngineOptions(**fields)
        self.setup = Setup.build(options)
        #: The options as built (settings defaulted, storage opened): an engine built from them shares both.
        self.options = replace(options, config=self.setup.config, storage=self.setup.storage)
        self.memos = Memos()
        self.jobs = jobs if jobs is not None else BackgroundJobs()
        refuse_on_demand(self.setup)  # what the provider would refuse, said once the models are known
        refuse_threshold(options.agent_model)

    # -- the setup, as the fronts read it
    @property
    def before(self) -> str:
        return self.setup.before

    @property
    def config(self) -> CompactionConfig:
        return self.setup.config

    @property
    def model(self) -> Any:
        return self.setup.model

    @property
    def storage(self) -> Any:
        return self.setup.storage

    @property
    def budget(self) -> Budget:
        return self.setup.budget

    @property
    def counter(self) -> Any:
        return self.setup.counter

    @property
    def fixed_tokens(self) -> int:
        """Tokens every request carries besides the messages (system prompt, tool schemas)."""
        return self.setup.fixed_tokens

    @fixed_tokens.setter
    def fixed_tokens(self, value: int) -> None:
        self.setup.fixed_tokens = value

    # -- where a step runs
    def where(self, config: RunnableConfig, state: Any, store: Any = None) -> Run:
        """Return where a step over ``state`` runs: its thread (see ``run_thread_id``), user, storage and budget.

        ``store`` is the graph's store for a step run outside the graph (``compact_thread``); inside a run the
        runtime's is used.
        """
        runtime = current_runtime()
        storage = storage_for(self.setup.storage, store if store is not None else getattr(runtime, "store", None))
        user = run_user_id(runtime, config)
        thread, threadless = run_thread_id(config, state, user)
        return Run(
            thread_id=thread, user_id=user, storage=storage, budget=self._budget_for(runtime), threadless=threadless
        )

    def _budget_for(self, runtime: Any) -> Budget:
        """Return the budget with the run context's thresholds applied (a bad value raises, naming the field)."""
        if getattr(runtime, "context", None) is None:
            return self.setup.budget
        overrides = {k: v for k in CONTEXT_THRESHOLDS if (v := context_value(runtime, k)) is not None}
        if not overrides:
            return self.setup.budget
        if "keep_tokens" in overrides:  # a tail in tokens for this run, even where the config keeps messages
            overrides["keep_by"] = "tokens"
        config = self.setup.config
        return type(config).model_validate({**dict(config), **overrides}).resolve(self.setup.window_model)

    def performer(self, run: Run, call_agent: Callable[[Any], Any] | None = None) -> Performer:
        """Return what the driver performs this run's effects with."""
        return Performer(run, self.setup.config.summary.timeout, call_agent)

    # -- what the model is sent
    def messages_of(self, state: Any) -> list[BaseMessage]:
        """Return the messages compaction works on and the model is sent: the state's, or in view mode their view."""
        record = read_compaction(state_value(state, "compaction"))
        return self.setup.messages_of(state_value(state, "messages") or [], record)

    def sends_other_messages(self, model: Any = None) -> bool:
        """Return True when the agent's ``model`` (default: ``agent_model``) is sent other messages than the state's."""
        return self.setup.sends_other_messages(model)

    def model_messages(self, state: Any, model: Any = None) -> list[BaseMessage]:
        """Return what the agent's ``model`` (default: ``agent_model``) is sent (``Setup.model_messages``)."""
        messages = state_value(state, "messages") or []
        return self.setup.model_messages(messages, state_value(state, "compaction"), model)

    # -- the stages, each over a state (read once here)
    def _read(self, state: Any) -> tuple[list[BaseMessage], Any]:
        record = read_compaction(state_value(state, "compaction"))
        return self.setup.messages_of(state_value(state, "messages") or [], record), record

    def gate_steps(self, state: Any, run: Run, overflow: bool = False) -> Steps[GraphUpdate]:
        """The gate's steps over ``state``: answer calls left unanswered, layers 1-2 and the decision to summarize."""
        record = read_compaction(state_value(state, "compaction"))
        repaired, added = answer_unanswered(state_value(state, "messages") or [])
        messages = self.setup.messages_of(repaired, record)
        repair = (repaired, added) if added else None
        return gate_steps(self.setup, self.memos, self.jobs, messages, record, run, overflow, repair)

    def offload_steps(self, state: Any, run: Run) -> Steps[OffloadResult]:
        """The offload's steps over ``state``: every message the transcript lacks, appended."""
        messages, _ = self._read(state)
        return offload_result(messages, run, self.setup.config)

    def flush_steps(self, state: Any, run: Run) -> Steps[FlushResult]:
        """The flush's steps over ``state``: memories of the evicted prefix, into today's ledger."""
        messages, record = self._read(state)
        return flush_result(self.setup, messages, record, run)

    def summarize_steps(self, state: Any, run: Run) -> Steps[SummaryResult]:
        """The summary's steps over ``state``: the pending request's evicted messages replaced by a summary."""
        messages, record = self._read(state)
        return summary_result(self.setup, messages, record, run)

    def plan(
        self,
        messages: Sequence[BaseMessage],
        *,
        manual: bool = False,
        budget: Budget | None = None,
        overflow: bool = False,
        memo: Memo | None = None,
    ) -> CompactionPlan:
        """Return the gate's plan for these messages (layers 1-2, trigger, cutoff), for a look without acting."""
        return plan_for(self.setup, messages, manual=manual, budget=budget, overflow=overflow, memo=memo)

    def memo(self, thread_id: str, messages: Sequence[BaseMessage]) -> Memo:
        """Return the gate's memo of a thread brought up to date with ``messages``."""
        return self.memos.get(thread_id, messages, self.setup.counter)

    # -- the graph front's nodes
    def _node(
        self, node: str, steps: Callable[[Any, Run], Steps[Any]], state: Any, config: RunnableConfig
    ) -> GraphUpdate:
        run = self.where(config, state)
        return drive(
            guarded(stage_name(node), self._update(node, steps(state, run)), failed_update), self.performer(run)
        )

    async def _anode(
        self, node: str, steps: Callable[[Any, Run], Steps[Any]], state: Any, config: RunnableConfig
    ) -> GraphUpdate:
        run = self.where(config, state)
        return await adrive(
            guarded(stage_name(node), self._update(node, steps(state, run)), failed_update), self.performer(run)
        )

    @staticmethod
    def _update(node: str, steps: Steps[Any]) -> Steps[GraphUpdate]:
        """Return a node's steps returning its graph update (the gate's steps return it; the others, their result)."""
        return steps if node == GATE else rendered(steps)

    def gate(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        """The gate node: layers 1-2 and the decision, before every model call (no LLM)."""
        return self._node(GATE, self.gate_steps, state, config)

    async def agate(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        return await self._anode(GATE, self.gate_steps, state, config)

    def offload(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        """The offload node: append every message not yet in the transcript (each message once per thread)."""
        return self._node(OFFLOAD, self.offload_steps, state, config)

    async def aoffload(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        return await self._anode(OFFLOAD, self.offload_steps, state, config)

    def flush(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        """The flush node: extract long-term memories from the evicted prefix into today's ledger."""
        return self._node(FLUSH, self.flush_steps, state, config)

    async def aflush(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        return await self._anode(FLUSH, self.flush_steps, state, config)

    def summarize(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        """The summarize node: replace the evicted prefix by one structured summary (the join of flush and offload)."""
        return self._node(SUMMARIZE, self.summarize_steps, state, config)

    async def asummarize(self, state: Any, config: RunnableConfig) -> GraphUpdate:
        return await self._anode(SUMMARIZE, self.summarize_steps, state, config)

    def route(self, state: Any) -> list[str] | str:
        """Return where the gate leads: the side branches when compaction is pending, else the model node."""
        if not read_compaction(state_value(state, "compaction"))["pending"]:
            return self.setup.before
        targets = []
        if self.setup.config.flush_before_compact:
            targets.append(FLUSH)
        if self.setup.config.offload_before_compact:
            targets.append(OFFLOAD)
        return targets or [SUMMARIZE]

    # -- the whole pass (every front but the graph's four nodes)
    def run_pass(self, state: Any, run: Run) -> PassResult:
        """Run one compaction pass synchronously; offload and flush run side by side in two threads.

        Every failure inside a stage is recorded in the update (the stage's own
        guard), so this never raises and never drops a message.
        """
        updates, after = drive(pass_steps(self, state, run), self.performer(run))
        return self._result(updates, after)

    async def arun_pass(self, state: Any, run: Run) -> PassResult:
        """Run one compaction pass with ``await``; offload and flush run side by side (``asyncio.gather``)."""
        updates, after = await adrive(pass_steps(self, state, run), self.performer(run))
        return self._result(updates, after)

    @staticmethod
    def _result(updates: list[GraphUpdate], state: Any) -> PassResult:
        update = combined(updates)
        return PassResult(update=update, state=state, events=list((update.get("compaction") or {}).get("events") or []))

    # -- overflow recovery around the agent's model call
    def recover(self, state: Any, run: Run, call: Callable[[Any], Any]) -> Any:
        """Call ``call(state)``; when the model refuses it as too long, compact in overflow mode and call once more."""
        return drive(recovery_steps(self, state, run), self.performer(run, call))

    async def arecover(self, state: Any, run: Run, call: Callable[[Any], Any]) -> Any:
        """Return ``recover``'s output, awaiting ``call`` (a coroutine function)."""
        return await adrive(recovery_steps(self, state, run), self.performer(run, call))
