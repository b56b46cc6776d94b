"""Measure: a new user's app with background compaction, sync and async, beside the same app blocking.

The app is what a new user writes first: ``create_agent`` with
``CompactionMiddleware(config=CompactionConfig(context_window=32_000,
background=True))`` (the trigger, 16,000 tokens, derived from the window).
Its two tools each return about 5,000 tokens; for each request the agent's
model calls one, then the other, then answers (three model requests a
request), in 0.05 s a call. The summarizer, which also extracts the memories, answers in
0.2 s (sync, ``invoke``) or 0.3 s (async, ``ainvoke``). The figures: model
requests over the trigger (each request as the model received it, its
messages and tool schemas counted with the package's token counter), the
largest request, prepared summaries discarded, and compaction-model calls
per applied summary. The trigger is the user's budget: none of the app's
requests may be over it, background or not.
"""

from __future__ import annotations

from typing import Any

from benchmarks.report import check, table, targets_table
from langgraph_compaction.testing.scenarios import (
    AGENT_LATENCY,
    REQUESTS,
    RESULT_TOKENS,
    SUMMARIZER_LATENCY,
    WINDOW,
    run_app,
)

NAME = "background_apps"
QUICK_REQUESTS = 15


def run(ctx: Any) -> dict:
    requests = QUICK_REQUESTS if ctx.quick else REQUESTS
    runs: dict[str, dict] = {}
    for mode in ("sync", "async"):
        for background in (True, False):
            storage = ctx.scratch_dir / f"background-apps-{mode}-{background}"
            runs[f"{mode}, {'background' if background else 'blocking'}"] = run_app(
                storage, mode=mode, requests=requests, background=background
            ).figures()
    targets = [
        check(
            f"{mode}, background: model requests over the trigger",
            runs[f"{mode}, background"]["over_trigger"],
            0,
            unit="",
        )
        for mode in ("sync", "async")
    ]
    targets.append(
        check(
            "async, background: prepared summaries discarded",
            100 * runs["async, background"]["discarded_share"],
            10,
            unit=" %",
        )
    )
    return {"requests": requests, "window": WINDOW, "runs": runs, "targets": targets}


def report(figures: dict) -> str:
    rows = [
        (
            name,
            f"{r['over_trigger']} of {r['model_requests']}",
            r["largest"],
            f"{r['discarded']} of {r['prepared']}" if r["prepared"] else "–",
            r["calls_per_applied"] if r["calls_per_applied"] is not None else "–",
            r["seconds"],
        )
        for name, r in figures["runs"].items()
    ]
    headers = [
        "app",
        "requests over the trigger",
        "largest request",
        "prepared summaries discarded",
        "compaction-model calls per applied summary",
        "seconds",
    ]
    return f"""## Background compaction in a new user's app

`create_agent` with `CompactionMiddleware(config=CompactionConfig(context_window={figures["window"]:_},
background=True))`, {figures["requests"]} requests; two tools of about {RESULT_TOKENS:,} tokens each, the agent's
model answering in {AGENT_LATENCY} s, the summarizer in {SUMMARIZER_LATENCY["sync"]} s (sync) or
{SUMMARIZER_LATENCY["async"]} s (async), beside the same app with `background=False`. A request's size is its
messages and tool schemas, counted with the package's token counter.

{targets_table(figures["targets"])}

{table(headers, rows)}
"""
