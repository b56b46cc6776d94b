"""Long-term memory, the pure part: the flush prompt, the daily ledger's format, consolidation's checks.

The ledger ``memory/YYYY-MM-DD.md`` is append-only: each flush adds a
``## Flush <ISO time>`` section of markdown bullets, followed by a hidden
``<!-- flush:<key> messages:<k1>,<k2>,... -->`` line naming, by content, the
messages it came from (``content_key``): a flush run again, after a crash,
on another worker or by a client's retry whose tool results got new ids,
finds those messages there and asks the model only about the others.
``MEMORY.md`` is the curated memory; flush only reads it, consolidation
rewrites it (keeping backups under ``memory/backups/``); old daily files move
to ``memory/archive/``. Consolidation's prompt, watermark and loss guard are
here too; ``consolidation.py`` runs them against storage and a model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from langchain_core.messages import BaseMessage

from ..core.conversation import is_injected, is_summary
from ..core.ledger_format import bullet_item, entry_text, normalize_bullet, parse_bullets
from ..core.prompts import (
    MEMORY_PROMPT,
    NO_REPLY,
    before_loop,
    is_error_text,
    is_no_reply,
    memory_request,
    refusal,
    text_lines,
    without_lead_in,
)
from ..core.summary import render_messages
from ..core.tokens import estimate_text_tokens

MEMORY_FILE = "MEMORY.md"
ARCHIVE_DIR = "memory/archive"
BACKUP_DIR = "memory/backups"
_DAILY = re.compile(r"memory/(?:archive/)?(\d{4}-\d{2}-\d{2})\.md")
_FLUSH_HEADER = re.compile(r"^##\s+Flush\s+(\S+)")
_MARKER = re.compile(r"^<!--\s*flush:([0-9a-f]+)(?:\s+messages:([0-9a-f,]*))?\s*-->$")
#: Hex digits of a message's content key in the marker: one in 2**48 chance that two messages share one.
_KEY_DIGITS = 12


def ledger_relpath(day: str) -> str:
    """Return the daily ledger's path for a ``YYYY-MM-DD`` day."""
    return f"memory/{day}.md"


def ledger_day(relpath: str) -> str | None:
    """Return the ``YYYY-MM-DD`` of a daily ledger path (current or archived), else None."""
    match = _DAILY.fullmatch(relpath)
    return match.group(1) if match else None


def is_memory_text(relpath: str) -> bool:
    """Return True for the files memory search covers: ``MEMORY.md`` and the daily ledgers."""
    return relpath == MEMORY_FILE or ledger_day(relpath) is not None


def content_key(message: BaseMessage, thread_id: str) -> str:
    """Return a key of what a message of a thread says (its type, content, tool calls and tool name), not of its id.

    A run retried after a crash makes the same messages again under new ids
    (a tool's result gets a fresh one); their memories are in the ledger
    already, and this key finds them there. The thread is part of the key: two
    threads that say the same thing each keep their own memories.
    """
    calls = [(c.get("name"), c.get("args")) for c in getattr(message, "tool_calls", None) or []]
    said = [thread_id, message.type, message.content, calls, getattr(message, "name", None)]
    text = json.dumps(said, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_KEY_DIGITS]


def flush_marker(messages: Iterable[BaseMessage], thread_id: str) -> str:
    """Return the hidden line that marks a ledger entry as extracted from these messages (by their content)."""
    keys = sorted({content_key(m, thread_id) for m in messages})
    digest = hashlib.sha256(",".join(keys).encode("ascii")).hexdigest()[:16]
    return f"<!-- flush:{digest} messages:{','.join(keys)} -->"


def has_flush_marker(ledger: str, marker: str) -> bool:
    """Return True when the ledger already holds the entry of this marker (a re-run after a crash)."""
    return any(line.strip() == marker for line in ledger.splitlines())


def flushed_keys(*ledgers: str) -> set[str]:
    """Return the content keys of every message the entries of these ledgers were extracted from."""
    keys: set[str] = set()
    for text in ledgers:
        for line in text.splitlines():
            match = _MARKER.match(line.strip())
            if match and match.group(2):
                keys.update(k for k in match.group(2).split(",") if k)
    return keys


@dataclass(frozen=True)
class MemoryLine:
    """One searchable line of a memory file, with where it is and when it was written."""

    path: str
    line: int
    text: str
    date: str | None


def memory_lines(relpath: str, text: str) -> list[MemoryLine]:
    """Return the content lines of a memory file (no headings, blanks or markers), each with its date.

    A ledger line is dated by its ``## Flush <time>`` section (else the
    file's day); ``MEMORY.md`` lines are undated.
    """
    date = ledger_day(relpath)
    out: list[MemoryLine] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = _FLUSH_HEADER.match(line)
        if header:
            date = header.group(1)
            continue
        if not line or line.startswith("#") or _MARKER.match(line):
            continue
        out.append(MemoryLine(relpath, number, bullet_item(line) or line, date))
    return out


