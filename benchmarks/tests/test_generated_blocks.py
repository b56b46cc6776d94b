"""The figures between ``generated:`` markers in the README and the documentation agree with the committed results.

``python -m benchmarks.readme`` writes them from ``benchmarks/results/``; a page it would change is stale.
"""

import re
from pathlib import Path

import pytest

from benchmarks import readme

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_generated_blocks_of_the_readme_and_the_docs_agree_with_the_committed_results():
    used = set()
    for page in readme.pages():
        text = page.read_text(encoding="utf-8")
        used |= set(re.findall(r"<!-- generated:(\w+) -->", text))
        assert readme.render(text, page.name) == text, (
            f"{page.relative_to(ROOT)} is stale: run python -m benchmarks.readme"
        )
    assert used == set(readme.BLOCKS)
    assert "generated:headline" in TEXT  # the headline figures against the anchors


def _measure(name: str, *passed: bool) -> dict:
    targets = [{"name": f"t{i}", "measured": 2, "limit": 1, "unit": "×", "passed": p} for i, p in enumerate(passed)]
    return {"name": name, "status": "ok", "figures": {"targets": targets}}


def test_the_misses_name_each_missed_target_once_with_its_reason():
    text = readme.misses_text([_measure("a", True, False), _measure("b", True)], {"a": "Because."})
    assert text == "- **a** (t1: MISS 2× (target ≤ 1×)). Because.\n"


def test_a_miss_without_a_reason_and_a_reason_without_a_miss_stop_the_block():
    with pytest.raises(SystemExit, match="say why a miss"):
        readme.misses_text([_measure("a", False)], {})
    with pytest.raises(SystemExit, match=r"drop b \(nothing missed\)"):
        readme.misses_text([_measure("a", False), _measure("b", True)], {"a": "x", "b": "y"})
