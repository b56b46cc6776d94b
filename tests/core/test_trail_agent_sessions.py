"""The trail on long sessions of other agents (``testing.agent_sessions``): every path read, most named in the bound.

Each session is 560 generated tool calls in one agent's vocabulary (Codex,
Copilot, OpenCode, Gemini CLI), with its answer key of what each call
touched. The trail must read every path of the key from the calls, and a
summary's trail, within ``trail_tokens``, must name at least 95 % of them.
"""

from __future__ import annotations

import json

import pytest

from langgraph_compaction.core.config import FidelityConfig
from langgraph_compaction.core.conversation import tool_calls_of
from langgraph_compaction.core.fidelity import artifacts_section
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.core.touches import normalise_path, touches
from langgraph_compaction.core.trail import expand_group
from langgraph_compaction.testing.agent_sessions import AGENTS, long_session, write_session
from langgraph_compaction.trajectories import load_trajectory


@pytest.fixture(scope="module", params=sorted(AGENTS))
def session(request, tmp_path_factory):
    path = write_session(tmp_path_factory.mktemp("sessions"), request.param)
    return request.param, load_trajectory(path), json.loads(path.with_suffix(".touched.json").read_text())


def test_a_session_is_long_parallel_and_the_same_every_time():
    first, again = long_session("codex", seed=3), long_session("codex", seed=3)
    assert first.records == again.records and first.touched == again.touched
    rounds = [r for r in first.records if r.get("tool_calls")]
    assert first.calls >= 560 and len(first.touched) == first.calls
    assert any(len(r["tool_calls"]) >= 3 for r in rounds)  # rounds of parallel calls
    names = {c["function"]["name"] for r in rounds for c in r["tool_calls"]}
    assert names == {"shell", "apply_patch"}
    assert long_session("codex", seed=4).records != first.records


def test_every_call_touches_the_paths_of_its_answer_key(session):
    agent, messages, key = session
    calls = [c for m in messages for c in tool_calls_of(m)]
    assert len(calls) == len(key) >= 560
    for call in calls:
        found = {normalise_path(t.target) for t in touches(call["name"], call["args"])}
        expected = key[call["id"]]
        assert {normalise_path(p) for p in expected["read"] + expected["changed"]} <= found, (agent, call)


def test_the_bounded_trail_of_a_whole_session_names_95_percent_of_its_paths(session):
    agent, messages, key = session
    settings = FidelityConfig()
    body = artifacts_section("", messages, settings.max_artifacts, settings.trail_tokens)
    lines = [line[2:] for line in body.splitlines() if line.startswith("- ")]
    assert sum(estimate_text_tokens(line) + 2 for line in lines) <= settings.trail_tokens
    grouped = {p for line in lines for p in expand_group(line)}
    # a file the session named both ways is spelled once, under the project's root: /p/src/a.ts names src/a.ts
    grouped |= {p[i + 1 :] for p in grouped if p.startswith("/") for i in range(1, len(p)) if p[i] == "/"}
    paths = {normalise_path(p) for v in key.values() for p in v["read"] + v["changed"]}
    named = {p for p in paths if p in grouped or p in body}
    assert len(named) / len(paths) >= 0.95, (agent, sorted(paths - named)[:10])