def local_now(timezone: str) -> datetime:
    """Return the current time in the ledger's time zone."""
    return datetime.now(ZoneInfo(timezone))


def flush_input(messages: Sequence[BaseMessage], flushed_ids: Sequence[str]) -> list[BaseMessage]:
    """Return the messages left for memory extraction: no summaries or re-injected messages, nothing flushed before."""
    done = set(flushed_ids)
    return [m for m in messages if not is_summary(m) and not is_injected(m) and m.id not in done]


def _ledger_values(memory_md: str, ledger: str, day: str) -> dict[str, Any]:
    return {
        "ledger_path": ledger_relpath(day),
        "today": day,
        "memory_md": memory_md.strip() or "(empty)",
        "ledger": ledger.strip() or "(empty)",
    }


def flush_prompt(
    messages: Sequence[BaseMessage],
    memory_md: str,
    ledger: str,
    day: str,
    max_result_chars: int | None = None,
    *,
    prompt: str | None = None,
    instructions: Sequence[str | None] = (),
) -> str:
    """Return the memory-extraction prompt with MEMORY.md and today's ledger shown read-only.

    ``prompt`` replaces the built-in text; ``instructions`` (the application's) are added to it.
    """
    rendered = render_messages(messages, max_result_chars)
    return memory_request(rendered, prompt=prompt, instructions=instructions, **_ledger_values(memory_md, ledger, day))


#: Han, kana and hangul: written without spaces, so they are indexed as characters and bigrams.
_CJK = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_CJK_SPLIT = re.compile(f"({_CJK}+)")
_CJK_RUN = re.compile(f"{_CJK}+")


def flush_instruction(
    memory_md: str, ledger: str, day: str, *, prompt: str | None = None, instructions: Sequence[str | None] = ()
) -> str:
    """Return the memory-extraction instruction sent after the agent's messages (MEMORY.md and the ledger read-only)."""
    return memory_request(None, prompt=prompt, instructions=instructions, **_ledger_values(memory_md, ledger, day))


def search_terms(text: str) -> list[str]:
    """Return the terms a text is indexed and searched by: folded words, CJK characters and bigrams.

    >>> search_terms("Deploy to staging-2 on 周五发布")
    ['deploy', 'to', 'staging', '2', 'on', '周', '五', '发', '布', '周五', '五发', '发布']
    """
    terms: list[str] = []
    for run in re.findall(r"[^\W_]+", text.casefold()):
        for part in _CJK_SPLIT.split(run):
            if _CJK_RUN.fullmatch(part):
                terms += list(part) + [part[i : i + 2] for i in range(len(part) - 1)]
            elif part:
                terms.append(part)
    return terms


@dataclass(frozen=True)
class MemoryAnswer:
    """What a memory model's answer says: its facts (none: ``NO_REPLY``), or why it cannot be used."""

    facts: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def text(self) -> str:
        """Return the answer as the ledger takes it: one ``- `` bullet per fact, or ``NO_REPLY``."""
        return "\n".join(f"- {fact}" for fact in self.facts) if self.facts else NO_REPLY


#: A line that says there is nothing to remember: ``NO_REPLY`` however wrapped, or in words.
_NOTHING = re.compile(r"^\W*(?:no[ _-]?reply\b|nothing (?:new |else )?(?:worth|to) (?:remember|record|note))", re.I)


def _fact(line: str) -> str | None:
    """Return the fact a line of an answer states (a bullet's text, a plain line), None for the words around it."""
    line = line.strip()
    if not line or line.startswith(("#", "```", "<")) or not re.search(r"\w", line) or line.endswith(":"):
        return None  # a heading, a fence, a rule, a lead-in ("Here are the memories:")
    item = bullet_item(line) or line
    return None if _NOTHING.match(item) or not without_lead_in(item).strip() or refusal(item) else item


