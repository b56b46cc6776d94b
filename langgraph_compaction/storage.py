"""Where transcripts and memory live: one small protocol, a directory or a LangGraph store.

Both backends keep the same two things:

- the *transcript* of a thread: every message once, in ``messages_to_dict``
  form, append-only and idempotent by message id;
- the *memory files* of a user: ``MEMORY.md`` and the daily ledger
  ``memory/YYYY-MM-DD.md`` (plus whatever consolidation keeps beside them),
  addressed by a relative path that is checked before any use.

Thread and user ids never reach a path or a namespace as given: ``safe_label``
keeps short plain ids readable and hashes everything else.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Optional, Protocol, Union, runtime_checkable

_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_REL_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")
DEFAULT_USER = "default"


def safe_label(value: object) -> str:
    """Return a label safe as a file name and a store namespace label for any id.

    Plain ids (letters, digits, ``_``, ``-``; at most 64 characters) are kept;
    anything else (``..``, ``/``, ``.``, NUL, unicode, very long) becomes a
    readable slug plus a hash of the original, so two ids never collide.
    """
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "id"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def check_relpath(relpath: str) -> str:
    """Return a memory file path after checking it stays inside the memory folder.

    Accepted: relative paths of plain parts (``MEMORY.md``,
    ``memory/2026-11-29.md``); refused with ValueError: absolute paths, ``..``,
    hidden parts, empty parts, NUL and backslashes.
    """
    if not isinstance(relpath, str) or not relpath or "\x00" in relpath or "\\" in relpath:
        raise ValueError(f"memory path {relpath!r} is not a plain relative path like 'memory/2026-01-31.md'")
    parts = relpath.split("/")
    if relpath.startswith("/") or any(not _REL_PART.fullmatch(p) or p in (".", "..") for p in parts):
        raise ValueError(f"memory path {relpath!r} leaves the memory folder; use e.g. 'MEMORY.md' or 'memory/2026-01-31.md'")
    return relpath


def record_id(record: dict) -> Optional[str]:
    """Return the message id of a ``messages_to_dict`` record."""
    data = record.get("data")
    return data.get("id") if isinstance(data, dict) else None


@runtime_checkable
class CompactionStorage(Protocol):
    """The storage protocol: transcripts per thread, memory files per user (sync and async)."""

    def transcript_location(self, thread_id: str) -> str:
        """Return where the thread's transcript is, as the summary names it."""

    def append_transcript(self, thread_id: str, records: list[dict]) -> str:
        """Append records not yet stored (by message id) and return the location."""

    def read_transcript(self, thread_id: str) -> list[dict]:
        """Return all records of the thread's transcript, oldest first."""

    def read_memory_file(self, user_id: str, relpath: str) -> Optional[str]:
        """Return a memory file's text, or None when it does not exist."""

    def append_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        """Append text to a memory file (created when missing) and return its location."""

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        """Atomically replace a memory file's text and return its location."""

    def delete_memory_file(self, user_id: str, relpath: str) -> None:
        """Remove a memory file if it exists."""

    def list_memory_files(self, user_id: str) -> list[str]:
        """Return the relative paths of the user's memory files, sorted."""

    def memory_location(self, user_id: str, relpath: str) -> str:
        """Return where a memory file is, for messages and provenance."""

    async def aappend_transcript(self, thread_id: str, records: list[dict]) -> str: ...
    async def aread_transcript(self, thread_id: str) -> list[dict]: ...
    async def aread_memory_file(self, user_id: str, relpath: str) -> Optional[str]: ...
    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str: ...
    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str: ...
    async def adelete_memory_file(self, user_id: str, relpath: str) -> None: ...
    async def alist_memory_files(self, user_id: str) -> list[str]: ...


class _ThreadedAsync:
    """Async twins that run the sync file methods in a worker thread.

    The LangGraph dev server forbids blocking file-system calls inside async
    nodes; ``asyncio.to_thread`` keeps them off the event loop.
    """

    async def aappend_transcript(self, thread_id: str, records: list[dict]) -> str:
        return await asyncio.to_thread(self.append_transcript, thread_id, records)

    async def aread_transcript(self, thread_id: str) -> list[dict]:
        return await asyncio.to_thread(self.read_transcript, thread_id)

    async def aread_memory_file(self, user_id: str, relpath: str) -> Optional[str]:
        return await asyncio.to_thread(self.read_memory_file, user_id, relpath)

    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        return await asyncio.to_thread(self.append_memory_file, user_id, relpath, text)

    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        return await asyncio.to_thread(self.replace_memory_file, user_id, relpath, text)

    async def adelete_memory_file(self, user_id: str, relpath: str) -> None:
        await asyncio.to_thread(self.delete_memory_file, user_id, relpath)

    async def alist_memory_files(self, user_id: str) -> list[str]:
        return await asyncio.to_thread(self.list_memory_files, user_id)


