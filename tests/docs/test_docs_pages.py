"""The documentation as a reader meets it, on the repository's pages and the site alike.

Its links lead to files of the repository, the benchmark report's headings stand on their own, the targets'
figures read as the verdict beside them, a unit is defined where it is used, the notebooks page counts the
notebooks, the notebooks leave no folder behind, and the configuration table keeps every setting's name whole.
"""

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
REPORT = ROOT / "benchmarks" / "results" / "report.md"
NUMBER_WORDS = {3: "Three", 4: "Four", 5: "Five", 6: "Six"}


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """Return the text without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_of_the_repository(page):
    links = re.findall(r"\]\(([^)\s]+)\)", _prose(_text(page)))
    local = [link.split("#", 1)[0] for link in links if "://" not in link and not link.startswith(("#", "mailto:"))]
    missing = [link for link in local if link and not (page.parent / link).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to what the repository does not have"


def test_every_heading_of_the_benchmark_report_stands_on_its_own():
    lines = _prose(_text(REPORT)).splitlines()
    glued = [line for before, line in zip(lines, lines[1:], strict=False) if line.startswith("#") and before.strip()]
    assert glued == []


def _target_cells() -> list[tuple[str, str]]:
    cells = []
    for page in [*PAGES, REPORT]:
        for cell in re.findall(r"\| ((?:PASS|MISS) [^|]*) \|", _text(page)):
            cells.append((str(page.relative_to(ROOT)), cell))
    return cells


def test_a_targets_figure_reads_as_its_verdict_in_plain_notation():
    cells = [cell for page, cell in _target_cells() if page != "benchmarks/results/report.md"]
    assert cells
    for cell in cells:
        word, measured, limit = re.fullmatch(r"(PASS|MISS) ([-\d.,]+) ?\S* \(target ≤ ([-\d.,]+) ?\S*\)", cell).groups()
        measured, limit = float(measured.replace(",", "")), float(limit.replace(",", ""))
        assert (measured <= limit) == (word == "PASS"), cell


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_that_counts_in_l_says_what_l_is(page):
    text = _text(page)
    if re.search(r"\d L\b", text):
        assert re.search(r"\*\*L\*\*", text), f"{page.relative_to(ROOT)} uses L without defining it"


def test_the_notebooks_page_counts_and_lists_every_notebook():
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    text = _text(ROOT / "docs" / "notebooks.md")
    assert text.split("\n\n", 1)[1].startswith(f"{NUMBER_WORDS[len(notebooks)]} notebooks in `notebooks/`")
    assert [name for name in notebooks if f"`notebooks/{name}`" not in text] == []


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_a_notebook_removes_every_folder_it_writes_in_the_working_tree(name):
    book = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    code = "\n".join("".join(cell["source"]) for cell in book["cells"] if cell["cell_type"] == "code")
    tree = ast.parse("\n".join(line for line in code.splitlines() if not line.startswith("%")))
    written = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and str(n.value).startswith("./")}
    assigned = {  # storage = "./..." then shutil.rmtree(storage)
        t.id: n.value.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    removed = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "rmtree" and node.args:
            arg = node.args[0]
            removed.add(arg.value if isinstance(arg, ast.Constant) else assigned.get(getattr(arg, "id", None)))
    assert written <= removed, f"{name} leaves {sorted(written - removed)} in the working tree"


def test_the_configuration_table_keeps_every_settings_name_on_one_line():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    names = [row[0] for row in hooks.config_rows()]
    assert names and all(re.fullmatch(r'<code style="white-space: nowrap">[\w.]+</code>', name) for name in names)
    assert '<code style="white-space: nowrap">context_window</code>' in names
