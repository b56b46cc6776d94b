"""Token counts for LangChain messages, estimated without a tokenizer.

`estimate_text_tokens` is the package's default. It reads character-class
statistics off the UTF-8 bytes (a few ``bytes.translate`` and ``bytes.count``
calls, all in C) and weighs them with coefficients fitted against OpenAI's
o200k_base tokenizer. On the samples in ``tests/data/token_samples`` it stays
within 10 % of o200k for English prose, Python source, JSON tool output,
Chinese, test logs and agent transcripts, at about 30 MB/s on one core.

`seed_text_tokens` keeps the ``ceil(len / 2.5)`` rule (2.5 characters a token)
as a named option: it over-counts English and code by about 80 % and under-counts
Chinese by about 45 %.

`message_tokens` adds the per-message overheads to the text of the content,
tool calls and name; `TokenCounter` memoises per-message counts across calls
so that re-counting a checkpointed history is nearly free.
"""

from __future__ import annotations

import json
import marshal
import math
import operator
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

MESSAGE_OVERHEAD = 5
"""Tokens every message costs beyond its text (role markers, separators)."""

TOOL_CALL_OVERHEAD = 10
"""Tokens each tool call costs beyond its name and JSON arguments (id, wrapper)."""

TOOL_RESULT_OVERHEAD = 8
"""Tokens a tool result (ToolMessage or ``tool_result`` block) costs beyond its content."""

MEDIA_TOKENS = 1_000
"""Flat charge for one image, file, audio or video block.

Providers bill media by pixels or pages, not by the size of its base64 text, so
counting that text would over-charge a small PNG tens of times. 1,000 tokens
covers a typical screenshot (OpenAI charges 765 for a 1024x1024 high-detail
image, Anthropic about 1,600 for a 1.15-megapixel one).
"""

TextTokens = Callable[[str], int]
MessagesCounter = Callable[[list[BaseMessage]], int]


# --- Text estimator -----------------------------------------------------------
#
# Every byte of the UTF-8 text is mapped to a one-byte class, and UTF-8
# continuation bytes are deleted, so that each character leaves exactly one
# class byte. o200k's pre-tokenizer splits text at class boundaries (letters,
# digits in groups of up to three, punctuation runs, whitespace runs), and BPE
# then merges within those pieces, so the counts of classes, runs and a few
# class pairs predict its token count well.


def _class_of(byte: int) -> str:
    """Return the class character of one UTF-8 byte (``"~"`` for a continuation byte)."""
    char = chr(byte)
    if byte >= 0xF0:
        return "d"  # lead of a 4-byte character: emoji, rare CJK
    if byte >= 0xE1:
        return "c"  # lead of a 3-byte character: CJK, kana, Hangul, typographic punctuation
    if byte == 0xE0:
        return "i"  # lead of U+0800-U+0FFF: Indic scripts, Thai, which o200k packs tighter than CJK
    if 0xD6 <= byte <= 0xDB:
        return "h"  # lead of U+0580-U+06FF: Hebrew and Arabic
    if byte >= 0xC0:
        return "b"  # lead of another 2-byte character: accented Latin, Greek, Cyrillic
    if byte >= 0x80:
        return "~"
    if "a" <= char <= "z":
        return "a"
    if "A" <= char <= "Z":
        return "A"
    if "0" <= char <= "9":
        return "0"
    if char in " \t\v\f":
        return " "
    if char in "\r\n":
        return "\n"
    if byte < 0x20 or byte == 0x7F:
        return "x"  # control characters (NUL, ANSI escapes) are one token each
    return "."


_CLASSES = "".join(_class_of(byte) for byte in range(256)).encode("latin-1")
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def _marker(wanted: str) -> bytes:
    """Return a translate table for class strings: '#' for the classes in `wanted`, ' ' for the rest."""
    return bytes(ord("#") if chr(byte) in wanted else ord(" ") for byte in range(256))


_WORD_RUNS = _marker("aAbh")  # letter runs, including non-ASCII letters
_DIGIT_RUNS = _marker("0")
_PUNCT_RUNS = _marker(".")
_NEWLINE_RUNS = _marker("\n")
_SPACE_RUNS = _marker(" ")


