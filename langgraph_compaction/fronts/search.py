"""What the memory and transcript tools answer: ranked memory lines, memory files, transcript search and recall.

Functions of a storage, a user or a thread and the tool's arguments; the
tools of ``fronts.tools`` call them for the run's thread and user. Memory
search and session search rank by one rule (`rank`: BM25 over words and
their parts); a store with an embedding index adds its semantic ranking
to memory search (`merge_rankings`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import messages_from_dict
from rank_bm25 import BM25Plus

from ..core.conversation import is_summary
from ..core.summary import render_message
from ..memory.ledger import MEMORY_FILE, MemoryLine, is_memory_text, memory_lines, search_terms
from ..storage import DEFAULT_USER, CompactionStorage, StoreStorage, check_relpath, safe_label
from ..storage.transcript import messages_by_id, paginate, render_recalled, summary_covers

logger = logging.getLogger(__name__)

MAX_RESULTS = 50
MAX_LINES = 400
PAGE_CHARS = 10_000
SNIPPET_CHARS = 300

# --- ranking (pure) -----------------------------------------------------------


#: A query word this long or longer also finds the words it begins (``modul`` finds ``modules``).
PREFIX_CHARS = 3


def document_terms(text: str) -> list[list[str]]:
    """Return a text's words, each as the terms it is found by: the word, then its parts.

    The words are `search_terms`'s; a word's parts are where its case or
    its letters and digits change (``readFile`` -> ``read``, ``file``;
    ``module7`` -> ``module``, ``7``).

    >>> document_terms("readFile(module7)")
    [['readfile', 'read', 'file'], ['module7', 'module', '7']]

    Args:
        text: a memory line or a rendered message.
    """
    words: list[list[str]] = []
    for run in re.findall(r"[^\W_]+", text):
        terms = search_terms(run)
        parts = _word_parts(run)
        if len(terms) == 1 and len(parts) > 1:
            words.append([terms[0], *dict.fromkeys(p for p in parts if p != terms[0])])
        else:
            words += [[term] for term in terms]
    return words


def _word_parts(word: str) -> list[str]:
    """Return the folded parts of a word: split where lower case meets upper case, or letters meet digits."""
    parts: list[str] = []
    current = ""
    for ch in word:
        if current and (ch.isdigit() != current[-1].isdigit() or (ch.isupper() and current[-1].islower())):
            parts.append(current)
            current = ""
        elif current[-2:].isupper() and len(current) >= 2 and ch.islower():  # "HTTPServer": "HTTP", "Server"
            parts.append(current[:-1])
            current = current[-1]
        current += ch
    return [p.casefold() for p in [*parts, current] if p]


def _matched(query_terms: Sequence[str], word: Sequence[str]) -> str:
    """Return the query term a document word counts as (itself when it matches none)."""
    for term in query_terms:
        if any(t == term or (len(term) >= PREFIX_CHARS and t.startswith(term)) for t in word):
            return term
    return word[0]


def rank(query: str, documents: Sequence[str], max_results: int) -> list[tuple[int, float]]:
    """Return (index, score) of the documents that match the query best, BM25-ranked, newest first on ties.

    A query term finds a document word that is the term, begins with it
    (terms of at least `PREFIX_CHARS` characters) or has it as a part
    (`document_terms`): ``module`` finds ``modules`` and ``module7``. Only
    documents with at least one such word are returned. Memory search and
    session search rank by this one rule.

    Args:
        query: what to look for.
        documents: the texts to rank.
        max_results: how many to return at most.
    """
    terms = list(dict.fromkeys(search_terms(query)))
    if not terms or not documents:
        return []
    # each document word is counted as the query term it matches, so BM25 weighs "modules" as "module"
    corpus = [[_matched(terms, word) for word in document_terms(d)] for d in documents]
    if not any(corpus):
        return []
    # BM25+ keeps IDF positive, so a term found in half of a small memory still counts
    scores = BM25Plus([c or [""] for c in corpus]).get_scores(terms)
    wanted = set(terms)
    hits = [(i, float(scores[i])) for i, c in enumerate(corpus) if wanted.intersection(c)]
    hits.sort(key=lambda hit: (-hit[1], -hit[0]))
    return hits[:max_results]


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """Return one line of about ``width`` characters of the text around the first query term found."""
    flat = " ".join(text.split())
    folded = flat.casefold()
    at = min((p for p in (folded.find(t) for t in search_terms(query)) if p >= 0), default=0)
    start = max(0, min(at - width // 3, len(flat) - width))
    piece = flat[start : start + width]
    return ("..." if start else "") + piece + ("..." if start + width < len(flat) else "")


def _clamp(value: Any, low: int, high: int, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return min(max(number, low), high)


# --- the answers ----------------------------------------------------------------


def search_memory(storage: CompactionStorage, user_id: str, query: str, max_results: int = 10) -> str:
    """Return the ``memory_search`` answer: ranked hits as ``path#line [date] text``.

    Lines are ranked by words (`rank`); where the memory lives in a LangGraph
    store configured with an embedding index (``index={"dims": ..., "embed":
    ...}``), by the store's semantic search too, the two rankings merged
    (`merge_rankings`): a line that shares no word with the query is found
    by its meaning. When the store's embedder fails (its model cannot load),
    the word matches are returned with a last line saying the semantic part
    is unavailable, and a warning is logged.

    Args:
        storage: where the memory files are.
        user_id: whose memory.
        query: what to look for.
        max_results: how many lines to return at most (1 to `MAX_RESULTS`).
    """
    lines = []
    for path in storage.list_memory_files(user_id):
        if is_memory_text(path):
            lines += memory_lines(path, storage.read_memory_file(user_id, path) or "")
    limit = _clamp(max_results, 1, MAX_RESULTS, 10)
    hits = [i for i, _ in rank(query, [line.text for line in lines], limit)]
    store = semantic_store(storage)
    note = ""
    if store is not None and lines and query.strip():
        try:
            hits = merge_rankings([hits, semantic_ranking(store, user_id, lines, query, limit)])[:limit]
        except Exception as exc:  # noqa: BLE001 - an embedder that cannot load leaves the word matches
            logger.warning("memory_search: the store's embedding index failed, word matches only: %r", exc)
            note = SEMANTIC_UNAVAILABLE.format(error=type(exc).__name__)
    if not hits:
        return f"No memory matches {query!r}." + note
    rows = []
    for i in hits:
        line = lines[i]
        when = f" [{line.date}]" if line.date else (" [curated]" if line.path == MEMORY_FILE else "")
        rows.append(f"{line.path}#{line.line}{when} {line.text}")
    return (
        f"{len(rows)} memory results for {query!r} (use memory_get(path, start_line, end_line) for context):\n"
        + "\n".join(rows)
        + note
    )


#: Where memory search keeps the memory's lines for a store's semantic search, per user: one item per line.
SEMANTIC_NAMESPACE = ("compaction", "memory_search")
#: The last line of a memory_search answer whose semantic part failed (the store's embedder could not run).
SEMANTIC_UNAVAILABLE = (
    "\n(semantic search is unavailable: the store's embedding index failed with {error}; these are word matches only)"
)
#: Reciprocal rank fusion's constant: how much a first place outweighs a tenth.
RRF_K = 60


def semantic_store(storage: CompactionStorage | None) -> Any | None:
    """Return the LangGraph store behind ``storage`` when it has an embedding index (semantic search), else None.

    Args:
        storage: the compaction storage the tools read.
    """
    store = getattr(storage, "store", None) if isinstance(storage, StoreStorage) else None
    return store if getattr(store, "index_config", None) else None


def semantic_ranking(store: Any, user_id: str, lines: Sequence[MemoryLine], query: str, limit: int) -> list[int]:
    """Return the indexes of ``lines`` the store's semantic search ranks first for ``query``.

    The lines are kept as items of their own under `SEMANTIC_NAMESPACE`,
    keyed by file and text: a line is embedded once, when first searched, and
    an item whose line is gone is deleted.

    Args:
        store: a LangGraph ``BaseStore`` with an embedding index.
        user_id: whose memory (the items are per user).
        lines: the memory's lines (`memory_lines`).
        query: what to look for.
        limit: how many to return at most.
    """
    from langgraph.store.base import PutOp

    namespace = (*SEMANTIC_NAMESPACE, safe_label(user_id or DEFAULT_USER))
    keys: dict[str, int] = {}
    for i, line in enumerate(lines):
        keys.setdefault(_line_key(line), i)
    stored: set[str] = set()
    offset = 0
    while batch := store.search(namespace, limit=500, offset=offset):
        stored.update(item.key for item in batch)
        offset += len(batch)
    writes = [PutOp(namespace, key, None) for key in stored - keys.keys()]
    writes += [PutOp(namespace, k, {"text": lines[i].text}, index=["text"]) for k, i in keys.items() if k not in stored]
    if writes:
        store.batch(writes)
    found = store.search(namespace, query=query, limit=limit)
    return [keys[item.key] for item in found if item.key in keys]


def _line_key(line: MemoryLine) -> str:
    return hashlib.sha256(f"{line.path}\x00{line.text}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def merge_rankings(rankings: Sequence[Sequence[int]]) -> list[int]:
    """Return the items of several rankings in one order: reciprocal rank fusion (the sum of ``1 / (RRF_K + rank)``).

    >>> merge_rankings([[3, 1, 2], [1, 4]])
    [1, 3, 4, 2]

    Args:
        rankings: each a list of items, best first.
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for place, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + place)
    return sorted(scores, key=lambda item: -scores[item])


