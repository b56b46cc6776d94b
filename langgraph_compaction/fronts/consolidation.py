"""``consolidation_node``: the memory consolidation as a graph node (sync and async)."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableLambda

from ..core.config import CompactionConfig
from ..engine.events import emit_event
from ..engine.run import current_runtime, run_user_id
from ..memory.consolidation import ConsolidationResult, aconsolidate_memory, consolidate_memory
from ..storage import StoreStorage, open_storage


def consolidation_node(model: Any, storage: Any = None, config: CompactionConfig | None = None, **options: Any) -> Any:
    """Return a graph node (sync and async) that consolidates the run's user's memory.

    The user is ``runtime.context.user_id``, else ``configurable["user_id"]``.
    The rate limit makes it cheap to run after every turn. The node writes
    the result as a compaction event (``compaction["events"]`` and
    ``stream_mode="custom"``).

    Args:
        model: The chat model that merges the ledger into MEMORY.md.
        storage: A directory, a LangGraph ``BaseStore`` or a storage object;
            None means the graph's store (``runtime.store``).
        config: Supplies ``memory.consolidation_max_tokens``, ``memory.consolidation_min_gap``,
            ``memory.daily_file_retention_days``, ``memory.timezone`` and ``guards.redactor``.
        **options: Keywords of ``consolidate_memory``; they override what
            ``config`` supplies.
    """
    fixed = open_storage(storage)
    if config is not None:
        options = {
            "max_tokens": config.memory.consolidation_max_tokens,
            "min_gap_seconds": config.memory.consolidation_min_gap,
            "retention_days": config.memory.daily_file_retention_days,
            "timezone": config.memory.timezone,
            "redactor": config.guards.redactor,
            **options,
        }

    def where(config: Any) -> tuple[Any, str]:
        runtime = current_runtime()
        target = fixed
        if target is None and getattr(runtime, "store", None) is not None:
            target = StoreStorage(runtime.store)
        return target, run_user_id(runtime, config)

    def update(result: ConsolidationResult) -> dict:
        event = emit_event(result.as_event())
        return {"compaction": {"events": [event]}}

    def missing() -> dict:
        return {"compaction": {"events": [emit_event({"stage": "consolidate", "note": "no storage configured"})]}}

    def run(state: Any, config: Any) -> dict:
        target, user = where(config)
        return update(consolidate_memory(target, model, user_id=user, **options)) if target else missing()

    async def arun(state: Any, config: Any) -> dict:
        target, user = where(config)
        return update(await aconsolidate_memory(target, model, user_id=user, **options)) if target else missing()

    return RunnableLambda(run, afunc=arun, name="memory_consolidation")
