"""Measure: a provider-native compaction is billed the way the provider bills it, from ``usage.iterations``.

Anthropic's on-demand compaction answers with one ``compaction`` block; its
top-level ``usage`` is zero and the cost is in ``usage.iterations`` (an entry
of type ``compaction``), so a count that reads ``usage_metadata`` alone bills
nothing. A ``create_agent`` session (a scripted agent reading files) runs with
a ``ChatAnthropic`` summarizer and ``summary={"native": True}`` against the
local stand-in of the Messages API (``langgraph_compaction.testing.providers``).
Each compaction's provider bill (its iterations: uncached input at 1, cache
writes at 1.25, cache reads at 0.1, Anthropic's prices) is set beside what the
package recorded for it (the ``compaction_applied`` event's usage) and what
``usage_metadata`` says.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.report import check, table, targets_table
from langgraph_compaction import CompactionConfig, CompactionMiddleware
from langgraph_compaction.core.billing import ANTHROPIC, CACHED_PRICE
from langgraph_compaction.core.native import billed
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.providers import AnthropicStandIn

NAME = "native_billing"
WINDOW = 30_000


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "def handler(event):\n    return process(event)\n" * 100


def _agent_replies() -> list:
    call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": "read"}
    return [AIMessage("Reading.", tool_calls=[call]), "The file is read."]


def _session(stand_in: AnthropicStandIn, folder: Path, requests: int) -> list[dict]:
    summarizer = ChatAnthropic(model="claude-opus-4-7", base_url=stand_in.base_url, api_key="bench", max_retries=0)
    config = CompactionConfig(context_window=WINDOW, summary={"native": True}, background={"enabled": False})
    middleware = CompactionMiddleware(model=summarizer, flush_model=ScriptedModel(), config=config, storage=folder)
    thread = {"configurable": {"thread_id": "bench"}}
    agent = create_agent(
        ScriptedModel(reply=_agent_replies()), [read_file], middleware=[middleware], checkpointer=InMemorySaver()
    )
    for n in range(requests):
        agent.invoke({"messages": [HumanMessage(f"Request {n}: read src/app.py and check handler {n}")]}, thread)
    events = read_compaction(agent.get_state(thread).values["compaction"])["events"]
    return [e for e in events if e.get("event") == "compaction_applied"]


def _priced(bill) -> float:
    """Return an iteration bill's input in full-price token equivalents (Anthropic: cache writes at 1.25)."""
    return bill.input_tokens + bill.cache_write_tokens * ANTHROPIC.uncached + bill.cache_read_tokens * CACHED_PRICE


def run(ctx) -> dict:
    requests = 12 if ctx.quick else 30
    with tempfile.TemporaryDirectory() as folder, AnthropicStandIn() as stand_in:
        applied = _session(stand_in, Path(folder), requests)
    answers = [a for a in stand_in.answers if a["stop_reason"] == "compaction"]
    bills = [billed(a["usage"]) for a in answers]
    provider_input = sum(b.input_tokens + b.cache_read_tokens + b.cache_write_tokens for b in bills)
    recorded_input = sum(e["usage"].get("input_tokens", 0) for e in applied)
    metadata_input = sum(a["usage"]["input_tokens"] for a in answers)  # what usage_metadata reports
    error = abs(recorded_input - provider_input) / provider_input if provider_input else 1.0  # none made: a miss
    return {
        "requests": requests,
        "compactions": len(answers),
        "rows": [
            {
                "input": b.input_tokens,
                "cache_read": b.cache_read_tokens,
                "cache_write": b.cache_write_tokens,
                "output": b.output_tokens,
                "priced": round(_priced(b), 1),
            }
            for b in bills
        ],
        "provider_input": provider_input,
        "recorded_input": recorded_input,
        "usage_metadata_input": metadata_input,
        "targets": [
            check("native compactions recorded vs billed input tokens (relative error)", error, 0.0, unit=""),
        ],
    }


def report(figures: dict) -> str:
    rows = [
        (
            str(i + 1),
            f"{r['input']:,}",
            f"{r['cache_read']:,}",
            f"{r['cache_write']:,}",
            f"{r['output']:,}",
            r["priced"],
        )
        for i, r in enumerate(figures["rows"])
    ]
    return (
        f"## {NAME}: a native compaction billed from usage.iterations\n\n"
        f"{figures['requests']} requests of a create_agent session; on-demand compactions: {figures['compactions']} "
        "(ChatAnthropic summarizer against the local stand-in). Per compaction, its "
        "`usage.iterations` entry and its input priced at Anthropic's rates (token equivalents):\n\n"
        + table(["compaction", "input", "cache read", "cache write", "output", "priced input"], rows)
        + f"\n\nInput tokens billed by the provider: {figures['provider_input']:,}; recorded by the package: "
        f"{figures['recorded_input']:,}; reported by `usage_metadata` (top-level usage): "
        f"{figures['usage_metadata_input']:,}.\n\n" + targets_table(figures["targets"])
    )
