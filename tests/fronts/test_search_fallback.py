"""memory_search over a store whose embedding index cannot load: the word matches stay, the answer says why.

A deployment configures its store with an embedding function (``index={"dims": ..., "embed": ...}``); when that
function fails (its model files are missing, its service is down), the words still find what they find.
"""

import logging

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langgraph_compaction import CompactionState
from langgraph_compaction.fronts.tools import make_compaction_tools
from langgraph_compaction.storage import StoreStorage

MEMORY_MD = "# Memory\n\n- The project database is Postgres 16 on db-main\n- The user prefers tabs for indentation\n"


def _unloadable(texts):
    raise OSError("[Errno 2] No such file or directory: 'all-MiniLM-L6-v2/model.safetensors'")


def _ask(store: InMemoryStore, query: str) -> str:
    builder = StateGraph(CompactionState)
    builder.add_node("tools", ToolNode(make_compaction_tools()))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile(store=store)
    call = AIMessage("", tool_calls=[{"name": "memory_search", "args": {"query": query}, "id": "c1"}])
    config = {"configurable": {"thread_id": "t", "user_id": "ada"}}
    return graph.invoke({"messages": [call]}, config)["messages"][-1].content


def test_a_failing_embedder_leaves_the_word_matches_and_says_the_semantic_part_is_unavailable(caplog):
    store = InMemoryStore(index={"dims": 3, "embed": _unloadable})
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    with caplog.at_level(logging.WARNING, logger="langgraph_compaction"):
        answer = _ask(store, "which database?")
    lines = answer.splitlines()
    assert lines[0].startswith("1 memory results for 'which database?'")
    assert lines[1] == "MEMORY.md#3 [curated] The project database is Postgres 16 on db-main"
    assert lines[-1] == (
        "(semantic search is unavailable: the store's embedding index failed with OSError; these are word matches only)"
    )
    assert "compaction storage" not in answer
    assert any("embedding index" in r.getMessage() for r in caplog.records)  # the operator sees why


def test_a_failing_embedder_with_no_word_match_says_so_instead_of_blaming_the_storage():
    store = InMemoryStore(index={"dims": 3, "embed": _unloadable})
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    answer = _ask(store, "which SQL engine?")
    assert answer.splitlines() == [
        "No memory matches 'which SQL engine?'.",
        "(semantic search is unavailable: the store's embedding index failed with OSError; "
        "these are word matches only)",
    ]
