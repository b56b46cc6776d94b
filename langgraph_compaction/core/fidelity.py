"""What every summary keeps word for word: the user's requests, pinned constraints, the artifact trail.

An LLM's summary is a paraphrase, and paraphrases lose exactly what an agent
needs to go on: which files it changed, what the user forbade, what it was
asked last. ``complete_summary`` rewrites the SESSION INTENT and ARTIFACTS
sections of any summary (the LLM's or the extractive one) so that they hold:

- the constraints in force, verbatim: pinned by the application
  (``pin_constraint`` / ``unpin_constraint``) or detected when the user states
  a rule ("never ...", "always ...", "do not ...", "must ...", "不要 ...",
  "必须 ..."), until they are unpinned;
- the LLM's statement of the goal;
- the user's most recent requests, verbatim, within a token budget (oldest
  dropped first, with a count);
- the trail of paths, commands and URLs taken from the tool calls themselves,
  merged with what the LLM wrote and with the previous summary's trail, so the
  trail survives chained compactions (newest first, bounded, with a count);

and strips the secrets the redactor finds. Pins live JSON-native in the
``compaction`` state (``compaction["pins"]``), merged by id. Pure functions
over messages; nothing here imports langgraph.

>>> update = pin_constraint("Never push to main.")
>>> update["compaction"]["pins"][0]["text"]
'Never push to main.'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage

from .config import FidelityConfig
from .conversation import is_summary, is_user_turn, text_of
from .pins import PinBudget, auto_pins_within, bounded_pins, pin_budget
from .redact import redact_secrets
from .sections import PINS_OPENER, SECTIONS, quote_lines, section, summary_preamble, without_quotes
from .tokens import estimate_text_tokens
from .trail import TrailEntry, TrailLine, entry_key, merge_entries, parse_line, tool_trail
from .trail_bound import bound_trail

PINS_HEADER = f"{PINS_OPENER} (the user's own words; in force until unpinned):"
GOAL_LABEL = "Goal:"
REQUESTS_HEADER = "The user's most recent requests, verbatim, oldest first"
TRAIL_HEADER = "Trail from the tool calls, newest first"
#: How the agent finds what the bounded trail does not list one by one.
TRAIL_FIND = (
    "changed files all listed, read files grouped by folder; "
    "session_search('<path or folder>') finds the calls that used one, recall(message_ids) returns them in full"
)


def counted_note(kept: Sequence[TrailLine]) -> str | None:
    """Return the trail's note when folders are counted (how many files, the query that finds them again), else None."""
    entries = [e for e in kept if isinstance(e, TrailEntry)]
    counts = [e for e in entries if e.is_counted]
    if not counts:
        return None
    changed, other = sum(e.changed_files for e in counts), sum(e.other_files for e in counts)
    listed = sum(1 for e in entries if e.is_change and not e.is_counted)
    parts = [f"{listed + changed} changed files, {changed} of them counted by folder, not listed"] if changed else []
    parts += [f"{other} other files counted by folder"] if other else []
    largest = max(counts, key=lambda e: e.changed_files + e.other_files).key[:-1]
    return "; ".join(parts) + (
        "; session_search('<folder>/') finds the calls that touched a counted folder "
        f"(e.g. session_search('{largest}/')), recall(message_ids) returns them in full"
    )


#: How each deterministic block opens; a summarizer that copies one from the previous summary is not repeated.
_BLOCK_OPENERS = (PINS_HEADER.split(" (")[0], REQUESTS_HEADER, TRAIL_HEADER)
_REQUEST_BLOCK = re.compile(r"<request>\n(.*?)\n</request>", re.DOTALL)
_EARLIER = re.compile(re.escape(REQUESTS_HEADER) + r" \((\d+) earlier")
_OLDER = re.compile(re.escape(TRAIL_HEADER) + r" \((\d+) older")
_GOAL = re.compile(r"^\W*goal\W*:\s*", re.IGNORECASE)
_PIN_ID = re.compile(r"pin-[0-9a-f]{12}")

