"""Consolidation: merge the new daily ledger entries into ``MEMORY.md``, without losing memory by accident.

Flush only appends to ``memory/YYYY-MM-DD.md``. ``consolidate_memory`` reads
what was appended since its watermark, asks a model to merge it into
``MEMORY.md`` (dedupe, merge related facts, drop superseded ones, stay within
a token limit), and writes the result only when it is safe:

- an empty, failed or unparsable answer changes nothing;
- an answer that drops more than half of the existing entries without
  naming them as superseded is refused;
- the previous ``MEMORY.md`` is copied to ``memory/backups/`` first, and the
  replace is atomic.

The watermark and the time of the last run live in the storage
(``memory/consolidation.json``), so several workers share the rate limit.
Daily files older than the retention move to ``memory/archive/`` once they
are consolidated.

Use it as a function, a graph node (``consolidation_node``) or from the
command line (``langgraph-compaction consolidate``, ``consolidate_main``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict
from zoneinfo import ZoneInfo

from langchain_core.messages import HumanMessage
from langgraph.constants import TAG_NOSTREAM

from ..core.conversation import content_text
from ..core.redact import redact_secrets
from ..core.settings import MemoryConfig
from ..core.tokens import estimate_text_tokens
from ..storage import DEFAULT_USER, CompactionStorage, open_storage
from .ledger import (
    ARCHIVE_DIR,
    BACKUP_DIR,
    MEMORY_FILE,
    SHORTEN_INSTRUCTION,
    advanced_watermark,
    consolidation_prompt,
    dropped_entries,
    is_consolidated,
    ledger_day,
    loss_problem,
    parse_answer,
    parse_bullets,
    pending_entries,
    trim_to_tokens,
)

logger = logging.getLogger("langgraph_compaction")

STATE_FILE = "memory/consolidation.json"
_DEFAULTS = MemoryConfig.model_fields
DEFAULT_MAX_TOKENS: int = _DEFAULTS["consolidation_max_tokens"].default
DEFAULT_MIN_GAP: float = _DEFAULTS["consolidation_min_gap"].default
DEFAULT_RETENTION_DAYS: int = _DEFAULTS["daily_file_retention_days"].default


def _backup_name(now: datetime, taken: set[str]) -> str:
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    name, n = f"{BACKUP_DIR}/MEMORY-{stamp}.md", 1
    while name in taken:
        name, n = f"{BACKUP_DIR}/MEMORY-{stamp}-{n}.md", n + 1
    return name


# --- the result -------------------------------------------------------------


@dataclass(frozen=True)
class ConsolidationResult:
    """What one consolidation did.

    ``status`` is ``"consolidated"`` (MEMORY.md replaced), ``"unchanged"``
    (nothing new, or the model kept it as it was), ``"rate_limited"``,
    ``"busy"`` (another worker claimed this run), ``"refused"`` (the answer
    would lose memory or was too long) or ``"failed"`` (model or storage
    error); in the last three nothing was changed.
    """

    status: str
    reason: str
    user_id: str = DEFAULT_USER
    memory_path: str | None = None
    backup_path: str | None = None
    merged_files: tuple[str, ...] = ()
    archived_files: tuple[str, ...] = ()
    entries_before: int = 0
    entries_after: int = 0
    tokens: int = 0
    next_run_after: str | None = None
    dropped: tuple[str, ...] = field(default=(), repr=False)

    @property
    def changed(self) -> bool:
        """Return True when MEMORY.md was replaced."""
        return self.status == "consolidated"

    def as_event(self) -> dict:
        """Return the result as the fields of a compaction event (stage ``consolidate``), JSON-native."""
        event = {"stage": "consolidate", **asdict(self), "changed": self.changed}
        event.update({k: list(v) for k, v in event.items() if isinstance(v, tuple)})
        if self.status in ("refused", "failed"):
            event["error"] = self.reason
        return event


# --- the shell ----------------------------------------------------------------


def _read_state(storage: CompactionStorage, user_id: str) -> dict:
    raw = storage.read_memory_file(user_id, STATE_FILE)
    try:
        state = json.loads(raw) if raw else {}
    except ValueError:
        logger.warning("consolidation state %s is not JSON; starting over", STATE_FILE)
        state = {}
    return state if isinstance(state, dict) else {}


def _write_state(storage: CompactionStorage, user_id: str, state: dict) -> None:
    storage.replace_memory_file(user_id, STATE_FILE, json.dumps(state, indent=1, sort_keys=True) + "\n")


def _parse_time(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return parsed if parsed is None or parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _ask(model: Any, prompt: str) -> str:
    runnable = model.with_config(tags=[TAG_NOSTREAM], run_name="compaction_consolidate")
    return content_text(runnable.invoke([HumanMessage(prompt)]).content)


def _log(result: ConsolidationResult) -> ConsolidationResult:
    log = logger.warning if result.status in ("refused", "failed") else logger.info
    log("memory consolidation for %s: %s (%s)", result.user_id, result.status, result.reason)
    return result


def consolidate_memory(
    storage: Any,
    model: Any,
    *,
    user_id: str = DEFAULT_USER,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    min_gap_seconds: float = DEFAULT_MIN_GAP,
    now: datetime | None = None,
    retention_days: int = DEFAULT_RETENTION_DAYS,
    timezone: str = "UTC",
    redactor: Callable[[str], str] | None = redact_secrets,
    keep_backups: int = 20,
    force: bool = False,
) -> ConsolidationResult:
    """Merge the ledger entries written since the last run into MEMORY.md; return what happened.

    Runs at most once per ``min_gap_seconds`` per user. Never raises for a
    model or storage failure: the result says ``"failed"`` and nothing is
    changed.

    Args:
        storage: A directory, a LangGraph ``BaseStore`` or a storage object.
        model: Any chat model; its call is tagged no-stream.
        user_id: Whose memory to consolidate.
        max_tokens: The most tokens MEMORY.md may hold after the merge (at least 100).
        min_gap_seconds: The least time between two runs for one user.
        now: An aware datetime that fixes the clock (for tests and replays); None: the current time.
        retention_days: How many days a consolidated daily ledger file stays before it moves to
            ``memory/archive/``.
        timezone: The IANA zone the ledger's days are in (``CompactionConfig.memory.timezone``).
        redactor: Applied to the text written to MEMORY.md; None writes it as the model answered.
        keep_backups: How many earlier versions of MEMORY.md are kept as backups.
        force: Run even when the last run was less than ``min_gap_seconds`` ago.

    Raises:
        ValueError: For storage None, a ``max_tokens`` under 100 or an unknown time zone.
    """
    opened = open_storage(storage)
    if opened is None:
        raise ValueError("storage is None: pass the directory, BaseStore or storage object that holds the memory")
    if max_tokens < 100:
        raise ValueError(f"max_tokens={max_tokens} is too small for a memory file; use at least 100")
    try:
        zone = ZoneInfo(timezone)
    except Exception as exc:  # noqa: BLE001 - any lookup failure is a bad name
        raise ValueError(
            f"timezone {timezone!r} is not a known IANA zone name; use e.g. 'UTC' or 'Asia/Shanghai'"
        ) from exc
    now = (now or datetime.now(UTC)).astimezone(zone)
    user_id = str(user_id or DEFAULT_USER)
    try:
        return _log(
            _consolidate(
                opened, model, user_id, max_tokens, min_gap_seconds, now, retention_days, redactor, keep_backups, force
            )
        )
    except Exception as exc:  # noqa: BLE001 - a failed consolidation leaves memory as it was
        logger.debug("memory consolidation failed", exc_info=exc)
        return _log(ConsolidationResult("failed", f"{type(exc).__name__}: {exc}"[:500], user_id))


class _Unchanged(TypedDict):
    """The fields of a result that leaves MEMORY.md as it is: what it holds."""

    user_id: str
    entries_before: int
    entries_after: int
    tokens: int


class _Merging(TypedDict):
    """The fields every result of a merge reports."""

    user_id: str
    merged_files: tuple[str, ...]
    entries_before: int


def _consolidate(
    storage: CompactionStorage,
    model: Any,
    user_id: str,
    max_tokens: int,
    min_gap: float,
    now: datetime,
    retention_days: int,
    redactor: Callable[[str], str] | None,
    keep_backups: int,
    force: bool,
) -> ConsolidationResult:
    state = _read_state(storage, user_id)
    old_md = storage.read_memory_file(user_id, MEMORY_FILE) or ""
    # every outcome that leaves MEMORY.md as it is reports what it holds
    count = len(parse_bullets(old_md))
    kept = _Unchanged(user_id=user_id, entries_before=count, entries_after=count, tokens=estimate_text_tokens(old_md))
    last = _parse_time(state.get("last_run"))
    if not force and last is not None and now < last + timedelta(seconds=min_gap):
        after = (last + timedelta(seconds=min_gap)).isoformat(timespec="seconds")
        return ConsolidationResult(
            "rate_limited", f"the last run was at {state['last_run']}", next_run_after=after, **kept
        )

    # claim the run: last writer wins, and a worker that reads back someone else's claim stands down
    claim = uuid.uuid4().hex
    state.update(last_run=now.isoformat(timespec="seconds"), claim=claim)
    _write_state(storage, user_id, state)
    if _read_state(storage, user_id).get("claim") != claim:
        return ConsolidationResult("busy", "another worker is consolidating this memory", **kept)

    files = storage.list_memory_files(user_id)
    ledgers = {
        p: storage.read_memory_file(user_id, p) or "" for p in files if ledger_day(p) and not p.startswith(ARCHIVE_DIR)
    }
    stored = state.get("watermark")
    watermark: dict[str, Any] = stored if isinstance(stored, dict) else {}
    entries = pending_entries(ledgers, watermark)
    result = ConsolidationResult("unchanged", "no new ledger entries", **kept)
    if entries:
        result = _merge(storage, model, user_id, old_md, entries, max_tokens, now, redactor, keep_backups, set(files))
        if result.status in ("refused", "failed"):
            state["last_status"] = result.status
            _write_state(storage, user_id, state)
            return result
        watermark = {**watermark, **advanced_watermark({p: ledgers[p] for p in entries})}

    archived = _archive(storage, user_id, ledgers, watermark, now, retention_days)
    state.update(
        watermark={p: m for p, m in watermark.items() if p in ledgers and p not in archived},
        last_status=result.status,
        last_consolidated=now.isoformat(timespec="seconds") if result.changed else state.get("last_consolidated"),
    )
    _write_state(storage, user_id, state)
    return replace(result, archived_files=tuple(archived))


def _merge(
    storage: CompactionStorage,
    model: Any,
    user_id: str,
    old_md: str,
    entries: dict[str, str],
    max_tokens: int,
    now: datetime,
    redactor: Callable[[str], str] | None,
    keep_backups: int,
    files: set[str],
) -> ConsolidationResult:
    """Ask the model, check its answer, back up and replace MEMORY.md; return what happened."""
    base = _Merging(user_id=user_id, merged_files=tuple(entries), entries_before=len(parse_bullets(old_md)))
    prompt = consolidation_prompt(old_md, entries, max_tokens, now.date().isoformat())
    try:
        new_md, superseded = parse_answer(_ask(model, prompt))
        if new_md is not None and estimate_text_tokens(new_md) > max_tokens:
            retry = prompt + SHORTEN_INSTRUCTION.format(tokens=estimate_text_tokens(new_md), max_tokens=max_tokens)
            new_md, superseded = parse_answer(_ask(model, retry))
    except Exception as exc:  # noqa: BLE001 - a failed model changes nothing
        return ConsolidationResult("failed", f"the model failed: {type(exc).__name__}: {exc}"[:500], **base)
    if new_md is None:
        return ConsolidationResult("refused", "the model's answer has no memory bullets (empty or malformed)", **base)
    if redactor is not None:
        new_md = redactor(new_md)
    tokens = estimate_text_tokens(new_md)
    if tokens > max_tokens:
        return ConsolidationResult(
            "refused", f"the answer is ~{tokens} tokens, over max_tokens={max_tokens}", tokens=tokens, **base
        )
    problem = loss_problem(old_md, new_md, superseded)
    if problem:
        dropped = tuple(dropped_entries(old_md, new_md, superseded))
        return ConsolidationResult("refused", problem, tokens=tokens, dropped=dropped, **base)
    if new_md.strip() == old_md.strip():
        return ConsolidationResult(
            "unchanged",
            "the model kept MEMORY.md as it was",
            tokens=tokens,
            entries_after=len(parse_bullets(new_md)),
            **base,
        )
    backup = None
    if old_md.strip():
        backup = _backup_name(now, files)
        storage.replace_memory_file(user_id, backup, old_md)
        old_backups = sorted(p for p in files if p.startswith(BACKUP_DIR + "/"))
        for stale in old_backups[: max(0, len(old_backups) + 1 - keep_backups)]:
            storage.delete_memory_file(user_id, stale)
    path = storage.replace_memory_file(user_id, MEMORY_FILE, new_md)
    return ConsolidationResult(
        "consolidated",
        f"merged {sum(len(parse_bullets(t)) for t in entries.values())} new entries",
        memory_path=path,
        backup_path=backup and storage.memory_location(user_id, backup),
        entries_after=len(parse_bullets(new_md)),
        tokens=tokens,
        dropped=tuple(dropped_entries(old_md, new_md, superseded)),
        **base,
    )


def _archive(
    storage: CompactionStorage,
    user_id: str,
    ledgers: dict[str, str],
    watermark: dict[str, Any],
    now: datetime,
    retention_days: int,
) -> list[str]:
    """Move consolidated daily files older than the retention to ``memory/archive/``; return their old paths.

    The archive copy is written before the original is deleted, so a crash
    in between leaves two copies, never none; the next run finishes the move.
    """
    oldest_kept = (now - timedelta(days=retention_days)).date().isoformat()
    moved: list[str] = []
    for path, text in sorted(ledgers.items()):
        day = ledger_day(path)
        if day is None or day >= oldest_kept or not is_consolidated(path, text, watermark):
            continue
        target = f"{ARCHIVE_DIR}/{day}.md"
        existing = storage.read_memory_file(user_id, target)
        if existing is None or existing != text:
            storage.replace_memory_file(
                user_id, target, text if existing is None or text.startswith(existing) else existing + "\n" + text
            )
        storage.delete_memory_file(user_id, path)
        moved.append(path)
    return moved


async def aconsolidate_memory(storage: Any, model: Any, **options: Any) -> ConsolidationResult:
    """Return ``consolidate_memory(storage, model, **options)`` run in a worker thread (safe in async servers).

    Args:
        storage: A directory, a LangGraph ``BaseStore`` or a storage object.
        model: Any chat model.
        **options: The keyword arguments of ``consolidate_memory``.
    """
    return await asyncio.to_thread(consolidate_memory, storage, model, **options)


def memory_for_prompt(storage: Any, user_id: str = DEFAULT_USER, max_tokens: int = 2000) -> str:
    """Return MEMORY.md cut to ``max_tokens`` for a system prompt ('' when there is none).

    When it is longer, whole lines from the top are kept and a last line
    tells the agent how to read the rest.

    Args:
        storage: A directory, a LangGraph ``BaseStore`` or a storage object (None gives '').
        user_id: Whose memory to read.
        max_tokens: The most tokens the returned text holds.
    """
    opened = open_storage(storage)
    if opened is None:
        return ""
    text = (opened.read_memory_file(str(user_id or DEFAULT_USER), MEMORY_FILE) or "").strip()
    return trim_to_tokens(text, max_tokens) if text else ""


async def amemory_for_prompt(storage: Any, user_id: str = DEFAULT_USER, max_tokens: int = 2000) -> str:
    """Return MEMORY.md cut to ``max_tokens`` for a system prompt (async; I/O off the event loop).

    Args:
        storage: A directory, a LangGraph ``BaseStore`` or a storage object (None gives '').
        user_id: Whose memory to read.
        max_tokens: The most tokens the returned text holds.
    """
    return await asyncio.to_thread(memory_for_prompt, storage, user_id, max_tokens)
