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
summary within a token budget: the most recently touched files first, up to
the first that does not fit, each read as the messages it is (the call and
its results), then the earlier pages of the files kept. A read stays only
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
...     AIMessage(
...         "",
...         tool_calls=[
...             {"name": "Edit", "args": {"file_path": "a.py", "old_string": "...", "new_string": "1"}, "id": "e1"}
...         ],
...         id="a2",
...     ),
...     ToolMessage("ok", tool_call_id="e1", id="t2"),
... ]
>>> [(f.path, f.read, f.stale) for f in working_set(messages)]
[('a.py', 2, True)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from .conversation import (
    ToolRound,
    answered_call_id,
    content_text,
    starts_with_thinking,
    tool_calls_of,
    tool_rounds,
)
from .touches import normalise_path, touches

#: Verbs after which the file's latest read no longer shows it (it is stale until read again).
_STALE_VERBS = frozenset({"edited", "wrote"})
#: Verbs after which the path names no file of the working set.
_GONE_VERBS = frozenset({"deleted", "moved"})
#: The lines a read shows, first and last (last None: to the end); None for the whole file.
Lines = tuple[int, int | None] | None
#: Files left out of the working set that a summary names (newest first); the trail names every file.
NAMED_LEFT_OUT = 10


@dataclass(frozen=True)
class WorkingFile:
    """One file of the working set: its latest read and what changed it since.

    ``read`` is the index of the tool result that shows the file, in the round
    ``read_round``; ``edits`` the rounds that changed it since, oldest first;
    ``touched`` the index of the newest call that read or changed it;
    ``lines`` the first and last line the read shows (None: the whole file).
    """

    path: str
    read: int
    read_round: ToolRound
    edits: tuple[ToolRound, ...] = ()
    touched: int = 0
    lines: Lines = None

    @property
    def shown(self) -> str:
        """Return the lines the read shows, as a summary names them (``lines 1-120``), or '' for the whole file."""
        if self.lines is None:
            return ""
        return f"lines {self.lines[0]}-{'end' if self.lines[1] is None else self.lines[1]}"

    @property
    def stale(self) -> bool:
        """Return True when the file was changed since its latest read (the read alone is not the file)."""
        return bool(self.edits)

    def indices(self) -> list[int]:
        """Return the indices of the messages of its read (the call and its results)."""
        return sorted({self.read_round.call_index, *self.read_round.result_indices})


def shown_again(lines: Lines, later: Sequence[Lines]) -> bool:
    """Return True when the reads of ``later`` together show every line a read of ``lines`` showed.

    ``None`` is the whole file; ``(first, None)`` runs to the end, so a read
    from line 1 to the end shows the whole file again.
    """
    first, last = (1, None) if lines is None else lines
    spans = sorted(((1, None) if shown is None else shown for shown in later), key=lambda span: span[0])
    at = first  # the first line not shown again yet
    for start, end in spans:
        if start > at:
            return False
        if end is None:
            return True
        at = max(at, end + 1)
        if last is not None and at > last:
            return True
    return False


def working_set(messages: Sequence[BaseMessage]) -> list[WorkingFile]:
    """Return the reads of files the messages' tool calls made, newest touched first, each file's latest per range.

    A read is a call whose trail verb is ``read`` (``touches.touches``) and
    that has a result; a read of some lines (``offset``/``limit``, ``sed -n
    'a,bp'``) is one entry per range, and later reads that show those lines
    again, one or together (``shown_again``), replace it. A change (``edited``, ``wrote``) after a read is
    recorded with every read of the file (they are then stale); ``deleted``
    and ``moved`` take the path out. A file changed but never read has no
    result that shows it and is not in the set.
    """
    files: dict[tuple[str, Lines], WorkingFile] = {}
    since: dict[tuple[str, Lines], list[Lines]] = {}  # the lines read of the file since each read
    for r in tool_rounds(messages):
        answered = {answered_call_id(messages[j]): j for j in r.result_indices}
        for call in tool_calls_of(messages[r.call_index]):
            result = answered.get(call.get("id") or "")
            for touch in touches(call.get("name") or "tool", call.get("args")):
                path = normalise_path(touch.target)
                same = [key for key in files if key[0] == path]
                if touch.verb == "read" and result is not None:
                    for key in same:
                        since[key].append(touch.lines)
                        if shown_again(key[1], since[key]):
                            del files[key]
                    files.pop((path, touch.lines), None)  # re-inserted: the dict stays in order of the latest touch
                    files[(path, touch.lines)] = WorkingFile(path, result, r, (), r.call_index, touch.lines)
                    since[(path, touch.lines)] = []
                elif touch.verb in _STALE_VERBS:
                    for key in same:
                        known = files.pop(key)
                        # after the read, even in its own round: the read may show the file as it was before
                        edits = known.edits if r in known.edits else (*known.edits, r)
                        files[key] = replace(known, edits=edits, touched=r.call_index)
                elif touch.verb in _GONE_VERBS:
                    for key in same:
                        del files[key]
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


def _latest_reads_first(files: list[WorkingFile]) -> list[WorkingFile]:
    """Return each file's latest read first (newest touched first), then its other pages, in the same order.

    The latest read is the one an edit needs in front of it; the pages read
    before it come in with the room left.
    """
    latest: dict[str, WorkingFile] = {}
    for f in files:
        if f.path not in latest or f.read > latest[f.path].read:
            latest[f.path] = f
    return [f for f in files if latest[f.path] is f] + [f for f in files if latest[f.path] is not f]


#: What a result costs once layer 2 cleared it to its placeholder (``layers.MICRO_PLACEHOLDER``, about 30 tokens and
#: the tool's name): a result the working set holds only to answer its call, in a parallel round of a read it keeps.
CLEARED_TOKENS = 60
#: Results of at most this many characters are never counted as cleared: the placeholder would save nothing.
CLEARABLE_CHARS = 400


@dataclass(frozen=True)
class WorkingSetChoice:
    """The messages the working set keeps: ``kept`` (calls and results), of which ``cleared`` are results held
    only to answer their call (the other calls of a parallel round), counted as cleared (``clear``)."""

    kept: frozenset[int] = frozenset()
    cleared: frozenset[int] = frozenset()


def choose_working_set(
    messages: Sequence[BaseMessage],
    counts: Sequence[int],
    budget_tokens: int,
    evict: Sequence[int] | None = None,
    *,
    clear: bool = False,
) -> WorkingSetChoice:
    """Return the working set's reads that stay out of the summary, and the results kept only to answer a call.

    Newest touched files come first, each by its latest read, up to the first
    that does not fit ``budget_tokens``: an older file never takes the place
    of a newer one. Then the other pages of the files kept (read in pages),
    with the room left; a file whose latest read is left out keeps none, an
    edit needing the file whole.

    ``evict`` are the indices the cut would summarize; a read that lies
    outside it is kept at no cost (the tail holds it). A read that cannot
    stay alone (``_round_keepable``) leaves its file out, and an older file
    may come in after it. With ``evict``
    None every message counts as evicted and no order is checked: the
    messages the working set would keep, which layers 1-2 must not shorten.

    A read made in a round of parallel calls stays with its call and every
    result of the round (the pairing providers require). With ``clear`` the
    other results, unless they are reads the working set keeps too, count
    ``CLEARED_TOKENS`` each and are listed in ``cleared``: results layers 1-2
    may shorten, the read beside them being what the working set is for.
    """
    checking = evict is not None
    evicted = set(range(len(messages))) if evict is None else set(evict)
    thinking = checking and any(starts_with_thinking(m) for m in messages)
    humans = {i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and i not in evicted}

    def cleared_cost(i: int) -> int:
        long = clear and len(content_text(messages[i].content)) > CLEARABLE_CHARS
        return min(counts[i], CLEARED_TOKENS) if long else counts[i]

    chosen: set[int] = set()
    cleared: set[int] = set()
    weighed: set[str] = set()  # the files whose latest read came up (the pages come after them all)
    kept: set[str] = set()  # the files whose latest read stays
    full = False  # a latest read did not fit: no older file's comes in
    used = 0
    for f in _latest_reads_first(working_set(messages)):
        page = f.path in weighed
        weighed.add(f.path)
        if page and f.path not in kept:
            continue
        r = f.read_round
        cost, adds, upgrade = 0, [], False
        for i in f.indices():
            if i not in evicted:
                continue
            if i == f.read and i in cleared:  # kept so far only to answer its call: now whole
                cost += counts[i] - cleared_cost(i)
                upgrade = True
            elif i not in chosen:
                cost += counts[i] if i in (f.read, r.call_index) else cleared_cost(i)
                adds.append(i)
        room = 0 if full and not page else budget_tokens - used
        if cost > room:
            full = full or not page
            continue
        if checking and adds and not _round_keepable(messages, r, humans, thinking):
            continue
        chosen.update(adds)
        cleared.update(i for i in adds if i not in (f.read, r.call_index) and cleared_cost(i) < counts[i])
        if upgrade:
            cleared.discard(f.read)
        used += cost
        kept.add(f.path)
    return WorkingSetChoice(frozenset(chosen), frozenset(cleared))


def keep_working_set(
    messages: Sequence[BaseMessage],
    counts: Sequence[int],
    budget_tokens: int,
    evict: Sequence[int] | None = None,
) -> frozenset[int]:
    """Return the indices of the working set's reads that stay out of the summary (``choose_working_set``).

    With ``evict``: every message the cut keeps for the working set, whole
    rounds. With ``evict`` None: the messages layers 1-2 must not shorten,
    the reads and their calls; a result a parallel round holds only to
    answer its call is not among them (and counts as cleared), so a large
    test log next to a read does not keep that read out of their protection.
    """
    choice = choose_working_set(messages, counts, budget_tokens, evict, clear=evict is None)
    return choice.kept - choice.cleared


def working_set_note(messages: Sequence[BaseMessage], evict_ids: set[Any]) -> str:
    """Return the summary's lines on the working set: files kept after it, files it took and how to get them back.

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
        shown = ", ".join(_in_view(path, pages) for path, pages in _by_path(kept).items())
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
            f"- {' '.join(filter(None, (f.path, f.shown)))} (read in {messages[f.read].id}"
            f"{'; changed since' if f.stale else ''})"
            for f in gone[:NAMED_LEFT_OUT]
        ]
        if more > 0:
            lines.append(f"- ... and {more} more, named in ARTIFACTS")
    return "\n".join(lines)


def _by_path(files: Sequence[WorkingFile]) -> dict[str, list[WorkingFile]]:
    """Return the reads grouped by file, the file touched last first."""
    grouped: dict[str, list[WorkingFile]] = {}
    for f in files:
        grouped.setdefault(f.path, []).append(f)
    return grouped


def _in_view(path: str, reads: Sequence[WorkingFile]) -> str:
    """Return how the summary names a kept file: ``src/x.py (lines 1-120, 121-240; stale: ...)`` or the path alone."""
    pages = sorted((f for f in reads if f.lines is not None), key=lambda f: f.lines or (0, 0))
    words = (
        ["lines " + ", ".join(f.shown.removeprefix("lines ") for f in pages)]
        if pages and len(pages) == len(reads)
        else []
    )
    if any(f.stale for f in reads):
        words.append("stale: changed since this read")
    return f"{path} ({'; '.join(words)})" if words else path
