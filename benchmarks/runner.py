"""Discover the measures, run them in one process, and write ``latest.json`` and ``report.md``.

A measure is a module in ``benchmarks/measures/`` defining ``NAME``,
``run(ctx) -> dict`` and ``report(figures) -> str``. One that raises is
recorded as failed with its traceback; the others still run.

A run writes to ``--out`` or a fresh temporary folder
(``langgraph-compaction-benchmarks-*`` in the system's temporary folder);
only ``--write-results`` (a full run of every measure) rewrites the committed
``benchmarks/results/``, which the README's figures are generated from. The
measures' scratch databases and transcripts (a few hundred MB at full scale)
go to the output folder's ``tmp/`` and are removed when the run ends; a run
that fails before writing its report removes the fresh folder it made.
"""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
import platform
import shutil
import tempfile
import time
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from benchmarks import measures
from benchmarks.context import Context
from benchmarks.report import separated_blocks, verdict

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# small, varied real trajectories (tool-heavy coding agents and a customer-service agent) for --quick
QUICK_TRAJECTORIES = (
    "oh_claude35_swebv_django-11292",
    "cc_opus46_entire-cli_interleaved_user",
    "swe-agent_gpt4_pydicom-1458",
    "tau_gpt4o_airline_task33",
)


def default_trajectory_dir() -> Path:
    """Return the repository's own ``tests/data/trajectories`` (all 18 real trajectories, see its SOURCES.md)."""
    return REPO_ROOT / "tests" / "data" / "trajectories"


def trajectory_files(directory: Path, quick: bool) -> list[Path]:
    """Return the ``.jsonl`` trajectories in ``directory`` (the quick subset when ``quick``), sorted by name.

    Raises ValueError naming ``--trajectories`` when the folder is missing or has none.
    """
    if not directory.is_dir():
        raise ValueError(f"--trajectories: {directory} is not a directory; pass a folder of .jsonl trajectories")
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise ValueError(
            f"--trajectories: {directory} has no .jsonl files; pass a folder of OpenAI-format trajectories"
        )
    if quick:
        chosen = [f for f in files if f.stem in QUICK_TRAJECTORIES]
        files = chosen or sorted(files, key=lambda f: f.stat().st_size)[: len(QUICK_TRAJECTORIES)]
    return files


