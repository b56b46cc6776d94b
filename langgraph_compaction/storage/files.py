"""The file backend: transcripts and memory files in one directory, safe for several threads and processes.

Layout under the storage folder::

    sessions/<thread>.jsonl      one transcript per thread (``names.safe_label``)
    MEMORY.md, memory/...        the default user's memory
    users/<user>/MEMORY.md, ...  any other user's memory

A transcript line is one version of one message: ``{"id": ..., "rev": ...,
<the typed-encoded record>}``, led by its id and revision so that an append
reads the versions stored without parsing the messages.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import record_id
from .codec import decode, revision, versioned
from .names import DEFAULT_USER, check_relpath, safe_label

#: A transcript line starts with its message id and revision (see ``_encoded_lines``).
_LINE_HEAD = re.compile(rb'\{"id":(null|"(?:[^"\\]|\\.)*"),"rev":"([0-9a-f]+)"')


def _version(line: dict[str, Any]) -> tuple[str | None, str]:
    """Return (message id, revision) of a stored line; lines written before revisions get theirs computed."""
    return (record_id(line), line["rev"]) if "rev" in line else (record_id(line), revision(line))


def _encoded_lines(records: list[dict[str, Any]]) -> list[tuple[tuple[str | None, str], str]]:
    """Return each record's (id, revision) and its JSON line: typed-encoded, led by the id and revision."""
    out = []
    for record in records:
        rid, rev, encoded = versioned(record)
        line = {"id": rid, "rev": rev, **encoded}
        out.append(((rid, rev), json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"))
    return out


def _decoded(line: dict[str, Any]) -> dict[str, Any]:
    """Return the ``messages_to_dict`` record of a stored line (lines without a revision were plain JSON)."""
    if "rev" not in line:
        return line
    record: dict[str, Any] = decode({k: v for k, v in line.items() if k not in ("id", "rev")})
    return record


def _make_dirs(path: Path) -> Path:
    """Create ``path`` and its missing parents, each ``0700`` (``mkdir(parents=True)`` gives parents the umask's)."""
    missing, folder = [], path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    return path


def _open_append(path: Path) -> int:
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o600)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` and ``fsync``; on any failure cut the file back to where it was."""
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


def _read_all(fd: int) -> bytes:
    size, chunks, pos = os.fstat(fd).st_size, [], 0
    while pos < size:
        chunk = os.pread(fd, min(size - pos, 1 << 20), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def _stored_versions(fd: int) -> set[tuple[str | None, str]]:
    """Return the (message id, revision) of every line: the whole transcript, not its last lines."""
    versions = set()
    for line in _read_all(fd).splitlines():
        head = _LINE_HEAD.match(line)
        if head:  # id and revision lead each line: no need to parse the message
            versions.add((json.loads(head.group(1).decode("utf-8", "surrogatepass")), head.group(2).decode()))
        elif line.strip():
            versions.add(_version(json.loads(line)))
    return versions


class FileStorage:
    """Files under one directory: ``sessions/<thread>.jsonl``, ``MEMORY.md``, ``memory/``.

    The default user's memory sits at the top of the directory; any other
    user's under ``users/<label>/``. Files are created ``0600`` in ``0700``
    directories; appends are one ``write`` of whole lines under an exclusive
    ``flock``, then ``fsync``. Under that lock a transcript append first reads
    the (id, revision) of every line, and a ledger append re-reads the file,
    so concurrent writers (threads, processes) never write a thing twice.
    No path below the folder is followed through a link. ``append_transcript``
    returns the transcript's path relative to the folder, which is what the
    model is told; ``transcript_location`` gives the absolute one. The async
    methods run the sync ones in a worker thread: the LangGraph dev server
    forbids blocking file-system calls inside async nodes.

    Args:
        root: The storage folder; a relative one is made absolute now, so a
            later ``chdir`` (an agent's shell tool) does not move it.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.abspath(root))

    # -- paths
    def _contained(self, path: Path, what: str) -> Path:
        """Return ``path`` after checking that no link below the storage folder leads it elsewhere."""
        expected = os.path.join(os.path.realpath(self.root), os.path.relpath(path, self.root))
        if os.path.realpath(path) != expected:
            raise ValueError(f"{what} is reached through a link ({path}); storage never follows links")
        return path

    @staticmethod
    def _transcript_name(thread_id: str) -> str:
        """Return the transcript's path relative to the storage folder: what the model is told, no machine path."""
        return f"sessions/{safe_label(thread_id)}.jsonl"

    def _transcript_path(self, thread_id: str) -> Path:
        return self._contained(self.root / self._transcript_name(thread_id), "the transcript")

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

    # -- transcripts
    def append_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str:
        path = self._transcript_path(thread_id)
        _make_dirs(path.parent)
        lines = _encoded_lines(records)
        fd = _open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _repair_partial_line(fd)
            present = _stored_versions(fd) if lines else set()
            fresh = []
            for version, line in lines:
                if version not in present:
                    present.add(version)
                    fresh.append(line)
            if fresh:
                _write_all(fd, "".join(fresh).encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return self._transcript_name(thread_id)

    def read_transcript(self, thread_id: str) -> list[dict[str, Any]]:
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
        _make_dirs(path.parent)
        fd = _open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _write_all(fd, text.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return str(path)

    def append_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        path = self._memory_path(user_id, relpath)
        if not path.exists() and not compose(""):  # nothing to write: create no folder and no empty file
            return str(path), None
        _make_dirs(path.parent)
        fd = _open_append(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # read and append under one lock: another writer's entry is seen
            entry = compose(_read_all(fd).decode("utf-8", "surrogatepass"))
            if entry:
                _write_all(fd, entry.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return str(path), entry

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        path = self._memory_path(user_id, relpath)
        _make_dirs(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, text.encode("utf-8", "surrogatepass"))
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

    # -- summaries prepared in the background, for the thread's other workers
    def _prepared_path(self, thread_id: str, key: str) -> Path:
        path = self.root / "prepared" / safe_label(thread_id) / f"{safe_label(key)}.json"
        return self._contained(path, "a prepared summary")

    def read_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None:
        try:
            value = json.loads(self._prepared_path(thread_id, key).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def write_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None:
        path = self._prepared_path(thread_id, key)
        if record is None:
            path.unlink(missing_ok=True)
            return
        _make_dirs(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, json.dumps(record, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        os.replace(tmp, path)

    # -- async twins: the same methods in a worker thread, off the event loop
    async def aappend_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str:
        return await asyncio.to_thread(self.append_transcript, thread_id, records)

    async def aread_transcript(self, thread_id: str) -> list[dict[str, Any]]:
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

    async def aread_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.read_prepared, thread_id, key)

    async def awrite_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None:
        await asyncio.to_thread(self.write_prepared, thread_id, key, record)