def _runs(classes: bytes, lookup: bytes, start: bytes = b"#") -> int:
    """Return how many runs of the classes `lookup` marks are at least ``len(start)`` long."""
    marked = classes.translate(lookup)
    return marked.count(b" " + start) + marked.startswith(start)


def estimate_text_tokens(text: str) -> int:
    """Return an estimate of the o200k token count of `text` (0 for empty text, else at least 1).

    The weights were fitted by non-negative least squares on relative error
    against o200k_base, over prose, Python source, JSON, Chinese, logs and
    transcripts, plus smaller weights for other scripts and for base64 / numeric
    data, then scaled up 1 % so that errors lean towards over-counting.
    """
    if not text:
        return 0
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASSES, _CONTINUATION_BYTES)
    count = classes.count
    # Long punctuation runs ("=====", "-----") merge into very few tokens, so
    # every full 8-character stretch is charged as one unit.
    separators = count(b"........")
    # A single punctuation character before a letter joins that word's piece
    # ("(self", ".append", "_name"); other punctuation runs are pieces of their own.
    free_punct_runs = _runs(classes, _PUNCT_RUNS) - count(b".a") - count(b".A") - count(b".b")
    # A newline right after punctuation joins its piece ("):\n"); others are a token.
    free_newline_runs = _runs(classes, _NEWLINE_RUNS) - count(b".\n")
    # Case flips around a single letter or digit almost only occur in base64,
    # hashes and keys, which o200k splits into pieces of 1-2 characters.
    random_looking = count(b"AaA") + count(b"A0A") + count(b"a0A") + count(b"A0a")
    estimate = (
        0.369 * _runs(classes, _WORD_RUNS)  # each word is at least one token ...
        + 0.156 * (count(b"a") + count(b"A"))  # ... and long or rare ones split further
        + 0.763 * _runs(classes, _DIGIT_RUNS)  # digits go in groups of up to three
        + 0.344 * count(b"0")
        + 0.422 * count(b" 0")  # a space before a number is a token of its own
        + 0.626 * free_punct_runs
        + 0.367 * (count(b".") - 8 * separators)
        + 0.318 * separators
        + 0.609 * free_newline_runs
        + 0.5 * count(b"\n\n\n\n\n\n\n\n")  # o200k caps newline tokens at about 16 newlines
        + 0.867 * _runs(classes, _SPACE_RUNS, b"##")  # indentation; single spaces join the next word
        + 1.044 * count(b"x")
        + 2.589 * random_looking
    )
    if not text.isascii():  # O(1) for str; skips five passes over most English and code
        estimate += (
            0.200 * count(b"b")
            + 0.298 * count(b"h")
            + 0.382 * count(b"i")
            + 0.773 * count(b"c")  # Chinese: about 0.72 tokens per character
            + 2.227 * count(b"d")
        )
    return max(1, math.ceil(estimate))


def seed_text_tokens(text: str) -> int:
    """Return ``ceil(len(text) / 2.5)``: the token count of `text` at 2.5 characters a token.

    Args:
        text: The text to count.
    """
    return -(-2 * len(text) // 5)


# --- Messages -------------------------------------------------------------------

# Block types whose payload is an image, document, audio or video: charged MEDIA_TOKENS.
_MEDIA_BLOCKS = frozenset(
    {"image", "image_url", "input_image", "file", "input_file", "document", "audio", "input_audio", "video"}
)
# Block types that are tool calls, whose ids let a call duplicated in `tool_calls` count once.
_TOOL_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "server_tool_use", "server_tool_call"})
# Block keys that carry identifiers, signatures or provider metadata the model does not read as text.
_METADATA_KEYS = frozenset(
    {
        "type",
        "id",
        "index",
        "signature",
        "encrypted_content",
        "cache_control",
        "extras",
        "tool_use_id",
        "tool_call_id",
        "mime_type",
    }
)


