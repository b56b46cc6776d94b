"""Where transcripts and memory live: one small protocol, a directory or a LangGraph store.

Both backends keep the same two things:

- the *transcript* of a thread: every version of every message once, in
  ``messages_to_dict`` form (typed-encoded by ``codec``, so bytes, datetimes,
  tuples, int keys, sets and models come back equal), append-only and
  idempotent by message id and revision (a hash of the record), in the order
  each version was first written;
- the *memory files* of a user: ``MEMORY.md`` and the daily ledger
  ``memory/YYYY-MM-DD.md`` (plus whatever consolidation keeps beside them),
  addressed by a relative path that is checked before any use.

Thread and user ids never reach a path or a namespace as given: ``safe_label``
maps them injectively to names (short lower-case ids kept, everything else
escaped behind a ``~``); names written by earlier releases are moved to the
new ones on first use, when ``legacy_label`` says only that id can own them.
``thread_key`` is the one reading of a run's thread id that writers and
readers share.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional, Protocol, Union, runtime_checkable

from ..memory.ledger import entry_text, normalize_bullet, parse_bullets
from .codec import decode, encode, revision

logger = logging.getLogger("langgraph_compaction")

_REL_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")
DEFAULT_USER = "default"

#: Ids kept as they are: lower-case letters, digits, ``_`` and ``-`` (no case-insensitive disk can merge two).
_KEPT = re.compile(r"[a-z0-9_-]{1,64}")
#: What every label of earlier releases was made of, and the shape of their hashed labels (slug, ``-``, 16 hex).
_LEGACY_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_HASHED_SHAPE = re.compile(r"[A-Za-z0-9_-]*-[0-9a-f]{16}")
_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
#: Starts every encoded label; no kept id and no label of an earlier release contains it.
ENCODED = "~"
_LABEL_CHARS = 64


def _escaped(text: str) -> str:
    """Return ``text`` with every UTF-8 byte outside ``[a-z0-9_-]`` written as ``+`` and two lower-case hex digits."""
    return "".join(chr(b) if b in _SAFE_BYTES else f"+{b:02x}" for b in text.encode("utf-8", "surrogatepass"))


def safe_label(value: object) -> str:
    """Return the storage name of a thread or user id: a file name and a store namespace label (no ``.``).

    Two different ids (compared as ``str(value)``) never get the same label:

    - *kept*: an id of 1-64 lower-case letters, digits, ``_`` and ``-`` is its
      own label, unless it is ``"default"`` or ends like an earlier release's
      hashed label (``-`` and 16 hex digits); kept labels never contain ``~``.
    - *encoded*: any other id is ``~`` followed by its UTF-8 bytes, each byte
      outside ``[a-z0-9_-]`` written ``+hh``. The escape is injective (a ``+``
      is always followed by exactly two hex digits and is never a kept byte;
      UTF-8 with surrogates passed is injective on ``str``), so two encoded
      ids differ; each has exactly one ``~``, so none equals a kept label.
    - *long*: an encoded label over 64 characters is cut to ``~``, 30 escaped
      characters, ``~`` and 32 hex digits of the id's SHA-256: two ``~``, so
      never a short label; two long labels are equal only for a SHA-256
      collision on 128 bits.

    Labels use only ``[a-z0-9_+~-]``: no ``.``, ``/``, NUL or upper case, so
    they are valid store labels and stay distinct on a case-insensitive disk.
    """
    text = str(value)
    if _KEPT.fullmatch(text) and text != DEFAULT_USER and not _HASHED_SHAPE.fullmatch(text):
        return text
    label = ENCODED + _escaped(text)
    if len(label) <= _LABEL_CHARS:
        return label
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{label[:31]}{ENCODED}{digest}"


def legacy_label(value: object, *, thread: bool) -> str | None:
    """Return the name an earlier release stored this id under, when only this id can own it; else None.

    Earlier releases kept ids of ``[A-Za-z0-9_-]{1,64}`` and named any other
    id ``<slug>-<16 hex of its SHA-256>``; a run without a thread id wrote the
    thread ``"default"``. A legacy name is given back only when no other id
    could have written it:

    - a hashed name: only the id whose hash it carries (another id would need
      a second preimage of SHA-256 on 64 bits);
    - a plain name that has the hashed shape: nobody (it may be the hashed
      name of another id, so the id equal to it cannot claim it);
    - any other plain name: only the id equal to it;
    - the thread ``"default"``: nobody (every thread-less run shared it).

    None also when the legacy name is the label itself (nothing to move).
    Since a kept label is its own legacy name and never has the hashed shape,
    no new label is ever another id's legacy name either.
    """
    text = str(value)
    if thread and text == DEFAULT_USER:
        return None
    if _LEGACY_PLAIN.fullmatch(text):
        old = None if _HASHED_SHAPE.fullmatch(text) else text
    else:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "id"
        old = f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"
    return None if old == safe_label(text) else old


class _FirstUse:
    """The ids whose legacy name was looked for in this process: the most recent ``size`` of them.

    Bounded, since a service names a new transcript for every run without a
    thread id; an id forgotten is looked for again, which finds nothing to move.
    """

    def __init__(self, size: int = 4096) -> None:
        self._seen: dict[tuple[str, str], None] = {}
        self._size = size
        self._lock = threading.Lock()

    def first(self, kind: str, key: str) -> bool:
        """Return True the first time (kind, key) is asked about (since it was last forgotten)."""
        with self._lock:
            if (kind, key) in self._seen:
                return False
            self._seen[(kind, key)] = None
            if len(self._seen) > self._size:
                del self._seen[next(iter(self._seen))]
            return True


def thread_key(thread_id: object) -> str:
    """Return the transcript key of a thread id: ``str(thread_id)``; ``"default"`` when there is none.

    ``""``, ``"default"`` and ``0`` are three threads. A graph run without a
    ``thread_id`` never comes here: it gets a transcript of its own (see
    ``engine.effects.run_thread_id``).
    """
    return "default" if thread_id is None else str(thread_id)


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
        raise ValueError(
            f"memory path {relpath!r} leaves the memory folder; use e.g. 'MEMORY.md' or 'memory/2026-01-31.md'"
        )
    return relpath


def message_records(messages: list[Any]) -> list[dict]:
    """Return ``messages_to_dict`` records that keep each field's values as they are.

    ``messages_to_dict`` dumps nested models (a pydantic artifact becomes a
    plain dict); the transcript's typed encoding keeps them, so it is given
    the fields themselves. ``messages_from_dict`` reads both forms.
    """
    return [{"type": m.type, "data": dict(m)} for m in messages]


def record_id(record: dict) -> str | None:
    """Return the message id of a ``messages_to_dict`` record."""
    data = record.get("data")
    return data.get("id") if isinstance(data, dict) else None


@runtime_checkable
class CompactionStorage(Protocol):
    """The storage protocol: transcripts per thread, memory files per user (sync and async)."""

    def transcript_location(self, thread_id: str) -> str:
        """Return where the thread's transcript is, as the summary names it."""

    def append_transcript(self, thread_id: str, records: list[dict]) -> str:
        """Append the records not stored yet (by message id and revision) and return the location."""

    def read_transcript(self, thread_id: str) -> list[dict]:
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
        """Return where a memory file is, for messages and provenance."""

    async def aappend_transcript(self, thread_id: str, records: list[dict]) -> str: ...
    async def aread_transcript(self, thread_id: str) -> list[dict]: ...
    async def aread_memory_file(self, user_id: str, relpath: str) -> str | None: ...
    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str: ...
    async def aappend_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]: ...
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

    async def aread_memory_file(self, user_id: str, relpath: str) -> str | None:
        return await asyncio.to_thread(self.read_memory_file, user_id, relpath)

    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        return await asyncio.to_thread(self.append_memory_file, user_id, relpath, text)

    async def aappend_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        return await asyncio.to_thread(self.append_memory_entry, user_id, relpath, compose)

    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        return await asyncio.to_thread(self.replace_memory_file, user_id, relpath, text)

    async def adelete_memory_file(self, user_id: str, relpath: str) -> None:
        await asyncio.to_thread(self.delete_memory_file, user_id, relpath)

    async def alist_memory_files(self, user_id: str) -> list[str]:
        return await asyncio.to_thread(self.list_memory_files, user_id)


