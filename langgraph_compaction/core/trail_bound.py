"""Bounding the artifact trail: at most so many lines and tokens, no file lost.

Every changed path keeps its own line while the token bound allows. When the
trail is over its bound, read paths share their folder's line
(``src/checkpoints/ (12 files: fsStore.ts, store.ts, ...)``), then changed
paths too, named first (``src/ (5 files, the first 2 changed: a.ts, b.ts,
...)``): every file is still named. When that is not
enough for its token bound, the files of the largest folders are counted
instead (``src/pkg/ (412 changed files, 30 other files)``), changed files
too: a codemod over thousands of files leaves a trail of a few lines, each
named by the folder ``session_search`` finds them with. The files the agent
works on (``worked_on``: touched most and most recently) keep their own lines
throughout, in up to ``WORK_SHARE`` of the token bound; the long tail is
grouped and counted. Linear in the
entries (each one's tokens counted once). Pure functions; nothing here
imports langgraph.

>>> from .trail import TrailEntry
>>> entries = [TrailEntry("src/a.py", ("edited",)), TrailEntry("src/b.py", ("read",)), TrailEntry("src/c.py")]
>>> [line.render() for line in bound_trail(entries, 2)[0]]
['src/a.py (edited)', 'src/ (2 files: b.py, c.py)']
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Sequence
from typing import Any

from .trail import FolderLine, TrailEntry, TrailLine

Size = Callable[[Sequence[TrailLine]], int]
#: The share of the token bound the files the agent works on most may take on their own lines.
WORK_SHARE = 0.5


def _split_folder(key: str) -> tuple[str | None, str]:
    """Return (folder, name) of a path or URL, with ``key == folder + "/" + name`` (folder ``.`` and the key as the name
    for a bare name or ``./name``)."""
    cut = key.rstrip("/").rfind("/")
    if cut < 0:
        return ".", key
    folder = key[:cut]
    if folder.endswith(":/") or folder.endswith(":"):  # ``https://host`` is as far up as a URL goes
        return None, key
    if folder == ".":  # ``./name`` keeps its ``./`` (a group line gives back the key it came from)
        return ".", key
    return folder, key[cut + 1 :]


def _parent(folder: str) -> str | None:
    if folder in (".", "") or "/" not in folder and folder.startswith("~"):
        return None
    if "://" in folder and "/" not in folder.split("://", 1)[1]:
        return None
    if "/" not in folder:
        return "."
    return folder.rsplit("/", 1)[0]


def _merge_folders(folders: Sequence[str], room: int) -> tuple[dict[str, str], list[str]]:
    """Return where each folder ends up, and the folders left in order, once the deepest are merged into their parents.

    The deepest folder (the latest of equals) moves into its parent until at
    most ``room`` are left or none can move. A heap keeps it O(n log n) in
    the folders (picking the deepest by a scan was quadratic).
    """
    rank = {f: i for i, f in enumerate(folders)}
    left: dict[str, None] = dict.fromkeys(folders)
    into: dict[str, str] = {}

    def push(f: str) -> None:
        if _parent(f) is not None:
            heapq.heappush(heap, (-(f.count("/") + (f != ".")), -rank[f], f))

    heap: list[Any] = []
    for f in folders:
        push(f)
    while len(left) > room and heap:
        folder = heapq.heappop(heap)[2]
        parent = _parent(folder)
        assert parent is not None  # only folders with a parent are pushed
        del left[folder]
        into[folder] = parent
        if parent not in left:
            left[parent] = None
            rank.setdefault(parent, len(rank))
            push(parent)

    def final(f: str) -> str:
        while f in into:
            f = into[f]
        return f

    return {f: final(f) for f in folders}, list(left)


def group_paths(entries: Sequence[TrailEntry], room: int) -> list[TrailLine]:
    """Return path entries in at most ``room`` lines (when it can): the paths of one folder share a line.

    A shared line (``FolderLine``) has every name under the folder, the
    changed files first, newest first; the deepest folders are merged into
    their parents until the lines fit. A folder with one path keeps its entry
    as it was.
    """
    # a URL at its host's root (``https://host``) has no folder: it is its own bucket, at the top
    homes = [folder if folder is not None else e.key for e in entries for folder in (_split_folder(e.key)[0],)]
    where, left = _merge_folders(list(dict.fromkeys(homes)), room)
    buckets: dict[str, list[int]] = {f: [] for f in left}
    for i, home in enumerate(homes):
        buckets[where[home]].append(i)

    def name(key: str, folder: str) -> str:
        return key[len(folder) + 1 :] if folder != "." and key.startswith(folder + "/") else key

    lines: list[TrailLine] = []
    for folder, members in buckets.items():
        lines += [entries[i] for i in members if entries[i].key == folder]  # a host's root: no name under itself
        inside = sorted((i for i in members if entries[i].key != folder), key=lambda i: not entries[i].is_change)
        if len(inside) == 1:
            lines.append(entries[inside[0]])
        elif inside:
            names = tuple(name(entries[i].key, folder) for i in inside)
            lines.append(FolderLine(folder, names, sum(entries[i].is_change for i in inside)))
    return lines


def worked_on(entries: Sequence[TrailEntry]) -> list[TrailEntry]:
    """Return the paths the agent worked on: touched in two calls or more, the most used first.

    An entry's ``weight`` counts its calls, each halved every
    ``WORK_HALF_LIFE`` calls back: the files touched most and most recently
    come first (the newest first among equals).
    """
    return sorted((e for e in entries if e.uses >= 2 and not e.is_command), key=lambda e: -e.weight)


def _bound_lines(
    entries: Sequence[TrailEntry],
    limit: int,
    own: Collection[TrailEntry] | None = None,
    group_changes: bool = False,
) -> tuple[list[TrailLine], int]:
    """Return the trail in about ``limit`` lines, and how many older commands were left out.

    ``own`` are the read paths that keep their own line when the others share
    their folder's; by default the ones the agent worked on most
    (``worked_on``), at most half the room. With ``group_changes`` the
    changed paths not in ``own`` share their folder's line too.
    """
    if len(entries) <= limit:
        return list(entries), 0
    commands = [e for e in entries if e.is_command]
    recent, older = commands[: max(1, limit // 10)], commands[max(1, limit // 10) :]
    changed = [e for e in entries if not e.is_command and e.is_change]
    reads = [e for e in entries if not e.is_command and not e.is_change]
    shared: set[TrailEntry] = set()
    if group_changes:
        shared = {e for e in changed if e not in set(own or ()) and not e.is_counted}
        changed = [e for e in changed if e not in shared]
    room = limit - len(changed) - len(recent)
    grouped: list[TrailLine] = []
    if len(reads) > room or shared:
        named = set(own) if own is not None else set(worked_on(reads)[: max(room, 0) // 2])
        tail = shared | {e for e in reads if e not in named}
        grouped = group_paths([e for e in entries if e in tail], max(room - len(named), 1)) if tail else []
        reads = [e for e in reads if e in named]
    kept_older = older[: max(0, room - len(reads) - len(grouped))]
    keep = set(changed) | set(recent) | set(kept_older) | set(reads)
    return [e for e in entries if e in keep] + grouped, len(older) - len(kept_older)


def _counted_lines(
    entries: Sequence[TrailEntry], max_tokens: int, size: Size, own: Collection[TrailEntry]
) -> tuple[list[TrailLine], int]:
    """Return the trail in one line of each kind with the files of the costliest folders counted, until it fits.

    The other files (read, searched, run) of the folders whose lines take the
    most tokens are counted first, then the changed files the same way, so a
    changed file keeps its own line longest. When every file is counted and
    the lines are still too many, the deepest folders merge into their
    parents, their counts added up. A count carried from an earlier summary
    joins its folder's line as soon as that folder is counted. The paths of
    ``own`` keep their own lines.
    """
    homes: dict[
        TrailEntry, tuple[str, int, int]
    ] = {}  # entry -> (its folder, changed files, other files it stands for)
    units: dict[TrailEntry, tuple[Any, ...]] = {}  # entry -> the units (folder, changed?) whose counting counts it
    costs: dict[tuple[str, bool], int] = {}  # unit -> the tokens its entries take
    for e in entries:
        if e.is_command or e in own:
            continue
        home = e.key[:-1] if e.is_counted else _split_folder(e.key)[0]
        if home is not None:
            homes[e] = (
                (home, e.changed_files, e.other_files) if e.is_counted else (home, *((1, 0) if e.is_change else (0, 1)))
            )
            units[e] = ((home, False), (home, True)) if e.is_counted else ((home, e.is_change),)
            costs[units[e][-1]] = costs.get(units[e][-1], 0) + size([e])
    order = sorted(costs, key=lambda u: (u[1], -costs[u]))  # stable: the newest first among equals

    def render(k: int, where: dict[str, str] | None = None) -> tuple[list[TrailLine], int]:
        chosen, where = set(order[:k]), where or {}
        gone = [e for e in entries if e in units and any(u in chosen for u in units[e])]
        counts: dict[str, list[int]] = {}  # in the trail's order: the folder touched last first
        for e in gone:
            home, changed, other = homes[e]
            total = counts.setdefault(where.get(home, home), [0, 0])
            total[0] += changed
            total[1] += other
        left = set(gone)
        lines, dropped = _bound_lines([e for e in entries if e not in left], 1, own)
        return lines + [TrailEntry(f"{f}/", (), 0, 0.0, *n) for f, n in counts.items()], dropped

    low, high = 1, len(order)
    while low < high:  # fewer tokens with every unit counted, the costliest first
        mid = (low + high) // 2
        low, high = (low, mid) if size(render(mid)[0]) <= max_tokens else (mid + 1, high)
    best = render(low)
    room = len({u[0] for u in order})
    while size(best[0]) > max_tokens and room > 1:
        room = room * 3 // 4
        where, _ = _merge_folders(list(dict.fromkeys(h[0] for h in homes.values())), room)
        best = render(len(order), where)
    return best


def _own_share(entries: Sequence[TrailEntry], max_tokens: float, size: Size) -> list[TrailEntry]:
    """Return the paths the agent worked on most (``worked_on``) whose own lines take at most ``max_tokens``."""
    own: list[TrailEntry] = []
    used = 0
    for e in worked_on(entries):
        used += size([e])
        if used > max_tokens:
            break
        own.append(e)
    return own


def bound_trail(
    entries: Sequence[TrailEntry],
    limit: int,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> tuple[list[TrailLine], int]:
    """Return the trail in about ``limit`` lines (and ``max_tokens`` tokens), and how many older commands were left out.

    Every changed path keeps its own line while the token bound allows. Then
    the newest commands (a tenth of the bound: what was run last and whether
    it passed); then the other paths and URLs, each on its line while they
    fit, else grouped by folder (``group_paths``) so that none is lost; older
    commands fill what room is left. Newest first within each kind. Over
    ``max_tokens`` (counted by ``count_tokens``) the line bound shrinks by a
    quarter at a time: older commands leave first, then more paths share a
    folder's line. Still over it, changed paths share their folder's line too
    (``_shared_changes``), every file still named. When even that is over it,
    the files of the costliest folders are counted, changed ones too
    (``src/pkg/ (412 changed files, 30 other files)``), until it fits. The
    paths the agent worked on most (``worked_on``) keep their own lines all
    along: half the room when read paths are grouped, up to ``WORK_SHARE``
    of ``max_tokens`` when folders are counted.
    Linear in the entries (each one's tokens counted once).
    """
    best = _bound_lines(entries, limit)
    limit_at_start = limit
    if max_tokens is None or count_tokens is None:
        return best
    tokens: dict[TrailLine, int] = {}

    def size(lines: Sequence[TrailLine]) -> int:
        total = 0
        for line in lines:
            n = tokens.get(line)
            if n is None:
                n = tokens[line] = count_tokens(line.render()) + 2
            total += n
        return total

    smallest = size(best[0])
    while limit > 1 and smallest > max_tokens:
        limit = limit * 3 // 4
        tried = _bound_lines(entries, limit)
        if size(tried[0]) < smallest:  # merging folders into their parents can lengthen the names: keep the shortest
            best, smallest = tried, size(tried[0])
    if smallest > max_tokens:
        share = _own_share(entries, max_tokens * WORK_SHARE, size)
        shared = _shared_changes(entries, limit_at_start, max_tokens, size, share)
        if shared is not None:
            return shared
        counted = _counted_lines(entries, max_tokens, size, share)
        if size(counted[0]) < smallest:
            best = counted
    return best


def _shared_changes(
    entries: Sequence[TrailEntry], limit: int, max_tokens: int, size: Size, share: Sequence[TrailEntry]
) -> tuple[list[TrailLine], int] | None:
    """Return the trail with changed files on their folder's line too, if that fits ``max_tokens``, else None.

    The most lines (``limit``, shrunk by a quarter at a time) that fit, and
    in them the most of ``share`` (the files worked on most) on their own lines.
    """
    if sum(1 for e in entries if not e.is_command and not e.is_counted) > max_tokens:
        return None  # each file named costs a token at least: a codemod's thousands of files are counted at once

    def lines(k: int) -> tuple[list[TrailLine], int]:
        return _bound_lines(entries, limit, share[:k], True)

    while True:
        if size(lines(0)[0]) <= max_tokens:
            low, high = 0, len(share)
            while low < high:  # the most files worked on with their own lines that fit
                mid = (low + high + 1) // 2
                low, high = (mid, high) if size(lines(mid)[0]) <= max_tokens else (low, mid - 1)
            return lines(low)
        if limit <= 1:
            return None
        limit = limit * 3 // 4
