"""The offloaded transcript of a thread: read it back, find messages in it, page through them.

Offload writes every version of every message of a thread once, in
``messages_to_dict`` form (``sessions/<thread>.jsonl`` or a store namespace
per thread), so ``load_transcript`` gives back exactly what the agent saw:
ids, tool calls with their full arguments, ``tool_call_id``, names, metadata
and artifacts (bytes, datetimes, tuples, models: equal, not JSON look-alikes).

A summary is written there too, as soon as it is made, and its record names
the messages it replaced (``additional_kwargs["lc_compaction"]["covers"]``,
in order): ``summary_covers`` reads that link and ``summarized_by`` turns it
around, so every record of a summarized message says which summary replaced
it without rewriting an append-only line. A summary written before covers
existed is read by the id range of its compaction note.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, messages_from_dict

from ..core.conversation import is_summary, text_of
from ..core.summary import COMPACTION_MARKER, render_message
from . import open_storage
from .base import CompactionStorage, record_id
from .names import thread_key

#: The id range of a summary's compaction note (``compaction_note``), for summaries written without ``covers``.
_NOTE_RANGE = re.compile(
    r"Compacted \d+ messages \(~[\d,]+ tokens\), ids (\S+) \.\. (\S+?)(?:;|\.\n|\.$)", re.MULTILINE
)


def _require(storage: Any) -> CompactionStorage:
    opened = open_storage(storage)
    if opened is None:
        raise ValueError("storage is None: pass the directory, BaseStore or storage object compaction offloads to")
    return opened


Versions = Literal["latest", "all"]


def latest_versions(records: Sequence[dict]) -> list[dict]:
    """Return the last written version of each message, at the place its first version has."""
    slots: dict[Any, dict] = {}
    for i, record in enumerate(records):
        rid = record_id(record)
        # a dict keeps a key's first place when it is set again; a record without an id supersedes nothing
        slots[rid if rid is not None else ("no id", i)] = record
    return list(slots.values())


def _select(records: list[dict], versions: Versions) -> list[BaseMessage]:
    if versions not in ("latest", "all"):
        raise ValueError(f"versions={versions!r}: use 'latest' (one per message) or 'all' (every version, as written)")
    return messages_from_dict(records if versions == "all" else latest_versions(records))


def load_transcript(storage: Any, thread_id: Any, *, versions: Versions = "latest") -> list[BaseMessage]:
    """Return the offloaded messages of a thread, oldest first, as LangChain messages.

    A thread never offloaded gives ``[]``.

    Args:
        storage: What ``add_compaction`` was given: a directory path, a
            LangGraph ``BaseStore`` or a storage object.
        thread_id: The thread whose transcript to read.
        versions: For a message replaced by id after it was offloaded:
            ``"latest"`` gives the last version of each (at the place of the
            first), ``"all"`` every version in the order written.
    """
    return _select(_require(storage).read_transcript(thread_key(thread_id)), versions)


async def aload_transcript(storage: Any, thread_id: Any, *, versions: Versions = "latest") -> list[BaseMessage]:
    """Return ``load_transcript``'s messages; file I/O runs off the event loop.

    Args:
        storage: See ``load_transcript``; every argument means the same.
        thread_id: See ``load_transcript``.
        versions: See ``load_transcript``.
    """
    return _select(await _require(storage).aread_transcript(thread_key(thread_id)), versions)


def messages_by_id(messages: Sequence[BaseMessage], ids: Sequence[str]) -> tuple[list[BaseMessage], list[str]]:
    """Return (the messages with these ids in the order asked, the ids not found)."""
    index = {m.id: m for m in messages if m.id}
    found = [index[i] for i in dict.fromkeys(ids) if i in index]
    return found, [i for i in dict.fromkeys(ids) if i not in index]


def summary_covers(messages: Sequence[BaseMessage]) -> dict[str, list[str]]:
    """Return, for each summary in a transcript, the ids of the messages it replaced, in order.

    ``messages`` is the transcript (``load_transcript``). A summary that
    replaced an earlier summary lists it; open that one for what it covers.
    """
    order = [m.id for m in messages if m.id]
    covers: dict[str, list[str]] = {}
    for m in messages:
        if not is_summary(m) or not m.id:
            continue
        marker = m.additional_kwargs.get(COMPACTION_MARKER)
        listed = marker.get("covers") if isinstance(marker, dict) else None
        if isinstance(listed, list):
            covers[m.id] = [str(i) for i in listed]
        elif (span := _NOTE_RANGE.search(text_of(m))) and span.group(1) in order and span.group(2) in order:
            first, last = order.index(span.group(1)), order.index(span.group(2))
            covers[m.id] = [i for i in order[first : last + 1] if i != m.id]
    return covers


def summarized_by(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Return, for each summarized message of a transcript, the id of the summary that replaced it (the first one)."""
    out: dict[str, str] = {}
    for summary_id, ids in summary_covers(messages).items():
        for i in ids:
            out.setdefault(i, summary_id)
    return out


def render_recalled(message: BaseMessage) -> str:
    """Return one recalled message as text: a header with its id and kind, then its full rendering."""
    return f"--- message {message.id} ({message.type}) ---\n{render_message(message)}"


@dataclass(frozen=True)
class Page:
    """One page of a long text: its slice, its number and how many pages there are."""

    text: str
    number: int
    count: int


def paginate(text: str, page: int, page_chars: int) -> Page:
    """Return page ``page`` (1-based, clamped) of ``text`` in ``page_chars`` slices, cut at line ends when possible."""
    pages: list[str] = []
    rest = text
    while rest:
        if len(rest) <= page_chars:
            pages.append(rest)
            break
        cut = rest.rfind("\n", page_chars // 2, page_chars)
        cut = cut + 1 if cut > 0 else page_chars
        pages.append(rest[:cut])
        rest = rest[cut:]
    pages = pages or [""]
    number = min(max(page, 1), len(pages))
    return Page(pages[number - 1], number, len(pages))