#: A transcript line starts with its message id and revision (see ``_encoded_lines``).
_LINE_HEAD = re.compile(rb'\{"id":(null|"(?:[^"\\]|\\.)*"),"rev":"([0-9a-f]+)"')


def _version(line: dict) -> tuple[str | None, str]:
    """Return (message id, revision) of a stored line; lines written before revisions get theirs computed."""
    return (record_id(line), line["rev"]) if "rev" in line else (record_id(line), revision(line))


def _encoded_lines(records: list[dict]) -> list[tuple[tuple[str | None, str], str]]:
    """Return each record's (id, revision) and its JSON line: typed-encoded, led by the id and revision."""
    out = []
    for record in records:
        encoded = encode(record)
        version = (record_id(record), revision(encoded))
        line = {"id": version[0], "rev": version[1], **encoded}
        out.append((version, json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"))
    return out


def _decoded(line: dict) -> dict:
    """Return the ``messages_to_dict`` record of a stored line (lines without a revision were plain JSON)."""
    if "rev" not in line:
        return line
    return decode({k: v for k, v in line.items() if k not in ("id", "rev")})


def unencodable_fields(records: list[dict]) -> list[str]:
    """Return the fields of these records that only a marked repr can store (the offload event names them)."""
    marked: list[str] = []
    for record in records:
        encode(record.get("data"), marked, f"{record_id(record)}")
    return marked


class FileStorage(_ThreadedAsync):
    """Files under one directory: ``sessions/<thread>.jsonl``, ``MEMORY.md``, ``memory/``.

    The default user's memory sits at the top of the directory; any other
    user's under ``users/<label>/``. Files are created ``0600`` in ``0700``
    directories; appends are one ``write`` of whole lines under an exclusive
    ``flock``, then ``fsync``. Under that lock a transcript append first reads
    the (id, revision) of every line, and a ledger append re-reads the file,
    so concurrent writers (threads, processes) never write a thing twice.
    The folder is made absolute when the storage is created. A transcript
    or user folder an earlier release named otherwise (``legacy_label``) is
    renamed to its ``safe_label`` name the first time its id is used.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        # resolved now: a relative folder must not follow a later chdir (an agent's shell tool)
        self.root = Path(os.path.abspath(root))
        self._first_use = _FirstUse()

    def _adopt_legacy(self, kind: str, key: str, new: Path, old: Path | None) -> None:
        """Rename what an earlier release stored for this id (``old``) to its new name, once per id and process."""
        if not self._first_use.first(kind, key):
            return
        if old is None or not os.path.lexists(old) or os.path.islink(old) or os.path.lexists(new):
            return
        try:
            os.rename(old, new)
            logger.info("moved %s to %s (the name this release gives its id)", old, new)
        except FileNotFoundError:  # another process moved it first
            pass

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
        path = self._contained(self.root / "sessions" / f"{safe_label(thread_id)}.jsonl", "the transcript")
        old = legacy_label(thread_id, thread=True)
        self._adopt_legacy("thread", str(thread_id), path, old and self.root / "sessions" / f"{old}.jsonl")
        return path

    def _user_root(self, user_id: str) -> Path:
        if not user_id or user_id == DEFAULT_USER:
            return self.root
        path = self.root / "users" / safe_label(user_id)
        old = legacy_label(user_id, thread=False)
        self._adopt_legacy("user", str(user_id), path, old and self.root / "users" / old)
        return path

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
    def _read_all(fd: int) -> bytes:
        size, chunks, pos = os.fstat(fd).st_size, [], 0
        while pos < size:
            chunk = os.pread(fd, min(size - pos, 1 << 20), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)

    @classmethod
    def _stored_versions(cls, fd: int) -> set[tuple[str | None, str]]:
        """Return the (message id, revision) of every line: the whole transcript, not its last lines."""
        versions = set()
        for line in cls._read_all(fd).splitlines():
            head = _LINE_HEAD.match(line)
            if head:  # id and revision lead each line: no need to parse the message
                versions.add((json.loads(head.group(1).decode("utf-8", "surrogatepass")), head.group(2).decode()))
            elif line.strip():
                versions.add(_version(json.loads(line)))
        return versions

    # -- transcripts
    def append_transcript(self, thread_id: str, records: list[dict]) -> str:
        path = self._transcript_path(thread_id)
        self._dir(path.parent)
        lines = _encoded_lines(records)
        fd = self._open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._repair_partial_line(fd)
            present = self._stored_versions(fd) if lines else set()
            fresh = []
            for version, line in lines:
                if version not in present:
                    present.add(version)
                    fresh.append(line)
            if fresh:
                self._write_all(fd, "".join(fresh).encode("utf-8", "surrogatepass"))
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
                    out.append(_decoded(json.loads(line.decode("utf-8", "surrogatepass"))))
        return out

    # -- memory files
    def read_memory_file(self, user_id: str, relpath: str) -> str | None:
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

    def append_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        path = self._memory_path(user_id, relpath)
        if not path.exists() and not compose(""):  # nothing to write: create no folder and no empty file
            return str(path), None
        self._dir(path.parent)
        fd = self._open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # read and append under one lock: another writer's entry is seen
            entry = compose(self._read_all(fd).decode("utf-8", "surrogatepass"))
            if entry:
                self._write_all(fd, entry.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return str(path), entry

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
    keyed by message id and revision (``<id>@<revision>``), so a version put
    twice (time travel, a second worker) is one item; memory files under
    ``("compaction", "memory", <user>)`` keyed by their relative path. A
    ledger entry's bullets are items of their own under ``(..., <user>,
    "entries")`` keyed by a hash of the file and the normalized bullet: two
    workers flushing the same fact at once write one item, by construction.
    Labels go through ``safe_label`` (store labels may not contain ``.``);
    the items of a namespace an earlier release named otherwise
    (``legacy_label``) are moved to the new one the first time its id is used.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._first_use = _FirstUse()

    def _legacy(self, kind: str, key: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """Return (legacy namespace, new namespace) the first time an id is used in this process, when it has one."""
        if not self._first_use.first(kind, key):
            return None
        old = legacy_label(key, thread=kind == "transcripts")
        return ((_NS_ROOT, kind, old), (_NS_ROOT, kind, safe_label(key))) if old else None

    def _adopt(self, kind: str, key: str) -> None:
        """Move an earlier release's items of this id (and its ledger entries) to the id's namespace."""
        if moves := self._legacy(kind, key):
            old, new = moves
            for item in self._search_all(old):  # a prefix: the ledger entries below it move too
                target = (*new, *tuple(item.namespace)[len(old) :])
                if self.store.get(target, item.key) is None:  # a worker that moved it first may have written since
                    self.store.put(target, item.key, item.value, index=False)
                self.store.delete(item.namespace, item.key)

    async def _aadopt(self, kind: str, key: str) -> None:
        if moves := self._legacy(kind, key):
            old, new = moves
            for item in await self._asearch_all(old):
                target = (*new, *tuple(item.namespace)[len(old) :])
                if await self.store.aget(target, item.key) is None:
                    await self.store.aput(target, item.key, item.value, index=False)
                await self.store.adelete(item.namespace, item.key)

    def _tns(self, thread_id: str) -> tuple[str, ...]:
        return (_NS_ROOT, "transcripts", safe_label(thread_id))

    def _mns(self, user_id: str) -> tuple[str, ...]:
        return (_NS_ROOT, "memory", safe_label(user_id or DEFAULT_USER))

    def _ens(self, user_id: str) -> tuple[str, ...]:
        return (*self._mns(user_id), "entries")

    def transcript_location(self, thread_id: str) -> str:
        return "store://" + "/".join(self._tns(thread_id))

    def memory_location(self, user_id: str, relpath: str) -> str:
        return "store://" + "/".join(self._mns(user_id)) + "/" + check_relpath(relpath)

    # -- transcripts
    @staticmethod
    def _versions(ns: tuple[str, ...], records: list[dict]) -> tuple[list[tuple[str, dict]], list[Any]]:
        """Return the items to put (key, value) and the reads that say which are stored already."""
        from langgraph.store.base import GetOp

        stamp, items, seen = time.time_ns(), [], set()
        for i, record in enumerate(records):
            encoded = encode(record)
            rid, rev = record_id(record), revision(encoded)
            if (rid, rev) not in seen:
                seen.add((rid, rev))
                items.append((f"{rid or ''}@{rev}", {"id": rid, "rev": rev, "record": encoded, "order": [stamp, i]}))
        # an item keyed by the bare id was written before revisions: the same version must not be put again
        reads = [GetOp(ns, key) for key, _ in items] + [GetOp(ns, value["id"] or "@") for _, value in items]
        return items, reads

    @staticmethod
    def _missing(items: list[tuple[str, dict]], found: list[Any]) -> list[tuple[str, dict]]:
        stored, legacy = found[: len(items)], found[len(items) :]
        return [
            (key, value)
            for (key, value), item, old in zip(items, stored, legacy)
            if item is None
            and not (old is not None and "rev" not in old.value and revision(old.value.get("record")) == value["rev"])
        ]

    def append_transcript(self, thread_id: str, records: list[dict]) -> str:
        self._adopt("transcripts", str(thread_id))
        ns = self._tns(thread_id)
        items, reads = self._versions(ns, records)
        for key, value in self._missing(items, self.store.batch(reads) if items else []):
            self.store.put(ns, key, value, index=False)
        return self.transcript_location(thread_id)

    async def aappend_transcript(self, thread_id: str, records: list[dict]) -> str:
        await self._aadopt("transcripts", str(thread_id))
        ns = self._tns(thread_id)
        items, reads = self._versions(ns, records)
        for key, value in self._missing(items, await self.store.abatch(reads) if items else []):
            await self.store.aput(ns, key, value, index=False)
        return self.transcript_location(thread_id)

    @staticmethod
    def _sorted(items: list[Any]) -> list[dict]:
        ordered = sorted(items, key=lambda it: tuple(it.value.get("order", (0, 0))))
        return [decode(it.value["record"]) if "rev" in it.value else it.value["record"] for it in ordered]

    def _search_all(self, ns: tuple[str, ...], **kwargs: Any) -> list[Any]:
        items, offset = [], 0
        while batch := self.store.search(ns, limit=500, offset=offset, **kwargs):
            items.extend(batch)
            offset += len(batch)
        return items

    async def _asearch_all(self, ns: tuple[str, ...], **kwargs: Any) -> list[Any]:
        items, offset = [], 0
        while batch := await self.store.asearch(ns, limit=500, offset=offset, **kwargs):
            items.extend(batch)
            offset += len(batch)
        return items

    def read_transcript(self, thread_id: str) -> list[dict]:
        self._adopt("transcripts", str(thread_id))
        return self._sorted(self._search_all(self._tns(thread_id)))

    async def aread_transcript(self, thread_id: str) -> list[dict]:
        await self._aadopt("transcripts", str(thread_id))
        return self._sorted(await self._asearch_all(self._tns(thread_id)))

    # -- memory files
    @staticmethod
    def _text(base: Any, entries: list[Any]) -> str | None:
        """Return a memory file's text: its written text, then its ledger entries' bullets in order."""
        if base is None and not entries:
            return None
        text = base.value.get("text") or "" if base is not None else ""
        header, bullets = None, []
        for item in [*sorted(entries, key=lambda it: tuple(it.value["order"])), None]:
            if item is None or item.value["header"] != header:
                if bullets:
                    text += entry_text(text, header or "", bullets)
                header, bullets = (item.value["header"], []) if item is not None else (None, [])
            if item is not None:
                bullets.append(item.value["bullet"])
        return text

    def read_memory_file(self, user_id: str, relpath: str) -> str | None:
        self._adopt("memory", user_id or DEFAULT_USER)
        base = self.store.get(self._mns(user_id), check_relpath(relpath))
        return self._text(base, self._search_all(self._ens(user_id), filter={"path": relpath}))

    async def aread_memory_file(self, user_id: str, relpath: str) -> str | None:
        await self._aadopt("memory", user_id or DEFAULT_USER)
        base = await self.store.aget(self._mns(user_id), check_relpath(relpath))
        return self._text(base, await self._asearch_all(self._ens(user_id), filter={"path": relpath}))

    def append_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        old = self.read_memory_file(user_id, relpath) or ""
        return self.replace_memory_file(user_id, relpath, old + text)

    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        old = await self.aread_memory_file(user_id, relpath) or ""
        return await self.areplace_memory_file(user_id, relpath, old + text)

    def _entry_items(self, user_id: str, relpath: str, entry: str | None) -> tuple[list[tuple[str, dict]], list[Any]]:
        from langgraph.store.base import GetOp

        if not entry:
            return [], []
        header = "".join(
            f"{line}\n" for line in entry.strip("\n").splitlines() if line.strip() and not parse_bullets(line)
        )
        stamp, ns = time.time_ns(), self._ens(user_id)
        items = {
            _bullet_key(relpath, bullet): {"path": relpath, "header": header, "bullet": bullet, "order": [stamp, i]}
            for i, bullet in enumerate(parse_bullets(entry))
        }
        return list(items.items()), [GetOp(ns, key) for key in items]

    def append_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        entry = compose(self.read_memory_file(user_id, relpath) or "")
        items, reads = self._entry_items(user_id, relpath, entry)
        fresh = [(k, v) for (k, v), item in zip(items, self.store.batch(reads) if reads else []) if item is None]
        for key, value in fresh:  # a bullet another worker just wrote has the same key: one item either way
            self.store.put(self._ens(user_id), key, value, index=False)
        return self.memory_location(user_id, relpath), entry if fresh else None

    async def aappend_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        entry = compose(await self.aread_memory_file(user_id, relpath) or "")
        items, reads = self._entry_items(user_id, relpath, entry)
        fresh = [(k, v) for (k, v), item in zip(items, await self.store.abatch(reads) if reads else []) if item is None]
        for key, value in fresh:
            await self.store.aput(self._ens(user_id), key, value, index=False)
        return self.memory_location(user_id, relpath), entry if fresh else None

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        self._adopt("memory", user_id or DEFAULT_USER)
        self.store.put(self._mns(user_id), check_relpath(relpath), {"text": text}, index=False)
        for item in self._search_all(self._ens(user_id), filter={"path": relpath}):  # now part of the text
            self.store.delete(item.namespace, item.key)
        return self.memory_location(user_id, relpath)

    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        await self._aadopt("memory", user_id or DEFAULT_USER)
        await self.store.aput(self._mns(user_id), check_relpath(relpath), {"text": text}, index=False)
        for item in await self._asearch_all(self._ens(user_id), filter={"path": relpath}):
            await self.store.adelete(item.namespace, item.key)
        return self.memory_location(user_id, relpath)

    def delete_memory_file(self, user_id: str, relpath: str) -> None:
        self._adopt("memory", user_id or DEFAULT_USER)
        self.store.delete(self._mns(user_id), check_relpath(relpath))
        for item in self._search_all(self._ens(user_id), filter={"path": relpath}):
            self.store.delete(item.namespace, item.key)

    async def adelete_memory_file(self, user_id: str, relpath: str) -> None:
        await self._aadopt("memory", user_id or DEFAULT_USER)
        await self.store.adelete(self._mns(user_id), check_relpath(relpath))
        for item in await self._asearch_all(self._ens(user_id), filter={"path": relpath}):
            await self.store.adelete(item.namespace, item.key)

    def _names(self, user_id: str, items: list[Any]) -> list[str]:
        ns = self._mns(user_id)
        return sorted({it.key if tuple(it.namespace) == ns else it.value["path"] for it in items})

    def list_memory_files(self, user_id: str) -> list[str]:
        self._adopt("memory", user_id or DEFAULT_USER)
        return self._names(user_id, self._search_all(self._mns(user_id)))  # the prefix covers the entries too

    async def alist_memory_files(self, user_id: str) -> list[str]:
        await self._aadopt("memory", user_id or DEFAULT_USER)
        return self._names(user_id, await self._asearch_all(self._mns(user_id)))


def _bullet_key(relpath: str, bullet: str) -> str:
    """Return the store key of a ledger bullet: the same fact in the same file is always the same item."""
    return hashlib.sha256(f"{relpath}\x00{normalize_bullet(bullet)}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def open_storage(storage: Any) -> CompactionStorage | None:
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
    raise TypeError(f"storage={storage!r} is not supported: pass a directory path, a LangGraph BaseStore, or None")
