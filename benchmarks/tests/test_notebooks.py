"""The notebooks run top to bottom offline (PostgreSQL included), print the figures they promise, and are stored
with the outputs a run gives today (``python -m benchmarks.readme --notebooks`` stores them)."""

import ast
import re
import socket
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import nbformat
import pytest

from benchmarks.readme import execute_notebook, notebook_workdir, outputs_text

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: Per notebook, the printed figures a rerun must reproduce exactly (the stored outputs show them to readers).
FIGURES = {
    "01_quickstart.ipynb": r"turn \d: .*tokens|quickstart\.jsonl: .*",
    "02_persistence_and_memory.ipynb": r"before the restart: .*|after three more turns: .*|\d+ messages on disk.*",
    "03_cost_curve.ipynb": r"growth exponent .*|saved: .*|\d+ model calls.*",
    "04_controls.ipynb": r"\d+ results shortened.*|summaries: .*",
}


def stored_text(name: str) -> str:
    """Return the text of a notebook's stored outputs."""
    return outputs_text(nbformat.read(NOTEBOOKS / name, as_version=4))


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _shape_and_numbers(lines: list[str]) -> tuple[list[str], list[float]]:
    return [_NUMBER.sub("#", line) for line in lines], [
        float(n.replace(",", "")) for line in lines for n in _NUMBER.findall(line)
    ]


def run_notebook(name: str, workdir: Path) -> str:
    """Execute a notebook in ``workdir``; return the text of its outputs, its figures checked against the stored ones.

    The same lines must come out, with the same figures within 1 %: a summary names the transcript's path, a
    temporary folder whose name changes a token count by a few tokens.
    """
    out = outputs_text(execute_notebook(NOTEBOOKS / name, workdir))
    figures = re.compile(FIGURES[name])
    (shape, numbers), (stored_shape, stored_numbers) = (
        _shape_and_numbers(figures.findall(out)),
        _shape_and_numbers(figures.findall(stored_text(name))),
    )
    stale = f"{name}: its stored outputs are stale; rerun python -m benchmarks.readme --notebooks"
    assert shape == stored_shape, stale
    assert all(abs(a - b) <= 0.01 * max(abs(a), abs(b)) for a, b in zip(numbers, stored_numbers, strict=False)), stale
    return out


@pytest.fixture
def postgres_env(postgres_dsn, monkeypatch):
    """Point the notebooks' PostgreSQL cell at this run's schema (set, so an unreachable server fails the cell)."""
    monkeypatch.setenv("COMPACTION_TEST_POSTGRES", postgres_dsn)


@pytest.fixture
def workdir():
    """The folder ``python -m benchmarks.readme --notebooks`` ran them in, where their stored figures come from."""
    with notebook_workdir() as work:
        yield work


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_notebooks_are_stored_executed_with_public_names_only(name):
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(book)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code) and any(c.outputs for c in code)
    assert set(FIGURES) == {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
    assert tempfile.gettempdir() + "/" not in stored_text(name)  # no path of the machine that ran it
    # the package, its offline models, the demo, and the documented home of the token helpers
    public = {
        "langgraph_compaction",
        "langgraph_compaction.testing",
        "langgraph_compaction.cli.demo",
        "langgraph_compaction.core.tokens",
    }
    for cell in code:
        source = "\n".join(line for line in cell.source.splitlines() if not line.startswith("%"))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("langgraph_compaction"):
                assert node.module in public, f"{name} imports {node.module}"
                assert not any(alias.name.startswith("_") for alias in node.names)


def test_quickstart_compacts_a_thread_and_keeps_every_message(workdir):
    out = run_notebook("01_quickstart.ipynb", workdir)
    assert "compaction_gate" in out and "compaction_summarize" in out  # the mermaid picture
    assert re.search(r"turn \d: summarize +extractive +[\d,]+ -> +[\d,]+ tokens", out)
    assert "__compaction_summary__" in out and "## SESSION INTENT" in out
    on_disk, in_state = map(
        int, re.search(r"quickstart.jsonl: (\d+) messages on disk, (\d+) in the state", out).groups()
    )
    assert on_disk > in_state


def test_persistence_notebook_runs_on_sqlite_and_postgres(workdir, postgres_env):
    out = run_notebook("02_persistence_and_memory.ipynb", workdir)
    before = int(re.search(r"before the restart: (\d+) messages", out).group(1))
    assert re.search(r"after three more turns: \d+ messages, \{.*'extractive': \d+", out) and before > 0
    disk, distinct = map(int, re.search(r"(\d+) messages on disk; (\d+) distinct ids", out).groups())
    assert disk == distinct
    assert "## Flush " in out and "consolidated -" in out
    assert "--- memory_search" in out and "--- session_search" in out
    assert re.search(r"pg-[0-9a-f]{8}: \d+ checkpoints, [1-9]\d* transcript records in the store", out)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_persistence_notebook_without_a_server_runs_its_postgres_part_on_sqlite(workdir, monkeypatch):
    monkeypatch.setenv("COMPACTION_TEST_POSTGRES", f"postgresql://postgres@127.0.0.1:{_closed_port()}/test")
    out = run_notebook("02_persistence_and_memory.ipynb", workdir)
    assert "note: no PostgreSQL server answers at" in out and "runs on SqliteSaver and SqliteStore instead" in out
    assert re.search(r"sqlite-[0-9a-f]{8}: \d+ checkpoints, [1-9]\d* transcript records in the store", out)


def test_the_dev_extra_has_the_command_that_executes_a_notebook():
    extras = tomllib.loads((NOTEBOOKS.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("nbconvert") for req in extras["dev"])
    run = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--version"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr


def test_cost_curve_notebook_measures_quadratic_against_linear_run_after_run_leaving_no_files(workdir):
    from rich.console import Console

    from langgraph_compaction.cli.demo import DemoOptions, run_demo

    # what an earlier run of the notebook in this folder left: its thread "cost"
    run_demo(
        DemoOptions(turns=1, storage=str(workdir / ".compaction-cost"), thread="cost", quiet=True), Console(quiet=True)
    )
    out = run_notebook("03_cost_curve.ipynb", workdir)
    assert sorted(p.name for p in workdir.iterdir()) == []  # its 9 MB of demo storage are gone
    without, with_ = map(float, re.search(r"without compaction: ([\d.]+), with compaction: ([\d.]+)", out).groups())
    assert without > 1.6 and with_ < 1.2
    saved = float(re.search(r"saved: ([\d.]+)%", out).group(1))
    assert saved > 80


def test_controls_notebook_shows_what_superseded_results_save(workdir):
    out = run_notebook("04_controls.ipynb", workdir)
    shortened, without, with_ = (
        int(n.replace(",", ""))
        for n in re.search(
            r"(\d+) results shortened; tokens sent over \d+ calls: ([\d,]+) without, ([\d,]+) with", out
        ).groups()
    )
    assert shortened > 0 and with_ < without
    assert re.search(r"read-0 -> \[Superseded: `read_file` .* the newer result is message read-3", out)
