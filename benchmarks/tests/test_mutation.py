"""The mutation command's figures file: a run of some modules keeps the others' figures."""

from __future__ import annotations

from benchmarks.mutation import merged, policy_modules, tally


def test_a_run_of_some_modules_replaces_their_figures_and_keeps_the_others_in_pyproject_order():
    modules = ["m.plan", "m.trail", "m.working_set"]
    earlier = {
        "m.plan": {"killed": 7, "total": 9},
        "m.trail": {"killed": 1, "total": 4},
        "m.gone": {"killed": 1, "total": 1},
    }
    run = {"m.working_set": {"killed": 5, "total": 5}, "m.trail": {"killed": 4, "total": 4}}
    assert merged(earlier, run, modules) == {
        "m.plan": {"killed": 7, "total": 9},
        "m.trail": {"killed": 4, "total": 4},
        "m.working_set": {"killed": 5, "total": 5},
    }
    assert list(merged(earlier, run, modules)) == modules


def test_the_tally_counts_killed_and_timed_out_mutants_of_the_modules_asked_for_only():
    listing = "\n".join(
        [
            "    m.trail.x_f__mutmut_1: killed",
            "    m.trail.x_f__mutmut_2: timeout",
            "    m.trail.x_f__mutmut_3: survived",
            "    m.plan.x_g__mutmut_1: not checked",
            "    m.trail_bound.x_h__mutmut_1: killed",
        ]
    )
    assert tally(listing, ["m.trail", "m.working_set"]) == {
        "m.trail": {"killed": 2, "total": 3},
        "m.working_set": {"killed": 0, "total": 0},
    }


def test_the_policy_modules_are_the_six_pyproject_lists():
    assert policy_modules() == [
        "langgraph_compaction.core.plan",
        "langgraph_compaction.core.layers",
        "langgraph_compaction.core.working_set",
        "langgraph_compaction.core.background",
        "langgraph_compaction.core.trail",
        "langgraph_compaction.core.trail_bound",
    ]
