"""Property-based proof of the invariants, plus the checker's own tests (a checker that never fails proves nothing).

The conversations come from ``langgraph_compaction.testing.conversations.random_conversation``
(parallel, interleaved and mixed rounds, reused call ids, orphans, unanswered
calls, content blocks, huge, empty and non-ASCII messages, invalid calls),
driven by hypothesis' seeded random. ``python -m benchmarks.stress`` runs the
same examples by the hundred thousand.
"""

from __future__ import annotations

import logging
import random
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage, messages_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from support.checked import CheckedThread, build_checked_graph, request

from langgraph_compaction import FileStorage
from langgraph_compaction.core.conversation import leading_systems
from langgraph_compaction.core.plan import compacted_view, find_cutoff
from langgraph_compaction.core.summary import build_summary_message
from langgraph_compaction.engine.nodes import CompactionEngine
from langgraph_compaction.invariants import (
    INVARIANTS,
    bounded_problems,
    broken_tool_ids,
    duplicate_problems,
    escaped_paths,
    history_problems,
    lost_messages,
)
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.testing.conversations import random_config, random_conversation
from langgraph_compaction.testing.stress import replay_trajectory, run_example

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectories"
# a seed per example: drawing every choice through hypothesis would cost more than the check (the seed is reported)
SEEDS = st.integers(0, 2**32 - 1)


