"""The notebooks run top to bottom offline (PostgreSQL included) and print the figures they promise."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def run_notebook(name: str, workdir: Path) -> str:
    """Execute a notebook in ``workdir`` with the python3 kernel; return the text of all its outputs."""
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}).execute()
    texts = []
    for cell in book.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text") or "".join((output.get("data") or {}).get("text/plain", "")))
    return "\n".join(texts)


@pytest.fixture
def postgres_env(postgres_dsn, monkeypatch):
    """Point the notebooks' PostgreSQL cell at this run's schema (set, so an unreachable server fails the cell)."""
    monkeypatch.setenv("COMPACTION_TEST_POSTGRES", postgres_dsn)


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_notebooks_are_stored_without_outputs(name):
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(book)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_quickstart_compacts_a_thread_and_keeps_every_message(tmp_path):
    out = run_notebook("01_quickstart.ipynb", tmp_path)
    assert "compaction_gate" in out and "compaction_summarize" in out  # the mermaid picture
    assert re.search(r"turn \d: summarize +extractive +[\d,]+ -> +[\d,]+ tokens", out)
    assert "__compaction_summary__" in out and "## SESSION INTENT" in out
    on_disk, in_state = map(int, re.search(r"quickstart.jsonl: (\d+) messages on disk, (\d+) in the state", out).groups())
    assert on_disk > in_state


def test_persistence_notebook_runs_on_sqlite_and_postgres(tmp_path, postgres_env):
    out = run_notebook("02_persistence_and_memory.ipynb", tmp_path)
    before = int(re.search(r"before the restart: (\d+) messages", out).group(1))
    assert re.search(r"after three more turns: \d+ messages, \{.*'extractive': \d+", out) and before > 0
    disk, distinct = map(int, re.search(r"(\d+) messages on disk; (\d+) distinct ids", out).groups())
    assert disk == distinct
    assert "## Flush " in out and "consolidated -" in out
    assert "--- memory_search" in out and "--- session_search" in out
    assert re.search(r"pg-[0-9a-f]{8}: \d+ checkpoints, [1-9]\d* transcript records in the store", out)


def test_cost_curve_notebook_measures_quadratic_against_linear(tmp_path):
    out = run_notebook("03_cost_curve.ipynb", tmp_path)
    without, with_ = map(float, re.search(r"without compaction: ([\d.]+), with compaction: ([\d.]+)", out).groups())
    assert without > 1.6 and with_ < 1.2
    saved = float(re.search(r"saved: ([\d.]+)%", out).group(1))
    assert saved > 80
