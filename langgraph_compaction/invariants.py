"""The five promises of compaction, as pure checks that return what is broken.

1. ``valid_history``: the view the model receives adds no provider ordering
   violation to the uncompacted history, starts with its leading system
   messages, and holds the latest human request verbatim.
2. ``nothing_lost``: every message ever added, and every version a message
   replaced by id had, is in the state or in the transcript, equal to what
   was added (artifacts JSON cannot hold included).
3. ``bounded``: a compaction ends at or under the trigger or says why not,
   and never runs without evicting something.
4. ``exactly_once``: no version of a message is written twice to the
   transcript, and no ledger bullet appears twice.
5. ``contained``: no file is written outside the storage folder.

Each check returns a list of problems (empty when the promise holds), so
tests assert ``== []`` and the stress command counts them per invariant.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, SystemMessage

from .core.conversation import compaction_kind, is_user_turn
from .core.validation import broken_tool_ids
from .memory.ledger import normalize_bullet, parse_bullets
from .storage import message_records, record_id
from .storage.codec import encode, revision, same_version

INVARIANTS = ("valid_history", "nothing_lost", "bounded", "exactly_once", "contained")


def _leading_system(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    lead: list[BaseMessage] = []
    for m in messages:
        if not isinstance(m, SystemMessage):
            break
        lead.append(m)
    return lead


def history_problems(view: Sequence[BaseMessage], history: Sequence[BaseMessage]) -> list[str]:
    """Invariant 1: return how ``view`` breaks the rules that the full ``history`` keeps.

    A violation already in the history (an orphan result a caller added, a
    call a log never answered) is the input's, not compaction's; any other is
    reported, as are a missing or reordered leading system message, a
    missing or altered latest human request, a view that does not end with
    the request a history ends with, and an id two messages carry (a request
    ``add_messages`` merged into an older one of that id).
    """
    problems = [
        f"tool id {tid!r} is {kind} in the view only"
        for kind, tid in sorted(broken_tool_ids(view) - broken_tool_ids(history))
    ]
    lead = _leading_system(history)
    if [m.id for m in _leading_system(view)][: len(lead)] != [m.id for m in lead]:
        problems.append("the view does not start with the history's system message(s)")
    latest = next((m for m in reversed(history) if is_user_turn(m)), None)
    if latest is not None and not any(m.id == latest.id and m.content == latest.content for m in view):
        problems.append(f"the latest human message {latest.id!r} is missing or changed")
    if latest is not None and history[-1] is latest:
        last = next((m for m in reversed(view) if compaction_kind(m) is None), None)
        if last is not None and last.id != latest.id:
            problems.append(f"the view ends with {last.type} message {last.id!r}, not the latest human message")
    problems += _shared_ids(history, "history") + _shared_ids(view, "view")
    first = next((m for m in view if not isinstance(m, SystemMessage)), None)
    first_before = next((m for m in history if not isinstance(m, SystemMessage)), None)
    if first is not None and first.type != "human" and (first_before is None or first_before.type == "human"):
        problems.append(f"the first turn of the view is {first.type}, not a user turn")
    return problems


def _shared_ids(messages: Sequence[BaseMessage], where: str) -> list[str]:
    """Return the ids that more than one of ``messages`` carries (``add_messages`` keeps one message per id)."""
    counts = Counter(m.id for m in messages if m.id is not None)
    return [f"id {i!r} is carried by {n} messages of the {where}" for i, n in counts.items() if n > 1]


def lost_messages(
    added: Iterable[BaseMessage | dict], state: Sequence[BaseMessage], transcript: Sequence[dict]
) -> list[str]:
    """Invariant 2: return the added messages found neither in ``state`` nor in ``transcript``, as given.

    ``added`` holds messages (or their ``message_records``) exactly
    as they entered the thread; a match must have the same id and an equal
    record (tuples may be lists: a checkpointer keeps no tuples). A layer-1/2
    edit in the state is fine when the original is in the transcript.
    """
    have: dict[str, list[dict]] = {}
    for record in [*message_records(list(state)), *transcript]:
        have.setdefault(record_id(record) or "", []).append(record)
    problems = []
    for item in added:
        record = item if isinstance(item, dict) else message_records([item])[0]
        rid = record_id(record) or ""
        if not any(same_version(record, kept) for kept in have.get(rid, [])):
            where = "changed" if rid in have else "missing"
            problems.append(f"message {rid!r} is {where} in both the state and the transcript")
    return problems


def bounded_problems(events: Iterable[Mapping], trigger_tokens: int) -> list[str]:
    """Invariant 3: return the compactions that ended over the trigger without a reason, or made no progress."""
    problems = []
    for e in events:
        if e.get("stage") != "summarize" or e.get("layer") not in ("summarize", "extractive"):
            continue
        if not e.get("evicted"):
            problems.append(f"a compaction at {e.get('time')} evicted nothing")
        after, before = e.get("tokens_after"), e.get("tokens_before")
        if isinstance(after, int) and after > trigger_tokens and not e.get("over_budget"):
            problems.append(
                f"a compaction ended at {after} tokens, over the trigger {trigger_tokens}, without saying why"
            )
        if isinstance(after, int) and isinstance(before, int) and after >= before:
            problems.append(f"a compaction made no progress ({before} -> {after} tokens)")
    return problems


def duplicate_problems(transcript: Sequence[dict], ledgers: Mapping[str, str] = {}) -> list[str]:
    """Invariant 4: return the message versions written twice to the transcript and bullets written twice to a ledger.

    A message replaced by id has one record per version: that is not a
    duplicate; the same version (id and content) twice is.
    """
    versions = Counter((record_id(r), revision(encode(r))) for r in transcript)
    problems = [f"transcript holds message {i!r} (version {v}) {n} times" for (i, v), n in versions.items() if n > 1]
    for name, text in ledgers.items():
        repeated = [b for b, n in Counter(normalize_bullet(b) for b in parse_bullets(text or "")).items() if n > 1]
        problems += [f"{name} holds the bullet {b!r} more than once" for b in repeated]
    return problems


def escaped_paths(paths: Iterable[str | os.PathLike], root: str | os.PathLike) -> list[str]:
    """Invariant 5: return the paths that resolve (links followed) outside ``root``."""
    base = os.path.realpath(root)
    return [f"{p} is outside {root}" for p in paths if os.path.commonpath([base, os.path.realpath(p)]) != base]


def files_under(folder: str | os.PathLike[str]) -> set[str]:
    """Return every file and link under ``folder`` (links are not followed)."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        found.update(os.path.join(dirpath, n) for n in filenames)
        found.update(os.path.join(dirpath, n) for n in dirnames if os.path.islink(os.path.join(dirpath, n)))
    return found


