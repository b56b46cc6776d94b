"""The figures between ``generated:`` markers in the README and the documentation agree with the committed results.

``python -m benchmarks.readme`` writes them from ``benchmarks/results/``; a page it would change is stale.
"""

import re
from pathlib import Path

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
