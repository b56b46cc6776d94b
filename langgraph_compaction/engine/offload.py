"""Offload: every message, and every new version of one, appended once to the thread's transcript.

Nothing is removed or shortened before its original is in the transcript:
the gate offloads before layers 1-2 edit, and summarize checks that every
message it evicts was offloaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ..core.config import CompactionConfig
from ..core.conversation import content_text
from ..core.layers import PRUNED_MARK, SHORTENED_OPENINGS  # the marks of layer 2's edits, to tell them from a user's
from ..core.redact import redact_record, redact_secrets
from ..storage import message_records, record_id, unencodable_fields
from ..storage.codec import same_version
from .effects import Steps, StorageCall
from .events import describe_error, emit_event
from .results import OffloadResult
from .run import Run

OFFLOAD = "compaction_offload"

#: The offload event's note when a value could only be kept as a marked repr.
UNENCODABLE_NOTE = "some values could not be encoded: the transcript keeps a marked repr of each (listed)"


def _shortened_by_layers(message: BaseMessage, truncation_text: str) -> bool:
    """Return True for layers 1-2's own shortened copy of a message, which offload never writes as a new version."""
    if isinstance(message, ToolMessage):
        text = content_text(message.content)
        return bool(PRUNED_MARK.search(text)) or text.startswith(SHORTENED_OPENINGS)
    return isinstance(message, AIMessage) and truncation_text in repr((message.tool_calls, message.content))


def transcript_records(messages: Sequence[BaseMessage], config: CompactionConfig) -> list[dict[str, Any]]:
    """Return the transcript records of ``messages``, redacted when ``guards.redact_transcripts`` is on."""
    records = message_records(list(messages))
    if config.guards.redact_transcripts:
        records = [redact_record(r, config.guards.redactor or redact_secrets) for r in records]
    return records


#: How many times an offload is tried before it fails: a storage restarting fails one write, rarely two in a row.
OFFLOAD_ATTEMPTS = 2


def offload_messages(messages: Sequence[BaseMessage], run: Run, config: CompactionConfig) -> Steps[OffloadResult]:
    """Append each message, or new version of one, the transcript lacks; return what it wrote (or raise).

    A failed read or write is tried again at once (``OFFLOAD_ATTEMPTS``): the
    transcript is read again, so nothing is written twice.
    """
    attempt = 1
    while True:
        try:
            return (yield from _offload_once(messages, run, config))
        except Exception:
            if attempt >= OFFLOAD_ATTEMPTS:
                raise
            attempt += 1


def _offload_once(messages: Sequence[BaseMessage], run: Run, config: CompactionConfig) -> Steps[OffloadResult]:
    """Append each message, or new version of one, the transcript lacks; return what it wrote (or raise).

    The whole transcript is read every time, whatever the state says was
    offloaded: a run forked from an older checkpoint (time travel) or another
    worker may have written it, and it may have been deleted. A message
    replaced by id (``update_state``) since it was written is appended again as
    a new version; layers 1-2's own shortened copies are not (their originals
    are there), nor is a checkpoint's copy whose tuples became lists (the
    transcript keeps the tuples it was given). The result's ``events`` hold
    the offload event, not yet emitted.
    """
    latest = {record_id(r): r for r in (yield StorageCall("read_transcript", (run.thread_id,)))}
    records = transcript_records(messages, config)
    cut = config.truncate_args.truncation_text
    fresh = [
        r
        for m, r in zip(messages, records, strict=True)
        if m.id not in latest or (not same_version(r, latest[m.id]) and not _shortened_by_layers(m, cut))
    ]
    path = yield StorageCall("append_transcript", (run.thread_id, fresh))
    event: dict[str, Any] = {"stage": "offload", "offloaded": len(fresh), "offload_path": path}
    if marked := unencodable_fields(fresh):  # written as marked reprs; compaction goes on
        event.update(note=UNENCODABLE_NOTE, unencodable=marked)
    return OffloadResult((event,), tuple(m.id for m in messages if m.id), path)


def offload_result(messages: Sequence[BaseMessage], run: Run, config: CompactionConfig) -> Steps[OffloadResult]:
    """The offload node's steps: write what the transcript lacks; return what it did."""
    if run.storage is None:
        return OffloadResult(events=(emit_event({"stage": "offload", "note": "no storage configured"}),))
    try:
        result = yield from offload_messages(messages, run, config)
    except Exception as exc:  # noqa: BLE001 - summarize sees the missing ids and keeps the history
        event = emit_event({"stage": "offload", "error": describe_error(exc)})
        # an earlier offload's ids would vouch for messages replaced by id since: none are vouched for now
        return OffloadResult(events=(event,), offloaded_ids=(), last_error=event["error"])
    return dataclasses.replace(result, events=tuple(emit_event(e) for e in result.events))
