"""Random conversations, settings and faults for the stress runs (``testing.stress``, ``testing.retries``).

``random_conversation`` draws the shapes real agents produce and logs contain
(parallel, interleaved and mixed tool rounds, reused tool-call ids, orphan
results, unanswered calls, content blocks, huge, empty and non-ASCII messages,
invalid tool calls, artifacts JSON cannot hold); ``random_config`` a budget;
``HOSTILE_IDS`` thread and user ids built to escape a folder or collide;
``MODEL_FAULTS`` the ways a model answers badly; ``FlakyStorage`` a storage
that fails before or after its writes; ``huge_round`` and ``codemod`` the
requests that test the bounds.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ..core.config import CompactionConfig

#: A memory-backed folder for the runs' storage where there is one (fsync costs nothing there), else the default.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


def memory_store() -> Any:
    """Return a fresh LangGraph ``InMemoryStore`` (imported on first use)."""
    from langgraph.store.memory import InMemoryStore

    return InMemoryStore()


HOSTILE_IDS = [
    "t",
    "../../etc",
    "/abs/path",
    ".",
    "a\x00b",
    "x" * 300,
    "用户🙂",
    "a/b",
    "a.b",
    "langgraph",
    # built to collide: an id, a slug-and-hash spelling of it, its storage name, case, the default
    "user:42",
    "user-42-ea3fd43be1e57d62",
    "~user+3a42",
    "Alice",
    "alice",
    "default",
    "",
]
MODEL_FAULTS: list[Any] = [None, RuntimeError("provider down"), "", "Error: rate limited", "Sure, done.", "NO_REPLY"]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII="


# --- conversations ---------------------------------------------------------------------------


_CORPUS = " ".join(
    [
        "fix the parser",
        "修复登录模块",
        "🙂 done",
        "مرحبا بالعالم",
        "NUL\x00byte",
        "def f(x): return x",
        '{"k": [1, 2]}',
        "ok",
    ]
    * 4000
)


def _text(rng: random.Random, size: int) -> str:
    start = rng.randrange(len(_CORPUS) - size) if size else 0
    return _CORPUS[start : start + size]


def _artifact(rng: random.Random) -> Any:
    """Return a tool artifact that plain JSON cannot hold (or would change), or None."""
    if rng.random() >= 0.1:
        return None
    return {
        "raw": bytes([rng.randrange(256) for _ in range(8)]),
        "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        rng.randint(0, 9): (1, (2, "x")),
        "tags": {"a", "b"},
        "frozen": frozenset({1}),
        "took": dt.timedelta(seconds=3),
    }


#: One file spelled as agents spell it (dedupe, the working set and the trail must see one path).
SPELLINGS = ("src/billing.py", "./src/billing.py", "src//billing.py", "src/app/../billing.py")


def _call(rng: random.Random) -> tuple[str, Any]:
    """Return a tool call's name and arguments: a shell line, a paged read, an edit, or arguments of odd types."""
    draw = rng.random()
    if draw < 0.2:
        return rng.choice(["bash", "read_file", "write_file"]), {
            "n": rng.randint(0, 9),
            "nested": {"a": [1, {"b": None}]},
            "flag": True,
        }
    if draw < 0.3:  # a long file read in pages
        start = rng.choice([1, 121, 241])
        return "Read", {"file_path": rng.choice(SPELLINGS), "offset": start, "limit": 120}
    if draw < 0.35:
        start = rng.choice([1, 121])
        return "bash", {"command": f"sed -n '{start},{start + 119}p' {rng.choice(SPELLINGS)}"}
    if draw < 0.4:
        return "Edit", {"file_path": rng.choice(SPELLINGS), "old_string": "a", "new_string": "b"}
    return rng.choice(["bash", "read_file", "write_file"]), {"cmd": _text(rng, rng.choice([5, 300, 5000]))}


