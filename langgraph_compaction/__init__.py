"""Keep a LangGraph agent's conversation inside its model's context window.

Add the compaction nodes in front of your model node::

    from langgraph_compaction import CompactionConfig, CompactionState, add_compaction

    builder = StateGraph(CompactionState)
    builder.add_node("agent", call_model)
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=summarizer, config=CompactionConfig(context_window=128_000),
                   storage="./.compaction")
    graph = builder.compile(checkpointer=InMemorySaver())
"""

import importlib
from typing import Any

# Public names by the module that defines them. They are imported on first use (PEP 562), so
# ``import langgraph_compaction`` and the command line start fast, and the middleware's optional
# dependency (``langchain``) is needed only by those who use it.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "core.caching": ("with_cache_breakpoints",),
    "core.config": (
        "BackgroundConfig",
        "Budget",
        "CompactionConfig",
        "FidelityConfig",
        "GuardsConfig",
        "MemoryConfig",
        "MicroCompactConfig",
        "PruneConfig",
        "SummaryConfig",
        "TruncateArgsConfig",
    ),
    "memory.consolidation": (
        "ConsolidationResult",
        "aconsolidate_memory",
        "amemory_for_prompt",
        "consolidate_memory",
        "memory_for_prompt",
    ),
    "core.conversation": ("SUMMARY_MESSAGE_NAME", "is_summary"),
    "core.hooks": ("CompactionInfo",),
    "core.fidelity": ("complete_summary", "pin_constraint", "stated_rules", "unpin_constraint"),
    "fronts.consolidation": ("consolidation_node",),
    "fronts.functional": ("CompactionResult", "acompact_messages", "compact_messages"),
    "fronts.graph": ("add_compaction", "subgraph_node"),
    "fronts.middleware": ("CompactionMiddleware",),
    "engine.errors": ("ContextTooLongError", "is_context_overflow", "overflow_figures"),
    "engine.nodes": ("CompactionNodes", "FLUSH", "GATE", "OFFLOAD", "SUMMARIZE"),
    "engine.overflow": ("ainvoke_with_recovery", "invoke_with_recovery", "with_overflow_recovery"),
    "core.plan": ("CompactionPlan", "Cut", "find_cutoff", "plan_compaction"),
    "fronts.prebuilt": ("make_pre_model_hook",),
    "core.redact": ("redact_secrets",),
    "engine.state": ("CompactionState", "merge_compaction", "read_compaction"),
    "storage": ("CompactionStorage", "FileStorage", "StoreStorage", "open_storage", "safe_label"),
    "core.summary": ("build_summary_message", "extractive_summary", "summary_message_id"),
    "core.tokens": ("TokenCounter", "estimate_tokens", "seed_estimate_tokens"),
    "fronts.tools": ("make_compaction_tools",),
    "storage.transcript": ("aload_transcript", "load_transcript"),
    "core.validation": ("anthropic_violations", "openai_violations", "view_violations"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    except ModuleNotFoundError as exc:
        if module != "fronts.middleware" or not str(exc.name).startswith("langchain"):
            raise
        raise ImportError(
            "CompactionMiddleware needs LangChain's agents: pip install 'langchain>=1.5' (the [agents] extra)"
        ) from exc
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
