"""The billed-cost measure counts the requests over the trigger in the package's own units, each request whole."""

from pathlib import Path

from benchmarks.anchors import Thresholds, trajectory_turns
from benchmarks.measures.cost import replay
from langgraph_compaction.core.tokens import estimate_tokens

TRAJECTORY = (
    Path(__file__).resolve().parents[2] / "tests" / "data" / "trajectories" / "oh_claude35_swebv_django-11087.jsonl"
)


def test_requests_over_the_trigger_are_those_whose_history_the_package_counts_over_it(tmp_path):
    turns = trajectory_turns(TRAJECTORY)
    trigger = 20_000
    # with no compaction every request is the whole history so far: the pending messages of each call and all before
    history, expected = [], 0
    for pending, reply in turns:
        history += pending
        expected += estimate_tokens(history) > trigger
        history.append(reply)
    figures = replay("none", TRAJECTORY, tmp_path, Thresholds(context_window=60_000, trigger_tokens=trigger))
    assert 0 < expected < len(turns)  # some requests under the trigger, some over it
    assert figures["over_trigger"] == expected