def _json_text(value: Any) -> str:
    """Return `value` as the JSON text a provider would send (``repr`` if it is not serialisable)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # circular or pathologically deep values
        try:
            return repr(value)
        except RecursionError:
            return ""


def _call_text(name: Any, args: Any) -> str:
    """Return the text of a tool call: its name and its arguments (raw if already a string, else JSON)."""
    return f"{name or ''} {args if isinstance(args, str) else _json_text(args)}"


def _block_tokens(block: Any, text_tokens: TextTokens, call_ids: set[str], depth: int = 0) -> int:
    """Return the tokens of one content block; records the ids of tool-call blocks in `call_ids`."""
    if isinstance(block, str):
        return text_tokens(block)
    if not isinstance(block, dict):
        return text_tokens(_json_text(block))
    kind = block.get("type")
    if not isinstance(kind, str):
        kind = None
    if kind in _MEDIA_BLOCKS:
        return MEDIA_TOKENS
    if kind in _TOOL_CALL_BLOCKS:
        if isinstance(block.get("id"), str):
            call_ids.add(block["id"])
        args = block.get("input", block.get("args"))
        return TOOL_CALL_OVERHEAD + text_tokens(_call_text(block.get("name"), args))
    # Text, thinking, reasoning, refusal, tool_result and unknown blocks: count
    # every field the model reads, recursing into nested blocks.
    tokens = TOOL_RESULT_OVERHEAD if kind == "tool_result" else 0
    for key, value in block.items():
        if key in _METADATA_KEYS or value is None:
            continue
        if isinstance(value, str):
            tokens += text_tokens(value)
        elif isinstance(value, list) and depth < 8:
            tokens += sum(_block_tokens(item, text_tokens, call_ids, depth + 1) for item in value)
        else:
            tokens += text_tokens(_json_text(value))
    return tokens


def message_tokens(message: BaseMessage, text_tokens: TextTokens = estimate_text_tokens) -> int:
    """Return the tokens one message costs: its content, tool calls and name, plus fixed overheads.

    Overheads: MESSAGE_OVERHEAD per message, TOOL_CALL_OVERHEAD per tool call
    (valid or invalid) and TOOL_RESULT_OVERHEAD for a ToolMessage. Content may
    be a string, None or a list of blocks; media blocks cost MEDIA_TOKENS each.
    A tool call present both as a ``tool_use`` block and in ``tool_calls`` (as
    in Anthropic responses) is counted once.
    """
    tokens = MESSAGE_OVERHEAD
    if isinstance(message, ToolMessage):
        tokens += TOOL_RESULT_OVERHEAD
    content = getattr(message, "content", None)
    call_ids: set[str] = set()
    if isinstance(content, str):
        tokens += text_tokens(content)
    elif isinstance(content, list):
        tokens += sum(_block_tokens(block, text_tokens, call_ids) for block in content)
    elif content is not None:
        tokens += text_tokens(_json_text(content))
    for field in ("tool_calls", "invalid_tool_calls"):
        for call in getattr(message, field, None) or ():
            if not isinstance(call, dict):
                tokens += TOOL_CALL_OVERHEAD + text_tokens(_json_text(call))
            elif not (isinstance(call.get("id"), str) and call["id"] in call_ids):
                tokens += TOOL_CALL_OVERHEAD + text_tokens(_call_text(call.get("name"), call.get("args")))
    name = getattr(message, "name", None)
    if isinstance(name, str) and name:
        tokens += text_tokens(name)
    return tokens


def estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Return the estimated tokens of `messages`: the sum of `message_tokens` (the package default)."""
    return sum(message_tokens(message) for message in messages)


