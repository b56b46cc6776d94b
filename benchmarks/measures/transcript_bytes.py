"""Measure 8: transcript bytes after 500 turns with repeated compactions.

Offload appends each message once, by id, so the transcript should be the
size of the conversation serialized once. A whole-history rewrite (write the
full history at every compaction, as a file-per-session offload does) costs
the sum of the history's size at each compaction: quadratic in turns.
"""

from __future__ import annotations

import json

from langchain_core.messages import messages_to_dict

from benchmarks.anchors import ScriptedAgent, Thresholds, drive, ours_graph, scripted_summarizer, synthetic_session
from benchmarks.report import check, table, targets_table
from langgraph_compaction.storage import FileStorage

NAME = "transcript_bytes"
THRESHOLDS = Thresholds(context_window=128_000, trigger_tokens=30_000, keep_tokens=4_000, trigger_messages=0)


def _line_bytes(record: dict) -> int:
    """Return the bytes of one transcript line, as the file storage writes it."""
    return len((json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))


def run(ctx) -> dict:
    turns = 150 if ctx.quick else 500
    session = synthetic_session(turns, seed=ctx.seed)
    storage = FileStorage(ctx.scratch_dir / "transcripts")
    agent = ScriptedAgent(measure=False)
    graph = ours_graph(agent, scripted_summarizer(), THRESHOLDS.config(), storage).compile()
    originals = {m.id: m for pending, reply in session for m in (*pending, reply)}
    rewrite_bytes = [0]  # what rewriting the whole history at each compaction would have written
    seen_summaries = [0]

    def after_turn(i: int, values: dict) -> None:
        summaries = values["compaction"].get("counts", {}).get("summarize", 0)
        if summaries > seen_summaries[0]:
            seen_summaries[0] = summaries
            history = [originals[k] for k in list(originals)[: _arrived(i)]]
            rewrite_bytes[0] += sum(_line_bytes(r) for r in messages_to_dict(history))

    def _arrived(i: int) -> int:
        return sum(len(p) + 1 for p, _ in session[: i + 1])

    drive(graph, agent, session, after_turn=after_turn)
    records = storage.read_transcript("bench")
    file_bytes = sum(_line_bytes(r) for r in records)
    ids = [r.get("data", {}).get("id") for r in records]
    # the conversation once: every original message, plus each summary the agent saw (stored as written)
    once = sum(_line_bytes(r) for r in messages_to_dict([originals[i] for i in ids if i in originals]))
    once += sum(_line_bytes(r) for r in records if r.get("data", {}).get("id") not in originals)
    missing = [k for k in originals if k not in set(ids)]
    targets = [
        check(
            "transcript bytes / conversation serialized once, deviation", abs(file_bytes / once - 1) * 100, 1, unit=" %"
        ),
        check("messages stored more than once", len(ids) - len(set(ids)), 0, unit=""),
    ]
    return {
        "turns": turns,
        "compactions": seen_summaries[0],
        "file_bytes": file_bytes,
        "once_bytes": once,
        "rewrite_bytes": rewrite_bytes[0],
        "records": len(records),
        "not_offloaded": len(missing),
        "targets": targets,
    }


def report(figures: dict) -> str:
    rows = [
        (
            "this package (append by id)",
            f"{figures['file_bytes'] / 1e6:.2f} MB",
            figures["file_bytes"] / figures["once_bytes"],
        ),
        ("the conversation serialized once", f"{figures['once_bytes'] / 1e6:.2f} MB", 1.0),
        (
            "whole-history rewrite at each compaction",
            f"{figures['rewrite_bytes'] / 1e6:.2f} MB",
            figures["rewrite_bytes"] / figures["once_bytes"],
        ),
    ]
    return f"""## 8. Transcript bytes

{figures["turns"]} synthetic turns, {figures["compactions"]} compactions (trigger {THRESHOLDS.trigger_tokens:,} tokens, keep
{THRESHOLDS.keep_tokens:,}); {figures["records"]:,} transcript records; messages of the session never offloaded
(still in the live tail at the end): {figures["not_offloaded"]}.

{targets_table(figures["targets"])}

{table(["", "bytes written", "ratio to once"], rows)}
"""
