"""Measure 5: token estimates against the real o200k tokenizer, by kind of text.

Three estimators: this package's default (``estimate_text_tokens``), the
seed's ``len / 2.5`` and LangChain's ``count_tokens_approximately`` (``len /
4``). Texts: the samples in ``tests/data/token_samples`` (English prose,
Python source, JSON tool output in both layouts, Chinese, test logs, an agent
transcript) and the real trajectories (whole messages, overheads included).
"""

from __future__ import annotations

import json

from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.anchors import SAMPLES, o200k_tokens
from benchmarks.report import check, table, targets_table
from langgraph_compaction.core.tokens import estimate_text_tokens, message_tokens, seed_text_tokens
from langgraph_compaction.trajectories import load_trajectory

NAME = "token_accuracy"
SAMPLE_FILES = {
    "English prose": "english_prose.txt",
    "Python source": "python_source.py.txt",
    "JSON tool output": "tool_output.json",
    "Chinese": "chinese.txt",
    "test / compiler logs": "test_log.txt",
    "agent transcript": "agent_transcript.txt",
}


def _langchain_text(text: str) -> int:
    """Return LangChain's approximate count of a text alone (its per-message overhead taken off)."""
    return count_tokens_approximately([HumanMessage(text)]) - count_tokens_approximately([HumanMessage("")])


ESTIMATORS = {"ours": estimate_text_tokens, "seed len/2.5": seed_text_tokens, "LangChain len/4": _langchain_text}


def run(ctx) -> dict:
    texts = {kind: (SAMPLES / name).read_text(encoding="utf-8") for kind, name in SAMPLE_FILES.items()}
    texts["JSON, compact"] = json.dumps(json.loads(texts["JSON tool output"]), separators=(",", ":"))
    ratios: dict[str, dict[str, float]] = {}
    for kind, text in texts.items():
        real = o200k_tokens(text)
        ratios[kind] = {name: estimate(text) / real for name, estimate in ESTIMATORS.items()} | {"o200k tokens": real}
    for path in ctx.trajectories:
        messages = load_trajectory(path)
        real = sum(message_tokens(m, o200k_tokens) for m in messages)
        ratios[f"trajectory {path.stem}"] = {
            "ours": sum(message_tokens(m) for m in messages) / real,
            "seed len/2.5": sum(message_tokens(m, seed_text_tokens) for m in messages) / real,
            "LangChain len/4": count_tokens_approximately(messages) / real,
            "o200k tokens": real,
        }
    worst_over = max(r["ours"] for r in ratios.values())
    worst_under = min(r["ours"] for r in ratios.values())
    targets = [
        check("ours: largest over-count, every category", (worst_over - 1) * 100, 10, unit=" %"),
        check("ours: largest under-count, every category", (1 - worst_under) * 100, 10, unit=" %"),
    ]
    return {"ratios": ratios, "targets": targets}


def report(figures: dict) -> str:
    rows = [
        (kind, r["o200k tokens"], *(f"{(r[name] - 1) * 100:+.1f} %" for name in ESTIMATORS))
        for kind, r in figures["ratios"].items()
    ]
    return f"""## 5. Token estimate accuracy against o200k

Error of each estimator against OpenAI's o200k_base tokenizer (`bpe-openai`, offline); positive = over-count.
Trajectories are counted as whole messages with this package's per-message overheads on both sides
(LangChain's with its own).

{targets_table(figures["targets"])}

{table(["text", "o200k tokens", *ESTIMATORS], rows)}
"""
