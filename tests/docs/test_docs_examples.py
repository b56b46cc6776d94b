"""Every Python example in the README and the documentation runs as written, offline, and prints what the page says.

The blocks are read from the files themselves. Conventions a page may use (HTML comments, invisible on the page):

- each ```` ```python ```` block runs on its own, in a fresh empty working folder, with no ``OPENAI_*``
  variable set (the examples use the package's offline models);
- ``<!-- continue -->`` on the line before a block runs it after the page's previous block, in the same
  namespace and folder (for a page that builds one example in steps);
- ``<!-- prints -->`` on the line before a ```` ```text ```` block that follows an example: each of its lines
  must be a whole line the example printed, in the same order; a line that ends in ``…`` stands for any printed
  line that starts with the rest (for what changes from run to run, such as a timing), and a line ``…`` alone
  for any number of printed lines.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(
    r"^(?P<marker><!-- (?:continue|prints) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL
)


@dataclass
class Example:
    """One runnable example: the blocks that run together, and the lines the page says they print."""

    page: Path
    line: int
    blocks: list[str] = field(default_factory=list)
    prints: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(page: Path) -> list[Example]:
    """Return the examples of one page, in page order."""
    text = page.read_text(encoding="utf-8")
    found: list[Example] = []
    for match in _FENCE.finditer(text):
        marker, lang, body = match.group("marker") or "", match.group("lang"), match.group("body")
        line = text.count("\n", 0, match.start("lang")) + 1
        if lang == "python":
            if "continue" in marker:
                assert found, f"{page.name}:{line}: <!-- continue --> before the page's first python block"
                found[-1].blocks.append(body)
            else:
                found.append(Example(page, line, [body]))
        elif "prints" in marker:
            assert found, f"{page.name}:{line}: <!-- prints --> before any python block"
            found[-1].prints += [printed for printed in body.splitlines() if printed.strip()]
    return found


EXAMPLES = [example for page in PAGES for example in examples(page)]


def test_the_pages_have_examples_and_every_readme_front_has_one():
    readme = [e for e in EXAMPLES if e.page.name == "README.md"]
    assert len(readme) >= 6
    code = "\n".join(block for e in readme for block in e.blocks)
    for front in (
        "create_agent",
        "add_compaction",
        "create_deep_agent",
        "make_pre_model_hook",
        "compact_messages",
        "subgraph_node",
    ):
        assert front in code, f"the README has no example of {front}"
    # create_agent comes first: it is how LangChain builds agents now
    assert "create_agent" in readme[0].blocks[0]


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")  # the page says so
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_the_example_runs_as_written_offline(example, tmp_path, monkeypatch):
    for variable in [v for v in os.environ if v.startswith("OPENAI_")]:
        monkeypatch.delenv(variable)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in example.blocks:
            # compiled as a reader's script is: without this file's postponed annotations, which would leave a
            # state class's annotations as names LangGraph looks up in the wrong module
            code = compile(block, example.name, "exec", dont_inherit=True)
            exec(code, namespace)  # noqa: S102 - the page's own example
    missing = unprinted(example.prints, printed.getvalue())
    assert not missing, f"{example.name} did not print {missing!r}; it printed:\n{printed.getvalue()}"


def shown_as_printed(shown: str, printed: str) -> bool:
    """Return True when a line a page shows stands for a line the example printed (whole, or ``…`` for the rest)."""
    shown, printed = shown.rstrip(), printed.rstrip()
    return printed.startswith(shown[:-1]) if shown.endswith("…") else shown == printed


def unprinted(shown: list[str], printed: str) -> list[str]:
    """Return the lines a page shows that the example did not print, in the page's order, as whole lines."""
    lines = printed.splitlines()
    at, missing = 0, []
    for line in shown:
        if line.strip() == "…":
            continue
        found = next((i for i in range(at, len(lines)) if shown_as_printed(line, lines[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


@pytest.mark.parametrize(
    "shown, printed, missing",
    [
        (["['compaction_started', 'compaction_"], "['compaction_started', 'compaction_ready']\n", True),
        (["80 messages ->"], "80 messages -> 31 messages\n", True),
        (["80 messages -> …"], "80 messages -> 31 messages\n", False),
        (["a", "b"], "a\nb\n", False),
        (["b", "a"], "a\nb\n", True),  # the page's order is the printed order
        (["a", "…", "c"], "a\nb\nc\n", False),
    ],
)
def test_a_shown_output_line_must_be_a_whole_printed_line(shown, printed, missing):
    assert bool(unprinted(shown, printed)) is missing