class FileStorage(_ThreadedAsync):
    """Files under one directory: ``sessions/<thread>.jsonl``, ``MEMORY.md``, ``memory/``.

    The default user's memory sits at the top of the directory; any other
    user's under ``users/<label>/``. Files are created ``0600`` in ``0700``
    directories; appends are one ``write`` of whole lines under an exclusive
    ``flock``, then ``fsync``.
    """

    def __init__(self, root: Union[str, os.PathLike]) -> None:
        self.root = Path(root)

    # -- paths
    def _dir(self, path: Path) -> Path:
        missing, folder = [], path
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        for folder in reversed(missing):  # each one 0700: mkdir(parents=True) would give parents the umask's mode
            folder.mkdir(mode=0o700, exist_ok=True)
        return path

    def _contained(self, path: Path, what: str) -> Path:
        """Return ``path`` after checking that no link below the storage folder leads it elsewhere."""
        expected = os.path.join(os.path.realpath(self.root), os.path.relpath(path, self.root))
        if os.path.realpath(path) != expected:
            raise ValueError(f"{what} is reached through a link ({path}); storage never follows links")
        return path

    def _transcript_path(self, thread_id: str) -> Path:
        return self._contained(self.root / "sessions" / f"{safe_label(thread_id)}.jsonl", "the transcript")

    def _user_root(self, user_id: str) -> Path:
        if not user_id or user_id == DEFAULT_USER:
            return self.root
        return self.root / "users" / safe_label(user_id)

    def _memory_path(self, user_id: str, relpath: str) -> Path:
        return self._contained(self._user_root(user_id) / check_relpath(relpath), f"memory path {relpath!r}")

    def transcript_location(self, thread_id: str) -> str:
        return str(self._transcript_path(thread_id))

    def memory_location(self, user_id: str, relpath: str) -> str:
        return str(self._memory_path(user_id, relpath))

    # -- low level
    @staticmethod
    def _open_append(path: Path) -> int:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        return os.open(path, flags, 0o600)

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        start = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                if written <= 0:  # pragma: no cover - os.write raises instead
                    raise OSError(errno.EIO, "short write")
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, start)  # a failed append (disk full) leaves no half line behind
            raise

    @staticmethod
    def _repair_partial_line(fd: int) -> None:
        """Cut a line left half-written by a crash, so every line stays whole JSON."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        pos = size
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = os.pread(fd, pos - start, start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                os.ftruncate(fd, start + nl + 1)
                return
            pos = start
        os.ftruncate(fd, 0)

    @staticmethod
    def _last_ids(fd: int, count: int) -> set[str]:
        """Return the message ids of the last ``count`` lines (what a crashed retry may have written)."""
        size = os.fstat(fd).st_size
        data = b""
        pos = size
        while pos > 0 and data.count(b"\n") <= count:
            start = max(0, pos - 262144)
            data = os.pread(fd, pos - start, start) + data
            pos = start
        ids: set[str] = set()
        for line in data.splitlines()[-count:]:
            try:
                rid = record_id(json.loads(line))
            except ValueError:
                continue
            if rid:
                ids.add(rid)
        return ids

    # -- transcripts
    def append_transcript(self, thread_id: str, records: list[dict]) -> str:
        path = self._transcript_path(thread_id)
        self._dir(path.parent)
        fd = self._open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._repair_partial_line(fd)
            present = self._last_ids(fd, len(records)) if records else set()
            lines = [
                json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                for r in records
                if record_id(r) not in present
            ]
            if lines:
                self._write_all(fd, "".join(lines).encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return str(path)

    def read_transcript(self, thread_id: str) -> list[dict]:
        path = self._transcript_path(thread_id)
        if not path.exists():
            return []
        out = []
        with open(path, "rb") as fh:
            for line in fh:
                if line.strip() and line.endswith(b"\n"):  # an unterminated last line is an append in progress
                    out.append(json.loads(line.decode("utf-8", "surrogatepass")))
        return out

    # -- memory files
    def read_memory_file(self, user_id: str, relpath: str) -> Optional[str]:
        path = self._memory_path(user_id, relpath)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def append_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        path = self._memory_path(user_id, relpath)
        self._dir(path.parent)
        fd = self._open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._write_all(fd, text.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return str(path)

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        path = self._memory_path(user_id, relpath)
        self._dir(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            self._write_all(fd, text.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return str(path)

    def delete_memory_file(self, user_id: str, relpath: str) -> None:
        try:
            self._memory_path(user_id, relpath).unlink()
        except FileNotFoundError:
            pass

    def list_memory_files(self, user_id: str) -> list[str]:
        base = self._user_root(user_id)
        found = []
        if (base / "MEMORY.md").is_file():
            found.append("MEMORY.md")
        memory = base / "memory"
        if memory.is_dir():
            for path in memory.rglob("*.md"):
                if path.is_file() and not path.is_symlink():
                    found.append(path.relative_to(base).as_posix())
        return sorted(found)


_NS_ROOT = "compaction"


class StoreStorage:
    """Items of a LangGraph ``BaseStore``: works on the LangGraph server and across workers.

    Transcript records live under ``("compaction", "transcripts", <thread>)``
    keyed by message id; memory files under ``("compaction", "memory",
    <user>)`` keyed by their relative path. Labels go through ``safe_label``
    (store labels may not contain ``.``).
    """

    def __init__(self, store: Any) -> None:
        self.store = store

    def _tns(self, thread_id: str) -> tuple[str, ...]:
        return (_NS_ROOT, "transcripts", safe_label(thread_id))

    def _mns(self, user_id: str) -> tuple[str, ...]:
        return (_NS_ROOT, "memory", safe_label(user_id or DEFAULT_USER))

    def transcript_location(self, thread_id: str) -> str:
        return "store://" + "/".join(self._tns(thread_id))

    def memory_location(self, user_id: str, relpath: str) -> str:
        return "store://" + "/".join(self._mns(user_id)) + "/" + check_relpath(relpath)

    @staticmethod
    def _items(records: list[dict]) -> list[tuple[str, dict]]:
        stamp = time.time_ns()
        return [(record_id(r) or f"anon-{stamp}-{i}", {"record": r, "order": [stamp, i]}) for i, r in enumerate(records)]

    @staticmethod
    def _sorted(items: list[Any]) -> list[dict]:
        return [it.value["record"] for it in sorted(items, key=lambda it: tuple(it.value.get("order", (0, 0))))]

    def append_transcript(self, thread_id: str, records: list[dict]) -> str:
        ns = self._tns(thread_id)
        for key, value in self._items(records):
            self.store.put(ns, key, value, index=False)
        return self.transcript_location(thread_id)

    async def aappend_transcript(self, thread_id: str, records: list[dict]) -> str:
        ns = self._tns(thread_id)
        for key, value in self._items(records):
            await self.store.aput(ns, key, value, index=False)
        return self.transcript_location(thread_id)

    def read_transcript(self, thread_id: str) -> list[dict]:
        ns, items, offset = self._tns(thread_id), [], 0
        while batch := self.store.search(ns, limit=500, offset=offset):
            items.extend(batch)
            offset += len(batch)
        return self._sorted(items)

    async def aread_transcript(self, thread_id: str) -> list[dict]:
        ns, items, offset = self._tns(thread_id), [], 0
        while batch := await self.store.asearch(ns, limit=500, offset=offset):
            items.extend(batch)
            offset += len(batch)
        return self._sorted(items)

    def read_memory_file(self, user_id: str, relpath: str) -> Optional[str]:
        item = self.store.get(self._mns(user_id), check_relpath(relpath))
        return item.value.get("text") if item else None

    async def aread_memory_file(self, user_id: str, relpath: str) -> Optional[str]:
        item = await self.store.aget(self._mns(user_id), check_relpath(relpath))
        return item.value.get("text") if item else None

    def append_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        old = self.read_memory_file(user_id, relpath) or ""
        return self.replace_memory_file(user_id, relpath, old + text)

    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        old = await self.aread_memory_file(user_id, relpath) or ""
        return await self.areplace_memory_file(user_id, relpath, old + text)

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        self.store.put(self._mns(user_id), check_relpath(relpath), {"text": text}, index=False)
        return self.memory_location(user_id, relpath)

    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        await self.store.aput(self._mns(user_id), check_relpath(relpath), {"text": text}, index=False)
        return self.memory_location(user_id, relpath)

    def delete_memory_file(self, user_id: str, relpath: str) -> None:
        self.store.delete(self._mns(user_id), check_relpath(relpath))

    async def adelete_memory_file(self, user_id: str, relpath: str) -> None:
        await self.store.adelete(self._mns(user_id), check_relpath(relpath))

    def list_memory_files(self, user_id: str) -> list[str]:
        ns, keys, offset = self._mns(user_id), [], 0
        while batch := self.store.search(ns, limit=500, offset=offset):
            keys.extend(it.key for it in batch)
            offset += len(batch)
        return sorted(keys)

    async def alist_memory_files(self, user_id: str) -> list[str]:
        ns, keys, offset = self._mns(user_id), [], 0
        while batch := await self.store.asearch(ns, limit=500, offset=offset):
            keys.extend(it.key for it in batch)
            offset += len(batch)
        return sorted(keys)


def open_storage(storage: Any) -> Optional[CompactionStorage]:
    """Return the storage for a directory path, a LangGraph ``BaseStore`` or a storage object.

    None stays None (no offload, no memory). Anything else raises a
    TypeError that names the accepted forms.
    """
    if storage is None or isinstance(storage, (FileStorage, StoreStorage)):
        return storage
    if isinstance(storage, (str, os.PathLike)):
        return FileStorage(storage)
    try:
        from langgraph.store.base import BaseStore
    except ImportError:  # pragma: no cover - langgraph is a dependency
        BaseStore = ()  # type: ignore[assignment]
    if isinstance(storage, BaseStore):
        return StoreStorage(storage)
    if isinstance(storage, CompactionStorage):
        return storage
    raise TypeError(
        f"storage={storage!r} is not supported: pass a directory path, a LangGraph BaseStore, or None"
    )