def random_conversation(rng: random.Random, prefix: str = "m", *, clean: bool = False) -> list[BaseMessage]:
    """Return a conversation with the shapes real agents produce and logs contain (unique message ids).

    ``clean`` draws the same shapes but one a provider accepts as it is: no
    reused call id, no call left unanswered, no note between results, no
    orphan result (the draws are made all the same, so a seed gives the same
    conversation otherwise).
    """
    n = [0]

    def mid() -> str:
        n[0] += 1
        return f"{prefix}{n[0]}"

    messages: list[BaseMessage] = []
    if rng.random() < 0.7:
        messages.append(SystemMessage(content="You are a coding agent.", id=mid()))
    call_ids = [0]
    reminders = rng.random() < 0.2  # an app that adds a system reminder before user turns
    for turn in range(rng.randint(1, 8)):
        if reminders and turn and rng.random() < 0.7:
            messages.append(
                SystemMessage(content=f"Reminder: the time is 10:{turn:02d}; stay in the repository.", id=mid())
            )
        content: Any = f"request {turn}: " + _text(rng, rng.choice([0, 20, 400, 4000]))
        if rng.random() < 0.05:  # a pasted report: lines that look like the summary's own sections
            content += "\nSUMMARY of the incident: the job failed.\nNEXT STEPS:\n- retry {messages}"
        if rng.random() < 0.1:
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG * 50}"}},
            ]
        messages.append(HumanMessage(content=content, id=mid()))
        for _ in range(rng.choice([0, 0, 1, 2, 3, 4])):
            width = rng.choice([1, 1, 2, 3, 8, 100 if rng.random() < 0.05 else 4])
            calls = []
            for _ in range(width):
                call_ids[0] += 1
                reused = rng.random() < 0.1 and not clean
                cid = "call_1" if reused else f"c{call_ids[0]}"  # reused ids happen in real logs
                name, args = _call(rng)
                calls.append({"name": name, "args": args, "id": cid})
            ai_content: Any = _text(rng, rng.choice([0, 50]))
            if rng.random() < 0.1:
                ai_content = [
                    {"type": "thinking", "thinking": "plan", "signature": "s"},
                    {"type": "text", "text": "calling"},
                ]
            invalid = (
                [{"name": "bash", "args": '{"cmd": "ls', "id": "bad", "error": "bad json", "type": "invalid_tool_call"}]
                if rng.random() < 0.05
                else []
            )
            messages.append(AIMessage(content=ai_content, tool_calls=calls, invalid_tool_calls=invalid, id=mid()))
            results: list[BaseMessage] = [
                ToolMessage(
                    content=_text(rng, rng.choice([0, 100, 3000, 30000 if rng.random() < 0.1 else 500])),
                    tool_call_id=c["id"],
                    id=mid(),
                    artifact=_artifact(rng),
                )
                for c in calls
            ]
            if rng.random() < 0.1 and results and not clean:
                results.pop(rng.randrange(len(results)))  # a call never answered
            if len(results) > 1 and rng.random() < 0.15 and not clean:
                results.insert(rng.randrange(1, len(results)), HumanMessage(content="(queued note)", id=mid()))
            messages.extend(results)
        if rng.random() < 0.05 and not clean:
            messages.append(ToolMessage(content="stray result", tool_call_id=f"ghost{turn}", id=mid()))  # an orphan
        if rng.random() < 0.7:
            messages.append(AIMessage(content="answer " + _text(rng, rng.choice([0, 30, 800])), id=mid()))
    if not isinstance(messages[-1], AIMessage):
        messages.append(AIMessage(content="final answer", id=mid()))
    return messages


