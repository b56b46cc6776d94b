"""Layers 1 and 2: cheap edits of old tool traffic, no LLM.

Each function takes the conversation and its per-message token counts and
returns ``{index: replacement}``: new message objects with the *same id*, so
written to state they replace the originals in place. Nothing is edited inside
the protected recent window, and edits are made in batches (only when enough
can be saved at once) so the prompt prefix changes rarely.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

from .config import CompactionConfig, MicroCompactConfig, PruneConfig, TruncateArgsConfig
from .conversation import content_text, tool_calls_of, tool_names_by_result, tool_rounds
from .touches import CHANGE_VERBS, normalise_path, touches
from .working_set import keep_working_set

PRUNED_MARK = re.compile(r"\n\n\.\.\.\(\d+ chars pruned\)\.\.\.\n\n")
MICRO_PLACEHOLDER = (
    "[Old tool result of `{tool}` cleared to save context ({chars} chars); the full output is in the transcript.]"
)
SUPERSEDED_MARK = (
    "[Superseded: `{tool}` was called again with the same arguments; the newer result is message {newer} "
    '(tool_call_id {call_id}). This older output ({chars} chars) is in the transcript: recall(["{own}"]).]'
)
#: How every marker of layer 2 opens: a result that starts so is layer 2's copy, never shortened again.
SHORTENED_OPENINGS = (MICRO_PLACEHOLDER.split("`", 1)[0], SUPERSEDED_MARK.split("`", 1)[0])


def _shorten(value: Any, cfg: TruncateArgsConfig) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) > cfg.max_arg_length:
            return value[: cfg.keep_chars] + cfg.truncation_text, True
        return value, False
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            out[k], c = _shorten(v, cfg)
            changed |= c
        return out, changed
    if isinstance(value, list):
        items = [_shorten(v, cfg) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def _truncated_ai(message: AIMessage, cfg: TruncateArgsConfig) -> AIMessage | None:
    # A string's repr is at least as long as the string: short calls need no walk (the gate sees every old call).
    if not isinstance(message.content, list) and len(repr(message.tool_calls)) <= cfg.max_arg_length:
        return None
    changed = False
    calls = []
    for call in message.tool_calls:
        args, c = _shorten(call.get("args"), cfg)
        changed |= c
        calls.append({**call, "args": args})
    content = message.content
    if isinstance(content, list):
        blocks = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                new_input, c = _shorten(block.get("input"), cfg)
                changed |= c
                block = {**block, "input": new_input}
            blocks.append(block)
        content = blocks
    if not changed:
        return None
    extra = dict(message.additional_kwargs)
    if isinstance(extra.get("tool_calls"), list):
        by_id = {c.get("id"): c.get("args") for c in calls}
        extra["tool_calls"] = [
            {
                **raw,
                "function": {
                    **raw.get("function", {}),
                    "arguments": json.dumps(by_id[raw.get("id")], ensure_ascii=False),
                },
            }
            if raw.get("id") in by_id
            else raw
            for raw in extra["tool_calls"]
        ]
    return message.model_copy(update={"tool_calls": calls, "content": content, "additional_kwargs": extra})


def truncate_arguments(
    messages: Sequence[BaseMessage], total_tokens: int, cfg: TruncateArgsConfig, *, start: int = 0
) -> dict[int, BaseMessage]:
    """Return assistant messages before the last ``keep_messages`` with long string arguments shortened.

    Runs only once the conversation has ``trigger_messages`` messages or
    ``trigger_tokens`` tokens; a long argument becomes its first
    ``keep_chars`` characters plus ``truncation_text``. Messages before
    ``start`` are known to need nothing (see ``settled_from``).
    """
    if not cfg.enabled or not (len(messages) >= cfg.trigger_messages or total_tokens >= cfg.trigger_tokens):
        return {}
    edits: dict[int, BaseMessage] = {}
    for i in range(start, max(0, len(messages) - cfg.keep_messages)):
        m = messages[i]
        if tool_calls_of(m):
            new = _truncated_ai(m, cfg)  # type: ignore[arg-type]
            if new is not None:
                edits[i] = new
    return edits


def prune_preview(text: str, max_chars: int) -> str:
    """Return the first and last ``max_chars // 2`` characters around a '(N chars pruned)' marker."""
    half = max_chars // 2
    head = text[:half]
    tail = text[max(len(text) - half, half) :] if len(text) > half else ""
    removed = len(text) - len(head) - len(tail)
    return f"{head}\n\n...({removed} chars pruned)...\n\n{tail}"


def _protected_from(counts: Sequence[int], protect_tokens: int) -> int:
    """Return the first index of the recent window holding at most ``protect_tokens``."""
    total = 0
    for i in range(len(counts) - 1, -1, -1):
        total += counts[i]
        if total > protect_tokens:
            return i + 1
    return 0