def read_memory(storage: CompactionStorage, user_id: str, path: str, start_line: Any = 1, end_line: Any = None) -> str:
    """Return the ``memory_get`` answer: numbered lines of a memory file, or an error that read nothing."""
    try:
        relpath = check_relpath(path)
        if not (relpath == MEMORY_FILE or (relpath.startswith("memory/") and relpath.endswith(".md"))):
            raise ValueError(f"{path!r} is not a memory file; use 'MEMORY.md' or 'memory/YYYY-MM-DD.md'")
        text = storage.read_memory_file(user_id, relpath)
    except ValueError as exc:
        return f"Error: {exc}"
    if text is None:
        return f"Error: {path} does not exist; memory_search lists the files that do."
    lines = text.splitlines()
    first = _clamp(start_line, 1, max(len(lines), 1), 1)
    last = _clamp(end_line, first, len(lines), len(lines)) if end_line is not None else len(lines)
    last = min(last, first + MAX_LINES - 1)
    body = "\n".join(f"{n}: {lines[n - 1]}" for n in range(first, last + 1))
    more = (
        f"\n(lines {last + 1}-{len(lines)} not shown; ask for them with start_line={last + 1})"
        if last < len(lines)
        else ""
    )
    return f"{relpath} lines {first}-{last} of {len(lines)}:\n{body}{more}"


