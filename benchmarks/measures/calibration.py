"""Calibrated counting: how far the gate's count of each request is from what the provider bills.

The real trajectories are replayed model call by model call through this
package's nodes with a 32k window (trigger 12k tokens). The agent node is a
scripted model bound with four tool schemas and preceded by a 600-token
system prompt; it reports ``usage_metadata["input_tokens"]`` as the exact
o200k count of the whole request (system prompt + tool schemas + messages),
as a provider would. For every call the measure compares that figure with
three counts of the same request: the messages alone (what the core counted
before calibration), messages + system prompt + tool schemas, and the
calibrated count (that, times the ratio learned from the previous replies).
A second replay with ``calibrate=False`` shows what the real input reached
without calibration.
"""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from benchmarks.anchors import billed_counter, drive, o200k_tokens, scripted_summarizer, trajectory_turns
from benchmarks.report import check, table, targets_table
from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.calibration import calibrated_tokens

NAME = "calibration"
WINDOW = 32_000
SYSTEM_PROMPT = (
    "You are a careful software engineering agent working in a real repository. Read before you edit, "
    "run the tests after every change, keep diffs small, and explain what you changed and why. "
) * 12
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string", "description": f"The {arg}."}},
                "required": [arg],
            },
        },
    }
    for name, description, arg in (
        ("bash", "Run a shell command in the repository and return its output and exit status.", "command"),
        ("read_file", "Read a file of the repository, optionally a range of lines.", "path"),
        ("edit_file", "Replace an exact snippet of a file by new text.", "path"),
        ("search", "Search the repository for a regular expression.", "pattern"),
    )
]


class UsageAgent:
    """The model node: returns the recorded reply with the request's exact o200k size as ``input_tokens``."""

    def __init__(self, counter, nodes_ref: dict) -> None:
        self.counter = counter
        self.nodes_ref = nodes_ref
        self.fixed_real = o200k_tokens(SYSTEM_PROMPT) + 5 + o200k_tokens(json.dumps(TOOLS))
        self.next_reply = None
        self.rows: list[tuple[int, int, int, int]] = []  # (real, messages only, + fixed, calibrated)

    def __call__(self, state: dict) -> dict:
        messages = state["messages"]
        nodes = self.nodes_ref["nodes"]
        real = self.fixed_real + self.counter.total(messages)
        estimate = nodes.counter.total(messages)
        calibration = (state.get("compaction") or {}).get("calibration") or {}
        self.rows.append(
            (
                real,
                estimate,
                estimate + nodes.fixed_tokens,
                calibrated_tokens(estimate, calibration, nodes.fixed_tokens),
            )
        )
        usage = {"input_tokens": real, "output_tokens": 1, "total_tokens": real + 1}
        return {"messages": [self.next_reply.model_copy(update={"usage_metadata": usage})]}


def _bound_agent_model():
    """Return a stand-in for ``llm.bind_tools(TOOLS)``: what add_compaction reads the tool schemas from."""
    return RunnableLambda(lambda x: AIMessage("")).bind(tools=TOOLS)


def _replay(path, calibrate: bool) -> UsageAgent:
    ref: dict = {}
    agent = UsageAgent(billed_counter(), ref)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    ref["nodes"] = add_compaction(
        builder,
        before="agent",
        model=scripted_summarizer(),
        config=CompactionConfig(context_window=WINDOW, guards={"calibrate": calibrate}),
        agent_model=_bound_agent_model(),
        system_prompt=SYSTEM_PROMPT,
    )
    drive(builder.compile(), agent, trajectory_turns(path))
    return agent


def _errors(rows: list, column: int) -> list[float]:
    return [row[column] / row[0] - 1 for row in rows]


def run(ctx) -> dict:
    per: dict[str, dict] = {}
    trigger = CompactionConfig(context_window=WINDOW).resolve().trigger_tokens
    for path in ctx.trajectories:
        calibrated = _replay(path, calibrate=True)
        plain = _replay(path, calibrate=False)
        figures = {"calls": len(calibrated.rows)}
        for label, column in (("messages only", 1), ("+ system and tools", 2), ("calibrated", 3)):
            errors = _errors(calibrated.rows[1:], column)  # the first call has no reply to learn from yet
            figures[label] = {
                "mean_abs_error": sum(abs(e) for e in errors) / max(1, len(errors)),
                "min_error": min(errors, default=0.0),
                "max_error": max(errors, default=0.0),
            }
        figures["peak_real_calibrated"] = max(r[0] for r in calibrated.rows)
        figures["peak_real_uncalibrated"] = max(r[0] for r in plain.rows)
        figures["over_window_calibrated"] = sum(r[0] > WINDOW for r in calibrated.rows)
        figures["over_window_uncalibrated"] = sum(r[0] > WINDOW for r in plain.rows)
        per[path.stem] = figures
    worst = max(f["calibrated"]["mean_abs_error"] for f in per.values())
    targets = [
        check("calibrated count: mean error per trajectory, worst trajectory", worst * 100, 5, unit=" %"),
        check(
            "calls over the 32k window with calibration",
            sum(f["over_window_calibrated"] for f in per.values()),
            0,
            unit="",
        ),
    ]
    return {"window": WINDOW, "trigger": trigger, "trajectories": per, "targets": targets}


def report(figures: dict) -> str:
    rows = []
    for name, f in figures["trajectories"].items():
        rows.append(
            (
                name,
                f["calls"],
                *(
                    f"{f[label]['mean_abs_error'] * 100:.1f} % ({f[label]['min_error'] * 100:+.0f} … {f[label]['max_error'] * 100:+.0f} %)"
                    for label in ("messages only", "+ system and tools", "calibrated")
                ),
                f["peak_real_uncalibrated"],
                f["peak_real_calibrated"],
            )
        )
    return f"""## Calibrated counting against the billed input size

Real trajectories replayed with a {figures["window"]:,}-token window (trigger {figures["trigger"]:,}); the model node
is bound with four tool schemas, sends a ~600-token system prompt, and reports the exact o200k size of each
request as `usage_metadata.input_tokens`. Each cell: mean absolute error of the gate's count of a request
against the reported size (the range of signed errors in brackets), over every call after the first.
"Peak real input" is the largest request the model received, without and with calibration.

{targets_table(figures["targets"])}

{table(["trajectory", "calls", "messages only", "+ system prompt and tools", "calibrated", "peak real input, uncalibrated", "peak real input, calibrated"], rows)}
"""