def prune_tool_results(
    messages: Sequence[BaseMessage], counts: Sequence[int], cfg: PruneConfig, *, start: int = 0
) -> dict[int, BaseMessage]:
    """Return old, large tool results shortened to head + marker + tail.

    Results inside the last ``protect_tokens`` and results of
    ``excluded_tools`` (retrieval tools: their output *is* the memory) are
    never touched; nothing happens unless the candidates hold at least
    ``minimum_tokens`` together.
    """
    if not cfg.enabled:
        return {}
    limit = _protected_from(counts, cfg.protect_tokens)
    large: list[tuple[int, str]] = []
    for i in range(start, limit):
        m = messages[i]
        if isinstance(m, ToolMessage):
            text = content_text(m.content)
            if len(text) > cfg.max_output_chars and not PRUNED_MARK.search(text):
                large.append((i, text))
    if sum(counts[i] for i, _ in large) < cfg.minimum_tokens:
        return {}
    # pairing results with their calls costs a pass over the history: only when pruning may happen
    names = tool_names_by_result(messages[:limit])
    candidates = [(i, text) for i, text in large if names.get(i, messages[i].name) not in cfg.excluded_tools]
    if not candidates or sum(counts[i] for i, _ in candidates) < cfg.minimum_tokens:
        return {}
    return {
        i: messages[i].model_copy(update={"content": prune_preview(text, cfg.max_output_chars)})
        for i, text in candidates
    }


def _call_key(call: ToolCall) -> tuple[str, str] | None:
    """Return what makes two tool calls the same call: the tool's name and its arguments, canonically."""
    try:
        return call.get("name") or "", json.dumps(call.get("args"), sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # keys json cannot order (mixed types): such a call is never deduplicated
        return None


def superseded_results(messages: Sequence[BaseMessage]) -> dict[int, BaseMessage]:
    """Return the tool results made obsolete by a later call of the same tool with the same arguments, as markers.

    A file read again, ``git status`` run again: the older output becomes
    ``SUPERSEDED_MARK`` naming the newer result's message id (the transcript
    keeps the original). The newest result of a run of same calls is kept
    whole; so is a result whose files a call in between changed (edited,
    wrote, deleted, moved), and a result the newer call failed to replace
    (``status="error"``). Results no longer than their marker stay. Cheap
    when no call repeats: one pass over the history, no parsing.
    """
    call_of: dict[str, tuple[int, ToolCall]] = {}
    # per same call: (the result's index, its call's index, the call, the result)
    results: dict[tuple[str, str], list[tuple[int, int, ToolCall, ToolMessage]]] = {}
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call_id := call.get("id"):
                    call_of[call_id] = (i, call)
        elif isinstance(m, ToolMessage) and m.tool_call_id in call_of:
            at, call = call_of[m.tool_call_id]
            if (key := _call_key(call)) is not None:
                results.setdefault(key, []).append((i, at, call, m))
    edits: dict[int, BaseMessage] = {}
    changes: dict[int, set[str]] = {}  # per assistant message: the paths its calls change

    def changed_between(first: int, last: int) -> set[str]:
        out: set[str] = set()
        for j in range(first, last + 1):
            if j not in changes:
                changes[j] = {
                    normalise_path(t.target)
                    for c in tool_calls_of(messages[j])
                    for t in touches(c.get("name") or "", c.get("args"))
                    if t.verb in CHANGE_VERBS
                }
            out |= changes[j]
        return out

    for (name, _), found in results.items():
        if len(found) < 2:
            continue
        targets = {normalise_path(t.target) for t in touches(name, found[0][2].get("args"))}
        newest = found[-1]
        for older in reversed(found[:-1]):
            if newest[3].status == "error" or (targets and targets & changed_between(older[1], newest[1])):
                newest = older  # a newer run starts here: the results before it are superseded by this one
                continue
            m, newer = older[3], newest[3]
            text = content_text(m.content)
            if text.startswith(SHORTENED_OPENINGS):
                continue
            marker = SUPERSEDED_MARK.format(
                tool=name, newer=newer.id, call_id=newer.tool_call_id, chars=len(text), own=m.id
            )
            if len(text) > len(marker):
                edits[older[0]] = m.model_copy(update={"content": marker})
    return edits


def micro_compact(
    messages: Sequence[BaseMessage],
    counts: Sequence[int],
    cfg: MicroCompactConfig,
    excluded_tools: frozenset[str],
    *,
    start: int = 0,
) -> dict[int, BaseMessage]:
    """Return all but the ``keep_recent`` latest tool results replaced by a placeholder naming the tool.

    A parallel batch is never split: the kept results extend to whole rounds.
    Results of at most ``min_chars`` characters stay; nothing happens until
    the clearable results hold ``minimum_tokens`` together.
    """
    if not cfg.enabled:
        return {}
    rounds = tool_rounds(messages)
    names = tool_names_by_result(messages, rounds)
    result_positions = sorted(names)
    kept = set(result_positions[len(result_positions) - cfg.keep_recent :]) if cfg.keep_recent else set()
    for r in rounds:
        if kept.intersection(r.result_indices):
            kept.update(r.result_indices)
    candidates: list[tuple[int, str]] = []
    for i in result_positions:
        if i < start or i in kept or names[i] in excluded_tools:
            continue
        text = content_text(messages[i].content)
        if len(text) > cfg.min_chars and not text.startswith(SHORTENED_OPENINGS):
            candidates.append((i, text))
    if not candidates or sum(counts[i] for i, _ in candidates) < cfg.minimum_tokens:
        return {}
    return {
        i: messages[i].model_copy(update={"content": MICRO_PLACEHOLDER.format(tool=names[i], chars=len(text))})
        for i, text in candidates
    }


def settled_from(
    messages: Sequence[BaseMessage],
    start: int,
    truncate: TruncateArgsConfig,
    prune: PruneConfig,
    micro: MicroCompactConfig,
) -> int:
    """Return the first index at or after ``start`` of a message layers 1-2 may still edit later.

    Everything before it is final for these layers (short arguments, small,
    excluded or already shortened results), so the gate's next call can start
    its scan there instead of at the beginning of a long history.
    """
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, AIMessage):
            if (
                truncate.enabled
                and (m.tool_calls or isinstance(m.content, list))
                and _truncated_ai(m, truncate) is not None
            ):
                return i
        elif isinstance(m, ToolMessage) and (prune.enabled or micro.enabled):
            content = m.content
            size = len(content) if isinstance(content, str) else len(content_text(content))
            if m.name in prune.excluded_tools and m.name is not None:
                continue
            if prune.enabled and size > prune.max_output_chars and not PRUNED_MARK.search(content_text(content)):
                return i
            if micro.enabled and size > micro.min_chars and not content_text(content).startswith(SHORTENED_OPENINGS):
                return i
    return len(messages)


