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

from .config import Budget, CompactionConfig, MicroCompactConfig, PruneConfig, TruncateArgsConfig
from .conversation import SUMMARY_MESSAGE_NAME, is_summary
from .graph import add_compaction
from .nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE, CompactionNodes
from .plan import CompactionPlan, Cut, find_cutoff, plan_compaction
from .state import CompactionState, merge_compaction, read_compaction
from .storage import CompactionStorage, FileStorage, StoreStorage, open_storage, safe_label
from .summary import build_summary_message, extractive_summary, summary_message_id
from .tokens import TokenCounter, estimate_tokens, seed_estimate_tokens
from .validation import anthropic_violations, openai_violations, view_violations

__all__ = [
    "SUMMARY_MESSAGE_NAME",
    "Budget",
    "CompactionConfig",
    "CompactionNodes",
    "CompactionPlan",
    "CompactionState",
    "CompactionStorage",
    "Cut",
    "FLUSH",
    "FileStorage",
    "GATE",
    "MicroCompactConfig",
    "OFFLOAD",
    "PruneConfig",
    "SUMMARIZE",
    "StoreStorage",
    "TokenCounter",
    "TruncateArgsConfig",
    "add_compaction",
    "anthropic_violations",
    "build_summary_message",
    "estimate_tokens",
    "extractive_summary",
    "find_cutoff",
    "is_summary",
    "merge_compaction",
    "open_storage",
    "openai_violations",
    "plan_compaction",
    "read_compaction",
    "safe_label",
    "seed_estimate_tokens",
    "summary_message_id",
    "view_violations",
]
