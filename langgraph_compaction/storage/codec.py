"""A typed JSON encoding for transcript records: what a checkpointer can hold, a transcript gives back equal.

``messages_to_dict`` records may carry values JSON cannot hold (a tool's
``artifact`` of bytes, a ``datetime``, tuples, int keys, sets, pydantic
models). Plain JSON would refuse them (bytes, datetimes) or change them
(tuples become lists, int keys strings). Here every value that is not plain
JSON becomes a small tagged object ``{"$t": <kind>, "v": <value>}``:
readable forms for bytes, tuples, sets, non-string keys and dates, and
LangGraph's own checkpoint serializer (``JsonPlusSerializer``, msgpack,
base64) for everything else it handles (pydantic models, dataclasses,
enums, ...). A value nothing can encode becomes
``{"$t": "unencodable", "type": ..., "repr": ...}``, which decodes to a
plain ``{"unencodable": <type>, "repr": <repr>}`` dict: the record is still
written, and the caller is told which fields were marked.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from typing import Any

TAG = "$t"
_PLAIN = (str, int, float, bool, type(None))
_REPR_CHARS = 2_000


def _serde() -> Any:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # the checkpointer's own serializer

    global _SERDE
    if _SERDE is None:
        _SERDE = JsonPlusSerializer()
    return _SERDE


_SERDE: Any = None


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def encode(value: Any, marked: list[str] | None = None, where: str = "") -> Any:
    """Return ``value`` as plain JSON data that ``decode`` turns back into an equal value.

    Each value that could not be encoded is replaced by a marked repr and its
    path is appended to ``marked``.
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        return [encode(v, marked, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is dict:
        if all(type(k) is str for k in value) and TAG not in value:
            return {k: encode(v, marked, f"{where}.{k}") for k, v in value.items()}
        items = [[encode(k, marked, f"{where}<key>"), encode(v, marked, f"{where}[{k!r}]")] for k, v in value.items()]
        return {TAG: "dict", "v": items}
    if kind is tuple:
        return {TAG: "tuple", "v": [encode(v, marked, f"{where}[{i}]") for i, v in enumerate(value)]}
    if kind in (set, frozenset):
        # set order differs between processes (hash seeds): sorted, so one set always encodes alike
        items = sorted((encode(v, marked, f"{where}{{}}") for v in value), key=_canonical)
        return {TAG: kind.__name__, "v": items}
    if kind is bytes:
        return {TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if kind in (dt.datetime, dt.date, dt.time):
        return {TAG: kind.__name__, "v": value.isoformat()}
    if kind is dt.timedelta:
        return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    try:
        form, data = _serde().dumps_typed(value)
        if form != "msgpack":
            raise TypeError(f"the checkpoint serializer wrote {form!r}")
        return {TAG: "serde", "v": base64.b64encode(data).decode("ascii")}
    except Exception:  # noqa: BLE001 - nothing can encode it: keep what it looked like, say so
        if marked is not None:
            marked.append(f"{where.lstrip('.') or '<value>'} ({kind.__module__}.{kind.__qualname__})")
        return {TAG: "unencodable", "type": f"{kind.__module__}.{kind.__qualname__}", "repr": _safe_repr(value)}


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:_REPR_CHARS]
    except Exception:  # noqa: BLE001 - a broken __repr__
        return f"<{type(value).__qualname__} object>"


def decode(value: Any) -> Any:
    """Return the value ``encode`` was given (an unencodable one as its marked repr)."""
    kind = type(value)
    if kind is list:
        return [decode(v) for v in value]
    if kind is not dict:
        return value
    tag = value.get(TAG)
    if tag is None:
        return {k: decode(v) for k, v in value.items()}
    data = value.get("v")
    if tag == "dict":
        return {decode(k): decode(v) for k, v in data}
    if tag == "tuple":
        return tuple(decode(v) for v in data)
    if tag == "set":
        return {decode(v) for v in data}
    if tag == "frozenset":
        return frozenset(decode(v) for v in data)
    if tag == "bytes":
        return base64.b64decode(data)
    if tag == "datetime":
        return dt.datetime.fromisoformat(data)
    if tag == "date":
        return dt.date.fromisoformat(data)
    if tag == "time":
        return dt.time.fromisoformat(data)
    if tag == "timedelta":
        return dt.timedelta(days=data[0], seconds=data[1], microseconds=data[2])
    if tag == "serde":
        return _serde().loads_typed(("msgpack", base64.b64decode(data)))
    if tag == "unencodable":
        return {"unencodable": value.get("type"), "repr": value.get("repr")}
    raise ValueError(f"unknown transcript value tag {tag!r}: written by a newer version of langgraph-compaction?")


def checkpointed(value: Any) -> Any:
    """Return ``value`` as a LangGraph checkpointer gives it back: every tuple a list (msgpack has no tuples).

    A message the transcript kept with its tuples and the same message read
    back from a checkpoint differ only in that: compare them in this form to
    tell a real edit from the checkpointer's copy.
    """
    kind = type(value)
    if kind is tuple or kind is list:
        return [checkpointed(v) for v in value]
    if kind is dict:
        return {k: checkpointed(v) for k, v in value.items()}
    return value


def same_version(a: Any, b: Any) -> bool:
    """Return True when two records are equal, or equal once both are in their checkpointed form."""
    return a == b or checkpointed(a) == checkpointed(b)


def revision(encoded: Any) -> str:
    """Return the revision of an encoded record: a hash of its content, equal for equal records."""
    return hashlib.sha256(_canonical(encoded).encode("utf-8", "surrogatepass")).hexdigest()[:16]