def random_config(rng: random.Random) -> CompactionConfig:
    """Return a budget from tiny (compaction on most calls) to roomy, fixed or derived from a small window."""
    if rng.random() < 0.2:  # the thresholds derived from the window (trigger and keep unset), on small windows
        window = rng.choice([CompactionConfig().smallest_window(), 16_000, 24_000, 40_000])
        return CompactionConfig(
            context_window=window, trigger_messages=rng.choice([0, 8, 20, 50]), summary={"timeout": None}
        )
    trigger = rng.choice([1_500, 3_000, 6_000, 12_000, 40_000])  # 1,500: compaction on nearly every call
    keep = rng.choice([None, trigger // 8, trigger // 3])  # None: the tail is kept by message count
    return CompactionConfig(
        context_window=rng.choice([None, trigger * 2, trigger + 20_000]),
        trigger_tokens=trigger,
        keep_tokens=keep,
        keep_by="messages" if keep is None else "tokens",
        keep_messages=rng.randint(1, 12),
        trigger_messages=rng.choice([0, 8, 20, 50]),
        summary={"timeout": None},
    )


# --- faults ------------------------------------------------------------------------------------


class FlakyStorage:
    """A storage whose calls fail at random: before doing anything, or after the write (the caller sees an error)."""

    def __init__(self, inner: Any, rng: random.Random, rate: float) -> None:
        self.inner, self.rng, self.rate = inner, rng, rate

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not callable(method) or name.endswith("location"):
            return method

        def call(*args: Any) -> Any:
            if self.rng.random() < self.rate:
                raise OSError(28, "No space left on device (injected)")
            result = method(*args)
            if self.rng.random() < self.rate:
                raise ConnectionError("connection reset after the write (injected)")
            return result

        return call


def huge_round(rng: random.Random, window: int) -> list[BaseMessage]:
    """Return one request answered by one parallel round of 2-12 results that together are over the window."""
    width = rng.randint(2, 12)
    chars = int(window * rng.uniform(1.05, 1.6) * 3.2 / width)  # about 3.2 characters a token in these logs
    name = rng.choice(["bash", "write_file", "read_file", "read_log"])
    calls = [{"name": name, "args": {"cmd": f"cat log{i}"}, "id": f"wide{i}"} for i in range(width)]
    line = "2026-01-01 12:00:00 worker step ok value=1234567\n"
    results = [
        ToolMessage(content=(line * (chars // len(line) + 1))[:chars], tool_call_id=c["id"], name=name, id=f"wr{i}")
        for i, c in enumerate(calls)
    ]
    return [
        HumanMessage(content="Read the logs and say what failed.", id="wh"),
        AIMessage(content="", tool_calls=calls, id="wa"),
        *results,
        AIMessage(content="Every worker passed.", id="wz"),
    ]


def codemod(rng: random.Random) -> list[BaseMessage]:
    """Return requests that change 1,000-3,000 files over 1-60 folders, ``edit_file`` or ``git rm``, 50-400 a time."""
    total, folders, batch = rng.randint(1_000, 3_000), rng.randint(1, 60), rng.randint(50, 400)
    paths = [f"pkg{i % folders}/sub{i % 3}/file_{i}.py" for i in range(total)]
    messages: list[BaseMessage] = []
    for start in range(0, total, batch):
        chunk = paths[start : start + batch]
        messages.append(HumanMessage(content=f"Apply the codemod to batch {start // batch}.", id=f"ch{start}"))
        if rng.random() < 0.7:
            calls = [
                {"name": "edit_file", "args": {"path": p, "old": "log", "new": "logger"}, "id": f"e{start}-{k}"}
                for k, p in enumerate(chunk)
            ]
        else:
            calls = [{"name": "bash", "args": {"command": "git rm -q " + " ".join(chunk)}, "id": f"rm{start}"}]
        messages.append(AIMessage(content="", tool_calls=calls, id=f"ca{start}"))
        messages += [ToolMessage(content="ok", tool_call_id=c["id"], id=f"cr{c['id']}") for c in calls]
        messages.append(AIMessage(content=f"Batch {start // batch} done.", id=f"cz{start}"))
    return messages


def turns_of(conversation: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Return the conversation cut into runs, each from a user request (leading system messages go with the first)."""
    turns: list[list[BaseMessage]] = []
    for message in conversation:
        if isinstance(message, HumanMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def retried(turn: Sequence[BaseMessage], attempt: int) -> list[BaseMessage]:
    """Return a run sent again: the same request and work, every message and tool call under a new id.

    A client's retry sends the request without the id the state gave it, and the tools run again: their calls and
    results get new ids. Leading system messages are the thread's, not the run's: they are not sent again.
    """
    out = []
    for m in turn:
        if isinstance(m, SystemMessage):
            continue
        update: dict[str, Any] = {"id": f"{m.id}~retry{attempt}"}
        if isinstance(m, AIMessage) and m.tool_calls:
            update["tool_calls"] = [{**c, "id": f"{c['id']}~retry{attempt}"} for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            update["tool_call_id"] = f"{m.tool_call_id}~retry{attempt}"
        out.append(m.model_copy(update=update))
    return out
