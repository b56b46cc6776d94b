"""The demo's report: what a session did, its totals table, its plot, and the session without compaction.

What the session would have cost without compaction is computed, not run:
every model call would have re-sent the whole conversation so far, which the
transcript (every message once, as first written) plus the live state rebuild
exactly; both sides are counted with the same token estimator. Billed
(`core.billing`), each of those calls would have read the previous call's
whole request from the cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict

from ..core.billing import CACHED_PRICE, cache_read
from ..core.calibration import add_usage, billed_input
from ..core.conversation import is_summary
from ..core.tokens import TokenCounter


@dataclass
class CallRecord:
    """One agent model call: the context it sent and the newest message in it.

    ``compaction_tokens`` is what the compaction model read just before this
    call (summary and memory prompts). What the API reported is added up in
    ``DemoReport.usage``.
    """

    tokens: int
    last_id: str | None
    compaction_tokens: int = 0


@dataclass
class DemoReport:
    """What a demo session did: the calls, the compactions, the files, with and without compaction."""

    mode: str
    thread: str
    window: int
    trigger: int
    calls: list[CallRecord] = field(default_factory=list)
    without: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    edited: dict[str, int] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    compaction_calls: int = 0
    consolidation: str = ""
    paths: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    checkpoints: int = 0
    checkpoint_bytes: int = 0
    transcript_bytes: int = 0
    usage: dict = field(
        default_factory=dict
    )  # the usage the agent's replies reported, added up by calibration.add_usage

    @property
    def with_tokens(self) -> list[int]:
        """Return the context tokens each agent model call sent."""
        return [c.tokens for c in self.calls]

    @property
    def compaction_input_tokens(self) -> int:
        """Return the input tokens of the compaction model's calls (summaries and memory extraction)."""
        return sum(c.compaction_tokens for c in self.calls)

    @property
    def cumulative_with(self) -> int:
        """Return the input tokens of all agent calls plus the compaction model's calls."""
        return sum(self.with_tokens) + self.compaction_input_tokens

    @property
    def cumulative_without(self) -> int:
        """Return the input tokens the same agent calls would have sent without compaction."""
        return sum(self.without)

    @property
    def usage_without(self) -> dict:
        """Return the usage the same agent calls would have reported without compaction.

        Each would have sent the whole conversation so far, whose start is the
        previous call's whole request: the cache serves that prefix.
        """
        usage: dict = {}
        # each call's predecessor: one more item than calls, the last one unused
        for previous, tokens in zip([0, *self.without], self.without, strict=False):
            usage = add_usage(usage, tokens, {"cache_read": cache_read(tokens, previous)})
        return usage

    @property
    def billed_with(self) -> float:
        """Return the billed input: the agent's reported usage (cached prefix at `CACHED_PRICE`).

        The compaction model's input counts in full.
        """
        return billed_input(self.usage, CACHED_PRICE) + self.compaction_input_tokens

    @property
    def billed_without(self) -> float:
        """Return the billed input of the same agent calls without compaction (`usage_without`)."""
        return billed_input(self.usage_without, CACHED_PRICE)