def search_session(
    storage: CompactionStorage, thread_id: str, query: str, max_results: int = 10, in_context: Sequence[str] = ()
) -> str:
    """Return the ``session_search`` answer: ranked transcript messages with id, kind, status and snippet.

    ``in_context`` are the ids of the messages the agent still has; the others are marked evicted.
    """
    messages = messages_from_dict(storage.read_transcript(thread_id))
    if not messages:
        return "Nothing of this conversation has been offloaded yet; everything is still in your context."
    hits = rank(query, [render_message(m) for m in messages], _clamp(max_results, 1, MAX_RESULTS, 10))
    if not hits:
        return f"No message of this conversation matches {query!r}."
    present = set(in_context)
    rows = []
    for i, _ in hits:
        m = messages[i]
        status = "in context" if m.id in present else "evicted"
        kind = "summary" if is_summary(m) else (f"tool {m.name}" if m.type == "tool" and m.name else m.type)
        rows.append(f"id={m.id} [{kind}, {status}] {snippet(render_message(m), query)}")
    return (
        f"{len(rows)} messages match {query!r} (recall(message_ids=[...]) returns evicted ones in full):\n"
        + "\n".join(rows)
    )


def recall_messages(
    storage: CompactionStorage, thread_id: str, message_ids: Sequence[str], page: Any = 1, max_chars: Any = PAGE_CHARS
) -> str:
    """Return the ``recall`` answer: the messages with these ids in full, one page at a time.

    A summary's id stands for the messages it replaced (all of them, in
    order, after the summary itself), so an agent can open a summary.
    """
    ids = [message_ids] if isinstance(message_ids, str) else [str(i) for i in message_ids or []]
    if not ids:
        return "Error: give message_ids, e.g. the ids session_search or the summary's compaction note shows."
    transcript = messages_from_dict(storage.read_transcript(thread_id))
    covers = summary_covers(transcript)
    wanted = [j for i in ids for j in ([i, *covers[i]] if i in covers else [i])]
    found, missing = messages_by_id(transcript, wanted)
    opened = [i for i in ids if i in covers]
    text = "\n\n".join(render_recalled(m) for m in found)
    if missing:
        text += ("\n\n" if text else "") + f"(not in the transcript: {', '.join(missing[:20])})"
    chunk = paginate(text, _clamp(page, 1, 10**6, 1), _clamp(max_chars, 1_000, 50_000, PAGE_CHARS))
    summaries = f"; {len(opened)} summar{'y' if len(opened) == 1 else 'ies'} opened" if opened else ""
    head = f"Recalled {len(found)} of {len(dict.fromkeys(wanted))} messages{summaries}"
    head += f" (page {chunk.number} of {chunk.count})"
    tail = f"\n(call recall with page={chunk.number + 1} for more)" if chunk.number < chunk.count else ""
    return f"{head}:\n{chunk.text}{tail}"
