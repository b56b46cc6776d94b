"""``python -m benchmarks`` as a user runs it: its own output folder, committed results untouched, quick figures labelled."""

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "benchmarks" / "results"


def _digest() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(COMMITTED.iterdir()) if p.is_file()}


def _benchmarks(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


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
