"""Regenerate the figures of the README and the documentation from committed results: ``python -m benchmarks.readme``.

Tables and samples in ``README.md`` and ``docs/**/*.md`` sit between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``; each block is
rendered from a committed file:

- ``demo``: ``docs/demo_output.txt``, the output of the offline demo
  (``--demo`` reruns it and redraws ``docs/demo.png``);
- ``headline``, ``targets``, ``misses``, ``cost``, ``checkpoints``, ``background``, ``working_set_anchors``,
  ``working_set_tails``, ``working_set_sessions``: ``benchmarks/results/latest.json``,
  the full benchmark run (``python -m benchmarks --write-results`` rewrites it);
- ``cost_curve``: the stored outputs of ``notebooks/03_cost_curve.ipynb``
  (``--notebooks`` re-executes every notebook and stores its outputs).

``--check`` rewrites nothing and exits 1 when a page disagrees with the
committed files. ``benchmarks/tests/test_generated_blocks.py`` runs that check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from benchmarks.report import verdict

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
DEMO_OUTPUT = REPO_ROOT / "docs" / "demo_output.txt"
DEMO_PLOT = REPO_ROOT / "docs" / "demo.png"
RESULTS = REPO_ROOT / "benchmarks" / "results" / "latest.json"
NOTEBOOKS = REPO_ROOT / "notebooks"
COST_CURVE = NOTEBOOKS / "03_cost_curve.ipynb"
#: The demo the README shows: all defaults but a fixed thread, so that a rerun gives the same figures.
DEMO_ARGS = ("demo", "--thread", "readme", "--storage", ".compaction")
#: Compaction lines the README shows before the totals.
DEMO_LINES = 3
_BLOCK = re.compile(r"(<!-- generated:(\w+) -->\n)(.*?)(<!-- /generated:\2 -->)", re.DOTALL)
_EXPONENTS = re.compile(r"growth exponent without compaction: ([\d.]+), with compaction: ([\d.]+)")
_SAVED = re.compile(r"saved: ([\d.]+%)")


# --- running what the figures come from ------------------------------------------------


def run_demo_sample() -> None:
    """Run the offline demo as a user would (no API key, an empty folder); store its output and plot under docs/.

    The folder is the same on every run (`fixed_workdir`), so a rerun of the same code gives the same figures.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["COLUMNS"] = "100"  # the table's width, whatever the terminal
    with fixed_workdir("langgraph-compaction-demo") as work:
        run = subprocess.run(
            [sys.executable, "-m", "langgraph_compaction", *DEMO_ARGS],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        DEMO_OUTPUT.write_text(run.stdout, encoding="utf-8")
        shutil.copyfile(Path(work, ".compaction", "demo.png"), DEMO_PLOT)


@contextlib.contextmanager
def fixed_workdir(name: str) -> Iterator[Path]:
    """Yield the temporary folder ``name``, the same path on every run (emptied first, removed after).

    A summary names the transcript's absolute path, so the folder's name moves token counts: stored figures
    and the runs compared with them must come from a folder of the same name.
    """
    work = Path(tempfile.gettempdir()) / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def notebook_workdir() -> contextlib.AbstractContextManager[Path]:
    """Return the folder notebooks run in (`fixed_workdir`), for their stored outputs and the test that reruns them."""
    return fixed_workdir("langgraph-compaction-notebook")


def execute_notebook(path: Path, workdir: Path):
    """Return the notebook at ``path`` executed top to bottom in ``workdir`` with the python3 kernel."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    # no per-cell timestamps: a rerun with the same results leaves the stored notebook unchanged
    NotebookClient(
        book, timeout=300, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(workdir)}}
    ).execute()
    return book


def outputs_text(book) -> str:
    """Return the text of every output of a notebook, cell by cell."""
    texts = []
    for cell in book.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text") or "".join((output.get("data") or {}).get("text/plain", "")))
    return "\n".join(texts)


def regenerate_notebooks(names: Sequence[str] = ()) -> None:
    """Execute the notebooks (all, or those named) in a temporary folder and store them with their outputs."""
    import nbformat

    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        if names and path.name not in names and path.stem not in names:
            continue
        with notebook_workdir() as work:
            book = execute_notebook(path, work)
        nbformat.write(book, path)
        print(f"[readme] executed {path.relative_to(REPO_ROOT)}", flush=True)


# --- the blocks ---------------------------------------------------------------------------


def demo_block() -> str:
    """Return the demo sample: its first compaction lines and its totals, as ``docs/demo_output.txt`` holds them."""
    lines = DEMO_OUTPUT.read_text(encoding="utf-8").splitlines()
    events = [line for line in lines if re.match(r"turn +\d+ call +\d+ ", line)]
    start = next(i for i, line in enumerate(lines) if line.startswith("Session totals"))
    end = next(i for i, line in enumerate(lines) if line.startswith("compactions by layer:"))
    return "```\n" + "\n".join([*events[:DEMO_LINES], "...", *lines[start : end + 1]]) + "\n```\n"


def targets_block() -> str:
    """Return the table of every benchmark target with its verdict, from the committed full run."""
    results = _results()
    rows = ["| measure | target | result |", "|---|---|---|"]
    for outcome in results["measures"]:
        if outcome["status"] != "ok":
            rows.append(f"| {outcome['name']} | (the measure failed) | FAILED |")
        for target in _targets(outcome):
            rows.append(f"| {outcome['name']} | {target['name']} | {verdict(target)} |")
    meta = results["meta"]
    note = (
        f"From `benchmarks/results/latest.json`: the {meta['mode']} run, "
        f"{len(meta['trajectories'])} real trajectories, seed {meta['seed']}"
    )
    note += f" (rerun alone since: {', '.join(meta['rerun'])})" if meta.get("rerun") else ""
    return "\n".join(rows) + f"\n\n{note}.\n"


def _results() -> dict:
    """Return the committed full run."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def _targets(outcome: dict) -> list[dict]:
    """Return one measure's targets (none for a measure that failed)."""
    return outcome.get("figures", {}).get("targets", [])


def _recall(totals: dict) -> str:
    """Return a system's working-set recall as the tables show it ('–' where it was not measured)."""
    return "–" if totals.get("ws_recall") is None else f"{100 * totals['ws_recall']:.1f} %"


def _figures(name: str) -> dict:
    """Return one measure's figures from the committed full run."""
    outcome = next((m for m in _results()["measures"] if m["name"] == name), None)
    if outcome is None or outcome["status"] != "ok":
        raise SystemExit(
            f"{RESULTS.name} has no figures of {name}; run python -m benchmarks --write-results --only {name}"
        )
    return outcome["figures"]


#: The cost table's rows: the label shown, the row of the billed_cost measure.
COST_ROWS = {
    "langgraph-compaction": "ours",
    "LangChain middleware": "langchain",
    "langmem": "langmem",
    "no compaction (past the window)": "none",
    "langgraph-compaction, 8k tail and the working set": "ours, 8k tail",
    "LangChain middleware, 2k tail": "langchain, 2k tail",
    "langmem, 2k tail": "langmem, 2k tail",
}


#: Rows shown when the committed run has them (the working-set runs), after ``COST_ROWS``.
WORKING_SET_ROWS = {
    "langgraph-compaction, 2k tail, no working set": "ours, 2k tail, no working set",
    "langgraph-compaction, 8k tail, no working set": "ours, 8k tail, no working set",
}


def cost_block() -> str:
    """Return the billed-cost table (18 trajectories, 60k window), from the committed full run.

    A run that measured the working set also shows its recall and the bill
    with the re-read charge, and the tails without the working set.
    """
    totals = _figures("billed_cost")["totals"]
    working_set = "ws_recall" in totals["ours"]
    rows = [
        "| system | billed (OpenAI) | vs none | billed (Anthropic) | hit ratio | breaks "
        "| summarizer + flush input (cached) | paths / changed / requests / constraints recalled |"
        + (" working-set recall | billed with re-reads (OpenAI) |" if working_set else ""),
        "|---|---:|---:|---:|---:|---:|---:|---|" + ("---:|---:|" if working_set else ""),
    ]
    shown = {**COST_ROWS, **({k: v for k, v in WORKING_SET_ROWS.items() if v in totals} if working_set else {})}
    for label, key in shown.items():
        t = totals[key]
        recall = " / ".join(
            "–" if t[f"{k}_recall"] is None else f"{100 * t[f'{k}_recall']:.4g}"
            for k in ("paths", "changed", "requests", "constraints")
        )
        side = f"{t['side_input'] / 1e6:.2f}M ({100 * (t['side_cached_ratio'] or 0):.0f} %)" if t["side_input"] else "–"
        extra = f" {_recall(t)} | {t['billed_openai_reread'] / 1e6:.2f}M |" if working_set else ""
        rows.append(
            f"| {label} | {t['billed_openai'] / 1e6:.2f}M | {t['vs_none_openai']:.3f}× "
            f"| {t['billed_anthropic'] / 1e6:.2f}M | {t['hit_ratio']:.3f} | {t['breaks']} | {side} "
            f"| {recall}{' %' if t['paths_recall'] is not None else ''} |{extra}"
        )
    return "\n".join(rows) + "\n"


def checkpoint_block() -> str:
    """Return the checkpoint-size table (300 turns, both savers), from the committed full run."""
    f = _figures("checkpoint_bytes")
    once = f["conversation_once"]
    rows = [
        "| saver | ours | vs the conversation once | added per turn | LangChain's middleware | langmem "
        "| no compaction |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, key in (
        ("SQLite (bytes of its rows)", "sqlite"),
        ("PostgreSQL (checkpoints, blobs, writes)", "postgres"),
    ):
        sizes = f[key]
        if not sizes:
            continue
        marks = list(sizes["ours"])
        first, last = marks[0], marks[-1]
        per_turn = (sizes["ours"][last] - sizes["ours"][first]) / (int(last) - int(first))
        others = [
            f"{sizes[s][last] / 1e6:,.2f} MB ({sizes[s][last] / once:.3g}×)" for s in ("langchain", "langmem", "none")
        ]
        rows.append(
            f"| {label} | {sizes['ours'][last] / 1e6:.2f} MB | {sizes['ours'][last] / once:.2f}× "
            f"| {per_turn / 1e3:.1f} kB | " + " | ".join(others) + " |"
        )
    return (
        f"After {f['turns']} turns; the conversation serialized once is {once / 1e6:.2f} MB.\n\n"
        + "\n".join(rows)
        + "\n"
        + _windows_block(f)
    )


def _windows_block(f: dict) -> str:
    """Return this package's defaults at each window on both savers (nothing for results that predate the measure)."""
    windows = f.get("windows")
    if not windows:
        return ""
    once, last = windows["conversation_once"], str(f["turns"])
    savers = [key for key in ("sqlite", "postgres") if windows[key]]
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        "| window | " + " | ".join(f"{names[key]} | vs once" for key in savers) + " |",
        "|---|" + "---:|---:|" * len(savers),
    ]
    for label in windows[savers[0]] if savers else ():
        cells = [
            f"{windows[key][label][last] / 1e6:.2f} MB | {windows[key][label][last] / once:.2f}×" for key in savers
        ]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return (
        f"\nThe defaults at each window, tool results of {windows['result_chars']:,} characters "
        f"(the conversation once: {once / 1e6:.2f} MB):\n\n" + "\n".join(rows) + "\n"
    )


