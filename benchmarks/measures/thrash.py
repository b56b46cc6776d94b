"""The 400-tiny-turns case: how often the message-count trigger summarizes a chat that is nowhere near full.

A seeded chat of 400 one-line user turns, each answered by a one-line reply
(800 messages, a few thousand tokens), on a 128k window. The design's rule
fires the summarizer whenever there are 50 messages; this package also asks
for ``trigger_messages_min_tokens`` (25 % of the trigger) and, after a
summary, ``min_new_tokens`` (10 % of the trigger) of new conversation.
LangChain's ``SummarizationMiddleware`` with the same message trigger
(``("messages", 50)``, keep 20 messages) is the anchor. This is the figure
behind the documented deviation from the design.
"""

from __future__ import annotations

import random

from langchain_core.messages import AIMessage, HumanMessage

from benchmarks.anchors import (
    ScriptedAgent,
    Thresholds,
    billed_counter,
    drive,
    langchain_graph,
    ours_graph,
    scripted_summarizer,
)
from benchmarks.report import check, table, targets_table
from langgraph_compaction import CompactionConfig

NAME = "thrash"
TURNS = 400
SUMMARY_PROMPT_MARK = "Context Extraction Assistant"
_ASKS = ("remind me to buy milk", "what time is it in Tokyo", "add eggs to the list", "thanks", "and bread too", "ok")


def chat_turns(turns: int, seed: int) -> list:
    """Return ``turns`` one-line user turns, each answered by a one-line reply (seeded)."""
    rng = random.Random(seed)
    return [
        ([HumanMessage(f"{rng.choice(_ASKS)} ({t})")], AIMessage(f"Sure, done ({t}).", id=f"reply-{t}"))
        for t in range(turns)
    ]


def _ours(config: CompactionConfig, turns: list) -> dict:
    agent = ScriptedAgent(counter=billed_counter())
    summarizer = scripted_summarizer()
    values = drive(ours_graph(agent, summarizer, config).compile(), agent, turns)
    events = [e for e in values.get("compaction", {}).get("events", []) if e.get("layer") == "summarize"]
    prompts = [p for p in summarizer.calls if SUMMARY_PROMPT_MARK in p]
    return {
        "summarizer_calls": len(prompts),
        "summarizer_prompt_chars": sum(len(p) for p in prompts),
        "tokens_at_last_summary": events[-1]["tokens_before"] if events else None,
        "peak_input": max(agent.inputs),
        "final_input": agent.inputs[-1],
    }


def _langchain(turns: list) -> dict:
    from langchain.agents.middleware import SummarizationMiddleware

    agent = ScriptedAgent(counter=billed_counter())
    summarizer = scripted_summarizer()
    middleware = SummarizationMiddleware(model=summarizer, trigger=("messages", 50), keep=("messages", 20))
    drive(langchain_graph(agent, middleware).compile(), agent, turns)
    return {
        "summarizer_calls": len(summarizer.calls),
        "summarizer_prompt_chars": sum(len(p) for p in summarizer.calls),
        "tokens_at_last_summary": None,
        "peak_input": max(agent.inputs),
        "final_input": agent.inputs[-1],
    }


def run(ctx) -> dict:
    turns = chat_turns(TURNS, ctx.seed)
    window = Thresholds().context_window
    runs = {
        "ours (token floor + cooldown)": _ours(CompactionConfig(context_window=window), turns),
        "the design's rule (50 messages, no floor)": _ours(
            CompactionConfig(
                context_window=window, summary={"min_new_tokens": 0}, guards={"trigger_messages_min_tokens": 0}
            ),
            turns,
        ),
        "50 messages, no floor, with the cooldown": _ours(
            CompactionConfig(context_window=window, guards={"trigger_messages_min_tokens": 0}), turns
        ),
        "LangChain SummarizationMiddleware (50 messages)": _langchain(turns),
    }
    budget = CompactionConfig(context_window=window).resolve()
    ours = runs["ours (token floor + cooldown)"]
    targets = [check("LLM summaries in 400 tiny turns, ours", ours["summarizer_calls"], 0, unit="")]
    return {
        "turns": TURNS,
        "window": window,
        "messages_min_tokens": budget.messages_min_tokens,
        "min_new_tokens": budget.min_new_tokens,
        "runs": runs,
        "targets": targets,
    }


def report(figures: dict) -> str:
    rows = [
        (
            name,
            r["summarizer_calls"],
            r["summarizer_prompt_chars"],
            r["tokens_at_last_summary"] if r["tokens_at_last_summary"] is not None else "–",
            r["peak_input"],
            r["final_input"],
        )
        for name, r in figures["runs"].items()
    ]
    return f"""## Thrash: {figures["turns"]} tiny chat turns

{figures["turns"]} one-line user turns with one-line replies ({2 * figures["turns"]} messages) on a
{figures["window"]:,}-token window. The design's message trigger (50 messages) alone summarizes this chat every
few turns for a few hundred tokens each time; this package requires {figures["messages_min_tokens"]:,} tokens as well
(`trigger_messages_min_tokens`, 25 % of the trigger) and {figures["min_new_tokens"]:,} new tokens after a summary
(`min_new_tokens`, 10 % of the trigger). Input sizes are o200k tokens.

{targets_table(figures["targets"])}

{table(["system", "summarizer calls", "summarizer prompt chars", "estimated tokens when it last summarized", "peak input", "final input"], rows)}
"""
