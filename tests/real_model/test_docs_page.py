"""docs/real-model.md's example runs as written with the localmodel extra (the offline docs tests leave it out)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model

PAGE = Path(__file__).resolve().parents[2] / "docs" / "real-model.md"


@pytest.mark.timeout(1200)
def test_the_pages_create_agent_example_compacts_with_the_local_model(smollm2, tmp_path, monkeypatch):
    blocks = re.findall(r"^```py\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(blocks[0], f"{PAGE.name}:py", "exec"), {"__name__": "__main__"})
    found = re.fullmatch(r"summaries by the model: (\d+) extractive: (\d+)\n", printed.getvalue())
    assert found, printed.getvalue()
    assert int(found.group(1)) + int(found.group(2)) >= 1
    assert (tmp_path / ".compaction" / "sessions" / "billing.jsonl").exists()  # what the summaries replaced
