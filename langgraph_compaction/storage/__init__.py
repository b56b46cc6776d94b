"""Where transcripts and memory live: one small protocol, a directory or a LangGraph store.

- ``base``: the ``CompactionStorage`` protocol and the record form every backend stores;
- ``names``: how thread ids, user ids and memory paths become storage names;
- ``files``: ``FileStorage``, a directory; ``store``: ``StoreStorage``, a LangGraph ``BaseStore``;
- ``codec``: the typed encoding of transcript records; ``transcript``: reading a transcript back.

``open_storage`` turns what ``add_compaction(storage=...)`` was given into one of them.
"""

from __future__ import annotations

import os
from typing import Any

from langgraph.store.base import BaseStore

from .base import CompactionStorage, message_records, record_id
from .codec import unencodable_fields
from .files import FileStorage
from .names import DEFAULT_USER, ENCODED, check_relpath, safe_label, thread_key
from .store import StoreStorage

__all__ = [
    "DEFAULT_USER",
    "ENCODED",
    "CompactionStorage",
    "FileStorage",
    "StoreStorage",
    "check_relpath",
    "message_records",
    "open_storage",
    "record_id",
    "safe_label",
    "thread_key",
    "unencodable_fields",
]


def open_storage(storage: Any) -> CompactionStorage | None:
    """Return the storage for a directory path, a LangGraph ``BaseStore`` or a storage object.

    Args:
        storage: A directory path (``FileStorage``), a LangGraph ``BaseStore``
            (``StoreStorage``), an object with the ``CompactionStorage``
            methods, or None (no offload, no memory: None is returned).

    Raises:
        TypeError: For anything else, naming the accepted forms.
    """
    if storage is None or isinstance(storage, (FileStorage, StoreStorage)):
        return storage
    if isinstance(storage, (str, os.PathLike)):
        return FileStorage(storage)
    if isinstance(storage, BaseStore):
        return StoreStorage(storage)
    if isinstance(storage, CompactionStorage):
        return storage
    raise TypeError(f"storage={storage!r} is not supported: pass a directory path, a LangGraph BaseStore, or None")