def discover() -> list[ModuleType]:
    """Return every measure module in ``benchmarks/measures``, in name order."""
    found = []
    for info in sorted(pkgutil.iter_modules(measures.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            found.append(importlib.import_module(f"{measures.__name__}.{info.name}"))
    return found


def run_measure(module: ModuleType, ctx: Context) -> dict:
    """Return ``{name, module, status, seconds, figures | traceback}`` for one measure."""
    name = getattr(module, "NAME", module.__name__.rsplit(".", 1)[-1])
    started = time.perf_counter()
    print(f"[benchmarks] {name} ...", flush=True)
    try:
        figures = module.run(ctx)
        json.dumps(figures)  # a measure must hand back JSON-native figures
        for target in figures.get("targets", []) if ctx.quick else ():
            target["quick"] = True  # quick inputs are too small for the full run's limits to apply
        outcome = {"status": "ok", "figures": figures}
    except Exception:
        outcome = {"status": "failed", "traceback": traceback.format_exc()}
    outcome.update(name=name, module=module.__name__, seconds=round(time.perf_counter() - started, 2))
    status = outcome["status"]
    print(f"[benchmarks] {name}: {status} in {outcome['seconds']} s", flush=True)
    for target in outcome.get("figures", {}).get("targets", []):
        print(f"    {target['name']}: {verdict(target)}", flush=True)
    if status == "failed":
        print(outcome["traceback"], flush=True)
    return outcome


def section(module: ModuleType, outcome: dict) -> str:
    """Return the markdown section for one measure (its own report, or its failure with traceback)."""
    if outcome["status"] == "ok":
        try:
            return separated_blocks(module.report(outcome["figures"]).strip())
        except Exception:
            outcome = {**outcome, "status": "failed", "traceback": "report() failed:\n" + traceback.format_exc()}
    return (
        f"## {outcome['name']}\n\n**FAILED** after {outcome['seconds']} s:\n\n```\n{outcome['traceback'].rstrip()}\n```"
    )


def summary(outcomes: Sequence[dict]) -> str:
    """Return the report's opening table: every target of every measure with PASS/MISS."""
    rows = ["| measure | target | result |", "|---|---|---|"]
    for outcome in outcomes:
        if outcome["status"] != "ok":
            rows.append(f"| {outcome['name']} | (measure failed) | FAILED |")
        for target in outcome.get("figures", {}).get("targets", []):
            rows.append(f"| {outcome['name']} | {target['name']} | {verdict(target)} |")
    return "\n".join(rows)


def merged_with_committed(outcomes: Sequence[dict]) -> tuple[list[dict], list[ModuleType]]:
    """Return the committed outcomes with these (rerun alone) in their place, and the modules of all of them, in name order."""
    committed = json.loads((RESULTS_DIR / "latest.json").read_text(encoding="utf-8"))["measures"]
    fresh = {o["name"]: o for o in outcomes}
    merged = {o["name"]: o for o in committed} | fresh
    modules = {getattr(m, "NAME", m.__name__): m for m in discover()}
    names = [n for n in sorted(merged, key=lambda n: modules[n].__name__ if n in modules else n) if n in modules]
    return [merged[n] for n in names], [modules[n] for n in names]


def write_results(
    outcomes: Sequence[dict], modules: Sequence[ModuleType], ctx: Context, seconds: float, rerun: Sequence[str] = ()
) -> None:
    """Write ``latest.json`` and ``report.md`` into ``ctx.results_dir``; ``rerun`` names measures run alone into them."""
    ctx.results_dir.mkdir(parents=True, exist_ok=True)
    meta = {
        "mode": "quick" if ctx.quick else "full",
        "seed": ctx.seed,
        "trajectories": [p.name for p in ctx.trajectories],
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "seconds": round(seconds, 1),
        **({"rerun": list(rerun)} if rerun else {}),
    }
    (ctx.results_dir / "latest.json").write_text(
        json.dumps({"meta": meta, "measures": list(outcomes)}, indent=2) + "\n", encoding="utf-8"
    )
    header = (
        "# Benchmarks: langgraph-compaction side by side\n\n"
        f"Mode `{meta['mode']}`, seed {ctx.seed}, {len(ctx.trajectories)} real trajectories, "
        f"Python {meta['python']} on {meta['machine']}, {meta['seconds']} s in all. "
        "Every figure is a ratio between systems measured in this one run; absolute times are context only.\n\n"
        + (f"Measures rerun alone since the full run: {', '.join(rerun)}.\n\n" if rerun else "")
        + (
            "A quick run: small inputs, so its figures are labelled QUICK and not checked against the full run's "
            "targets (the committed results in `benchmarks/results/` are the full run).\n"
            if ctx.quick
            else "Reproduce with `python -m benchmarks --write-results` (rewrites `benchmarks/results/`; "
            "`python -m benchmarks --out DIR` writes elsewhere).\n"
        )
    )
    body = "\n\n".join(section(m, o) for m, o in zip(modules, outcomes, strict=False))
    (ctx.results_dir / "report.md").write_text(
        f"{header}\n## Targets\n\n{summary(outcomes)}\n\n{body}\n", encoding="utf-8"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks from the command line; return the exit code."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a small run (a few trajectories, fewer turns): under 5 minutes on 2 cores"
    )
    parser.add_argument(
        "--trajectories",
        type=Path,
        default=None,
        help="folder of .jsonl trajectories (default: tests/data/trajectories)",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these measures (by NAME or module name)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where latest.json, report.md and the PNGs go (default: a new langgraph-compaction-benchmarks-* folder in the "
        "system's temporary folder); scratch files (a few hundred MB at full scale) go to its tmp/ and are removed at the end",
    )
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="rewrite the committed benchmarks/results/: a full run, or with --only those measures rerun into it "
        "(then regenerate the README: python -m benchmarks.readme)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for every synthetic input")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a measure fails or a target is missed")
    args = parser.parse_args(argv)
    if args.write_results and (args.quick or args.out or args.trajectories):
        parser.error(
            "--write-results rewrites the committed full-run results: it takes no --quick, --out or --trajectories"
        )
    if args.out is not None and args.out.resolve() == RESULTS_DIR:
        parser.error(f"--out {args.out}: that folder holds the committed results; rewrite it with --write-results")
    # the anchors' own noise (langmem's trim fallback, LangGraph's notice about langmem's state type) is not a result
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="langmem")
    logging.getLogger("langgraph").setLevel(logging.ERROR)
    modules = discover()
    if args.only:
        wanted = set(args.only)
        unknown = wanted - {getattr(m, "NAME", "") for m in modules} - {m.__name__.rsplit(".", 1)[-1] for m in modules}
        if unknown:
            names = ", ".join(getattr(m, "NAME", m.__name__) for m in modules)
            parser.error(f"--only: unknown measure(s) {', '.join(sorted(unknown))}; known: {names}")
        modules = [m for m in modules if getattr(m, "NAME", None) in wanted or m.__name__.rsplit(".", 1)[-1] in wanted]
    try:
        trajectories = trajectory_files(args.trajectories or default_trajectory_dir(), args.quick)
    except ValueError as exc:
        parser.error(str(exc))
    # made once the arguments are known to be good: a refused run leaves no folder behind
    fresh = not args.write_results and args.out is None
    out = (
        RESULTS_DIR
        if args.write_results
        else args.out or Path(tempfile.mkdtemp(prefix="langgraph-compaction-benchmarks-"))
    )
    ctx = Context(quick=args.quick, trajectories=trajectories, results_dir=out.resolve(), seed=args.seed)
    shutil.rmtree(ctx.results_dir / "tmp", ignore_errors=True)  # scratch files of an earlier run would skew this one
    try:
        started = time.perf_counter()
        outcomes = [run_measure(m, ctx) for m in modules]
        seconds, rerun = time.perf_counter() - started, []
        if args.write_results and args.only:
            previous = json.loads((RESULTS_DIR / "latest.json").read_text(encoding="utf-8"))["meta"]
            seconds, rerun = previous["seconds"], sorted({*previous.get("rerun", ()), *(o["name"] for o in outcomes)})
            outcomes, modules = merged_with_committed(outcomes)
        write_results(outcomes, modules, ctx, seconds, rerun)
    except BaseException:  # interrupted, or the report could not be written: a fresh folder holds nothing worth keeping
        if fresh:
            shutil.rmtree(ctx.results_dir, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(
            ctx.results_dir / "tmp", ignore_errors=True
        )  # scratch (hundreds of MB at full scale), not results
    print(f"[benchmarks] wrote {ctx.results_dir / 'report.md'}", flush=True)
    failed = any(o["status"] != "ok" for o in outcomes)
    missed = any(
        not t["passed"] and not t.get("quick") for o in outcomes for t in o.get("figures", {}).get("targets", [])
    )
    return 1 if args.strict and (failed or missed) else 0
