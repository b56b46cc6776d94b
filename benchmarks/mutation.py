"""Mutation testing of the core's policy modules: ``python -m benchmarks.mutation``.

Runs mutmut as ``[tool.mutmut]`` in ``pyproject.toml`` configures it (the
modules it mutates, the fast tests each mutant must fail), from a fresh
``mutants/`` folder, and writes ``benchmarks/results/mutation.json``::

    {"langgraph_compaction.core.plan": {"killed": 700, "total": 743}, ...}

A mutant is killed when a selected test fails or times out with it (mutmut's
own score); one that no selected test reaches counts as alive. The run takes a
few minutes on two cores, so it is not one of ``python -m benchmarks``'
measures and CI does not run it. ``mutants/`` stays for ``mutmut results`` and
``mutmut show NAME`` to read.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULT = REPO_ROOT / "benchmarks" / "results" / "mutation.json"
#: mutmut's verdicts that count as killed: a test failed, or the mutant made it hang.
KILLED = frozenset({"killed", "timeout"})


def policy_modules(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """Return the dotted names of the modules ``[tool.mutmut] only_mutate`` lists, in its order.

    Args:
        pyproject: The ``pyproject.toml`` holding the ``[tool.mutmut]`` section.
    """
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["mutmut"]
    return [path.removesuffix(".py").replace("/", ".") for path in config["only_mutate"]]


def tally(listing: str, modules: Sequence[str]) -> dict[str, dict[str, int]]:
    """Return ``{module: {"killed": k, "total": n}}`` from the lines ``name: verdict`` of ``mutmut results --all``.

    Args:
        listing: What ``mutmut results --all true`` printed: one ``<module>.<function>__mutmut_<n>: <verdict>`` a line.
        modules: The dotted module names to count, each listed even without a mutant.
    """
    figures = {module: {"killed": 0, "total": 0} for module in modules}
    for line in listing.splitlines():
        name, colon, verdict = line.strip().rpartition(": ")
        module = name.rpartition(".")[0]
        if colon and module in figures:
            figures[module]["total"] += 1
            figures[module]["killed"] += verdict in KILLED
    return figures


def merged(earlier: dict, figures: dict, modules: Sequence[str]) -> dict:
    """Return ``figures`` over ``earlier``'s for the other modules, in the order of ``modules`` (a partial run's file).

    Args:
        earlier: The figures the file held, ``{module: {"killed": k, "total": n}}``.
        figures: The figures of the modules this run mutated.
        modules: Every policy module, in ``[tool.mutmut] only_mutate``'s order; others are dropped.
    """
    both = {**earlier, **figures}
    return {module: both[module] for module in modules if module in both}


def _mutmut(*args: str, capture: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", *args], cwd=REPO_ROOT, check=True, capture_output=capture, text=True
    )
    return done.stdout if capture else ""


def main(argv: Sequence[str] | None = None) -> int:
    """Run mutmut from scratch, write the killed and total mutants of each policy module, and print them.

    Args:
        argv: The command line (``--max-children``, ``--out``, ``--module``); None reads ``sys.argv``.
    """
    every = policy_modules()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation", description=__doc__.splitlines()[0])
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default: 2)")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"where to write the figures (default: {RESULT})")
    parser.add_argument(
        "--module",
        action="append",
        choices=every,
        help="mutate only this module (repeatable); the other modules' figures stay as --out has them",
    )
    args = parser.parse_args(argv)
    modules = args.module or every
    # mutmut keeps an earlier run's verdicts and skips those mutants: the figures come from a run of today's tests
    shutil.rmtree(REPO_ROOT / "mutants", ignore_errors=True)
    _mutmut("run", "--max-children", str(args.max_children), *(f"{m}.*" for m in args.module or ()))
    figures = tally(_mutmut("results", "--all", "true", capture=True), modules)
    if args.module and args.out.exists():
        figures = merged(json.loads(args.out.read_text(encoding="utf-8")), figures, every)
    args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    for module, f in figures.items():
        share = f["killed"] / f["total"] if f["total"] else 0.0
        print(f"{module}: {f['killed']} of {f['total']} mutants killed ({share:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
