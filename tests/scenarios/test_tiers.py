"""The test tiers hold together: every test the slow list names exists, ``python -m pytest`` leaves the slow and
real-model tests out, and CI runs them right after it.
"""

import ast
import re
import tomllib
from pathlib import Path

from support.tiers import SLOW

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_the_slow_list_names_exists():
    """A renamed or removed test must leave the list too: a stale id would mark nothing, silently."""
    missing = []
    for node_id in sorted(SLOW):
        path, _, name = node_id.partition("::")
        file = ROOT / path
        defined = (
            {
                n.name
                for n in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            if file.is_file()
            else set()
        )
        if name.split("[", 1)[0] not in defined:
            missing.append(node_id)
    assert missing == []


def test_the_default_run_leaves_the_slow_and_real_model_tiers_to_ci():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert options["addopts"] == "-m 'not slow and not real_model' -n 2 --dist worksteal"
    assert sorted(marker.split(":", 1)[0] for marker in options["markers"]) == ["real_model", "slow"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"^python -m pytest.*$", ci, re.MULTILINE)
    assert commands == ["python -m pytest", 'python -m pytest -m "slow or real_model" -n 0']
