"""The working set: the files the agent is reading and editing, and the tool results that show them.

When the agent edits a file it needs the file in front of it. A summary that
takes the latest read of that file away leaves two choices: read it again
(one more call, the file billed again) or edit blind. The working set is read
from the tool calls the same way the ARTIFACTS trail reads them
(``touches.touches``: ``Read``/``read_file``/``view``, ``cat``/``sed -n`` in
a shell, MCP tools, patches), so it knows any agent's tools:

- each file the agent read, with its latest read (the tool round whose result
  shows the file) and the calls that changed it since that read, oldest first;
  a change since the read makes the read *stale*: the read alone is not the
  file any more, the read followed by those edits is;
- newest touched (read or changed) first; a deleted or moved file leaves it.

``keep_working_set`` decides, for a compaction, which reads stay out of the
summary within a token budget: the most recently touched files first, each
read as the messages it is (the call and its results). A read stays only
when keeping it alone keeps the order a provider accepts (its call answered
by all its results, nothing interleaved; under Anthropic extended thinking,
no non-thinking turn opened). A stale read is kept too (the edits since are
the newest part of the conversation, mostly in the tail) and the summary says
it is stale (``working_set_note``): the agent that needs the file as it is now
knows to read it again. Pure functions; nothing here imports langgraph.

>>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
>>> messages = [
...     HumanMessage("fix a.py", id="h"),
...     AIMessage("", tool_calls=[{"name": "Read", "args": {"file_path": "a.py"}, "id": "r1"}], id="a1"),
...     ToolMessage("def f(): ...", tool_call_id="r1", id="t1"),
...     AIMessage("", tool_calls=[{"name": "Edit", "args": {"file_path": "a.py", "old_string": "...", "new_string": "1"}, "id": "e1"}], id="a2"),
...     ToolMessage("ok", tool_call_id="e1", id="t2"),
... ]
>>> [(f.path, f.read, f.stale) for f in working_set(messages)]
[('a.py', 2, True)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage

from .conversation import ToolRound, starts_with_thinking, tool_calls_of, tool_rounds
from .touches import normalise_path, touches

#: Verbs after which the file's latest read no longer shows it (it is stale until read again).
_STALE_VERBS = frozenset({"edited", "wrote"})
#: Verbs after which the path names no file of the working set.
_GONE_VERBS = frozenset({"deleted", "moved"})
#: Files left out of the working set that a summary names (newest first); the trail names every file.
NAMED_LEFT_OUT = 10


@dataclass(frozen=True)
class WorkingFile:
    """One file of the working set: its latest read and what changed it since.

    ``read`` is the index of the tool result that shows the file, in the round
    ``read_round``; ``edits`` the rounds that changed it since, oldest first;
    ``touched`` the index of the newest call that read or changed it.
    """

    path: str
    read: int
    read_round: ToolRound
    edits: tuple[ToolRound, ...] = ()
    touched: int = 0

    @property
    def stale(self) -> bool:
        """Return True when the file was changed since its latest read (the read alone is not the file)."""
        return bool(self.edits)

    def indices(self) -> list[int]:
        """Return the indices of the messages of its read (the call and its results)."""
        return sorted({self.read_round.call_index, *self.read_round.result_indices})


def working_set(messages: Sequence[BaseMessage]) -> list[WorkingFile]:
    """Return the files the messages' tool calls read, newest touched first, each with its latest read.

    A read is a call whose trail verb is ``read`` (``touches.touches``) and
    that has a result; a change (``edited``, ``wrote``) after the file's latest
    read is recorded with it (the read is then stale); ``deleted`` and
    ``moved`` take the path out. A file changed but never read has no result
    that shows it and is not in the set.
    """
    files: dict[str, WorkingFile] = {}
    for r in tool_rounds(messages):
        answered = {messages[j].tool_call_id: j for j in r.result_indices}
        for call in tool_calls_of(messages[r.call_index]):
            result = answered.get(call.get("id") or "")
            for touch in touches(call.get("name") or "tool", call.get("args")):
                path = normalise_path(touch.target)
                if touch.verb == "read" and result is not None:
                    files.pop(path, None)  # re-inserted: the dict stays in order of the latest touch
                    files[path] = WorkingFile(path, result, r, (), r.call_index)
                elif touch.verb in _STALE_VERBS and path in files:
                    known = files.pop(path)
                    edits = known.edits if r in (known.read_round, *known.edits) else (*known.edits, r)
                    files[path] = WorkingFile(path, known.read, known.read_round, edits, r.call_index)
                elif touch.verb in _GONE_VERBS:
                    files.pop(path, None)
    return list(files.values())[::-1]


def _round_keepable(messages: Sequence[BaseMessage], r: ToolRound, humans: set[int], thinking: bool) -> bool:
    """Return True when the round can stay alone: every call answered right after it, thinking rules kept.

    ``humans`` are the indices of the human messages that stay (the summary
    comes before them all).
    """
    if len(r.result_indices) != len(r.call_ids) or r.result_indices != tuple(range(r.call_index + 1, r.end + 1)):
        return False
    # under extended thinking the assistant turn in progress (after the last user message) must open thinking
    return not thinking or starts_with_thinking(messages[r.call_index]) or any(h > r.call_index for h in humans)


def keep_working_set(
    messages: Sequence[BaseMessage],
    counts: Sequence[int],
    budget_tokens: int,
    evict: Sequence[int] | None = None,
) -> frozenset[int]:
    """Return the indices of the working set's reads that stay out of the summary: newest touched files first, within ``budget_tokens``.

    ``evict`` are the indices the cut would summarize; a read that lies
    outside it is kept at no cost (the tail holds it). A read that cannot
    stay alone (``_round_keepable``) leaves its file out; an older file that
    fits may still come in after a newer one that does not. With ``evict``
    None every message counts as evicted and no order is checked: the
    messages the working set would keep, which layers 1-2 must not shorten.
    """
    checking = evict is not None
    evicted = set(range(len(messages))) if evict is None else set(evict)
    thinking = checking and any(starts_with_thinking(m) for m in messages)
    humans = {i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and i not in evicted}
    chosen: set[int] = set()
    used = 0
    for f in working_set(messages):
        need = [i for i in f.indices() if i in evicted and i not in chosen]
        cost = sum(counts[i] for i in need)
        if used + cost > budget_tokens:
            continue
        if checking and need and not _round_keepable(messages, f.read_round, humans, thinking):
            continue
        chosen.update(need)
        used += cost
    return frozenset(chosen)


def working_set_note(messages: Sequence[BaseMessage], evict_ids: set) -> str:
    """Return the summary's lines on the working set: the files kept after it, and the ones it took with how to get them back.

    Empty when no file was read. The kept files are named with a word when
    stale (changed since the read: read it again for its content now); the files whose
    latest read is summarized are named newest first (``NAMED_LEFT_OUT``),
    each with the id of the result that showed it (``recall``).
    """
    files = working_set(messages)
    kept = [f for f in files if messages[f.read].id not in evict_ids]
    gone = [f for f in files if messages[f.read].id in evict_ids]
    lines: list[str] = []
    if kept:
        shown = ", ".join(f"{f.path} (stale: changed since this read)" if f.stale else f.path for f in kept)
        lines.append(f"Working set: the latest read of each of these files is still in context: {shown}.")
    if gone:
        more = len(gone) - NAMED_LEFT_OUT
        lines.append(
            "Files read earlier whose latest read this summary replaced (newest first): read the file again, "
            "or recall(message_ids=[...]) with the id shown to get that read back"
            + (" (it is stale: the file changed since)" if any(f.stale for f in gone[:NAMED_LEFT_OUT]) else "")
            + ":"
        )
        lines += [
            f"- {f.path} (read in {messages[f.read].id}{'; changed since' if f.stale else ''})"
            for f in gone[:NAMED_LEFT_OUT]
        ]
        if more > 0:
            lines.append(f"- ... and {more} more, named in ARTIFACTS")
    return "\n".join(lines)
