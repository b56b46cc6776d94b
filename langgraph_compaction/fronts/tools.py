"""The agent's tools over what compaction keeps: memory search and reads, transcript search and recall, compact.

``make_compaction_tools(storage)`` returns seven LangChain tools, sync and
async, for ``ToolNode`` / ``create_agent``:

- ``memory_search(query, max_results=10)``: BM25-ranked lines of MEMORY.md
  and the daily ledgers, each with ``path#line``, date and text;
- ``memory_get(path, start_line=1, end_line=None)``: a line range of a memory
  file; paths outside the memory folder are refused before anything is read;
- ``session_search(query, max_results=10)``: BM25 over this thread's
  offloaded transcript, each hit with its message id;
- ``recall(message_ids, page=1)``: evicted messages back by id, in full,
  size-capped and paginated; a summary's id gives the messages it replaced;
- ``compact(focus=None)``: ask for compaction before the next model call;
- ``pin(text)`` / ``unpin(text)``: keep a rule or a fact verbatim in every
  later summary (the pins of ``pin_constraint``), up to
  ``FidelityConfig.max_pins`` at a time, within the pins' token budget
  (``core.pins``: ``pin_tokens`` each, ``pins_tokens`` in all).

The thread, the user and the store come from the tool runtime (thread id
from the run's ``configurable``, or the run's own transcript when it has
none; user from ``runtime.context.user_id`` else ``configurable["user_id"]``);
``storage=None`` uses the graph's store. Pass the same storage as to
``add_compaction``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from rank_bm25 import BM25Plus

from ..core.config import CompactionConfig, FidelityConfig
from ..core.conversation import is_summary
from ..core.pins import pin_budget
from ..core.plan import find_cutoff
from ..core.summary import render_message
from ..core.tokens import TokenCounter
from ..engine.run import run_thread_id, run_user_id
from ..memory.ledger import MEMORY_FILE, MemoryLine, is_memory_text, memory_lines, search_terms
from ..storage import DEFAULT_USER, CompactionStorage, StoreStorage, check_relpath, open_storage, safe_label
from ..storage.transcript import messages_by_id, paginate, render_recalled, summary_covers
from .pinning import pin_answer, unpin_answer

logger = logging.getLogger("langgraph_compaction")

MAX_RESULTS = 50
MAX_LINES = 400
PAGE_CHARS = 10_000
SNIPPET_CHARS = 300
NOT_WIRED = (
    "Error: compact is not available here: no compaction runs in front of this agent's model (the graph was "
    "built without add_compaction, CompactionMiddleware or make_pre_model_hook), so nothing would be compacted. "
    "Carry on without it."
)
NO_STORAGE = (
    "Error: no compaction storage is configured for this agent (pass storage= to make_compaction_tools "
    "or run the graph with a store)."
)


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


# --- what the tools do, given where they run -----------------------------------


@dataclass
class _Where:
    storage: CompactionStorage | None
    thread_id: str
    user_id: str
    messages: list[BaseMessage]


def search_memory(storage: CompactionStorage, user_id: str, query: str, max_results: int = 10) -> str:
    """Return the ``memory_search`` answer: ranked hits as ``path#line [date] text``.

    Lines are ranked by words (`rank`); where the memory lives in a LangGraph
    store configured with an embedding index (``index={"dims": ..., "embed":
    ...}``), by the store's semantic search too, the two rankings merged
    (`merge_rankings`): a line that shares no word with the query is found
    by its meaning.

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
    if store is not None and lines and query.strip():
        hits = merge_rankings([hits, semantic_ranking(store, user_id, lines, query, limit)])[:limit]
    if not hits:
        return f"No memory matches {query!r}."
    rows = []
    for i in hits:
        line = lines[i]
        when = f" [{line.date}]" if line.date else (" [curated]" if line.path == MEMORY_FILE else "")
        rows.append(f"{line.path}#{line.line}{when} {line.text}")
    return (
        f"{len(rows)} memory results for {query!r} (use memory_get(path, start_line, end_line) for context):\n"
        + "\n".join(rows)
    )


#: Where memory search keeps the memory's lines for a store's semantic search, per user: one item per line.
SEMANTIC_NAMESPACE = ("compaction", "memory_search")
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


