"""The offline demo is deterministic: two runs with the same options give the same messages, ids and figures.

Notebook 03 and the README print the offline demo's figures, and their tests compare a rerun with the stored
outputs. Each summary quotes the ids of the messages it compacted, so a random id (LangGraph gives a message
without one a uuid4) changes a summary's token count, which moves every later call's context and, over 40
turns, can move a compaction across the trigger.
"""

import re
import shutil

from rich.console import Console

from langgraph_compaction.cli.demo import DemoOptions, run_demo
from langgraph_compaction.storage import FileStorage

THREAD = "cost"
STORAGE = "./.compaction-cost"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _run(folder, monkeypatch, turns: int) -> dict:
    """Run the offline demo the way notebook 03 does, in an empty ``folder``; return what must not change between runs."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    monkeypatch.chdir(folder)
    report = run_demo(DemoOptions(turns=turns, storage=STORAGE, thread=THREAD, quiet=True), Console(quiet=True))
    where = str(folder)
    transcript = FileStorage(folder / STORAGE).read_transcript(THREAD)  # every message once, summaries included
    return {
        "transcript ids": [r["data"].get("id") for r in transcript],
        "transcript": [str(r["data"].get("content")).replace(where, "<run>") for r in transcript],
        "context per call": report.with_tokens,
        "compaction tokens per call": [c.compaction_tokens for c in report.calls],
        "without per call": report.without,
        "counts": report.counts,
        # sorted: the flush and the offload run side by side, so their events come in either order
        "events": sorted(
            repr({k: str(v).replace(where, "<run>") for k, v in e.items() if k not in ("time", "ms")})
            for e in report.events
        ),
    }


def test_two_offline_demo_runs_give_the_same_messages_ids_and_figures(offline, tmp_path, monkeypatch):
    # one folder, emptied between the runs, as the notebooks run in: the summaries name the transcript's path
    first, second = (_run(tmp_path / "run", monkeypatch, turns=5) for _ in range(2))
    assert first["counts"].get("extractive", 0) >= 2  # the run compacted, so summaries quoted message ids
    for key in first:
        assert first[key] == second[key], key
    assert not [i for i in first["transcript ids"] if not i or UUID.fullmatch(i)]  # no message left to a random id


def test_tool_results_take_their_calls_id_once():
    from langchain_core.messages import ToolMessage

    from langgraph_compaction.cli.demo import _tool_result_ids

    wrap = _tool_result_ids()
    result = lambda request: ToolMessage("out", tool_call_id=request)  # noqa: E731
    assert wrap("call_1", result).id == "tool-call_1"
    assert wrap("call_2", result).id == "tool-call_2"
    assert wrap("call_1", result).id is None  # a reused call id: add_messages gives it a fresh one, nothing is replaced
    assert wrap("call_3", lambda request: ToolMessage("out", tool_call_id=request, id="given")).id == "given"