def cost_curve_block() -> str:
    """Return the cost-curve figures as the stored outputs of notebook 03 print them."""
    import nbformat

    text = outputs_text(nbformat.read(COST_CURVE, as_version=4))
    exponents, saved = _EXPONENTS.search(text), _SAVED.search(text)
    if not exponents or not saved:
        raise SystemExit(f"{COST_CURVE.name} has no stored outputs; run python -m benchmarks.readme --notebooks")
    return (
        f"Measured (the notebook's stored outputs): growth exponent {exponents.group(1)} without compaction and "
        f"{exponents.group(2)} with it; {saved.group(1)} of the input tokens saved.\n"
    )


#: The anchors of the README's headline table: the label shown, the row of the billed_cost and checkpoint_bytes
#: measures.
HEADLINE_ROWS = {
    "langgraph-compaction": "ours",
    "LangChain `SummarizationMiddleware`": "langchain",
    "langmem `SummarizationNode`": "langmem",
    "no compaction": "none",
}


def headline_block() -> str:
    """Return the README's headline figures: ours against each anchor, from the committed full run."""
    totals = _figures("billed_cost")["totals"]
    checkpoints = _figures("checkpoint_bytes")
    sqlite = checkpoints["sqlite"]
    rows = [
        "| system | billed input tokens, 18 trajectories | paths / requests kept after compaction "
        f"| edits with the file's latest read in context | SQLite checkpoints after {checkpoints['turns']} turns |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, key in HEADLINE_ROWS.items():
        t = totals[key]
        recall = (
            "–"
            if t["paths_recall"] is None
            else f"{100 * t['paths_recall']:.0f} % / {100 * t['requests_recall']:.0f} %"
        )
        size = sqlite[key][max(sqlite[key], key=int)] if sqlite else None
        rows.append(
            f"| {label} | {t['billed_openai'] / 1e6:.2f}M "
            f"({t['billed_openai'] / totals['ours']['billed_openai']:.2f}×) "
            f"| {recall} | {_recall(t)} | {'–' if size is None else f'{size / 1e6:,.1f} MB'} |"
        )
    results = _results()
    targets = [t for m in results["measures"] for t in _targets(m)]
    met = sum(t["passed"] for t in targets)
    return (
        "\n".join(rows)
        + f"\n\n{met} of the {len(targets)} benchmark targets met in the committed {results['meta']['mode']} run.\n"
    )


def background_block() -> str:
    """Return the timed-session figures of blocking and background compaction at each window.

    They come from the committed full run.
    """
    results = _results()
    if not any(m["name"] == "background_compaction" and m["status"] == "ok" for m in results["measures"]):
        return "(not in the committed results yet: `python -m benchmarks --write-results` measures it)\n"
    figures = _figures("background_compaction")
    rows = [
        "| window | system | wall time added | stall at p95 | compactions that blocked "
        "| prepared summaries discarded | billed vs blocking |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    systems = {
        "ours, blocking": "blocking",
        "ours, background": "background",
        "langchain": "LangChain middleware",
        "langmem": "langmem",
    }
    for window, totals in figures["totals"].items():
        blocking = max(1, totals["ours, blocking"]["billed_openai"])
        for key, label in systems.items():
            t = totals[key]
            blocked = f"{t['blocked']} of {t['compactions']}" if key.startswith("ours") else "all"
            discarded = f"{t['discarded']} of {t['prepared']}" if t["prepared"] else "–"
            rows.append(
                f"| {window} | {label} | {100 * t['added']:+.1f} % | {t['stall_p95'] / (t['L'] or 1):.2f} L "
                f"| {blocked} | {discarded} | {t['billed_openai'] / blocking:.3f}× |"
            )
    return "\n".join(rows) + "\n"


#: The systems of the working-set page's tables against the anchors: the label shown, the billed_cost row.
WORKING_SET_ANCHORS = {
    "**ours (default)**": "ours",
    "LangChain middleware": "langchain",
    "langmem": "langmem",
    "no compaction (past the window)": "none",
}
#: The kept tails of the working-set page, with and without the working set: (tail, working set), the billed_cost row.
WORKING_SET_TAILS = {
    ("2k", "off"): "ours, 2k tail, no working set",
    ("**2k**", "**6k (default)**"): "ours, 2k tail + working set",
    ("8k (`prompt_cache=False`)", "off"): "ours, 8k tail, no working set",
    ("8k", "6k"): "ours, 8k tail",
}


def working_set_anchors_block() -> str:
    """Return ours against the anchors at each window, with working-set recall and the re-read charge."""
    windows = _figures("billed_cost")["windows"]
    tables = []
    for label, window in windows.items():
        totals = window["totals"]
        best = min(("langchain", "langmem"), key=lambda k: totals[k]["billed_openai_reread"])
        rows = [
            f"| {label} window | working-set recall | re-reads | billed | with re-read "
            f"| vs best anchor ({'LangChain' if best == 'langchain' else best}), with re-read |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, key in WORKING_SET_ANCHORS.items():
            t = totals[key]
            rows.append(
                f"| {name} | {_recall(t)} ({t['ws_hits']}/{t['ws_edits']}) | {t['rereads']} "
                f"| {t['billed_openai'] / 1e6:.2f}M | {t['billed_openai_reread'] / 1e6:.2f}M "
                f"| {t['billed_openai_reread'] / totals[best]['billed_openai_reread']:.3f}× |"
            )
        tables.append("\n".join(rows) + "\n")
    return "\n".join(tables)


def working_set_tails_block() -> str:
    """Return ours with each kept tail, with and without the working set, at each window."""
    windows = _figures("billed_cost")["windows"]
    rows = [
        "| tail | working set | "
        + " | ".join(f"{w}: recall | {w}: billed | {w}: with re-read" for w in windows)
        + " |",
        "|---|---|" + "---:|---:|---:|" * len(windows),
    ]
    for (tail, kept), key in WORKING_SET_TAILS.items():
        totals = [w["totals"][key] for w in windows.values()]
        cells = [
            f"{_recall(t)} | {t['billed_openai'] / 1e6:.2f}M | {t['billed_openai_reread'] / 1e6:.2f}M" for t in totals
        ]
        rows.append(f"| {tail} | {kept} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def working_set_sessions_block() -> str:
    """Return the working set's recall on the real trajectories and the stress set, both ways, per window."""
    from benchmarks.measures.working_set import groups_table

    return groups_table(_figures("working_set")) + "\n"


#: Why each measure that misses a target in the committed run misses it, by measure; no figures (the block shows
#: them from the results). A measure that misses with no entry here, or an entry for a measure that misses nothing,
#: stops ``misses_block``: the reasons stay those of the committed run.
WHY_MISSED = {
    "billed_cost": (
        "The bill is the price of [the working set](working-set.md): the files the agent edits stay in context "
        "after every summary, and every kept token is billed in full once after each summary and again (cached) on "
        'each later call. Without the working set ours bills under the target (the row "2k tail, no working set" '
        "of [the cost table](#cost-under-prompt-caching-at-equal-fidelity)), and the agent loses the latest read "
        "of many more of the files it edits (the same row's working-set recall). The share of agent input not "
        "served from the cache cannot meet its target together with the bill's: every message is sent uncached at "
        "least once, and what a summary keeps is sent uncached again after it. The working-set recall at 128k misses for the reason given "
        "under working_set."
    ),
    "checkpoint_bytes": (
        "PostgreSQL keeps more bytes than SQLite for the same checkpoints at every window (a step's writes and each "
        "new channel version are rows of their own), and a 32k window compacts most often, each compaction writing "
        "a summary and the removals of what it replaced: together they pass the limit, where each alone stays "
        "under it."
    ),
    "cumulative_tokens": (
        "Raw tokens, so ours runs with `prompt_cache=False` there. LangChain's compactions call no model in a tool "
        'loop (it writes "Previous conversation was too long to summarize."); ours write real summaries and memory '
        "flushes."
    ),
    "gate_overhead": (
        "The gate's own call, on a history restored fresh from a checkpoint before each call: an exact check "
        "fingerprints every message (a same-length edit must be recounted) and plans the compaction, where "
        "LangChain's `before_model` only estimates the tokens and checks its trigger; at 100 messages its fixed cost per call is most of "
        "it. The whole graph on a history where nothing needs compaction is within its target, "
        "thread-less and with a checkpointer; the row with `InMemorySaver` times a session with its compactions, "
        "in which ours also flushes memories, writes every message to the transcript and keeps its state in "
        "`DeltaChannel`s read back to their last snapshot at every load."
    ),
    "working_set": (
        "The working set's budget is the limit, not the choice of files: ranking the files by the recorded future "
        "(the file edited next first) lowers the misses little, and twice the budget leaves them over the target "
        "while the bill passes langmem's. A read in a round of parallel calls stays only with the whole round, "
        "often larger than the budget; when the newest file's read does not fit, no older file takes its place; "
        "and many edits are of files read tens to hundreds of calls before. Every page would need every page of each "
        "edited file in view besides the latest reads, more than the budget holds."
    ),
}


def misses_text(measures: Sequence[dict], reasons: dict[str, str]) -> str:
    """Return one item per measure that misses a target: each missed target with its verdict, then why.

    Raises:
        SystemExit: a measure misses with no reason in ``reasons``, or a reason names a measure that misses nothing.
    """
    items, missing, failing = [], [], set()
    for outcome in measures:
        missed = [t for t in _targets(outcome) if not t["passed"]]
        if not missed:
            continue
        failing.add(outcome["name"])
        if outcome["name"] not in reasons:
            missing.append(outcome["name"])
            continue
        shown = "; ".join(f"{t['name']}: {verdict(t)}" for t in missed)
        items.append(f"- **{outcome['name']}** ({shown}). {reasons[outcome['name']]}")
    stale = set(reasons) - failing
    if missing or stale:
        raise SystemExit(
            "benchmarks/readme.py WHY_MISSED disagrees with the committed results: "
            + (f"say why {', '.join(missing)} miss; " if missing else "")
            + (f"drop {', '.join(sorted(stale))} (nothing missed)" if stale else "")
        )
    return "\n".join(items) + "\n" if items else "Every target is met in the committed run.\n"


def misses_block() -> str:
    """Return each measure that misses a target in the committed full run, its missed targets and why."""
    return misses_text(_results()["measures"], WHY_MISSED)


BLOCKS: dict[str, Callable[[], str]] = {
    "headline": headline_block,
    "demo": demo_block,
    "targets": targets_block,
    "cost_curve": cost_curve_block,
    "cost": cost_block,
    "checkpoints": checkpoint_block,
    "background": background_block,
    "misses": misses_block,
    "working_set_anchors": working_set_anchors_block,
    "working_set_tails": working_set_tails_block,
    "working_set_sessions": working_set_sessions_block,
}


def pages() -> list[Path]:
    """Return the files whose generated blocks this command renders: the README and every documentation page."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def render(text: str, name: str = "README.md") -> str:
    """Return ``text`` with every generated block rendered from the committed files."""

    def fill(match: re.Match) -> str:
        block = match.group(2)
        if block not in BLOCKS:
            raise SystemExit(f"{name}: unknown generated block {block!r}; known: {', '.join(BLOCKS)}")
        return match.group(1) + BLOCKS[block]() + match.group(4)

    return _BLOCK.sub(fill, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.readme", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--demo", action="store_true", help="rerun the offline demo first (docs/demo_output.txt, docs/demo.png)"
    )
    parser.add_argument(
        "--notebooks",
        nargs="*",
        metavar="NAME",
        help="re-execute these notebooks (all when none is named) and store their outputs first",
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a page disagrees with the committed files"
    )
    args = parser.parse_args(argv)
    if args.check and (args.demo or args.notebooks is not None):
        parser.error("--check changes nothing: it takes no --demo or --notebooks")
    if args.demo:
        run_demo_sample()
    if args.notebooks is not None:
        regenerate_notebooks(args.notebooks)
    stale = []
    for page in pages():
        name = str(page.relative_to(REPO_ROOT))
        current = page.read_text(encoding="utf-8")
        wanted = render(current, name)
        if wanted == current:
            continue
        stale.append(name)
        if not args.check:
            page.write_text(wanted, encoding="utf-8")
    if args.check:
        if stale:
            print(
                f"{', '.join(stale)} disagree with the committed results; run python -m benchmarks.readme",
                file=sys.stderr,
            )
            return 1
        return 0
    print(
        f"[readme] {'rewritten: ' + ', '.join(stale) if stale else 'README.md and docs/ already up to date'}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
