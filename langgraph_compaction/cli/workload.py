"""The demo's workload: a synthetic ``acme`` repository, its tools, the user's requests and the scripted agent.

Everything here is determined by a seed: the requests, the files the tools
return (thousands of tokens each, often from parallel tool calls) and the
offline agent's rounds (look around, read, test, write the fix, test again).
"""

from __future__ import annotations

import random
import zlib

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

#: Tool rounds an online agent may take per request before it must answer.
MAX_TOOL_ROUNDS = 6

SYSTEM_PROMPT = (
    "You are a senior engineer working in the `acme` Python repository. For every request: look around "
    "(grep, list_dir), read the relevant files, run the tests, write the fix with write_file, run the tests "
    "again, then answer in two sentences. Call independent tools in parallel. Never take more than "
    f"{MAX_TOOL_ROUNDS} tool rounds for one request."
)

# The synthetic repository: (module path, the bug a request asks about, the symbol to grep for).
_MODULES = [
    ("acme/billing/invoice.py", "rounds totals per line instead of per invoice", "line_total"),
    ("acme/billing/tax.py", "applies the reduced VAT rate to shipping", "vat_rate"),
    ("acme/api/routes.py", "returns 500 instead of 404 for unknown order ids", "get_order"),
    ("acme/api/auth.py", "accepts expired refresh tokens for one extra hour", "refresh_token"),
    ("acme/storage/csv_export.py", "drops rows whose customer name has an accent", "write_rows"),
    ("acme/storage/cache.py", "never evicts entries after a clock change", "evict_expired"),
    ("acme/core/scheduler.py", "runs a daily job twice on DST change days", "next_run"),
    ("acme/core/retry.py", "retries HTTP 400 responses that can never succeed", "should_retry"),
    ("acme/core/dates.py", "parses 12:30 AM as half past noon", "parse_time"),
    ("acme/search/index.py", "loses documents added during a rebuild", "rebuild_index"),
    ("acme/notify/email.py", "sends the weekly digest to unsubscribed users", "digest_recipients"),
    ("acme/reports/sales.py", "counts refunded orders as revenue", "monthly_revenue"),
]
_ASKS = [
    "Our {area} code {bug}. Find the cause in {path} and fix it; keep the public API unchanged.",
    "Customer ticket: the {area} module {bug}. Please investigate, fix it, and add a regression test.",
    "Bug report from QA: {path} {bug}. Fix it and make sure the whole {area} test suite passes.",
    "Next one: {path} {bug}. I prefer small diffs and type hints on every new function.",
]
_WORDS = "order invoice customer amount total rate record batch event window token cache entry result".split()


def _rng(seed: int, *parts: object) -> random.Random:
    """Return a random generator determined by ``seed`` and ``parts`` (stable across runs and processes)."""
    return random.Random(zlib.crc32("\x1f".join(map(str, (seed, *parts))).encode()))


def _test_path(path: str) -> str:
    package, name = path.split("/")[-2:]
    return f"tests/{package}/test_{name}"


def request_text(turn: int, seed: int) -> str:
    """Return the user's request of a turn (one of the repository's bugs, phrased one of four ways)."""
    rng = _rng(seed, "request", turn)
    path, bug, _ = _MODULES[turn % len(_MODULES)]
    area = path.split("/")[1]
    return f"Task {turn + 1}: " + rng.choice(_ASKS).format(area=area, bug=bug, path=path)


def source_text(path: str, seed: int, lines: int | None = None, version: str = "") -> str:
    """Return a synthetic Python module for a path (80-200 lines unless ``lines`` is given; ``version`` varies it)."""
    rng = _rng(seed, "source", path, version)
    target = lines or rng.randint(80, 200)
    out = [f'"""{path}: part of the acme service."""', "", "from __future__ import annotations", "import logging", ""]
    n = 0
    while len(out) < target:
        a, b = rng.sample(_WORDS, 2)
        out += [
            f"def {a}_{b}_{n}(records: list[dict], limit: int = {rng.randint(2, 500)}) -> list[dict]:",
            f'    """Return the {a} records whose {b} is below the limit."""',
            f"    selected = [r for r in records if r.get('{b}', 0) < limit]",
            f"    logging.getLogger(__name__).debug('kept %d of %d {a}s', len(selected), len(records))",
            "    return sorted(selected, key=lambda r: r.get('id', 0))",
            "",
        ]
        n += 1
    return "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(out[:target]))