def quiet(examples: int) -> settings:
    """Return hypothesis settings for ``examples`` slow-ish examples (no deadline, no size health checks)."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )


@pytest.fixture(autouse=True)
def _quiet_log():
    # injected faults log a warning each; thousands of them would only slow the run
    logger = logging.getLogger("langgraph_compaction")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


# --- the pure core: any conversation, any budget ------------------------------------------------


@quiet(2_500)
@given(SEEDS, st.integers(0, 4_000), st.integers(1, 12))
def test_any_cut_of_any_conversation_keeps_a_valid_history(seed, keep_tokens, keep_messages):
    messages = random_conversation(random.Random(seed))
    sizes = [len(str(m.content)) // 4 + 3 for m in messages]  # any sizes: the cut's safety must not depend on them
    cut = find_cutoff(messages, sizes, keep_tokens, keep_messages)
    if cut is None:
        return
    view = compacted_view(
        messages, {messages[i].id for i in cut.evict}, build_summary_message("## SESSION INTENT\nx\n## SUMMARY\ny")
    )
    assert history_problems(view, messages) == []
    # the summarize node's update gives exactly this view through the stock reducer
    assert [m.id for m in add_messages(messages, [RemoveMessage(id="__remove_all__"), *view])] == [m.id for m in view]


@quiet(300)
@given(SEEDS)
def test_the_gate_plan_never_evicts_a_leading_system_message_or_the_latest_request(seed):
    rng = random.Random(seed)
    messages = random_conversation(rng)  # some with a system reminder before user turns: conversation, evictable
    nodes = CompactionEngine(before="agent", model=None, config=random_config(rng))
    plan = nodes.plan(messages, manual=True)
    latest = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
    if plan.cut is not None:
        assert latest not in plan.cut.evict
        assert all(i >= leading_systems(messages) for i in plan.cut.evict)


# --- the nodes under random faults, model call by model call --------------------------------------


@quiet(60)
@given(SEEDS, st.booleans())
def test_random_conversations_under_random_faults_keep_every_invariant(seed, file_storage):
    problems = run_example(random.Random(seed), faults=True, storage="file" if file_storage else "store")
    assert {name: found for name, found in problems.items() if found} == {}


def test_a_random_example_prepares_its_summaries_in_the_calling_thread(monkeypatch):
    # a job in a thread of its own drew from the example's random faults beside the agent (a seed did not replay
    # the same way) and wrote prepared summaries after the example had deleted its folder
    threads: set[str] = set()
    write = FileStorage.write_prepared

    def recorded(self, thread_id, key, record):
        threads.add(threading.current_thread().name)
        return write(self, thread_id, key, record)

    monkeypatch.setattr(FileStorage, "write_prepared", recorded)
    for seed in range(6):
        run_example(random.Random(seed), faults=False, storage="file")
    assert threads == {threading.current_thread().name}


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.jsonl")))
def test_real_trajectories_with_compaction_every_few_calls_break_nothing(name):
    sim = replay_trajectory(DATA / f"{name}.jsonl")
    assert sim.ledger.all() == []
    compactions = [e for e in sim.events if e.get("stage") == "summarize" and e.get("layer")]
    calls = sum(m.type == "ai" for m in sim.ledger.history)
    assert compactions and (calls < 20 or len(compactions) >= calls // 6)


# --- the compiled graph, a few random runs -----------------------------------------------------


@quiet(12)
@given(
    st.integers(2, 7),
    st.sampled_from([None, RuntimeError("down"), "", "NO_REPLY"]),
    st.sampled_from([None, ValueError("x"), "junk"]),
)
def test_the_compiled_graph_keeps_every_invariant(tmp_path_factory, turns, summary_fault, memory_fault):
    root = tmp_path_factory.mktemp("store")
    summarizer = ScriptedModel(summary=summary_fault)
    graph, agent = build_checked_graph(
        summarizer, storage=root, checkpointer=InMemorySaver(), flush_model=ScriptedModel(memory=memory_fault)
    )
    thread = CheckedThread(graph, agent, FileStorage(root))
    for t in range(turns):
        graph.invoke(request(t), thread.config)
    assert thread.check() == []
    assert agent.calls("t") == turns * 3


# --- the checker catches what it must ----------------------------------------------------------


def _conversation():
    call = AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "ls"}, "id": "c1"}], id="a1")
    return [
        SystemMessage("sys", id="s"),
        HumanMessage("do it", id="h1"),
        call,
        ToolMessage("ok", tool_call_id="c1", id="t1"),
        HumanMessage("next", id="h2"),
    ]


def test_checker_flags_an_orphan_result_that_compaction_created():
    history = _conversation()
    view = [history[0], build_summary_message("## SUMMARY\nx\n## NEXT STEPS\ny"), history[3], history[4]]
    assert history_problems(view, history) == ["tool id 'c1' is orphan in the view only"]


def test_checker_accepts_an_orphan_that_was_already_in_the_input():
    history = _conversation() + [ToolMessage("stray", tool_call_id="ghost", id="t2")]
    assert broken_tool_ids(history) == {("orphan", "ghost")}
    assert history_problems(history, history) == []


def test_checker_flags_a_missing_system_prompt_and_a_changed_request():
    history = _conversation()
    view = [history[1], history[2], history[3], HumanMessage("next (edited)", id="h2")]
    assert history_problems(view, history) == [
        "the view does not start with the history's system message(s)",
        "the latest human message 'h2' is missing or changed",
    ]


def test_checker_flags_a_lost_or_altered_message_but_not_an_offloaded_original():
    history = _conversation()
    transcript = messages_to_dict(history[:2])
    state = [history[0], history[2], history[3].model_copy(update={"content": "pruned"}), history[4]]
    assert lost_messages(history, state, transcript) == ["message 't1' is changed in both the state and the transcript"]
    assert lost_messages(history, state, transcript + messages_to_dict([history[3]])) == []
    assert lost_messages(history, history[2:], []) == [
        "message 's' is missing in both the state and the transcript",
        "message 'h1' is missing in both the state and the transcript",
    ]


def test_checker_flags_duplicates_in_the_transcript_and_the_ledger():
    records = messages_to_dict([HumanMessage("a", id="x"), HumanMessage("a", id="x")])
    ledger = "## Flush 2026-01-01T00:00:00+00:00\n\n- The user prefers tabs.\n- the user prefers  tabs\n"
    (twice, bullet) = duplicate_problems(records, {"memory/2026-01-01.md": ledger})
    assert twice.startswith("transcript holds message 'x' (version ") and twice.endswith(") 2 times")
    assert bullet == "memory/2026-01-01.md holds the bullet 'the user prefers tabs' more than once"
    # a message replaced by id has two versions: each written once is no duplicate
    assert duplicate_problems(messages_to_dict([HumanMessage("a", id="x"), HumanMessage("b", id="x")])) == []


def test_checker_flags_an_unexplained_overrun_and_a_compaction_without_progress():
    events = [
        {"stage": "summarize", "layer": "summarize", "evicted": 3, "tokens_before": 9_000, "tokens_after": 7_000},
        {
            "stage": "summarize",
            "layer": "extractive",
            "evicted": 3,
            "tokens_before": 9_000,
            "tokens_after": 7_000,
            "over_budget": "a huge result",
        },
        {"stage": "summarize", "layer": "summarize", "evicted": 1, "tokens_before": 3_000, "tokens_after": 3_100},
        {"stage": "summarize", "error": "down"},
    ]
    assert bounded_problems(events, 5_000) == [
        "a compaction ended at 7000 tokens, over the trigger 5000, without saying why",
        "a compaction made no progress (3000 -> 3100 tokens)",
    ]


def test_checker_flags_a_path_outside_the_root_even_through_a_link(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    assert escaped_paths([root / "ok.md", root / "link" / "x.md", tmp_path / "y.md"], root) == [
        f"{root / 'link' / 'x.md'} is outside {root}",
        f"{tmp_path / 'y.md'} is outside {root}",
    ]


def test_every_invariant_has_a_counter():
    assert INVARIANTS == ("valid_history", "nothing_lost", "bounded", "exactly_once", "contained")
    assert set(run_example(random.Random(7), faults=False)) == set(INVARIANTS)
