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

from .config import Budget, CompactionConfig, FidelityConfig, MicroCompactConfig, PruneConfig, TruncateArgsConfig
from .consolidation import (
    ConsolidationResult,
    aconsolidate_memory,
    amemory_for_prompt,
    consolidate_memory,
    consolidation_node,
    memory_for_prompt,
)
from .conversation import SUMMARY_MESSAGE_NAME, is_summary
from .fidelity import complete_summary, pin_constraint, stated_rules, unpin_constraint
from .functional import CompactionResult, acompact_messages, compact_messages
from .graph import add_compaction, subgraph_node
from .nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE, CompactionNodes
from .overflow import (
    ContextTooLongError,
    ainvoke_with_recovery,
    invoke_with_recovery,
    is_context_overflow,
    overflow_figures,
    with_overflow_recovery,
)
from .plan import CompactionPlan, Cut, find_cutoff, plan_compaction
from .prebuilt import make_pre_model_hook
from .redact import redact_secrets
from .state import CompactionState, merge_compaction, read_compaction
from .storage import CompactionStorage, FileStorage, StoreStorage, open_storage, safe_label
from .summary import build_summary_message, extractive_summary, summary_message_id
from .tokens import TokenCounter, estimate_tokens, seed_estimate_tokens
from .tools import make_compaction_tools
from .transcript import aload_transcript, load_transcript
from .validation import anthropic_violations, openai_violations, view_violations

__all__ = [
    "CompactionMiddleware",
    "CompactionResult",
    "acompact_messages",
    "compact_messages",
    "make_pre_model_hook",
    "SUMMARY_MESSAGE_NAME",
    "Budget",
    "CompactionConfig",
    "CompactionNodes",
    "CompactionPlan",
    "CompactionState",
    "CompactionStorage",
    "ConsolidationResult",
    "ContextTooLongError",
    "Cut",
    "FLUSH",
    "FidelityConfig",
    "FileStorage",
    "GATE",
    "MicroCompactConfig",
    "OFFLOAD",
    "PruneConfig",
    "SUMMARIZE",
    "StoreStorage",
    "TokenCounter",
    "TruncateArgsConfig",
    "aconsolidate_memory",
    "add_compaction",
    "ainvoke_with_recovery",
    "aload_transcript",
    "amemory_for_prompt",
    "anthropic_violations",
    "build_summary_message",
    "complete_summary",
    "consolidate_memory",
    "consolidation_node",
    "estimate_tokens",
    "extractive_summary",
    "find_cutoff",
    "invoke_with_recovery",
    "is_context_overflow",
    "is_summary",
    "load_transcript",
    "make_compaction_tools",
    "memory_for_prompt",
    "merge_compaction",
    "open_storage",
    "openai_violations",
    "overflow_figures",
    "pin_constraint",
    "plan_compaction",
    "read_compaction",
    "redact_secrets",
    "safe_label",
    "seed_estimate_tokens",
    "stated_rules",
    "subgraph_node",
    "summary_message_id",
    "unpin_constraint",
    "view_violations",
    "with_overflow_recovery",
]


def __getattr__(name: str):
    # the middleware needs ``langchain`` (create_agent's package), which the graph front does not
    if name == "CompactionMiddleware":
        try:
            from .middleware import CompactionMiddleware
        except ModuleNotFoundError as exc:
            if exc.name != "langchain" and not str(exc.name).startswith("langchain."):
                raise
            raise ImportError("CompactionMiddleware needs LangChain's agents: pip install 'langchain>=1.5'") from exc
        return CompactionMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