def seed_estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Return the tokens of `messages`, their text counted at 2.5 characters a token (``ceil(len / 2.5)``).

    Args:
        messages: The messages to count.
    """
    return sum(message_tokens(message, seed_text_tokens) for message in messages)


# --- Memoising counter ------------------------------------------------------------


def _frozen(value: Any) -> Any:
    """Return bytes that differ whenever `value` (a structure of lists, dicts, str, numbers) differs.

    ``marshal`` walks the structure in C; version 2 writes no back-references,
    so equal values give equal bytes whatever their reference counts. Objects
    it cannot write (and circular values) fall back to their ``repr``; a value
    whose ``repr`` fails too gives a new object, which matches nothing.
    """
    try:
        return marshal.dumps(value, 2)
    except ValueError:
        try:
            return repr(value)
        except Exception:  # noqa: BLE001 - a hostile __repr__ or a structure too deep even for repr
            return object()


def fingerprint(message: BaseMessage) -> int:
    """Return a hash of a message's type, id, name, content and tool calls: what its token count depends on.

    The gate fingerprints every message of a history freshly restored from a
    checkpoint on every call, so the usual message (str content, tool calls
    with flat arguments) costs one hash of one tuple: str content is hashed in
    C, and each call's name, id and arguments go in the tuple as they are, each
    argument value with its type (``1``, ``1.0`` and ``True`` are equal and hash
    alike, but are different JSON). The pydantic fields are read from
    ``__dict__`` (a missing attribute costs an exception in pydantic's
    ``__getattr__``). Block content, invalid tool calls and any other shape go
    through `_frozen`.
    """
    fields = message.__dict__
    try:
        content = fields["content"]
        if content.__class__ is str:
            calls = fields.get("tool_calls")
            if not calls:  # not an AIMessage, or one that calls no tool
                if not fields.get("invalid_tool_calls"):
                    return hash((message.__class__, fields["id"], fields["name"], content))
            elif not fields["invalid_tool_calls"]:
                key: tuple[Any, ...] = (message.__class__, fields["id"], fields["name"], content)
                for call in calls:
                    args = call["args"]
                    key += (call["name"], call["id"], len(args))  # the count tells where the next call starts
                    for arg, value in args.items():
                        key += (arg, value, value.__class__)
                return hash(key)
    except Exception:  # noqa: BLE001 - another shape (of a call, of the fields) or an unhashable value: serialised below
        pass
    values = [fields.get(name) for name in ("id", "name", "content", "tool_calls", "invalid_tool_calls")]
    return hash((message.__class__, _frozen(values)))


class TokenCounter:
    """Counts tokens per message, memoised across calls.

    Wraps `message_tokens` (with `text_tokens`) or, when `counter` is given, any
    ``counter(list[BaseMessage]) -> int`` such as
    ``model.get_num_tokens_from_messages``, called as ``counter([message])``.
    Counts are cached by `fingerprint` (type, id, name, content, tool calls),
    so messages re-created from a checkpoint hit the cache; messages without an
    id are counted every time. The cache keeps at most `max_entries` counts and
    drops its oldest half when full.
    """

    max_entries = 50_000

    def __init__(self, counter: MessagesCounter | None = None, *, text_tokens: TextTokens = estimate_text_tokens):
        self._counter = counter
        self._text_tokens = text_tokens
        self._cache: dict[int, int] = {}
        # The last list counted, held so its objects stay alive (their ids cannot be reused).
        self._last: tuple[list[BaseMessage], list[int]] = ([], [])

    def _count(self, message: BaseMessage) -> int:
        """Return the uncached count of one message."""
        if self._counter is None:
            return message_tokens(message, self._text_tokens)
        return int(self._counter([message]))

    def message(self, message: BaseMessage) -> int:
        """Return the tokens of one message, from the cache when its fingerprint matches."""
        message_id = getattr(message, "id", None)
        if not isinstance(message_id, str) or not message_id:
            return self._count(message)
        key = fingerprint(message)
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= self.max_entries:
                for stale in list(islice(self._cache, len(self._cache) // 2)):
                    del self._cache[stale]
            cached = self._cache[key] = self._count(message)
        return cached

    def counts(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Return the tokens of each message, in order."""
        # One gate call counts the same history several times (calibration,
        # cooldown, plan): the same objects again cost one identity comparison.
        last_messages, last_counts = self._last
        if len(last_messages) == len(messages) and all(map(operator.is_, last_messages, messages)):
            return list(last_counts)
        counts = [self.message(message) for message in messages]
        self._last = (list(messages), counts)
        return list(counts)

    def total(self, messages: Sequence[BaseMessage]) -> int:
        """Return the tokens of all messages together."""
        return sum(self.message(message) for message in messages)
