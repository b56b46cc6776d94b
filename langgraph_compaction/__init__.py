"""Keep a LangGraph agent's conversation inside its model's context window.

Add the compaction nodes in front of your model node::

    from langgraph_compaction import CompactionConfig, CompactionState, add_compaction

    builder = StateGraph(CompactionState)
    builder.add_node("agent", call_model)
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=summarizer, config=CompactionConfig(context_window=128_000),
                   storage="./.compaction")
    graph = builder.compile(checkpointer=InMemorySaver())

``__all__`` lists what an application uses: the fronts, the settings, the state, storage, memory, the controls
and the errors. The building blocks underneath (the plan, the node names, the state's reducer, the summary
builders, the token helpers) are imported from the modules that define them, the provider checks from
``langgraph_compaction.testing``; importing one of them from here still works.
"""

import importlib
from typing import Any

# The public names, by the module that defines them. They are imported on first use (PEP 562), so
# ``import langgraph_compaction`` and the command line start fast, and the middleware's optional
# dependency (``langchain``) is needed only by those who use it.
_EXPORTS: dict[str, tuple[str, ...]] = {
    # the fronts: ways to add compaction to an agent
    "fronts.graph": ("add_compaction", "subgraph_node"),
    "fronts.middleware": ("CompactionMiddleware",),
    "fronts.prebuilt": ("make_pre_model_hook",),
    "fronts.functional": ("acompact_messages", "compact_messages"),
    "fronts.tools": ("make_compaction_tools",),
    "fronts.consolidation": ("consolidation_node",),
    # the settings (its groups may be given as dicts: ``CompactionConfig(summary={"timeout": 60})``)
    "core.config": ("CompactionConfig",),
    # the state
    "engine.state": ("CompactionState",),
    # storage and the transcripts it keeps
    "storage": ("CompactionStorage", "FileStorage", "StoreStorage"),
    "storage.transcript": ("aload_transcript", "load_transcript"),
    # memory
    "memory.consolidation": ("aconsolidate_memory", "amemory_for_prompt", "consolidate_memory", "memory_for_prompt"),
    # the controls
    "core.hooks": ("CompactionInfo",),
    "core.fidelity": ("pin_constraint", "unpin_constraint"),
    "core.conversation": ("is_summary",),
    # a thread from the application: the user's /compact, how full it is, its background jobs
    "fronts.controls": (
        "acompact_thread",
        "await_compaction",
        "compact_thread",
        "context_usage",
        "wait_for_compaction",
    ),
    # the errors
    "engine.errors": ("ContextTooLongError",),
    "engine.overflow": ("ainvoke_with_recovery", "invoke_with_recovery"),
}

# Names importable from here but documented, and listed, in their own modules: the plan, the node names,
# the state's reducer, the summary builders, the token helpers, the provider checks and a few more.
# ``from langgraph_compaction import GATE`` keeps working; ``from langgraph_compaction.engine.nodes import
# GATE`` is where the name lives.
_ELSEWHERE: dict[str, tuple[str, ...]] = {
    "core.config": (
        "BackgroundConfig",
        "Budget",
        "FidelityConfig",
        "GuardsConfig",
        "MemoryConfig",
        "MicroCompactConfig",
        "PruneConfig",
        "SummaryConfig",
        "TruncateArgsConfig",
    ),
    "core.plan": ("CompactionPlan", "Cut", "find_cutoff", "plan_compaction"),
    "engine.nodes": ("FLUSH", "GATE", "OFFLOAD", "SUMMARIZE"),
    "engine.state": ("merge_compaction", "read_compaction"),
    "core.summary": ("build_summary_message", "extractive_summary", "summary_message_id"),
    "core.fidelity": ("complete_summary", "stated_rules"),
    "core.tokens": ("TokenCounter", "estimate_tokens", "seed_estimate_tokens"),
    "testing": ("anthropic_violations", "openai_violations", "view_violations"),
    "fronts.functional": ("CompactionResult",),
    "memory.consolidation": ("ConsolidationResult",),
    "core.conversation": ("SUMMARY_MESSAGE_NAME",),
    "engine.errors": ("is_context_overflow", "overflow_figures"),
    "core.redact": ("redact_secrets",),
    "core.caching": ("with_cache_breakpoints",),
    "storage": ("open_storage", "safe_label"),
    "fronts.controls": ("ContextUsage", "ThreadCompaction", "compaction_engines"),
}
_MODULE_OF = {name: module for table in (_EXPORTS, _ELSEWHERE) for module, names in table.items() for name in names}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)


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
    if name in __all__:
        globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    # the public names, the module's dunders and the subpackages imported so far; neither this module's own
    # helpers nor the names documented elsewhere
    return sorted(
        set(__all__)
        | {name for name in globals() if name.startswith("__")}
        | {name for name, value in globals().items() if getattr(value, "__name__", "").startswith(f"{__name__}.")}
    )