def compact_answer(messages: Sequence[BaseMessage], focus: str | None, config: CompactionConfig | None) -> str | None:
    """Return what ``compact`` tells the agent will happen, or None when there is nothing to compact.

    With the agent's ``config`` the count is the one the gate will use;
    without it the check only asks whether any earlier message can go.
    """
    counter = TokenCounter(config.token_counter if config else None)
    counts = counter.counts(messages)
    try:
        budget = config.resolve() if config else None
    except ValueError:  # a share of a window only the agent's model reports: the tail is counted by messages
        budget = None
    cut = find_cutoff(messages, counts, budget.keep_tokens if budget else 0, budget.keep_messages if budget else 1)
    if cut is None:
        return None
    about = f" (about {len(cut.evict)} messages, ~{sum(counts[i] for i in cut.evict):,} tokens)" if config else ""
    focused = f", focusing on: {focus}" if focus else ""
    return (
        f"Compaction requested: before your next step the earlier conversation{about} will be replaced by a "
        f"summary{focused}. The most recent messages stay as they are; the full history stays in the transcript, "
        "and recall(message_ids) brings any message back."
    )


# --- the tool shell --------------------------------------------------------------


def _state_value(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else getattr(state, key, None)


def compaction_wired(state: Any) -> bool:
    """Return True when a compaction gate has run on this state (it marks ``compaction["wired"]``)."""
    value = _state_value(state, "compaction")
    return isinstance(value, dict) and value.get("wired") is True


def _where(runtime: Any, storage: CompactionStorage | None) -> _Where:
    config = getattr(runtime, "config", None) or {}
    store = getattr(runtime, "store", None)
    chosen = storage if storage is not None else (StoreStorage(store) if store is not None else None)
    state = getattr(runtime, "state", None)
    messages = (state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)) or []
    user = run_user_id(runtime, config)
    return _Where(chosen, run_thread_id(config, state, user)[0], user, list(messages))