def make_tools(seed: int) -> list:
    """Return the agent's tools over the synthetic repository (large, deterministic outputs)."""
    runs: dict[str, int] = {}

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository, with line numbers."""
        return source_text(path, seed)

    @tool
    def grep(pattern: str) -> str:
        """Search the repository for a regular expression; print path:line: text for each match."""
        rng = _rng(seed, "grep", pattern)
        hits = []
        for _ in range(rng.randint(25, 70)):
            path = rng.choice(_MODULES)[0] if rng.random() < 0.7 else _test_path(rng.choice(_MODULES)[0])
            hits.append(f"{path}:{rng.randint(1, 400)}:    result = {pattern}(records, limit={rng.randint(1, 99)})")
        return "\n".join(hits)

    @tool
    def list_dir(path: str) -> str:
        """List a directory of the repository with file sizes."""
        rng = _rng(seed, "ls", path)
        return "\n".join(
            f"{rng.randint(200, 40_000):>8}  {path.rstrip('/')}/{a}_{b}.py"
            for a, b in (rng.sample(_WORDS, 2) for _ in range(30))
        )

    @tool
    def run_tests(target: str) -> str:
        """Run pytest on a path and return its output."""
        runs[target] = runs.get(target, 0) + 1  # a rerun prints different timings and failures
        rng = _rng(seed, "pytest", target, runs[target])
        cases = rng.randint(60, 140)
        failed = rng.randint(0, 3)
        lines = [f"$ python -m pytest -q {target}", "============ test session starts ============"]
        lines += [
            f"{target}::test_{rng.choice(_WORDS)}_{i} PASSED [{100 * (i + 1) // cases:3d}%]" for i in range(cases)
        ]
        for i in range(failed):
            lines += [
                f"____________ test_regression_{i} ____________",
                "    def test_regression():",
                f">       assert compute(records) == {rng.randint(10, 999)}",
                f"E       AssertionError: assert {rng.randint(10, 999)} == {rng.randint(10, 999)}",
                f"{target}:{rng.randint(10, 300)}: AssertionError",
            ]
        lines.append(f"==== {cases - failed} passed, {failed} failed in {rng.uniform(0.5, 9):.2f}s ====")
        return "\n".join(lines)

    @tool
    def write_file(path: str, content: str) -> str:
        """Replace a file of the repository with new content."""
        return f"wrote {len(content.encode())} bytes ({content.count(chr(10)) + 1} lines) to {path}"

    return [read_file, grep, list_dir, run_tests, write_file]


def _call(name: str, args: dict, ident: str) -> dict:
    return {"name": name, "args": args, "id": ident, "type": "tool_call"}


def scripted_round(turn: int, step: int, seed: int) -> AIMessage:
    """Return the scripted agent's message for a step of a turn: tool calls (often parallel), then an answer.

    Each request takes 4 to 6 tool rounds: grep + list_dir, two or three
    parallel reads, the tests, a whole-file write, the tests again, and for
    some requests one more look at a neighbouring module.
    """
    rng = _rng(seed, "plan", turn)
    path, bug, symbol = _MODULES[turn % len(_MODULES)]
    neighbour = _MODULES[(turn + 1 + rng.randint(0, 4)) % len(_MODULES)][0]
    tests = _test_path(path)
    plan: list[tuple[str, list[tuple[str, dict]]]] = [
        (
            f"Looking for `{symbol}` and the layout of {path.rsplit('/', 1)[0]}.",
            [("grep", {"pattern": symbol}), ("list_dir", {"path": path.rsplit("/", 1)[0]})],
        ),
        (
            "Reading the module, its tests and a caller.",
            [("read_file", {"path": path}), ("read_file", {"path": tests})]
            + ([("read_file", {"path": neighbour})] if rng.random() < 0.5 else []),
        ),
        ("Reproducing the failure.", [("run_tests", {"target": tests})]),
        (
            f"The bug: it {bug}. Writing the fix.",
            [("write_file", {"path": path, "content": source_text(path, seed, rng.randint(70, 140), "fixed")})],
        ),
        ("Running the tests again.", [("run_tests", {"target": tests})]),
    ]
    if rng.random() < 0.5:
        plan.append(
            (
                "Checking the neighbouring module for the same pattern.",
                [("read_file", {"path": neighbour}), ("run_tests", {"target": _test_path(neighbour)})],
            )
        )
    ident = f"t{turn}s{step}"
    if step < len(plan):
        text, calls = plan[step]
        return AIMessage(
            content=text,
            id=f"ai-{ident}",
            tool_calls=[_call(n, a, f"call_{ident}_{k}") for k, (n, a) in enumerate(calls)],
        )
    return AIMessage(
        content=f"Fixed the bug in {path} (it {bug}): the change is in `{symbol}` and {tests} passes. "
        "The public API is unchanged.",
        id=f"ai-{ident}",
    )