def memory_answer(answer: object, *, requests: Sequence[str] = (), prompt: str | None = None) -> MemoryAnswer:
    """Return the facts a memory model's answer states, read as a model writes them, or why it is unusable.

    A fact is a line that reads as one: a bullet (``-``, ``*``, ``1.``) or a
    plain line; headings, lead-ins ("Here are the memories:") and ``NO_REPLY``
    lines are not. An answer with no fact is ``NO_REPLY`` when it says so
    (any case or wrapping: ``**no_reply**``, ```NO_REPLY`.``), and unusable
    otherwise. A line that writes back one of the user's ``requests`` or a
    line of ``prompt`` (the memory prompt's template, the built-in one by
    default) is no memory: it is left out, and an answer of nothing else is
    unusable. An answer that loops is read up to its loop (``before_loop``),
    and a fact it states twice is one fact.

    >>> memory_answer("Here are the memories:\\n1. The user prefers tabs.\\n**Deploys run on Fridays**").facts
    ('The user prefers tabs.', '**Deploys run on Fridays**')
    >>> memory_answer("`NO_REPLY`.").text
    'NO_REPLY'
    """
    if not isinstance(answer, str):
        return MemoryAnswer(problem=f"the memory model returned {type(answer).__name__}, not text")
    text = answer.strip()
    if not text:
        return MemoryAnswer(problem="the memory model returned empty text")
    if is_error_text(text):
        return MemoryAnswer(problem=f"the memory model returned an error text: {text[:80]!r}")
    echoes = {line: "the user's request" for request in requests for line in text_lines(request)}
    echoes.update(dict.fromkeys(text_lines(MEMORY_PROMPT if prompt is None else prompt), "the prompt"))
    facts: list[str] = []
    echoed: list[str] = []
    for line in before_loop(text).splitlines():
        if (fact := _fact(line)) is None or fact in facts:
            continue
        keys = text_lines(fact)
        (echoed if keys and keys[0] in echoes else facts).append(fact)
    if facts:
        return MemoryAnswer(tuple(facts))
    if echoed:
        source = echoes[text_lines(echoed[0])[0]]
        return MemoryAnswer(problem=f"the memory model's answer writes back {source}: {echoed[0][:80]!r}")
    if any(_NOTHING.match(line) for line in text.splitlines()):
        return MemoryAnswer()
    if declined := refusal(text):
        return MemoryAnswer(problem=f"the memory model declined: {declined!r}")
    return MemoryAnswer(problem=f"the memory model's answer states no fact and is not NO_REPLY: {text[:80]!r}")


def ledger_entry(
    answer: str,
    existing: str,
    now: datetime,
    redact: Callable[[str], str] | None = None,
    marker: str | None = None,
) -> str | None:
    """Return the text to append to today's ledger, or None when there is nothing new.

    ``NO_REPLY`` and answers without bullets write nothing; each bullet is
    passed through ``redact`` first; bullets already in today's ledger (same
    normalized text) are not written again. ``marker`` (``flush_marker``)
    follows the header.
    """
    if not isinstance(answer, str) or is_no_reply(answer):
        return None
    seen = {normalize_bullet(b) for b in parse_bullets(existing)}
    fresh: list[str] = []
    for bullet in parse_bullets(answer):
        if redact is not None:
            bullet = redact(bullet)
        key = normalize_bullet(bullet)
        if key and key not in seen:
            seen.add(key)
            fresh.append(bullet)
    if not fresh:
        return None
    header = f"## Flush {now.isoformat(timespec='seconds')}\n" + (f"{marker}\n" if marker else "")
    return entry_text(existing, header, fresh)


# --- consolidation, the pure part ------------------------------------------------

#: Share of an existing entry's terms a new or superseded entry must contain to count as covering it.
COVER_RATIO = 0.6

CONSOLIDATION_PROMPT = """You are a memory consolidation assistant. MEMORY.md is the curated long-term memory of an AI agent: facts, decisions, preferences and context worth keeping across conversations. Merge the new daily ledger entries below into it.

Rules:
- Write the complete new MEMORY.md between <memory> and </memory>: markdown, optional "## " section headings, one self-contained fact per "- " bullet, with dates and names.
- Keep every existing fact that is still true. Remove exact and near duplicates; merge related facts into one bullet.
- Drop a fact only when a newer entry supersedes or contradicts it, or it is clearly stale (a finished one-off task, a past deadline). List every existing bullet you drop between <superseded> and </superseded>, one per line as "- <the old bullet> => <why>".
- Stay within {max_tokens} tokens (about {max_words} words).
- Never record secrets (API keys, tokens, passwords, private keys).
- If nothing needs to change, write the current MEMORY.md unchanged.

Today's date: {today}

<memory_md>
{memory_md}
</memory_md>

<new_entries>
{entries}
</new_entries>"""  # noqa: E501 - a prompt keeps one line per paragraph, as the model reads it

SHORTEN_INSTRUCTION = """

Your previous answer was about {tokens} tokens, over the limit of {max_tokens}. Write it again, shorter: merge related facts and drop the least useful ones (listing them under <superseded>)."""  # noqa: E501

