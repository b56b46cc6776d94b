"""The fidelity measure of ``python -m benchmarks``: recall per trajectory, and the LLM-judged probes over HTTP.

The judge is the strict local OpenAI-compatible server, answering as a grader would.
"""

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from support.openai_server import request_text

from benchmarks.context import Context
from benchmarks.measures import fidelity as fidelity_measure
from langgraph_compaction.core.summary import build_summary_message

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "trajectories"


def _calls(*specs):
    """Return an assistant message calling tools and the results: specs are (name, args, result)."""
    calls = [{"name": n, "args": a, "id": f"c{i}-{n}"} for i, (n, a, _) in enumerate(specs)]
    results = [ToolMessage(r, tool_call_id=c["id"], name=c["name"]) for c, (_, _, r) in zip(calls, specs, strict=False)]
    return [AIMessage("", tool_calls=calls), *results]


PROBES = {
    "recall": ("Which port does the staging database listen on?", "5433"),
    "artifact": ("Which file did the agent edit?", "src/db.py"),
    "continuation": ("What should the agent do next?", "run the migration tests"),
    "decision": ("Which driver did the user choose?", "psycopg 3"),
}


def _judge_responder(body):
    """An OpenAI-compatible judge: writes the probes, answers from the context it is given, grades by the reference."""
    text = request_text(body)
    if "writing a quiz" in text:
        probes = [{"type": t, "question": q, "answer": a} for t, (q, a) in PROBES.items()]
        return {"content": "```json\n" + json.dumps({"probes": probes}) + "\n```"}
    if "You are the agent in the session below" in text:
        context = text.split("<context>", 1)[1].split("</context>", 1)[0]
        question = text.rsplit("Question: ", 1)[1]
        answer = next(a for q, a in PROBES.values() if q in question)
        return {"content": answer if answer in context else "I don't know"}
    reference = text.split("Reference answer: ", 1)[1].split("\n", 1)[0]
    return {"content": json.dumps({"score": 5 if reference in text.split("Answer to grade: ", 1)[1] else 0})}


def test_probe_evaluation_grades_each_systems_context_over_http(openai_server):
    from langchain_openai import ChatOpenAI

    openai_server.responder = _judge_responder
    llm = ChatOpenAI(base_url=openai_server.base_url, api_key="test", model="gpt-4o-mini", max_retries=0)
    compacted = [
        HumanMessage("Use psycopg 3. The staging database listens on 5433.", id="u1"),
        *_calls(("Edit", {"file_path": "src/db.py", "old_string": "2", "new_string": "3"}, "ok")),
        AIMessage("Next I will run the migration tests.", id="a2"),
    ]
    kept_facts = build_summary_message(
        "## SESSION INTENT\npsycopg 3 on port 5433; edited src/db.py; next: run the migration tests"
    )
    lost_facts = build_summary_message("## SESSION INTENT\nThe user wants database work.")
    result = fidelity_measure.probe_scores(llm, compacted, {"ours": [kept_facts], "langchain": [lost_facts]})
    assert result["probes"] == 4 and result["unusable"] == 0
    assert result["grades"]["ours"] == {t: [1.0] for t in PROBES}
    assert result["grades"]["langchain"] == {t: [0.0] for t in PROBES}


def test_the_measure_reports_recall_per_trajectory_and_runs_the_probes_only_with_an_endpoint(
    tmp_path, monkeypatch, openai_server
):
    ctx = Context(quick=True, trajectories=[DATA / "oh_claude35_swebv_django-11292.jsonl"], results_dir=tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    figures = fidelity_measure.run(ctx, shapes=[fidelity_measure.SHAPES / "opencode_export.jsonl"], agents=())
    json.dumps(figures)
    assert len(figures["targets"]) == 15 and all(t["passed"] for t in figures["targets"])
    ours = figures["settings"]["24k window"]["totals"]["ours"]
    assert ours["compactions"] >= 2 and ours["paths_recall"] == ours["changed_recall"] == 1.0
    # the answer key of the OpenCode session: 160 calls, each path as the agent named it (filePath)
    shape = figures["settings"]["24k window"]["shape_totals"]["ours"]
    assert shape["compactions"] >= 5 and shape["changed_recall"] == 1.0 and shape["paths_recall"] >= 0.95
    assert 0 < shape["summary_tokens_max"] <= figures["settings"]["24k window"]["summary_room"]
    report = fidelity_measure.report(figures)
    assert "LLM-judged probe evaluation: skipped (OPENAI_BASE_URL / OPENAI_API_KEY are not set)" in report
    assert "| oh_claude35_swebv_django-11292 | ours |" in report
    assert "| opencode_export (40k window) | ours |" in report

    openai_server.responder = _judge_responder
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    probes = fidelity_measure.run(ctx, shapes=[], agents=())["probes"]
    assert (probes["status"], probes["trajectories"], probes["probes"], probes["unusable"]) == ("ran", 1, 4, 0)
    assert "LLM-judged probe evaluation (gpt-4o-mini, 1 trajectories, 4 probes" in fidelity_measure.report(
        {**figures, "probes": probes}
    )


@pytest.mark.slow
def test_the_stress_set_names_95_percent_of_the_paths_of_a_long_gemini_session_after_every_compaction(tmp_path):
    ctx = Context(quick=True, trajectories=[], results_dir=tmp_path)
    stress = fidelity_measure.stress_set(ctx, agents=("gemini",))
    gemini = stress["gemini"]
    assert gemini["calls"] >= 500 and gemini["compactions"] >= 20
    assert gemini["named_paths"] >= 0.95 and gemini["changed_found"] == gemini["changed"]
    targets = fidelity_measure._stress_targets(stress)
    assert [t["passed"] for t in targets] == [True, True]
    section = fidelity_measure._stress_section({"stress": stress, "trail_tokens": 1200})
    assert "| gemini | 560 |" in section
