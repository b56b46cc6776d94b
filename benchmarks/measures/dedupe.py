"""Measure: what layer 2's superseded results save (``CompactionConfig(dedupe_results=True)``, the default).

An agent reads a file again, runs ``git status`` again: the older result is
obsolete, and layer 2 shortens it to a marker naming the newer one (never
across a change of the file in between). The 18 real trajectories are
replayed as the billed-cost measure replays ours (60k window, the
summarizer being the agent's model), once with ``dedupe_results=False`` and
once with the default, and compared: the agent's input tokens, the bill
under prompt caching (OpenAI and Anthropic pricing, as in that measure),
prefix breaks, summaries, and how many results were shortened. The same pair
runs with ``prompt_cache=False`` too (layer-2 edits whenever they fire: the
raw-token view, as the cumulative-tokens measure bills). Recall of
changed files, requests and constraints is checked after every compaction
in both runs, as the fidelity measure does.
"""

from __future__ import annotations

from benchmarks.measures.cost import replay
from benchmarks.measures.fidelity import KINDS
from benchmarks.measures.replay import THRESHOLDS
from benchmarks.report import check, table, targets_table
from langgraph_compaction.core.billing import PRICES
from langgraph_compaction.core.config import CompactionConfig

NAME = "dedupe"
PLOT = "dedupe_savings.png"
_WINDOW = THRESHOLDS.context_window
RUNS = {
    "without": CompactionConfig(context_window=_WINDOW, dedupe_results=False),
    "with": CompactionConfig(context_window=_WINDOW),
    "without, prompt_cache=False": CompactionConfig(context_window=_WINDOW, dedupe_results=False, prompt_cache=False),
    "with, prompt_cache=False": CompactionConfig(context_window=_WINDOW, prompt_cache=False),
}
#: (saving, run without, run with) compared.
PAIRS = (("cached", "without", "with"), ("uncached", "without, prompt_cache=False", "with, prompt_cache=False"))
FIGURES = (
    "agent_input",
    "billed_openai",
    "billed_anthropic",
    "breaks",
    "compactions",
    "superseded",
    *KINDS,
    *(f"{k}_found" for k in KINDS),
)


def savings(without: dict, with_: dict) -> dict:
    """Return what the dedupe run saved over the run without it: tokens, billed cost (both pricings), results shortened."""
    out = {"results_shortened": with_["superseded"], "agent_input_saved": without["agent_input"] - with_["agent_input"]}
    for name in PRICES:
        out[f"billed_{name}_saved"] = without[f"billed_{name}"] - with_[f"billed_{name}"]
        out[f"billed_{name}_ratio"] = round(with_[f"billed_{name}"] / max(1, without[f"billed_{name}"]), 4)
    return out


def run(ctx) -> dict:
    per: dict[str, dict] = {}
    for path in ctx.trajectories:
        # the same folder name in both runs: a summary names the transcript's path, and its length is counted
        runs = {
            row: replay("ours", path, ctx.scratch_dir / f"dedupe-{i}" / path.stem, THRESHOLDS, config)
            for i, (row, config) in enumerate(RUNS.items())
        }
        per[path.stem] = {row: {k: f[k] for k in FIGURES} for row, f in runs.items()}
        per[path.stem]["saved"] = savings(per[path.stem]["without"], per[path.stem]["with"])
        per[path.stem]["saved_uncached"] = savings(per[path.stem][PAIRS[1][1]], per[path.stem][PAIRS[1][2]])
    totals = {row: {k: sum(per[t][row][k] for t in per) for k in FIGURES} for row in RUNS}
    saved = savings(totals["without"], totals["with"])
    saved_uncached = savings(totals[PAIRS[1][1]], totals[PAIRS[1][2]])
    recall = {row: {k: round(totals[row][f"{k}_found"] / max(1, totals[row][k]), 4) for k in KINDS} for row in RUNS}
    targets = [
        check("dedupe: billed (OpenAI) with / without", saved["billed_openai_ratio"], 1.0),
        check(
            "dedupe: recall lost (changed files, requests, constraints)",
            max(totals_recall_lost(recall, off, on) for _, off, on in PAIRS),
            0.0,
            unit="",
        ),
    ]
    _plot(per, ctx.results_dir / PLOT)
    return {
        "totals": totals,
        "saved": saved,
        "saved_uncached": saved_uncached,
        "recall": recall,
        "per_trajectory": per,
        "plot": PLOT,
        "targets": targets,
    }


