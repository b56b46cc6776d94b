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
from collections.abc import Callable
from typing import Any

from .base import record_id

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


#: Values of these types become ``{"$t": <type name>, "v": <plain JSON>}``; ``_FROM_TAGGED`` reads them back.
_TO_TAGGED: dict[type, Callable[[Any], Any]] = {
    bytes: lambda v: base64.b64encode(v).decode("ascii"),
    dt.datetime: dt.datetime.isoformat,
    dt.date: dt.date.isoformat,
    dt.time: dt.time.isoformat,
    dt.timedelta: lambda v: [v.days, v.seconds, v.microseconds],
}
_FROM_TAGGED: dict[str, Callable[[Any], Any]] = {
    "bytes": base64.b64decode,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "serde": lambda v: _serde().loads_typed(("msgpack", base64.b64decode(v))),
}


def encode(value: Any, marked: list[str] | None = None, where: str = "") -> Any:
    """Return ``value`` as plain JSON data that ``decode`` turns back into an equal value.

    Args:
        value: A record, or any value inside one.
        marked: Where the path of each value that could not be encoded (and
            was replaced by a marked repr) is appended.
        where: The path of ``value`` in the record, for ``marked``.
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind in (list, dict, tuple, set, frozenset):
        return _encode_collection(value, marked, where)
    if kind in _TO_TAGGED:
        return {TAG: kind.__name__, "v": _TO_TAGGED[kind](value)}
    try:
        form, data = _serde().dumps_typed(value)
        if form != "msgpack":
            raise TypeError(f"the checkpoint serializer wrote {form!r}")
        return {TAG: "serde", "v": base64.b64encode(data).decode("ascii")}
    except Exception:  # noqa: BLE001 - nothing can encode it: keep what it looked like, say so
        if marked is not None:
            marked.append(f"{where.lstrip('.') or '<value>'} ({kind.__module__}.{kind.__qualname__})")
        return {TAG: "unencodable", "type": f"{kind.__module__}.{kind.__qualname__}", "repr": _safe_repr(value)}


def _encode_collection(value: Any, marked: list[str] | None, where: str) -> Any:
    """Return a list, dict, tuple or set encoded item by item (a dict with only string keys stays a dict)."""
    kind = type(value)
    if kind is list:
        return [encode(v, marked, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is dict:
        if all(type(k) is str for k in value) and TAG not in value:
            return {k: encode(v, marked, f"{where}.{k}") for k, v in value.items()}
        items = [[encode(k, marked, f"{where}<key>"), encode(v, marked, f"{where}[{k!r}]")] for k, v in value.items()]
        return {TAG: "dict", "v": items}
    if kind is tuple:
        return {TAG: "tuple", "v": [encode(v, marked, f"{where}[{i}]") for i, v in enumerate(value)]}
    # set order differs between processes (hash seeds): sorted, so one set always encodes alike
    items = sorted((encode(v, marked, f"{where}{{}}") for v in value), key=_canonical)
    return {TAG: kind.__name__, "v": items}


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:_REPR_CHARS]
    except Exception:  # noqa: BLE001 - a broken __repr__
        return f"<{type(value).__qualname__} object>"


def decode(value: Any) -> Any:
    """Return the value ``encode`` was given (an unencodable one as its marked repr).

    Args:
        value: What ``encode`` returned, as read back from JSON.
    """
    kind = type(value)
    if kind is list:
        return [decode(v) for v in value]
    if kind is not dict:
        return value
    tag = value.get(TAG)
    data = value.get("v")
    if tag is None:
        return {k: decode(v) for k, v in value.items()}
    if tag == "dict":
        return {decode(k): decode(v) for k, v in data}
    if tag in ("tuple", "set", "frozenset"):
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(v) for v in data)
    if tag == "unencodable":
        return {"unencodable": value.get("type"), "repr": value.get("repr")}
    if tag in _FROM_TAGGED:
        return _FROM_TAGGED[tag](data)
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
    return bool(a == b or checkpointed(a) == checkpointed(b))


def revision(encoded: Any) -> str:
    """Return the revision of an encoded record: a hash of its content, equal for equal records."""
    return hashlib.sha256(_canonical(encoded).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def versioned(record: dict[str, Any]) -> tuple[str | None, str, Any]:
    """Return (message id, revision, encoded record) of a transcript record: how both backends key and store it."""
    encoded = encode(record)
    return record_id(record), revision(encoded), encoded


def unencodable_fields(records: list[dict[str, Any]]) -> list[str]:
    """Return the fields of these records that only a marked repr can store (the offload event names them)."""
    marked: list[str] = []
    for record in records:
        encode(record.get("data"), marked, f"{record_id(record)}")
    return marked
