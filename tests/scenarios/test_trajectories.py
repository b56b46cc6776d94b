"""Real recorded agent conversations replayed through the compiled graph (see data/trajectories/SOURCES.md)."""

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from support.replay import replay

from langgraph_compaction import CompactionConfig
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.trajectories import load_trajectory

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectories"
TRAJECTORIES = sorted(p.stem for p in DATA.glob("*.jsonl"))
# the anchors' measurement setup: a 60k window, trigger 40k tokens or 50 messages, keep 8k tokens
CONFIG = CompactionConfig(context_window=60_000, keep_tokens=8_000)


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_every_model_call_gets_a_valid_view_under_the_trigger(name, tmp_path):
    trajectory = load_trajectory(DATA / f"{name}.jsonl")
    replayer, state = replay(trajectory, ScriptedModel(), CONFIG, tmp_path, InMemorySaver())
    assert replayer.calls == sum(m.type == "ai" for m in trajectory)
    assert replayer.problems == []
    assert max(replayer.view_tokens) <= CONFIG.resolve().trigger_tokens


@pytest.mark.parametrize("name", ["oh_claude35_swebv_django-11292", "cc_opus46_entire-cli_interleaved_user"])
def test_replay_with_sqlite_checkpointer(name, tmp_path):
    trajectory = load_trajectory(DATA / f"{name}.jsonl")
    with SqliteSaver.from_conn_string(str(tmp_path / "c.sqlite")) as saver:
        replayer, state = replay(trajectory, ScriptedModel(), CONFIG, tmp_path, saver)
    assert replayer.problems == []
    assert state["compaction"]["counts"].get("summarize", 0) >= 1