class LayerEdits:
    """The layer 1-2 edits of one plan and the messages and counts they make.

    Nothing is copied until a layer edits; ``undo`` goes back to the
    originals. Edits before ``frozen`` and of the rounds the working set
    keeps (within ``working_set_tokens``) are never made.
    """

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        counts: Sequence[int],
        recount: Callable[[BaseMessage], int],
        frozen: int,
        working_set_tokens: int,
    ) -> None:
        self.messages, self.counts = messages, counts
        self.edits: dict[int, BaseMessage] = {}
        self.layer_counts: dict[str, int] = {}
        self._layer_of: dict[int, str] = {}
        self._copy: tuple[list[BaseMessage], list[int]] | None = None  # made on the first edit
        self._recount = recount
        self._frozen = frozen
        self._working_set_tokens = working_set_tokens
        self._protected: frozenset[int] | None = None

    @property
    def working(self) -> Sequence[BaseMessage]:
        """Return the messages with the edits made."""
        return self._copy[0] if self._copy is not None else self.messages

    @property
    def sizes(self) -> Sequence[int]:
        """Return the token counts of ``working``."""
        return self._copy[1] if self._copy is not None else self.counts

    def _allowed(self, changed: dict[int, BaseMessage]) -> dict[int, BaseMessage]:
        if self._frozen and changed:
            changed = {i: m for i, m in changed.items() if i >= self._frozen}
        if changed and self._working_set_tokens > 0:
            # layers 1-2 never shorten what the working set keeps (worked out once, only when a layer edits)
            if self._protected is None:
                self._protected = keep_working_set(self.messages, self.counts, self._working_set_tokens)
            changed = {i: m for i, m in changed.items() if i not in self._protected}
        return changed

    def apply(self, name: str, changed: dict[int, BaseMessage]) -> None:
        """Make a layer's edits (those allowed), counted under ``name``."""
        changed = self._allowed(changed)
        if not changed:
            return
        self.layer_counts[name] = self.layer_counts.get(name, 0) + len(changed)
        if self._copy is None:
            self._copy = (list(self.messages), list(self.counts))
        working, sizes = self._copy
        for i, m in changed.items():
            working[i] = m
            sizes[i] = self._recount(m)
            self.edits[i] = m
            self._layer_of[i] = name

    def run(self, cfg: CompactionConfig, first: int, dedupe: bool = True) -> None:
        """Run layers 1-2 in their order from ``first``, each on the previous one's edits."""
        self.apply("truncate", truncate_arguments(self.working, sum(self.sizes), cfg.truncate_args, start=first))
        if dedupe and cfg.dedupe_results:  # the whole history: a new call can supersede a result layers 1-2 had settled
            self.apply("dedupe", superseded_results(self.working))
        self.apply("prune", prune_tool_results(self.working, self.sizes, cfg.prune, start=first))
        self.apply("micro", micro_compact(self.working, self.sizes, cfg.micro, cfg.prune.excluded_tools, start=first))

    def undo(self) -> None:
        """Drop every edit."""
        self._copy, self.edits, self.layer_counts = None, {}, {}

    def keep(self, kept: dict[int, BaseMessage]) -> None:
        """Keep only the edits in ``kept``: the others' messages go back to their originals."""
        if len(kept) == len(self.edits) or self._copy is None:
            return
        working, sizes = self._copy
        for i in set(self.edits) - set(kept):
            working[i], sizes[i] = self.messages[i], self.counts[i]
        self.edits = kept
        self.layer_counts = {}
        for i in kept:
            self.layer_counts[self._layer_of[i]] = self.layer_counts.get(self._layer_of[i], 0) + 1