# A rule is a sentence that opens with a rule word, or puts one right after "you"/"we".
_RULE_OPENING = re.compile(
    r"^[\s\-*•>#\d.)]*(?:(?:please|and|but|also|so|remember(?:\s+to)?|important|note)[\s,:!-]+)*"
    r"(?:never|always|do\s+not|don'?t|must|mustn'?t|avoid|make\s+sure|under\s+no\s+circumstances)\b",
    re.IGNORECASE,
)
_RULE_ADDRESSED = re.compile(
    r"\b(?:you|we)\s+(?:must|mustn'?t|shall\s+not|should\s+(?:never|always|not)|may\s+not|can'?t|cannot|"
    r"are\s+not\s+allowed\s+to|never|always|do\s+not|don'?t)\b",
    re.IGNORECASE,
)
_RULE_CHINESE = re.compile(
    r"不要|不准|不许|不得|禁止|严禁|必须|务必|一定要|永远不|永远别|总是|绝不|千万不要|千万别|切勿"
)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?;])\s+|\n+|(?<=[。！？；])")
_CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
#: A longer "sentence" is pasted material (a log, a document), not a rule someone stated.
_MAX_RULE_CHARS = 300


class Completed(NamedTuple):
    """A summary with its deterministic parts, and the pin updates to store in ``compaction["pins"]``."""

    text: str
    pins: list[dict[str, Any]]


# --- pins ---------------------------------------------------------------------


def pin_id(text: str) -> str:
    """Return the id of a pinned text: ``pin-`` and 12 hex digits of its hash (whitespace-insensitive)."""
    return "pin-" + hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:12]


