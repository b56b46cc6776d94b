"""How thread ids, user ids and memory paths become storage names: injective, and never a way out of the storage.

Thread and user ids never reach a path or a namespace as given: ``safe_label``
maps them injectively to names (short lower-case ids kept, everything else
escaped behind a ``~``). ``thread_key`` is the one reading of a run's thread
id that writers and readers share; ``check_relpath`` refuses a memory path
that would leave the memory folder.

    >>> [safe_label(v) for v in ("user-42", "user:42", "Alice", "")]
    ['user-42', '~user+3a42', '~+41lice', '~']
"""

from __future__ import annotations

import hashlib
import re

#: The user whose memory a run without a user id reads and writes.
DEFAULT_USER = "default"
#: Starts every encoded label; no kept id contains it.
ENCODED = "~"

#: Ids kept as they are: lower-case letters, digits, ``_`` and ``-`` (no case-insensitive disk can merge two).
_KEPT = re.compile(r"[a-z0-9_-]{1,64}")
_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
_LABEL_CHARS = 64
_REL_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


def _escaped(text: str) -> str:
    """Return ``text`` with every UTF-8 byte outside ``[a-z0-9_-]`` written as ``+`` and two lower-case hex digits."""
    return "".join(chr(b) if b in _SAFE_BYTES else f"+{b:02x}" for b in text.encode("utf-8", "surrogatepass"))


def safe_label(value: object) -> str:
    """Return the storage name of a thread or user id: a file name and a store namespace label (no ``.``).

    Two different ids (compared as ``str(value)``) never get the same label:

    - *kept*: an id of 1-64 lower-case letters, digits, ``_`` and ``-`` is its
      own label; kept labels never contain ``~``.
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

    Args:
        value: A thread or user id, of any type (``0`` and ``"0"`` are one id).
    """
    text = str(value)
    if _KEPT.fullmatch(text):
        return text
    label = ENCODED + _escaped(text)
    if len(label) <= _LABEL_CHARS:
        return label
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{label[:31]}{ENCODED}{digest}"


def thread_key(thread_id: object) -> str:
    """Return the transcript key of a thread id: ``str(thread_id)``; ``"default"`` when there is none.

    ``""``, ``"default"`` and ``0`` are three threads. A graph run without a
    ``thread_id`` never comes here: it gets a transcript of its own (see
    ``engine.effects.run_thread_id``).

    Args:
        thread_id: The run's ``configurable["thread_id"]``, or None.
    """
    return "default" if thread_id is None else str(thread_id)


def check_relpath(relpath: str) -> str:
    """Return a memory file path after checking it stays inside the memory folder.

    Accepted: relative paths of plain parts (``MEMORY.md``,
    ``memory/2026-11-29.md``); refused with ValueError: absolute paths, ``..``,
    hidden parts, empty parts, NUL and backslashes.

    Args:
        relpath: The path of a memory file, relative to the user's memory folder.
    """
    if not isinstance(relpath, str) or not relpath or "\x00" in relpath or "\\" in relpath:
        raise ValueError(f"memory path {relpath!r} is not a plain relative path like 'memory/2026-01-31.md'")
    parts = relpath.split("/")
    if relpath.startswith("/") or any(not _REL_PART.fullmatch(p) or p in (".", "..") for p in parts):
        raise ValueError(
            f"memory path {relpath!r} leaves the memory folder; use e.g. 'MEMORY.md' or 'memory/2026-01-31.md'"
        )
    return relpath