@dataclass
class ThreadLedger:
    """What one thread has been given and shown, checked against invariants 1, 2 and 4 at each step.

    Call ``added`` with the messages as they entered the state,
    ``check_view`` with each view the model receives, and ``check_store``
    with the state and the transcript after each run; ``problems`` collects
    every broken promise, by invariant.
    """

    history: list[BaseMessage] = field(default_factory=list)
    records: dict[str | None, dict] = field(default_factory=dict)  # by message id
    versions: list[dict] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in INVARIANTS})

    def added(self, messages: Sequence[BaseMessage]) -> None:
        """Remember messages that entered the thread (with the ids the state gave them)."""
        for m in messages:
            if m.id not in self.records:  # later sights may be compaction's own edits (same id)
                self.history.append(m)
                self.records[m.id] = message_records([m])[0]

    def replaced(self, messages: Sequence[BaseMessage]) -> None:
        """Remember messages that replaced earlier ones by id (``update_state``): each version must be kept too."""
        for m in messages:
            self.versions.append(message_records([m])[0])
            self.history = [m if old.id == m.id else old for old in self.history]
            if m.id not in self.records:
                self.history.append(m)
                self.records[m.id] = self.versions.pop()

    def check_view(self, view: Sequence[BaseMessage]) -> list[str]:
        """Record and return invariant-1 problems of one model call's view."""
        found = history_problems(view, self.history)
        self.problems["valid_history"] += found
        return found

    def check_store(
        self, state: Sequence[BaseMessage], transcript: Sequence[dict], ledgers: Mapping[str, str] = {}
    ) -> list[str]:
        """Record and return invariant-2 and -4 problems after a run."""
        lost = lost_messages([*self.records.values(), *self.versions], state, transcript)
        twice = duplicate_problems(transcript, ledgers)
        self.problems["nothing_lost"] += lost
        self.problems["exactly_once"] += twice
        return lost + twice

    def count(self) -> dict[str, int]:
        """Return the number of problems per invariant."""
        return {name: len(found) for name, found in self.problems.items()}

    def all(self) -> list[str]:
        """Return every problem, prefixed by its invariant."""
        return [f"{name}: {p}" for name, found in self.problems.items() for p in found]


def ledgers_of(storage: object, user_id: str) -> dict[str, str]:
    """Return ``{relpath: text}`` of a user's memory files through the storage protocol."""
    names = storage.list_memory_files(user_id)  # type: ignore[attr-defined]
    return {n: storage.read_memory_file(user_id, n) or "" for n in names}  # type: ignore[attr-defined]
