"""The README as a new user reads it: short, its set-up commands are the ones CI runs, its links lead somewhere, and
its figures (and those of the documentation) agree with the committed results
(``benchmarks/tests/test_generated_blocks.py``).

Its examples run as written: ``tests/docs/test_docs_examples.py``.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return TEXT.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def test_the_readme_is_read_in_five_minutes():
    assert len(TEXT.splitlines()) <= 250
    titles = re.findall(r"^## (.+)$", TEXT, re.MULTILINE)
    assert titles == ["Set-up", "Add it to your agent", "Guarantees", "How it compares", "Documentation"]
    assert len(re.findall(r"^\d\. \*\*", _section("Guarantees"), re.MULTILINE)) == 5
    assert len(re.findall(r"!\[[^\]]*\]\(", TEXT.split("## Set-up")[0])) == 1  # what it does, in one picture
    assert re.findall(r"!\[[^\]]*\]\((benchmarks/results/[^)]+)\)", _section("How it compares")) == [
        "benchmarks/results/working_set_recall.png",  # the committed run's plots, beside its figures
        "benchmarks/results/background_timeline.png",
    ]


def test_every_link_of_the_readme_leads_to_a_file_of_the_repository():
    links = [target for target in re.findall(r"\]\(([^)]+)\)", TEXT) if "://" not in target]
    assert links
    missing = [target for target in links if not (ROOT / target.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_set_up_commands_install_the_demo_first_and_run_what_ci_runs():
    first, second = _blocks(_section("Set-up"), "bash")[:2]
    assert 'pip install -e ".[demo]"' in first and first.strip().endswith("langgraph-compaction demo")
    assert 'pip install -e ".[dev]"' in second and second.strip().endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --quiet -e ".[dev]"' in ci and "\npython -m pytest\n" in ci


def test_every_extra_the_readme_names_exists():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    named = set(re.findall(r"`\[(\w+)\]`", TEXT)) | set(re.findall(r'\.\[(\w+)\]"', TEXT))
    assert named and named <= set(extras)
    assert any(dependency.startswith("deepagents") for dependency in extras["deepagents"])


def test_the_readme_says_why_and_how_to_open_studio():
    intro = TEXT.split("\n## ", 1)[0]
    assert re.search(r"Pick it\s+over LangChain's `SummarizationMiddleware` when", intro)
    setup = _section("Set-up")
    assert "`langgraph dev`" in setup and "(docs/studio.md)" in setup


def test_every_column_of_the_comparison_table_is_explained_under_it():
    compares = _section("How it compares")
    header = next(line for line in compares.splitlines() if line.startswith("| system |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")][1:]
    after = compares.split("<!-- /generated:headline -->", 1)[1]
    unexplained = [column for column in columns if f"**{column}**" not in " ".join(after.split())]
    assert columns and unexplained == []