def pin_constraint(text: str, *, message_id: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    """Return the state update that pins ``text``: it stays verbatim in every later summary until unpinned.

    Return it from a node, or pass it to ``graph.update_state(config, ...)``;
    pinning the same text twice is one pin. A summary shows at most one
    pin's budget of it (``FidelityConfig.pin_tokens``, see ``core.pins``).

    Args:
        text: The constraint, as the summaries must keep it (a non-empty string).
        message_id: The id of the message the text came from, recorded with the pin.
        max_tokens: When given, a text of more tokens is refused here instead.

    Raises:
        ValueError: When ``text`` is not a non-empty string, or is over ``max_tokens``.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("pin_constraint(text=...): text must be a non-empty string, e.g. 'Never push to main.'")
    if max_tokens is not None and (tokens := estimate_text_tokens(text.strip())) > max_tokens:
        raise ValueError(
            f"pin_constraint(text=...): the text is ~{tokens:,} tokens, over max_tokens={max_tokens:,}; pin the "
            "rule itself in a sentence or two and keep long material in a file"
        )
    pin = {"id": pin_id(text), "text": text.strip(), "source": "api", "active": True, "message_id": message_id}
    return {"compaction": {"pins": [pin]}}


def unpin_constraint(pin: str) -> dict[str, Any]:
    """Return the state update that unpins a constraint, given its id (``pin-...``) or its text.

    Unpinning a text that was never pinned also keeps it from being pinned
    automatically later.

    Args:
        pin: The pin's id (``pin-...``) or the pinned text.

    Raises:
        ValueError: When ``pin`` is not a non-empty string.
    """
    if not isinstance(pin, str) or not pin.strip():
        raise ValueError("unpin_constraint(pin=...): pass the pin's id ('pin-...') or the pinned text")
    return {"compaction": {"pins": [{"id": pin if _PIN_ID.fullmatch(pin) else pin_id(pin), "active": False}]}}


def clean_pins(raw: Any) -> list[dict[str, Any]]:
    """Return the well-formed pin records of a ``pins`` value (dicts with a string ``id``); the rest is dropped."""
    if not isinstance(raw, list):
        return []
    pins = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]:
            if item.get("text") is None or isinstance(item.get("text"), str):
                pins.append(dict(item))
    return pins


def merge_pins(current: Any, update: Any) -> list[dict[str, Any]]:
    """Return the pins after an update: records are matched by id and the update's fields win (in order)."""
    pins = {p["id"]: p for p in clean_pins(current)}
    for p in clean_pins(update):
        pins[p["id"]] = {**pins.get(p["id"], {}), **p}
    return list(pins.values())


def active_pins(pins: Any) -> list[dict[str, Any]]:
    """Return the pins in force (pinned and not unpinned), oldest first."""
    return [p for p in clean_pins(pins) if p.get("active", True) and (p.get("text") or "").strip()]


def stated_rules(messages: Sequence[BaseMessage]) -> list[tuple[str, str | None]]:
    """Return (sentence, message id) for every rule a user stated in the messages, verbatim, oldest first.

    A rule opens with never / always / do not / don't / must / avoid / make
    sure, puts one of them right after "you" or "we", or uses 不要, 不准,
    不许, 不得, 禁止, 严禁, 必须, 务必, 一定要, 永远不, 总是, 绝不, 切勿.
    Questions, headings of one or two words, code blocks and sentences over
    300 characters (pasted material) are not rules.
    """
    found = []
    for m in messages:
        if not is_user_turn(m):
            continue
        for sentence in _SENTENCE_BREAK.split(_CODE_FENCE.sub("\n", text_of(m))):
            if _is_rule(sentence.strip()):
                found.append((sentence.strip(), m.id))
    return found


def _is_rule(sentence: str) -> bool:
    if not 4 <= len(sentence) <= _MAX_RULE_CHARS or sentence.endswith(("?", "？")):
        return False
    if _RULE_CHINESE.search(sentence):
        return True
    english = _RULE_OPENING.search(sentence) or _RULE_ADDRESSED.search(sentence)
    return bool(english) and len(re.findall(r"\w+", sentence)) >= 3


def auto_pins(
    messages: Sequence[BaseMessage],
    stored: Any,
    max_auto_pins: int,
    budget: PinBudget | None = None,
    count_tokens: Callable[[str], int] = estimate_text_tokens,
) -> list[dict[str, Any]]:
    """Return the pin updates for the rules stated in the messages: new automatic pins, and the oldest retired.

    A rule whose id is already known (pinned, or unpinned by the user) is left
    as it is, and one over ``budget.pin`` is not pinned. Beyond
    ``max_auto_pins`` automatic pins in force, or past ``budget.pins`` with
    the other pins, the oldest are unpinned; pins set through
    ``pin_constraint`` or the pin tool are never retired.
    """
    known = {p["id"] for p in clean_pins(stored)}
    fresh = []
    for text, message_id in stated_rules(messages):
        if pin_id(text) not in known and (budget is None or count_tokens(text) <= budget.pin):
            known.add(pin_id(text))
            fresh.append({"id": pin_id(text), "text": text, "source": "auto", "active": True, "message_id": message_id})
    in_force = [p for p in active_pins(stored) if p.get("source") == "auto"] + fresh
    retire = max(0, len(in_force) - max_auto_pins)
    if budget is not None:  # automatic pins make room for the others
        others = [p for p in active_pins(stored) if p.get("source") != "auto"]
        retire += auto_pins_within(in_force[retire:], others, budget, count_tokens)
    return fresh + [{"id": p["id"], "active": False} for p in in_force[:retire]]


# --- the sections ---------------------------------------------------------------


def _previous_summary(messages: Sequence[BaseMessage]) -> str:
    return next((text_of(m) for m in reversed(messages) if is_summary(m)), "")


def _count(pattern: re.Pattern[str], text: str) -> int:
    match = pattern.search(text)
    return int(match.group(1)) if match else 0


def _own_text(body: str, known: set[str]) -> str:
    """Return what a summarizer wrote in a section, without the deterministic blocks it copied from the last summary."""
    kept: list[str] = []
    in_block = False
    for line in _REQUEST_BLOCK.sub("", body).splitlines():
        stripped = line.strip()
        if stripped.startswith(_BLOCK_OPENERS):
            in_block = True
            continue
        if in_block and (stripped.startswith("- ") or line.startswith("  ")):
            continue
        in_block = False
        copied = stripped.lstrip("-*• ").strip()
        if copied not in known and entry_key(copied) not in known:
            kept.append(line)
    text = _GOAL.sub("", "\n".join(kept).strip())
    return "" if text.rstrip(".").lower() == "none" else text


def _head(text: str, budget_tokens: int, tokens: int) -> str:
    """Return the start of a long request, about ``budget_tokens`` of it, saying how much was cut."""
    keep = max(1, int(len(text) * budget_tokens / max(tokens, 1) * 0.9))
    return f"{text[:keep]}\n(... {len(text) - keep} more characters of this request; see the transcript)"


def recent_requests(
    messages: Sequence[BaseMessage], budget_tokens: int, count_tokens: Callable[[str], int] = estimate_text_tokens
) -> tuple[list[str], int]:
    """Return the user's most recent requests (verbatim, oldest first) within the budget, and how many were left out.

    Requests carried in the previous summary come before the messages' own;
    the oldest are dropped first. A request over half the budget that does not
    fit (a pasted document, more than a request) is cut to its start, so it
    cannot crowd out the requests before it.
    """
    intent = section(_previous_summary(messages), "SESSION INTENT")
    # the quoted requests' block, found where no pin or request quotes its header
    at = without_quotes(intent).find(REQUESTS_HEADER)
    carried_intent = intent[at:] if at >= 0 else ""
    requests = _REQUEST_BLOCK.findall(carried_intent)
    requests += [t for t in (text_of(m).strip() for m in messages if is_user_turn(m)) if t]
    kept: list[str] = []
    room = budget_tokens
    for text in reversed(requests):
        tokens = count_tokens(text)
        if tokens <= room:
            kept.append(text)
            room -= tokens
        elif tokens > budget_tokens // 2 and room > 0:
            share = min(budget_tokens // 2, room)
            kept.append(_head(text, share, tokens))
            room -= share
        else:
            break
    return kept[::-1], _count(_EARLIER, carried_intent) + len(requests) - len(kept)


def _escape_request(text: str) -> str:
    """Return a request as its ``<request>`` block holds it: a closing tag it contains cannot end the block."""
    return text.replace("</request>", "<\\/request>")


def _pins_block(pins: Sequence[dict[str, Any]], budget: PinBudget, count_tokens: Callable[[str], int]) -> str:
    shown, left_out = bounded_pins(pins, budget, count_tokens)
    header = PINS_HEADER
    if left_out:
        header = f"{PINS_HEADER[:-2]}; {left_out} more not shown, past FidelityConfig.pins_tokens ~{budget.pins:,}):"
    return header + "".join(f"\n- {quote_lines(text)}" for text in shown)


def intent_section(
    own: str,
    messages: Sequence[BaseMessage],
    pins: Sequence[dict[str, Any]],
    budget_tokens: int,
    count_tokens: Callable[[str], int] = estimate_text_tokens,
    pins_budget: PinBudget | None = None,
) -> str:
    """Return the SESSION INTENT body: the pins in force, the summarizer's goal, the user's recent requests verbatim.

    The pins are bounded by ``pins_budget`` (``core.pins.pin_budget`` of no window when None).
    """
    goal = _own_text(own, {p["text"] for p in pins})
    requests, omitted = recent_requests(messages, budget_tokens, count_tokens)
    parts = []
    if pins:
        parts.append(_pins_block(pins, pins_budget or pin_budget(), count_tokens))
    if goal:
        parts.append(f"{GOAL_LABEL} {goal}")
    if requests or omitted:
        left_out = f" ({omitted} earlier not shown; see the transcript)" if omitted else ""
        blocks = "\n".join(f"<request>\n{_escape_request(r)}\n</request>" for r in requests)
        parts.append(f"{REQUESTS_HEADER}{left_out}:" + (f"\n{blocks}" if blocks else ""))
    return "\n\n".join(parts) or "None"


def _trail(body: str) -> tuple[list[TrailEntry], int]:
    """Return the trail entries and the left-out count written in an ARTIFACTS body; a folder's line gives its paths."""
    entries: list[TrailEntry] = []
    inside = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith(TRAIL_HEADER):
            inside = True
        elif inside and stripped.startswith("- "):
            entries += parse_line(stripped[2:])
        else:
            inside = False
    return entries, _count(_OLDER, body)


def artifacts_section(
    own: str,
    messages: Sequence[BaseMessage],
    limit: int,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] = estimate_text_tokens,
) -> str:
    """Return the ARTIFACTS body: what the summarizer wrote, then the tool-call trail (with the previous summary's).

    The trail has at most ``limit`` lines and about ``max_tokens`` tokens (``bound_trail``).
    """
    carried, carried_omitted = _trail(section(_previous_summary(messages), "ARTIFACTS"))
    trail = merge_entries(tool_trail(messages) + carried)
    kept, dropped = bound_trail(trail, limit, max_tokens, count_tokens)
    own = _own_text(own, {e.render() for e in trail} | {line.render() for line in kept} | {e.key for e in trail})
    omitted = carried_omitted + dropped
    parts = [own] if own else []
    if kept or omitted:
        notes = [f"{omitted} older commands not shown"] if omitted else []
        counted = counted_note(kept)
        if counted:
            notes.append(counted)
        elif omitted or len(kept) < len(trail):
            notes.append(TRAIL_FIND)
        parts.append(
            f"{TRAIL_HEADER}{' (' + '; '.join(notes) + ')' if notes else ''}:"
            + "".join(f"\n- {line.render()}" for line in kept)
        )
    return "\n\n".join(parts) or "None"


def complete_summary(
    text: str,
    messages: Sequence[BaseMessage],
    *,
    pins: Any = (),
    settings: FidelityConfig | None = None,
    redactor: Callable[[str], str] | None = redact_secrets,
    count_tokens: Callable[[str], int] = estimate_text_tokens,
    window: int | None = None,
) -> Completed:
    """Return the summary of ``messages`` with its deterministic parts, and the pin updates to store.

    ``text`` is the summarizer's four sections (or the extractive ones);
    ``pins`` the stored ``compaction["pins"]``, bounded by the budget
    ``window`` (the context window) gives them (``core.pins``). SESSION
    INTENT and ARTIFACTS are rebuilt around what the summarizer wrote,
    SUMMARY and NEXT STEPS are kept, and the whole text goes through
    ``redactor``. Applying it twice gives the same text.
    """
    settings = settings or FidelityConfig()
    budget = pin_budget(settings, window)
    updates = auto_pins(messages, pins, settings.max_auto_pins, budget, count_tokens) if settings.auto_pin else []
    in_force = active_pins(merge_pins(list(pins), updates))
    bodies = {
        "SESSION INTENT": intent_section(
            section(text, "SESSION INTENT"), messages, in_force, settings.request_tokens, count_tokens, budget
        ),
        "SUMMARY": section(text, "SUMMARY") or "None",
        "ARTIFACTS": artifacts_section(
            section(text, "ARTIFACTS"), messages, settings.max_artifacts, settings.trail_tokens, count_tokens
        ),
        "NEXT STEPS": section(text, "NEXT STEPS") or "None",
    }
    preamble = summary_preamble(text)
    completed = "\n\n".join(([preamble] if preamble else []) + [f"## {name}\n{bodies[name]}" for name in SECTIONS])
    return Completed(redactor(completed) if redactor else completed, updates)