def totals_recall_lost(recall: dict, off: str, on: str) -> float:
    """Return the largest drop of recall (changed files, requests, constraints, paths) the dedupe caused."""
    return max(recall[off][k] - recall[on][k] for k in KINDS)


def _plot(per: dict, path) -> None:
    """Draw, per trajectory, the agent input tokens saved and the results shortened."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(per, key=lambda t: -per[t]["saved_uncached"]["agent_input_saved"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.4
    rows = range(len(names))
    left.barh(
        [r - width / 2 for r in rows],
        [per[t]["saved"]["agent_input_saved"] / 1e3 for t in names],
        width,
        label="prompt_cache=True",
    )
    left.barh(
        [r + width / 2 for r in rows],
        [per[t]["saved_uncached"]["agent_input_saved"] / 1e3 for t in names],
        width,
        label="prompt_cache=False",
    )
    left.set_yticks(list(rows), names)
    left.set(xlabel="agent input tokens saved (thousands)", title="Superseded results: tokens saved per trajectory")
    left.legend()
    left.invert_yaxis()
    right.barh(names, [per[t]["saved_uncached"]["results_shortened"] for t in names])
    right.set(xlabel="results shortened", title="Results superseded by a later identical call")
    right.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(figures: dict) -> str:
    totals, saved, raw, per = figures["totals"], figures["saved"], figures["saved_uncached"], figures["per_trajectory"]
    rows = [
        (
            row,
            f"{t['agent_input'] / 1e6:.3f}M",
            f"{t['billed_openai'] / 1e6:.3f}M",
            f"{t['billed_anthropic'] / 1e6:.3f}M",
            t["breaks"],
            t["compactions"],
            t["superseded"],
            *(f"{100 * figures['recall'][row][k]:.1f} %" for k in KINDS),
        )
        for row, t in totals.items()
    ]
    per_rows = [
        (
            name,
            p["saved"]["results_shortened"],
            f"{p['saved']['agent_input_saved']:,}",
            f"{p['saved']['billed_openai_saved']:,}",
            p["saved_uncached"]["results_shortened"],
            f"{p['saved_uncached']['agent_input_saved']:,}",
        )
        for name, p in sorted(per.items())
    ]
    return f"""## Superseded results (layer 2 dedupe)

{len(per)} real trajectories replayed as in the billed-cost measure (ours at its defaults for a
60k window), without and with `dedupe_results`. Saved: {saved["results_shortened"]} results shortened,
{saved["agent_input_saved"]:,} agent input tokens, billed {saved["billed_openai_saved"]:,} (OpenAI,
{saved["billed_openai_ratio"]:.4f}× of the bill without) and {saved["billed_anthropic_saved"]:,} (Anthropic,
{saved["billed_anthropic_ratio"]:.4f}×) token-equivalents. With `prompt_cache=False` (edits whenever they fire):
{raw["results_shortened"]} results shortened and {raw["agent_input_saved"]:,} agent input tokens saved, while the bill
(OpenAI) is {raw["billed_openai_ratio"]:.4f}× the bill without: each edit breaks the cached prefix, which is why layer-2
edits wait for the cache rule by default.

{targets_table(figures["targets"])}

{table(["run", "agent input", "billed (OpenAI)", "billed (Anthropic)", "breaks", "summaries", "results shortened", *(f"{k} recall" for k in KINDS)], rows)}

![dedupe savings]({figures["plot"]})

Per trajectory:

{table(["trajectory", "results shortened", "agent input saved", "billed saved (OpenAI)", "shortened, prompt_cache=False", "input saved, prompt_cache=False"], per_rows)}
"""
