"""Measure: how long ``langgraph-compaction --help`` takes, warm, in a fresh process.

A new user's first command. The commands import what they need when they
run, so ``--help`` should cost an interpreter start plus argparse; what the
package's import pulls in on top is shown beside it. Each figure is the
median of several runs after one warm-up run (files in the page cache).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks.report import check, table, targets_table

NAME = "cli_help"
#: What a user waits for without noticing.
LIMIT_SECONDS = 1.0
COMMANDS = {
    "langgraph-compaction --help": [sys.executable, "-m", "langgraph_compaction", "--help"],
    "import langgraph_compaction": [sys.executable, "-c", "import langgraph_compaction"],
    "python alone": [sys.executable, "-c", "pass"],
}


def _seconds(argv: list[str], runs: int) -> float:
    """Return the median wall time of ``runs`` runs of a command, after one warm-up run."""
    subprocess.run(argv, check=True, capture_output=True)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(ctx) -> dict:
    runs = 2 if ctx.quick else 5
    seconds = {label: round(_seconds(argv, runs), 3) for label, argv in COMMANDS.items()}
    return {
        "runs": runs,
        "seconds": seconds,
        "targets": [
            check(
                "`langgraph-compaction --help`, warm (seconds)",
                seconds["langgraph-compaction --help"],
                LIMIT_SECONDS,
                unit=" s",
            )
        ],
    }


def report(figures: dict) -> str:
    rows = [(label, f"{s:.2f} s") for label, s in figures["seconds"].items()]
    return (
        f"## {NAME}: the command's start-up\n\n"
        f"Median of {figures['runs']} runs in a fresh process each, after one warm-up run.\n\n"
        + table(["command", "wall time"], rows)
        + "\n\n"
        + targets_table(figures["targets"])
    )
