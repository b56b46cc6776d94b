"""The storage protocol: what compaction keeps outside the context, and the record form every backend stores.

A storage keeps two things:

- the *transcript* of a thread: every version of every message once, as
  ``messages_to_dict`` records (``message_records``), append-only and
  idempotent by message id and revision, in the order each version was
  first written;
- the *memory files* of a user: ``MEMORY.md`` and the daily ledger
  ``memory/YYYY-MM-DD.md`` (plus whatever consolidation keeps beside them),
  addressed by a relative path (``names.check_relpath``);
- the *prepared summary* of a thread's conversation, while a summary made in
  the background waits to be applied by whichever worker serves the thread next.

``FileStorage`` (``storage.files``) keeps them in a directory,
``StoreStorage`` (``storage.store``) in a LangGraph ``BaseStore``; any object
with these methods works too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


def message_records(messages: list[Any]) -> list[dict[str, Any]]:
    """Return ``messages_to_dict`` records that keep each field's values as they are.

    ``messages_to_dict`` dumps nested models (a pydantic artifact becomes a
    plain dict); the transcript's typed encoding keeps them, so it is given
    the fields themselves. ``messages_from_dict`` reads both forms.

    Args:
        messages: LangChain messages.
    """
    return [{"type": m.type, "data": dict(m)} for m in messages]


def record_id(record: dict[str, Any]) -> str | None:
    """Return the message id of a ``messages_to_dict`` record (None when it has none)."""
    data = record.get("data")
    return data.get("id") if isinstance(data, dict) else None


@runtime_checkable
class CompactionStorage(Protocol):
    """The storage protocol: transcripts per thread, memory files per user, each method with an async twin.

    Thread and user ids are given as they are; a backend names them with
    ``names.safe_label``. The model is told where a thread's transcript is by
    what ``append_transcript`` returns: a location relative to the storage
    (``sessions/<name>.jsonl``) or a logical name
    (``store://compaction/transcripts/<name>``), never a path of the machine.
    ``transcript_location`` and ``memory_location`` are the operator's way to
    the real file or item.
    """

    def transcript_location(self, thread_id: str) -> str:
        """Return where an operator finds the thread's transcript (a file's absolute path, a store namespace)."""

    def append_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str:
        """Append the records not stored yet (by message id and revision) and return the transcript's location.

        The location is what the summary, its compaction note and the context
        status name: relative to the storage or a logical name.
        """

    def read_transcript(self, thread_id: str) -> list[dict[str, Any]]:
        """Return every stored version of every message, in the order first written."""

    def read_memory_file(self, user_id: str, relpath: str) -> str | None:
        """Return a memory file's text, or None when it does not exist."""

    def append_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        """Append text to a memory file (created when missing) and return its location."""

    def append_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        """Append ``compose(current text)`` to a memory file, reading and writing as one step.

        Two writers never compose from the same old text and both append: the
        second one sees the first one's entry. Return (location, the entry
        written or None).
        """

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        """Atomically replace a memory file's text and return its location."""

    def delete_memory_file(self, user_id: str, relpath: str) -> None:
        """Remove a memory file if it exists."""

    def list_memory_files(self, user_id: str) -> list[str]:
        """Return the relative paths of the user's memory files, sorted."""

    def memory_location(self, user_id: str, relpath: str) -> str:
        """Return where an operator finds a memory file (a file's absolute path, a store key), for provenance."""

    def read_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None:
        """Return the summary prepared in the background for a conversation of the thread, or None."""

    def write_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None:
        """Keep (or, with None, remove) the summary prepared for a conversation of the thread, replacing any."""

    async def aappend_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str: ...
    async def aread_transcript(self, thread_id: str) -> list[dict[str, Any]]: ...
    async def aread_memory_file(self, user_id: str, relpath: str) -> str | None: ...
    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str: ...
    async def aappend_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]: ...
    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str: ...
    async def adelete_memory_file(self, user_id: str, relpath: str) -> None: ...
    async def alist_memory_files(self, user_id: str) -> list[str]: ...
    async def aread_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None: ...
    async def awrite_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None: ...