_MEMORY_BLOCK = re.compile(r"<memory>\s*(.*?)\s*</memory>", re.DOTALL)
_SUPERSEDED_BLOCK = re.compile(r"<superseded>\s*(.*?)\s*</superseded>", re.DOTALL)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n```$", re.DOTALL)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pending_entries(ledgers: dict[str, str], watermark: dict[str, Any]) -> dict[str, str]:
    """Return, per daily ledger, the text appended since the watermark (whole files the watermark does not know).

    The watermark holds, per file, how many characters were consolidated and
    their hash; a file whose start no longer matches (edited by hand) is
    taken whole again.
    """
    out: dict[str, str] = {}
    for path, text in sorted(ledgers.items()):
        stored = watermark.get(path)
        mark = stored if isinstance(stored, dict) else {}
        chars = mark.get("chars")
        done = chars if isinstance(chars, int) else 0
        if not (0 < done <= len(text) and _sha(text[:done]) == mark.get("sha256")):
            done = 0
        rest = text[done:]
        if parse_bullets(rest):
            out[path] = rest
    return out


def advanced_watermark(ledgers: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Return the watermark that marks these ledger texts as consolidated."""
    return {path: {"chars": len(text), "sha256": _sha(text)} for path, text in ledgers.items()}


def is_consolidated(path: str, text: str, watermark: dict[str, Any]) -> bool:
    """Return True when a ledger has nothing the watermark does not cover."""
    return path not in pending_entries({path: text}, watermark)


def consolidation_prompt(memory_md: str, entries: dict[str, str], max_tokens: int, today: str) -> str:
    """Return the consolidation prompt: the current MEMORY.md and the new entries per daily file."""
    blocks = "\n\n".join(f"### {path}\n{text.strip()}" for path, text in entries.items())
    return CONSOLIDATION_PROMPT.format(
        max_tokens=max_tokens,
        max_words=int(max_tokens * 0.7),
        today=today,
        memory_md=memory_md.strip() or "(empty)",
        entries=blocks,
    )


def parse_answer(answer: object) -> tuple[str | None, list[str]]:
    """Return (the new MEMORY.md text or None when the answer has none, the bullets named superseded)."""
    if not isinstance(answer, str) or not answer.strip():
        return None, []
    block = _MEMORY_BLOCK.search(answer)
    superseded_block = _SUPERSEDED_BLOCK.search(answer)
    superseded = (
        [b.split("=>", 1)[0].strip() for b in parse_bullets(superseded_block.group(1))] if superseded_block else []
    )
    if block:
        text = block.group(1)
    elif "<memory" in answer or superseded_block:
        return None, superseded  # a cut-off or malformed answer: never take it as the memory
    else:
        text = answer.strip()
    fenced = _FENCE.match(text.strip())
    text = (fenced.group(1) if fenced else text).strip()
    if not parse_bullets(text):
        return None, superseded
    return text + "\n", superseded


def _covers(entry_terms: set[str], candidates: Sequence[set[str]]) -> bool:
    return bool(entry_terms) and any(len(entry_terms & c) >= COVER_RATIO * len(entry_terms) for c in candidates)


def dropped_entries(old_md: str, new_md: str, superseded: Sequence[str]) -> list[str]:
    """Return the entries of the old MEMORY.md that the new one lost without naming them superseded.

    An old entry counts as kept when the new text has it (same normalized
    text) or a bullet containing most of its terms (a merge), and as
    superseded when the superseded list has it the same way.
    """
    new = parse_bullets(new_md)
    new_keys = {normalize_bullet(b) for b in new}
    covering = [set(search_terms(b)) for b in [*new, *superseded]]
    return [
        b
        for b in parse_bullets(old_md)
        if normalize_bullet(b) not in new_keys and not _covers(set(search_terms(b)), covering)
    ]


def loss_problem(old_md: str, new_md: str, superseded: Sequence[str]) -> str | None:
    """Return why a new MEMORY.md must be refused (it silently drops over half the entries), or None."""
    old_count = len(parse_bullets(old_md))
    dropped = dropped_entries(old_md, new_md, superseded)
    if old_count and 2 * len(dropped) > old_count:
        sample = "; ".join(d[:80] for d in dropped[:3])
        return f"the answer drops {len(dropped)} of {old_count} entries without superseding them (e.g. {sample})"
    return None


def trim_to_tokens(text: str, max_tokens: int, count: Callable[[str], int] = estimate_text_tokens) -> str:
    """Return the text cut at a line end to fit ``max_tokens``, with a closing line saying what was left out."""
    if count(text) <= max_tokens:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    used = 0
    for line in lines:
        size = count(line + "\n")
        if used + size > max(0, max_tokens - 40):
            break
        kept.append(line)
        used += size
    left = len(lines) - len(kept)
    return "\n".join(kept) + (
        f"\n(MEMORY.md continues: {left} more lines; use memory_search, or memory_get on MEMORY.md"
        f" from line {len(kept) + 1})"
    )
