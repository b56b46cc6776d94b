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
    "caching": ("with_cache_breakpoints",),
    "config": ("Budget", "CompactionConfig", "FidelityConfig", "MicroCompactConfig", "PruneConfig", "TruncateArgsConfig"),
    "consolidation": ("ConsolidationResult", "aconsolidate_memory", "amemory_for_prompt", "consolidate_memory", "consolidation_node", "memory_for_prompt"),
    "conversation": ("SUMMARY_MESSAGE_NAME", "is_summary"),
    "fidelity": ("complete_summary", "pin_constraint", "stated_rules", "unpin_constraint"),
    "functional": ("CompactionResult", "acompact_messages", "compact_messages"),
    "graph": ("add_compaction", "subgraph_node"),
    "middleware": ("CompactionMiddleware",),
    "nodes": ("CompactionNodes", "FLUSH", "GATE", "OFFLOAD", "SUMMARIZE"),
    "overflow": ("ContextTooLongError", "ainvoke_with_recovery", "invoke_with_recovery", "is_context_overflow", "overflow_figures", "with_overflow_recovery"),
    "plan": ("CompactionPlan", "Cut", "find_cutoff", "plan_compaction"),
    "prebuilt": ("make_pre_model_hook",),
    "redact": ("redact_secrets",),
    "state": ("CompactionState", "merge_compaction", "read_compaction"),
    "storage": ("CompactionStorage", "FileStorage", "StoreStorage", "open_storage", "safe_label"),
    "summary": ("build_summary_message", "extractive_summary", "summary_message_id"),
    "tokens": ("TokenCounter", "estimate_tokens", "seed_estimate_tokens"),
    "tools": ("make_compaction_tools",),
    "transcript": ("aload_transcript", "load_transcript"),
    "validation": ("anthropic_violations", "openai_violations", "view_violations"),
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
        if module != "middleware" or not str(exc.name).startswith("langchain"):
            raise
        raise ImportError("CompactionMiddleware needs LangChain's agents: pip install 'langchain>=1.5' (the [agents] extra)") from exc
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
