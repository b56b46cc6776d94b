"""``python -m benchmarks`` as a user runs it: its own output folder, committed results untouched, quick figures labelled."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "benchmarks" / "results"


def _digest() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(COMMITTED.iterdir()) if p.is_file()}


def _benchmarks(*args: str, module: str = "benchmarks", env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_a_quick_run_writes_its_own_folder_labels_figures_quick_and_leaves_the_committed_results(tmp_path):
    before = _digest()
    run = _benchmarks("--quick", "--only", "thrash", "token_accuracy")
    assert run.returncode == 0, run.stderr
    assert _digest() == before
    written = Path(re.search(r"\[benchmarks\] wrote (.+report\.md)", run.stdout).group(1))
    assert COMMITTED not in written.parents
    report = written.read_text()
    shutil.rmtree(written.parent)
    assert "QUICK" in report and "not checked at quick scale" in report
    assert "MISS" not in report and "MISS" not in run.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--out", "benchmarks/results"], "holds the committed results"),
        (["--write-results", "--quick"], "takes no --quick"),
    ],
)
def test_the_committed_results_are_rewritten_only_by_a_full_write_results_run(args, message):
    before = _digest()
    run = _benchmarks(*args)
    assert run.returncode == 2 and message in run.stderr
    assert _digest() == before


def test_a_run_leaves_its_results_only_and_a_failed_run_leaves_no_folder(tmp_path):
    temp = {"TMPDIR": str(tmp_path)}  # where the default output folder goes
    run = _benchmarks("--quick", "--only", "transcript_bytes", env=temp)
    assert run.returncode == 0, run.stderr
    out = Path(re.search(r"\[benchmarks\] wrote (.+)report\.md", run.stdout).group(1))
    assert out.parent == tmp_path and out.name.startswith("langgraph-compaction-benchmarks-")
    assert sorted(p.name for p in out.iterdir()) == ["latest.json", "report.md"]  # the scratch databases are gone
    shutil.rmtree(out)
    for failing in (["--trajectories", str(tmp_path / "nowhere")], ["--only", "no-such-measure"]):
        failed = _benchmarks(*failing, env=temp)
        assert failed.returncode != 0 and failed.stderr.strip()
        assert list(tmp_path.iterdir()) == [], failing


def test_help_says_where_a_run_writes():
    text = " ".join(_benchmarks("--help").stdout.split())
    assert "temporary folder" in text and "scratch" in text and "removed" in text


def test_the_stress_command_refuses_a_trajectory_folder_that_does_not_exist(tmp_path):
    run = _benchmarks("--examples", "0", "--trajectories", str(tmp_path / "nowhere"), module="benchmarks.stress")
    assert run.returncode == 2
    assert f"--trajectories: {tmp_path / 'nowhere'} is not a directory" in run.stderr and "violations" not in run.stdout
