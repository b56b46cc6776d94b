"""The billed-cost measure's replay: on a real trajectory every cache break comes with a summary."""

from pathlib import Path

from benchmarks.measures.cost import replay

TRAJECTORY = (
    Path(__file__).resolve().parents[2] / "tests" / "data" / "trajectories" / "oh_claude35_swebv_django-11087.jsonl"
)


def test_on_a_real_trajectory_every_break_comes_with_a_summary_and_recall_stays_whole(tmp_path):
    figures = replay("ours", TRAJECTORY, tmp_path)
    assert figures["compactions"] >= 1
    assert figures["breaks"] <= figures["compactions"]
    for kind in ("changed", "requests", "constraints"):
        assert figures[f"{kind}_found"] == figures[kind], kind
