"""The store backend: transcripts and memory files as items of a LangGraph ``BaseStore``.

Namespaces (labels from ``names.safe_label``; store labels may not contain ``.``)::

    ("compaction", "transcripts", <thread>)         one item per message version, key "<id>@<revision>"
    ("compaction", "memory", <user>)                one item per memory file, key its relative path
    ("compaction", "memory", <user>, "entries")     one item per ledger bullet, key a hash of file and bullet
    ("compaction", "prepared", <thread>)            a summary prepared in the background, until it expires

Every write is keyed by what it holds, so two workers writing the same
version or the same fact at once write one item, by construction.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from langgraph.store.base import GetOp, PutOp

from ..core.ledger_format import entry_parts, entry_text, normalize_bullet
from .codec import decode, revision, versioned
from .names import DEFAULT_USER, check_relpath, safe_label

_NS_ROOT = "compaction"


def _bullet_key(relpath: str, bullet: str) -> str:
    """Return the store key of a ledger bullet: the same fact in the same file is always the same item."""
    return hashlib.sha256(f"{relpath}\x00{normalize_bullet(bullet)}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _transcript_items(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Return the (key, value) items of these records, each version once, in the order given."""
    stamp, items = time.time_ns(), dict[str, dict[str, Any]]()
    for i, record in enumerate(records):
        rid, rev, encoded = versioned(record)
        items.setdefault(f"{rid or ''}@{rev}", {"id": rid, "rev": rev, "record": encoded, "order": [stamp, i]})
    return list(items.items())


