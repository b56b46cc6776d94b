"""``python -m benchmarks.stress --examples 100000``: random conversations under random faults, invariants counted.

Each example draws a conversation (parallel, interleaved and mixed tool
rounds, reused tool-call ids, orphan results, unanswered calls, content
blocks, huge, empty and non-ASCII messages, invalid tool calls, artifacts
JSON cannot hold; user messages replaced by id after they were offloaded;
forks back to an earlier checkpoint, as time travel does), a budget,
hostile and colliding thread and user ids (ids equal to another id's storage
name, in this release or an earlier one) or no thread id at all, and faults (the summarizer or memory model
raising or answering empty, error-looking, unstructured or ``NO_REPLY``
text; storage failing before or after a write; a node's update lost after
its side effects, as a crash and resume would). One example in ten is a
huge parallel round over the window, or a codemod changing 1,000-3,000
files, at the default ``prompt_cache``: no view may be sent over the trigger
that layers 1-2 could bring under it, and every trail keeps to its budget.
One in ten compacts in the background. One in ten (``run_retry_example``)
sends runs again after a killed worker, a database outage or a crash while
the tools run, leaves calls unanswered by an approval the user answers with
the next request, edits stored messages by id while a background job runs,
and spreads the model calls over two workers: a conversation a provider
accepts as it is must give requests it accepts too (no orphan result, no
unanswered call), none over the window, and each request's memory written
once however the memory model words it. It is replayed model call by
model call through the real compaction nodes (gate, flush and offload on the
same snapshot, then summarize), with the stock ``add_messages`` and
``merge_compaction`` reducers, and every view and every run is checked.

The examples themselves live in ``langgraph_compaction.testing.stress`` and
``langgraph_compaction.testing.retries``, where tests draw them too. The
output is the number of violations per invariant (target: 0) and, with
``--show``, the first few problems. ``--trajectories DIR`` also replays
every ``*.jsonl`` trajectory there with compaction forced every few calls.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.runner import trajectory_files
from langgraph_compaction.invariants import INVARIANTS
from langgraph_compaction.testing.retries import run_retry_example
from langgraph_compaction.testing.stress import (
    replay_trajectory,
    run_background_example,
    run_bound_example,
    run_example,
)


def pick_example(seed: int) -> Callable[..., dict[str, list[str]]]:
    """Return the example a seed runs: one in ten is a huge parallel round or a codemod (``run_bound_example``),
    one in ten compacts in the background (``run_background_example``), one in ten is retried, left with
    unanswered calls and served by two workers (``run_retry_example``)."""
    special = {9: run_bound_example, 4: run_background_example, 7: run_retry_example}
    return special.get(seed % 10, run_example)


# --- the command -------------------------------------------------------------------------------


def _batch(args: tuple[int, int, bool, str]) -> tuple[dict[str, int], list[str]]:
    start, count, faults, storage = args
    totals = {name: 0 for name in INVARIANTS}
    samples: list[str] = []
    for seed in range(start, start + count):
        try:
            problems = pick_example(seed)(random.Random(seed), faults=faults, storage=storage)
        except Exception as exc:  # noqa: BLE001 - a crash of the run is a broken promise too
            problems = {"valid_history": [f"the run raised {type(exc).__name__}: {exc}"]}
        for name, found in problems.items():
            totals[name] += len(found)
            samples += [f"seed {seed}: {name}: {p}" for p in found[:2]]
    return totals, samples[:20]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000, help="random examples to run (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first example")
    parser.add_argument(
        "--workers", type=int, default=multiprocessing.cpu_count(), help="processes (default: all CPUs)"
    )
    parser.add_argument(
        "--storage", choices=["file", "store"], default="file", help="FileStorage or a LangGraph InMemoryStore"
    )
    parser.add_argument("--no-faults", action="store_true", help="no injected model, storage or crash faults")
    parser.add_argument("--trajectories", type=Path, help="also replay every *.jsonl trajectory in this folder")
    parser.add_argument("--show", type=int, default=5, help="print this many sample problems")
    args = parser.parse_args(argv)
    try:  # checked before the examples run: a mistyped folder must not end in "0 violations"
        trajectories = trajectory_files(args.trajectories, quick=False) if args.trajectories else []
    except ValueError as exc:
        parser.error(str(exc))
    logging.getLogger("langgraph_compaction").setLevel(logging.ERROR)  # injected faults would flood the log

    began = time.perf_counter()
    size = max(1, min(500, args.examples // max(1, args.workers * 4)))
    jobs = [
        (s, min(size, args.seed + args.examples - s), not args.no_faults, args.storage)
        for s in range(args.seed, args.seed + args.examples, size)
    ]
    totals = {name: 0 for name in INVARIANTS}
    samples: list[str] = []
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        done = 0
        for counts, found in pool.imap_unordered(_batch, jobs):
            for name, n in counts.items():
                totals[name] += n
            samples += found
            done += size
            print(
                f"{min(done, args.examples)}/{args.examples} examples, violations so far: {sum(totals.values())}",
                file=sys.stderr,
                flush=True,
            )
    for path in trajectories:
        for name, found in replay_trajectory(path).ledger.problems.items():
            totals[name] += len(found)
            samples += [f"{path.stem}: {name}: {p}" for p in found[:2]]

    print(
        f"{args.examples} random examples"
        + (f" + {len(trajectories)} trajectories" if trajectories else "")
        + f" ({'with' if not args.no_faults else 'without'} faults, {args.storage} storage)"
        + f" in {time.perf_counter() - began:.0f} s"
    )
    print(f"{'invariant':<16}violations")
    for name in INVARIANTS:
        print(f"{name:<16}{totals[name]}")
    for line in samples[: args.show]:
        print("  " + line.replace("\n", " ")[:300])
    return 1 if any(totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