def uncompacted_history(transcript: Sequence[dict], live: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the whole conversation as it was written: the transcript, then live messages not in it, no summaries.

    The transcript holds every message once, as first written (the originals
    reach it before any layer edits them); the live state adds what came after
    the last offload.
    """
    messages = messages_from_dict(list(transcript))
    seen = {m.id for m in messages}
    messages += [m for m in live if m.id not in seen]
    return [m for m in messages if not is_summary(m)]


def uncompacted_contexts(
    history: Sequence[BaseMessage], last_ids: Iterable[str | None], counter: TokenCounter
) -> list[int]:
    """Return, per model call, the tokens of the whole history up to the newest message that call saw."""
    position = {m.id: i for i, m in enumerate(history)}
    prefix = [0]
    for count in counter.counts(list(history)):
        prefix.append(prefix[-1] + count)
    return [prefix[position[i] + 1] if i in position else prefix[-1] for i in last_ids]


class EventLine:
    """Turns the stream's compaction events into one line per compaction (a flush joins its summary's line)."""

    def __init__(self) -> None:
        self._memories = 0

    def __call__(self, turn: int, call: int, event: dict) -> str | None:
        """Return the line to print for an event, or None while a compaction is still in progress."""
        stage = event.get("stage")
        if event.get("phase"):  # a step's start and end marks: its outcome has an event of its own
            return None
        where = f"turn {turn:>3} call {call:>4}  "
        if event.get("error"):
            return where + f"{stage} failed: {event['error']}"
        if stage == "flush":
            self._memories += event.get("memories") or 0
            return None
        if stage == "gate" and event.get("layer") and event.get("tokens_before") is not None:
            return where + (
                f"{event['layer']:<10} {event['tokens_before']:>7,} → {event['tokens_after']:>7,} tokens  "
                f"{event.get('edited', 0)} old messages shortened"
            )
        if stage == "summarize":
            before, after = event.get("tokens_before") or 0, event.get("tokens_after") or 0
            line = where + (
                f"{event.get('layer', 'summary'):<10} {before:>7,} → {after:>7,} tokens  "
                f"{event.get('evicted', 0)} offloaded, {self._memories} memor{'y' if self._memories == 1 else 'ies'}"
            )
            self._memories = 0
            return line
        return None


def compaction_counts(counts: dict[str, int], edited: dict[str, int]) -> str:
    """Return ``"prune: 12 compactions, 38 messages · ..."``: per layer, how often it acted and what it touched."""
    return " · ".join(
        f"{layer}: {times:,} compaction{'' if times == 1 else 's'}"
        + (f", {edited[layer]:,} message{'' if edited[layer] == 1 else 's'}" if layer in edited else "")
        for layer, times in sorted(counts.items())
    )


def totals_table(report: DemoReport) -> Any:
    """Return the rich Table of the session's totals: calls, compactions by layer, peak and cumulative tokens."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Session totals ({report.mode}, thread {escape(report.thread)})", show_lines=False)
    table.add_column("", no_wrap=True)
    table.add_column("with compaction", justify="right")
    table.add_column("without compaction", justify="right")
    calls = len(report.calls)
    table.add_row("agent model calls", f"{calls:,}", f"{calls:,}")
    table.add_row("compaction model calls", f"{report.compaction_calls:,}", "0")
    table.add_row(
        "peak context tokens", f"{max(report.with_tokens, default=0):,}", f"{max(report.without, default=0):,}"
    )
    table.add_row("agent input tokens, cumulative", f"{sum(report.with_tokens):,}", f"{report.cumulative_without:,}")
    table.add_row("compaction model input tokens", f"{report.compaction_input_tokens:,}", "0")
    saved = 1 - report.cumulative_with / report.cumulative_without if report.cumulative_without else 0.0
    table.add_row(
        "[bold]total input tokens", f"[bold]{report.cumulative_with:,}", f"[bold]{report.cumulative_without:,}"
    )
    table.caption = (
        f"Compaction saved {saved:.1%} of the input tokens. 'Without' is computed: each of the same calls re-sending "
        "the whole conversation so far (rebuilt from the transcript plus the live state), counted with the same "
        "estimator; past the window those calls would have failed."
    )
    if report.usage:
        without = report.usage_without
        table.add_row("agent input tokens (API usage)", f"{report.usage['input']:,}", "-")
        table.add_row(
            "agent input tokens read from the cache", f"{report.usage['cache_read']:,}", f"{without['cache_read']:,}"
        )
        billed_with, billed_without = report.billed_with, report.billed_without
        table.add_row(
            f"[bold]billed input (cached prefix at {CACHED_PRICE}×)",
            f"[bold]{billed_with:,.0f}",
            f"[bold]{billed_without:,.0f}",
        )
        outcome = (
            f"the input costs {billed_without / max(1.0, billed_with):.1f}× as much without compaction as with it."
            if billed_without >= billed_with
            else "without compaction the input would have cost less "
            f"({billed_without:,.0f} against {billed_with:,.0f}): "
            "this session is too short for compaction to pay for its own model calls and the cache reads it gives up."
        )
        table.caption += (
            f" Billed at OpenAI's prices (a cached prefix at {CACHED_PRICE}×, the compaction model's input in full; "
            f"without compaction each call reads the previous call's whole request from the cache), {outcome}"
        )
    table.add_row("transcript (every message once)", _size(report.transcript_bytes), "-")
    table.add_row(f"checkpoints ({report.checkpoints:,} in SQLite)", _size(report.checkpoint_bytes), "-")
    return table


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def layer_totals(report: DemoReport) -> str:
    """Return, per layer that acted, how often it acted and the messages it shortened or summarized.

    The line is `compaction_counts`'s.
    """
    totals: dict[str, tuple[int, int]] = {}
    for event in report.events:
        if event.get("error") or event.get("tokens_before") is None or event.get("stage") not in ("gate", "summarize"):
            continue
        for layer in str(event.get("layer")).split("+"):
            times, messages = totals.get(layer, (0, 0))
            totals[layer] = (times + 1, messages + (event.get("evicted") or 0))
    # the gate reports one edit count for all its layers; the state counts the messages each layer touched
    edited = {
        layer: messages if layer in ("summarize", "extractive") else report.edited.get(layer, 0)
        for layer, (_, messages) in totals.items()
    }
    return compaction_counts({layer: times for layer, (times, _) in totals.items()}, edited)


def save_plot(report: DemoReport, path: str) -> str:
    """Draw context tokens per call and cumulative input tokens, with and without compaction, to a PNG.

    Returns the path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from itertools import accumulate

    import matplotlib.pyplot as plt

    calls = range(1, len(report.calls) + 1)
    with_cum = list(accumulate(c.tokens + c.compaction_tokens for c in report.calls))
    without_cum = list(accumulate(report.without))
    compaction_at = {e["call"] for e in report.events if e.get("stage") == "summarize" and not e.get("error")}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), dpi=110)
    left.plot(calls, report.without, color="#c0392b", linestyle="--", label="without compaction")
    left.plot(calls, report.with_tokens, color="#2471a3", label="with compaction")
    left.axhline(
        report.window, color="#555555", linewidth=0.8, linestyle=":", label=f"context window {report.window:,}"
    )
    left.axhline(report.trigger, color="#999999", linewidth=0.8, linestyle="-.", label=f"trigger {report.trigger:,}")
    for call in compaction_at:
        left.axvline(call, color="#2471a3", alpha=0.12, linewidth=0.8)
    left.set(title="Context sent per model call", xlabel="model call", ylabel="tokens (log scale)", yscale="log")
    left.set_ylim(1_000, max(max(report.without, default=0), report.window) * 2)
    left.legend(loc="lower right", fontsize=8)
    right.plot(calls, [v / 1e6 for v in without_cum], color="#c0392b", linestyle="--", label="without compaction")
    right.plot(
        calls, [v / 1e6 for v in with_cum], color="#2471a3", label="with compaction (incl. compaction model calls)"
    )
    right.set(title="Cumulative input tokens", xlabel="model call", ylabel="million tokens")
    right.legend(loc="upper left", fontsize=8)
    fig.suptitle(
        f"langgraph-compaction demo: {len(report.calls)} model calls, {len(compaction_at)} summaries", fontsize=11
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb"
    ) as png:  # private, as the storage's files are
        fig.savefig(png, format="png")
    plt.close(fig)
    return str(path)