def _tool(name: str, storage: CompactionStorage | None, answer: Callable[..., str], signature_of: Callable) -> BaseTool:
    """Return a sync+async tool named ``name``: the schema and description come from ``signature_of``."""

    @functools.wraps(signature_of)
    def run(*args: Any, runtime: ToolRuntime[Any, Any], **kwargs: Any) -> str:
        where = _where(runtime, storage)
        if where.storage is None:
            return NO_STORAGE
        try:
            return answer(where, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a broken file or store is the agent's information, not a crash
            logger.warning("%s failed: %s", name, exc, exc_info=exc)
            return f"Error: {name} could not read the compaction storage: {type(exc).__name__}: {exc}"[:1000]

    @functools.wraps(signature_of)
    async def arun(*args: Any, runtime: ToolRuntime[Any, Any], **kwargs: Any) -> str:
        return await asyncio.to_thread(functools.partial(run, *args, runtime=runtime, **kwargs))

    return StructuredTool.from_function(func=run, coroutine=arun, name=name)


def make_compaction_tools(
    storage: Any = None, *, config: CompactionConfig | None = None, window: int | None = None
) -> list[BaseTool]:
    """Return the agent's tools, in this order: memory_search, memory_get, session_search, recall, compact, pin, unpin.

    ``storage`` is what ``add_compaction`` was given (a directory, a
    ``BaseStore`` or a storage object); None uses the graph's store at run
    time. ``config`` (the agent's ``CompactionConfig``) lets ``compact``
    say how much will be summarized, and sets the caps of ``pin``
    (``fidelity.max_pins``, and the pins' token budget of ``core.pins``,
    derived from ``window`` or else ``config.context_window``).
    """
    opened = open_storage(storage)
    fidelity = config.fidelity if config else FidelityConfig()
    max_pins = fidelity.max_pins
    budget = pin_budget(fidelity, window or (config.context_window if config else None))

    def memory_search(query: str, max_results: int = 10, *, runtime: ToolRuntime[Any, Any]) -> str:
        """Search long-term memory (MEMORY.md and the daily memory ledgers) for facts, decisions and preferences.

        Returns the best-matching lines, each as path#line [date] text.
        """

    def memory_get(
        path: str, start_line: int = 1, end_line: int | None = None, *, runtime: ToolRuntime[Any, Any]
    ) -> str:
        """Read lines start_line..end_line of a memory file ('MEMORY.md' or 'memory/YYYY-MM-DD.md')."""

    def session_search(query: str, max_results: int = 10, *, runtime: ToolRuntime[Any, Any]) -> str:
        """Search the full history of this conversation, including messages compacted out of your context.

        Returns the matching messages with their ids; recall them in full with recall.
        """

    def recall(message_ids: list[str], page: int = 1, *, runtime: ToolRuntime[Any, Any]) -> str:
        """Return earlier messages of this conversation in full, by id (from session_search or a summary).

        A summary's id returns the messages that summary replaced, in order.
        """

    def compact(focus: str | None = None, *, runtime: ToolRuntime[Any, Any]) -> Command:
        """Compact the conversation now: earlier messages are replaced by a summary before your next step.

        focus: what the summary must preserve in detail (optional).
        """
        call_id = runtime.tool_call_id or ""
        if not compaction_wired(getattr(runtime, "state", None)):
            # without a gate the request would be written nowhere useful: say so, to the model and the log
            logger.warning("the compact tool was called, but no compaction runs in front of this agent's model")
            return Command(
                update={"messages": [ToolMessage(NOT_WIRED, tool_call_id=call_id, name="compact", status="error")]}
            )
        messages = _where(runtime, opened).messages
        text = compact_answer(messages, focus, config)
        if text is None:
            note = "Nothing to compact: the conversation is already as short as compaction can make it."
            return Command(update={"messages": [ToolMessage(note, tool_call_id=call_id, name="compact")]})
        return Command(
            update={
                "compaction": {"manual": {"focus": focus}},
                "messages": [ToolMessage(text, tool_call_id=call_id, name="compact")],
            }
        )

    async def acompact(focus: str | None = None, *, runtime: ToolRuntime[Any, Any]) -> Command:
        return compact(focus, runtime=runtime)

    def _pins_command(
        runtime: ToolRuntime[Any, Any], name: str, answer: Callable[[Any], tuple[str, dict | None]]
    ) -> Command:
        call_id = runtime.tool_call_id or ""
        state = getattr(runtime, "state", None)
        if not compaction_wired(state):  # no compaction state to keep the pin in, and no summary to keep it in
            return Command(
                update={
                    "messages": [
                        ToolMessage(
                            NOT_WIRED.replace("compact is", f"{name} is"),
                            tool_call_id=call_id,
                            name=name,
                            status="error",
                        )
                    ]
                }
            )
        text, update = answer(state)
        message = ToolMessage(
            text, tool_call_id=call_id, name=name, **({"status": "error"} if text.startswith("Error") else {})
        )
        return Command(update={"messages": [message], **({"compaction": update} if update else {})})

    def pin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        """Pin a rule or a fact: it stays word for word in every later summary of this conversation until unpinned.

        text: the rule or fact, as it must be kept (e.g. 'Never push to main.').
        """
        return _pins_command(runtime, "pin", lambda state: pin_answer(state, text, max_pins, budget))

    async def apin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        return pin(text, runtime=runtime)

    def unpin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        """Unpin a rule or fact pinned before (give its text, or its id 'pin-...'): later summaries may drop it."""
        return _pins_command(runtime, "unpin", lambda state: unpin_answer(state, text))

    async def aunpin(text: str, *, runtime: ToolRuntime[Any, Any]) -> Command:
        return unpin(text, runtime=runtime)

    return [
        _tool("memory_search", opened, lambda w, *a, **k: search_memory(w.storage, w.user_id, *a, **k), memory_search),
        _tool("memory_get", opened, lambda w, *a, **k: read_memory(w.storage, w.user_id, *a, **k), memory_get),
        _tool(
            "session_search",
            opened,
            lambda w, *a, **k: search_session(w.storage, w.thread_id, *a, in_context=[m.id for m in w.messages], **k),
            session_search,
        ),
        _tool("recall", opened, lambda w, *a, **k: recall_messages(w.storage, w.thread_id, *a, **k), recall),
        StructuredTool.from_function(func=compact, coroutine=acompact, name="compact"),
        StructuredTool.from_function(func=pin, coroutine=apin, name="pin"),
        StructuredTool.from_function(func=unpin, coroutine=aunpin, name="unpin"),
    ]
