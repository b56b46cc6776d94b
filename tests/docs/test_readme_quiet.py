"""The README's examples, run as a reader runs them (each its own script, in an empty folder), print nothing to stderr.

A warning a reader did not ask for (a dict on stderr, a deprecation the page already names) reads as a fault in a
first example. ``tests/docs/test_docs_examples.py`` checks what they print to stdout.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"^```python\n(.*?)^```$", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL | re.M)

pytestmark = pytest.mark.slow  # a fresh interpreter per example: half a minute in all


@pytest.mark.parametrize("block", BLOCKS, ids=[block.splitlines()[0] for block in BLOCKS])
def test_a_readme_example_prints_nothing_to_stderr(block, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout  # it ran and printed what its page shows (checked by test_docs_examples)
