"""The offloaded transcript of a thread: read it back, find messages in it, page through them.

Offload writes every message of a thread once, in ``messages_to_dict`` form
(``sessions/<thread>.jsonl`` or a store namespace per thread), so
``load_transcript`` gives back exactly what the agent saw: ids, tool calls
with their full arguments, ``tool_call_id``, names and metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from langchain_core.messages import BaseMessage, messages_from_dict

from .storage import open_storage
from .summary import render_message


def _require(storage: Any):
    opened = open_storage(storage)
    if opened is None:
        raise ValueError("storage is None: pass the directory, BaseStore or storage object compaction offloads to")
    return opened


def load_transcript(storage: Any, thread_id: str) -> list[BaseMessage]:
    """Return every offloaded message of a thread, oldest first, as LangChain messages.

    ``storage`` is what ``add_compaction`` was given: a directory path, a
    LangGraph ``BaseStore`` or a storage object. A thread never offloaded
    gives ``[]``.
    """
    return messages_from_dict(_require(storage).read_transcript(str(thread_id)))


async def aload_transcript(storage: Any, thread_id: str) -> list[BaseMessage]:
    """Return every offloaded message of a thread, oldest first (async; file I/O off the event loop)."""
    return messages_from_dict(await _require(storage).aread_transcript(str(thread_id)))


def messages_by_id(messages: Sequence[BaseMessage], ids: Sequence[str]) -> tuple[list[BaseMessage], list[str]]:
    """Return (the messages with these ids in the order asked, the ids not found)."""
    index = {m.id: m for m in messages if m.id}
    found = [index[i] for i in dict.fromkeys(ids) if i in index]
    return found, [i for i in dict.fromkeys(ids) if i not in index]


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
    """Return page ``page`` (1-based, clamped) of ``text`` cut into ``page_chars`` slices, at line ends when possible."""
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
