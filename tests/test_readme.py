"""The README as a new user reads it: its figures agree with the committed results, its example runs as written,
its set-up commands are the ones CI runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks import readme

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return TEXT.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def test_the_readmes_generated_blocks_agree_with_the_committed_results():
    assert set(re.findall(r"<!-- generated:(\w+) -->", TEXT)) == set(readme.BLOCKS)
    assert readme.render(TEXT) == TEXT, "run python -m benchmarks.readme"


def test_the_first_example_runs_as_written_offline_and_shows_the_history_shrinking(tmp_path):
    example = _blocks(_section("Add it to your graph"), "python")[0]
    (tmp_path / "example.py").write_text(example, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    run = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    tokens = [int(t.replace(",", "")) for t in re.findall(r"after question \d+: \d+ messages, ([\d,]+) tokens", run.stdout)]
    assert len(tokens) == 8 and any(later < earlier for earlier, later in zip(tokens, tokens[1:]))
    # the lines the README quotes are what it prints
    quoted = re.findall(r"`(after question \d+: \d+ messages(?:, [\d,]+ tokens)?)`", TEXT.replace("\n", " "))
    assert len(quoted) == 2 and all(line in run.stdout for line in quoted)
    assert (tmp_path / ".compaction" / "sessions" / "billing.jsonl").is_file()


def test_the_set_up_commands_install_the_demo_first_and_run_what_ci_runs():
    first, second = _blocks(_section("Set-up"), "bash")[:2]
    assert 'pip install -e ".[demo]"' in first and first.strip().endswith("langgraph-compaction demo")
    assert 'pip install -e ".[dev]"' in second and second.strip().endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --quiet -e ".[dev]"' in ci and "\npython -m pytest\n" in ci