def _missing(items: list[tuple[str, dict[str, Any]]], found: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Return the items not stored yet: neither under their key nor as the same version under the bare id.

    ``found`` holds the reads ``_version_reads`` asked for: each item's key,
    then each item's bare id (how a version was keyed before revisions).
    """
    stored, bare = found[: len(items)], found[len(items) :]
    return [
        (key, value)
        for (key, value), item, old in zip(items, stored, bare, strict=True)
        if item is None
        and not (old is not None and "rev" not in old.value and revision(old.value.get("record")) == value["rev"])
    ]


def _version_reads(ns: tuple[str, ...], items: list[tuple[str, dict[str, Any]]]) -> list[GetOp]:
    return [GetOp(ns, key) for key, _ in items] + [GetOp(ns, value["id"] or "@") for _, value in items]


def _sorted(items: list[Any]) -> list[dict[str, Any]]:
    ordered = sorted(items, key=lambda it: tuple(it.value.get("order", (0, 0))))
    return [decode(it.value["record"]) if "rev" in it.value else it.value["record"] for it in ordered]


def _file_text(base: Any, entries: list[Any]) -> str | None:
    """Return a memory file's text: its written text, then its ledger entries' bullets in order."""
    if base is None and not entries:
        return None
    text = base.value.get("text") or "" if base is not None else ""
    groups: list[tuple[str, list[str]]] = []
    for item in sorted(entries, key=lambda it: tuple(it.value["order"])):
        if not groups or groups[-1][0] != item.value["header"]:
            groups.append((item.value["header"], []))
        groups[-1][1].append(item.value["bullet"])
    for header, bullets in groups:
        text += entry_text(text, header or "", bullets)
    return text


def _entry_items(relpath: str, entry: str | None) -> list[tuple[str, dict[str, Any]]]:
    """Return the (key, value) items of a ledger entry's bullets, each sharing the entry's header."""
    if not entry:
        return []
    header, bullets = entry_parts(entry)
    stamp = time.time_ns()
    items = {
        _bullet_key(relpath, bullet): {"path": relpath, "header": header, "bullet": bullet, "order": [stamp, i]}
        for i, bullet in enumerate(bullets)
    }
    return list(items.items())


class StoreStorage:
    """Items of a LangGraph ``BaseStore``: works on the LangGraph server and across workers.

    Transcript records are keyed by message id and revision, so a version put
    twice (time travel, a second worker) is one item; memory files by their
    relative path. A ledger entry's bullets are items of their own keyed by a
    hash of the file and the normalized bullet: two workers flushing the same
    fact at once write one item.

    Args:
        store: The LangGraph store (``InMemoryStore``, ``PostgresStore``, the
            server's store, ...).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        #: Whether other processes see this store (a server's, PostgreSQL): a summary prepared in the background is
        #: published to it for the thread's other workers. An in-process store (``InMemoryStore``, ``SqliteStore``)
        #: is this process's alone, and its application may close it while a job still runs.
        self.shared = not any(
            klass.__module__.startswith(("langgraph.store.memory", "langgraph.store.sqlite"))
            for klass in type(store).__mro__
        )

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

    def _search_all(self, ns: tuple[str, ...], **kwargs: Any) -> list[Any]:
        items: list[Any] = []
        while batch := self.store.search(ns, limit=500, offset=len(items), **kwargs):
            items.extend(batch)
        return items

    async def _asearch_all(self, ns: tuple[str, ...], **kwargs: Any) -> list[Any]:
        items: list[Any] = []
        while batch := await self.store.asearch(ns, limit=500, offset=len(items), **kwargs):
            items.extend(batch)
        return items

    # -- transcripts
    def append_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str:
        ns = self._tns(thread_id)
        items = _transcript_items(records)
        missing = _missing(items, self.store.batch(_version_reads(ns, items)) if items else [])
        if missing:  # one round trip for the lot, as for the reads
            self.store.batch([PutOp(ns, key, value, index=False) for key, value in missing])
        return self.transcript_location(thread_id)

    async def aappend_transcript(self, thread_id: str, records: list[dict[str, Any]]) -> str:
        ns = self._tns(thread_id)
        items = _transcript_items(records)
        missing = _missing(items, await self.store.abatch(_version_reads(ns, items)) if items else [])
        if missing:
            await self.store.abatch([PutOp(ns, key, value, index=False) for key, value in missing])
        return self.transcript_location(thread_id)

    def read_transcript(self, thread_id: str) -> list[dict[str, Any]]:
        return _sorted(self._search_all(self._tns(thread_id)))

    async def aread_transcript(self, thread_id: str) -> list[dict[str, Any]]:
        return _sorted(await self._asearch_all(self._tns(thread_id)))

    # -- memory files
    def read_memory_file(self, user_id: str, relpath: str) -> str | None:
        base = self.store.get(self._mns(user_id), check_relpath(relpath))
        return _file_text(base, self._search_all(self._ens(user_id), filter={"path": relpath}))

    async def aread_memory_file(self, user_id: str, relpath: str) -> str | None:
        base = await self.store.aget(self._mns(user_id), check_relpath(relpath))
        return _file_text(base, await self._asearch_all(self._ens(user_id), filter={"path": relpath}))

    def append_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        old = self.read_memory_file(user_id, relpath) or ""
        return self.replace_memory_file(user_id, relpath, old + text)

    async def aappend_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        old = await self.aread_memory_file(user_id, relpath) or ""
        return await self.areplace_memory_file(user_id, relpath, old + text)

    def append_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        entry = compose(self.read_memory_file(user_id, relpath) or "")
        items, ns = _entry_items(relpath, entry), self._ens(user_id)
        found = self.store.batch([GetOp(ns, key) for key, _ in items]) if items else []
        fresh = [(key, value) for (key, value), item in zip(items, found, strict=True) if item is None]
        for key, value in fresh:  # a bullet another worker just wrote has the same key: one item either way
            self.store.put(ns, key, value, index=False)
        return self.memory_location(user_id, relpath), entry if fresh else None

    async def aappend_memory_entry(
        self, user_id: str, relpath: str, compose: Callable[[str], str | None]
    ) -> tuple[str, str | None]:
        entry = compose(await self.aread_memory_file(user_id, relpath) or "")
        items, ns = _entry_items(relpath, entry), self._ens(user_id)
        found = await self.store.abatch([GetOp(ns, key) for key, _ in items]) if items else []
        fresh = [(key, value) for (key, value), item in zip(items, found, strict=True) if item is None]
        for key, value in fresh:
            await self.store.aput(ns, key, value, index=False)
        return self.memory_location(user_id, relpath), entry if fresh else None

    def replace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        self.store.put(self._mns(user_id), check_relpath(relpath), {"text": text}, index=False)
        for item in self._search_all(self._ens(user_id), filter={"path": relpath}):  # now part of the text
            self.store.delete(item.namespace, item.key)
        return self.memory_location(user_id, relpath)

    async def areplace_memory_file(self, user_id: str, relpath: str, text: str) -> str:
        await self.store.aput(self._mns(user_id), check_relpath(relpath), {"text": text}, index=False)
        for item in await self._asearch_all(self._ens(user_id), filter={"path": relpath}):
            await self.store.adelete(item.namespace, item.key)
        return self.memory_location(user_id, relpath)

    def delete_memory_file(self, user_id: str, relpath: str) -> None:
        self.store.delete(self._mns(user_id), check_relpath(relpath))
        for item in self._search_all(self._ens(user_id), filter={"path": relpath}):
            self.store.delete(item.namespace, item.key)

    async def adelete_memory_file(self, user_id: str, relpath: str) -> None:
        await self.store.adelete(self._mns(user_id), check_relpath(relpath))
        for item in await self._asearch_all(self._ens(user_id), filter={"path": relpath}):
            await self.store.adelete(item.namespace, item.key)

    def _names(self, user_id: str, items: list[Any]) -> list[str]:
        ns = self._mns(user_id)
        return sorted({it.key if tuple(it.namespace) == ns else it.value["path"] for it in items})

    def list_memory_files(self, user_id: str) -> list[str]:
        return self._names(user_id, self._search_all(self._mns(user_id)))  # the prefix covers the entries too

    async def alist_memory_files(self, user_id: str) -> list[str]:
        return self._names(user_id, await self._asearch_all(self._mns(user_id)))

    # -- summaries prepared in the background, for the thread's other workers
    def _pns(self, thread_id: str) -> tuple[str, ...]:
        return (*_PREPARED, safe_label(thread_id))

    def read_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None:
        item = self.store.get(self._pns(thread_id), safe_label(key))
        return dict(item.value) if item is not None else None

    async def aread_prepared(self, thread_id: str, key: str) -> dict[str, Any] | None:
        item = await self.store.aget(self._pns(thread_id), safe_label(key))
        return dict(item.value) if item is not None else None

    def _ttl(self, record: dict[str, Any]) -> dict[str, float]:
        """Return the ``ttl`` to put a record with (minutes, up to its ``expires_at``) when the store keeps one."""
        if not getattr(self.store, "supports_ttl", False) or "expires_at" not in record:
            return {}
        return {"ttl": max(1.0, math.ceil((record["expires_at"] - time.time()) / 60))}

    def write_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None:
        if record is None:
            self.store.delete(self._pns(thread_id), safe_label(key))
            return
        self.store.put(self._pns(thread_id), safe_label(key), record, index=False, **self._ttl(record))
        for item in self.store.search(_PREPARED, filter=_expired(), limit=_SWEEP):
            self.store.delete(item.namespace, item.key)

    async def awrite_prepared(self, thread_id: str, key: str, record: dict[str, Any] | None) -> None:
        if record is None:
            await self.store.adelete(self._pns(thread_id), safe_label(key))
            return
        await self.store.aput(self._pns(thread_id), safe_label(key), record, index=False, **self._ttl(record))
        for item in await self.store.asearch(_PREPARED, filter=_expired(), limit=_SWEEP):
            await self.store.adelete(item.namespace, item.key)


#: Where every thread's prepared summaries are: a publish deletes up to ``_SWEEP`` expired ones of any thread
#: (threads that never reached their trigger, nobody to apply them), whether or not the store sweeps by ``ttl``.
_PREPARED, _SWEEP = (_NS_ROOT, "prepared"), 50


def _expired() -> dict[str, Any]:
    return {"expires_at": {"$lt": time.time()}}
