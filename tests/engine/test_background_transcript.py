"""A background job never writes layer 1-2's shortened copies to the transcript.

The gate starts a job on the messages as its own edits of the same call leave
them (a long argument of an old call shortened by layer 1). It offloaded that
snapshot, so the shortened copy became the transcript's first version of the
message and the original a second one; the transcript must hold each message
as first written, once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from langgraph_compaction import CompactionConfig
from langgraph_compaction.core.layers import SHORTENED_OPENINGS
from langgraph_compaction.storage import FileStorage
from langgraph_compaction.testing.agents import (
    ScriptedAgent,
    compaction_graph,
    drive,
    scripted_summarizer,
    trajectory_turns,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectories"


@pytest.mark.parametrize("name", ["cc_sonnet45_entire-cli_303calls", "cc_opus45_entire-cli_71k_tool_output"])
def test_a_long_session_keeps_each_message_once_and_as_first_written(tmp_path, name):
    config = CompactionConfig(context_window=128_000, trigger_tokens=30_000, keep_tokens=4_000, trigger_messages=0)
    session = trajectory_turns(DATA / f"{name}.jsonl")
    storage = FileStorage(tmp_path)
    agent = ScriptedAgent(measure=False)
    drive(compaction_graph(agent, scripted_summarizer(), config, storage).compile(), agent, session)
    records = storage.read_transcript("bench")
    ids = Counter(r["data"]["id"] for r in records)
    assert [i for i, n in ids.items() if n > 1] == []
    shortened = config.truncate_args.truncation_text
    assert not [r for r in records if shortened in str(r["data"].get("tool_calls"))]
    assert not [r for r in records if str(r["data"].get("content")).startswith(SHORTENED_OPENINGS)]
