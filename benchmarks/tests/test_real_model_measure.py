"""The real-model measure of ``python -m benchmarks``: its session, its figures, and when it skips."""

from __future__ import annotations

from benchmarks.context import Context
from benchmarks.measures import real_model
from langgraph_compaction.testing import ScriptedModel


def _ctx(tmp_path, quick: bool) -> Context:
    return Context(quick=quick, trajectories=[], results_dir=tmp_path)


def test_without_llama_cpp_it_reports_skipped_and_checks_no_target(tmp_path, monkeypatch):
    monkeypatch.setattr(real_model.importlib.util, "find_spec", lambda name: None)
    figures = real_model.run(_ctx(tmp_path, quick=False))
    assert figures == {"skipped": "llama-cpp-python not installed", "targets": []}
    assert real_model.report(figures).endswith("skipped: llama-cpp-python not installed.")


def test_a_quick_run_skips_it_even_with_llama_cpp(tmp_path, monkeypatch):
    monkeypatch.setattr(real_model.importlib.util, "find_spec", lambda name: object())
    assert real_model.run(_ctx(tmp_path, quick=True))["skipped"].startswith("a quick run")


def test_models_left_out_by_real_model_models_are_reported_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(real_model.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setenv("REAL_MODEL_MODELS", "none")
    figures = real_model.run(_ctx(tmp_path, quick=False))
    assert figures["models"] == {label: {"skipped": "not chosen (REAL_MODEL_MODELS)"} for label in real_model.MODELS}
    assert figures["targets"] == []
    assert "| Gemma 3 270M | skipped: not chosen (REAL_MODEL_MODELS) |" in real_model.report(figures)


def test_the_session_with_a_scripted_summarizer_keeps_every_path_and_request(tmp_path):
    result = real_model.session(ScriptedModel(), tmp_path)

    assert result["counts"]["summarize"] >= 3 and len(result["compactions"]) == result["counts"]["summarize"]
    assert result["paths_missing"] == [] and result["requests_missing"] == [] and result["violations"] == []
    rows = result["compactions"]
    assert sum(r["paths"] for r in rows) >= 6 and sum(r["constraints"] for r in rows) >= 2
    assert all(r["paths_in_summary"] == r["paths"] and r["requests_in_summary"] == r["requests"] for r in rows)
    # no answer was recorded (not a RecordingModel): nothing is credited to the model's own text
    assert all(not r["model_text"] and r["paths_by_model"] == 0 for r in rows)
    totals = real_model.totals(result)
    assert totals["model_share"] == 1.0 and totals["paths_in_summary"] == totals["paths"]


def test_names_reads_a_path_by_its_file_name_and_a_rule_by_half_its_words():
    assert real_model.names("It read handler_03.py first.", "services/auth/handler_03.py", "paths")
    assert not real_model.names("It read handler_04.py first.", "services/auth/handler_03.py", "paths")
    rule = "Never modify files under migrations/."
    assert real_model.names("The user said never to modify files in migrations.", rule, "constraints")
    assert not real_model.names("The user wants tests.", rule, "constraints")


def test_the_model_text_is_the_summary_section_of_the_answer_an_applied_summary_carries():
    answer = (
        "Here is the summary.\n## SUMMARY\nThe user read six handlers of the billing service.\n## NEXT STEPS\nGo on."
    )
    applied = (
        "## SESSION INTENT\n...\n## SUMMARY\nThe user read six handlers of the billing service.\n## ARTIFACTS\n- a.py"
    )
    assert real_model.model_text(applied, ["Unrelated answer text of another call.", answer]) == (
        "The user read six handlers of the billing service."
    )
    assert real_model.model_text(applied, ["Unrelated answer text of another call."]) is None
    assert real_model.model_text(f"{real_model.EXTRACTIVE_MARK}\n{applied}", [answer]) is None


def test_the_model_text_of_a_looping_answer_is_its_text_before_the_loop():
    answer = "## SUMMARY\nThe user read the billing handlers; each retries pending records.\n" + "[user]\nTask 5\n" * 20
    applied = "## SESSION INTENT\n...\n## SUMMARY\nThe user read the billing handlers; each retries pending records."
    own = real_model.model_text(applied, [answer])
    assert own is not None and own.startswith("The user read the billing handlers") and own.count("Task 5") <= 1


def test_a_used_answer_cut_before_its_loop_is_counted_by_its_note():
    events = [
        {"stage": "summarize", "note": "the summarizer's answer looped; its first 3 lines were kept"},
        {"stage": "summarize", "note": "the summarizer's answer looped; its first 3 lines were kept"},
        {"stage": "summarize", "hook": "before_summary", "note": "skipped the summarizer"},
    ]
    assert real_model.cuts(events) == {"the summarizer's answer looped; its first 3 lines were kept": 2}
