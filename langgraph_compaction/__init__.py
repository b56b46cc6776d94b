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
and the errors. The building blocks underneath (the settings' groups, the plan, the node names, the state's
reducer, the summary builders, the token helpers) are imported from the modules that define them, the provider
checks from ``langgraph_compaction.testing``.
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
    # the public names, the module's dunders and the subpackages imported so far; not this module's own helpers
    return sorted(
        set(__all__)
        | {name for name in globals() if name.startswith("__")}
        | {name for name, value in globals().items() if getattr(value, "__name__", "").startswith(f"{__name__}.")}
    )
