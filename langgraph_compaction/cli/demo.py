"""The demo session: a long tool-using coding agent run through the compacting graph.

``run_demo`` drives one thread of ``turns`` user requests through a real
``StateGraph`` built with ``add_compaction``, checkpointed by ``SqliteSaver``
in ``<storage>/checkpoints.sqlite``, with transcripts and the memory ledger as
files under ``<storage>``. The agent reads files, greps, runs tests and writes
fixes in a synthetic repository whose tool outputs are large (thousands of
tokens) and often come from parallel tool calls.

Without ``OPENAI_API_KEY`` the agent is scripted (deterministic for a
``seed``), summaries are the package's deterministic extractive summaries and
memories (and their consolidation into MEMORY.md at the end) come from
``ScriptedModel``; with it, ``ChatOpenAI`` plays the agent,
the summarizer and the memory extractor. The scripted agent's replies report
``usage_metadata`` as OpenAI's automatic prompt caching would (`PromptCache`),
so the thread's calibration and the billed figures see cache reads offline too.

What the session would have cost without compaction is computed, not run:
every model call would have re-sent the whole conversation so far, which the
transcript (every message once, as first written) plus the live state rebuild
exactly; both sides are counted with the same token estimator. Billed, each of
those calls would have read the previous call's whole request from the cache.
"""

from __future__ import annotations

import os
import random
import shlex
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, messages_from_dict
from langchain_core.tools import tool
from langgraph.constants import TAG_NOSTREAM

from ..core.caching import CACHE_DEPTH, cache_key, cached_prefix
from ..core.calibration import add_usage, billed_input, cache_details
from ..core.config import CompactionConfig, PruneConfig
from ..core.conversation import is_summary, latest_user_index
from ..core.tokens import TokenCounter
from ..memory.consolidation import consolidate_memory
from ..memory.ledger import MEMORY_FILE, ledger_relpath, local_now
from ..storage import DEFAULT_USER, FileStorage
from .demo_defaults import CHECKPOINTS_FILE, DEFAULT_OPENAI_MODEL, DEFAULT_STORAGE, DEFAULT_TURNS, DEFAULT_WINDOW

#: Tool rounds an online agent may take per request before it must answer.
MAX_TOOL_ROUNDS = 6
#: OpenAI caches the prefix of a request of at least this many tokens.
CACHE_MIN_TOKENS = 1_024
#: OpenAI's price of a cached input token, a full-price one being 1 (gpt-5; billed_input's default).
CACHED_PRICE = 0.1

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
    """Return a random generator determined by the seed and the parts (stable across runs and processes)."""
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


def cache_read(tokens: int, prefix: int) -> int:
    """Return the tokens the cache serves of a ``tokens``-token request whose first ``prefix`` tokens it holds."""
    return prefix if tokens >= CACHE_MIN_TOKENS else 0


class PromptCache:
    """OpenAI's automatic prompt caching, as the offline agent's ``usage_metadata`` reports it.

    A request's cached prefix is the longest run of leading messages
    identical (`cache_key`) to the start of one of the last `CACHE_DEPTH`
    requests, counted with ``counter``; a request under `CACHE_MIN_TOKENS`
    reads nothing. Message granularity stands in for OpenAI's 128-token blocks.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._recent: list[list[tuple]] = []

    def usage(self, messages: Sequence[BaseMessage], reply: AIMessage) -> dict:
        """Return the ``usage_metadata`` of ``reply`` to the request ``messages``, and remember the request."""
        keys = [cache_key(m) for m in messages]
        counts = self.counter.counts(list(messages))
        shared = cached_prefix(keys, self._recent)
        self._recent = [*self._recent, keys][-CACHE_DEPTH:]
        tokens, output = sum(counts), self.counter.message(reply)
        return {
            "input_tokens": tokens,
            "output_tokens": output,
            "total_tokens": tokens + output,
            "input_token_details": {"cache_read": cache_read(tokens, sum(counts[:shared]))},
        }


@dataclass
class CallRecord:
    """One agent model call: the context it sent and the newest message in it.

    ``compaction_tokens`` is what the compaction model read just before this
    call (summary and memory prompts). What the API reported is added up in
    ``DemoReport.usage``.
    """

    tokens: int
    last_id: str | None
    compaction_tokens: int = 0


class CompactionModelUsage(BaseCallbackHandler):
    """Counts the compaction model calls (tagged ``nostream``) and their estimated input tokens."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.calls = 0
        self.pending = 0
        self._lock = threading.Lock()

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, tags=None, **kwargs: Any
    ) -> None:
        if TAG_NOSTREAM in (tags or []):
            with self._lock:
                self.calls += 1
                self.pending += sum(self.counter.total(batch) for batch in messages)

    def take(self) -> int:
        """Return the input tokens counted since the last ``take``."""
        with self._lock:
            taken, self.pending = self.pending, 0
            return taken


@dataclass
class DemoOptions:
    """The demo's settings (the command's flags)."""

    turns: int = DEFAULT_TURNS
    storage: str = DEFAULT_STORAGE
    window: int = DEFAULT_WINDOW
    thread: str | None = None
    seed: int = 7
    plot: str | None = None
    quiet: bool = False
    model: str = DEFAULT_OPENAI_MODEL
    resume: bool = False

    def check(self) -> None:
        """Raise ValueError naming the flag when a setting cannot work."""
        if self.turns < 1:
            raise ValueError(f"--turns must be at least 1 (got {self.turns})")
        # demo_config changes only layer 2's thresholds, which the smallest window does not depend on
        smallest = CompactionConfig().smallest_window()
        if self.window < smallest:
            raise ValueError(
                f"--window must be at least {smallest:,} tokens (got {self.window:,}): the smallest window in which "
                "a compaction leaves room for its summary and a kept tail"
            )


@dataclass
class DemoReport:
    """What a demo session did: the calls, the compactions, the files, with and without compaction."""

    mode: str
    thread: str
    window: int
    trigger: int
    calls: list[CallRecord] = field(default_factory=list)
    without: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    edited: dict[str, int] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    compaction_calls: int = 0
    consolidation: str = ""
    paths: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    checkpoints: int = 0
    checkpoint_bytes: int = 0
    transcript_bytes: int = 0
    usage: dict = field(
        default_factory=dict
    )  # the usage the agent's replies reported, added up by calibration.add_usage

    @property
    def with_tokens(self) -> list[int]:
        """Return the context tokens each agent model call sent."""
        return [c.tokens for c in self.calls]

    @property
    def compaction_input_tokens(self) -> int:
        """Return the input tokens of the compaction model's calls (summaries and memory extraction)."""
        return sum(c.compaction_tokens for c in self.calls)

    @property
    def cumulative_with(self) -> int:
        """Return the input tokens of all agent calls plus the compaction model's calls."""
        return sum(self.with_tokens) + self.compaction_input_tokens

    @property
    def cumulative_without(self) -> int:
        """Return the input tokens the same agent calls would have sent without compaction."""
        return sum(self.without)

    @property
    def usage_without(self) -> dict:
        """Return the usage the same agent calls would have reported without compaction.

        Each would have sent the whole conversation so far, whose start is the
        previous call's whole request: the cache serves that prefix.
        """
        usage: dict = {}
        for previous, tokens in zip([0, *self.without], self.without):
            usage = add_usage(usage, tokens, {"cache_read": cache_read(tokens, previous)})
        return usage

    @property
    def billed_with(self) -> float:
        """Return the billed input: the agent's reported usage (cached prefix at `CACHED_PRICE`), the compaction model's input in full."""
        return billed_input(self.usage, CACHED_PRICE) + self.compaction_input_tokens

    @property
    def billed_without(self) -> float:
        """Return the billed input of the same agent calls without compaction (`usage_without`, cached prefix at `CACHED_PRICE`)."""
        return billed_input(self.usage_without, CACHED_PRICE)


def uncompacted_history(transcript: Sequence[dict], live: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the whole conversation as it was written: the transcript, then live messages not in it, no summaries.

    The transcript holds every message once, as first written (the originals
    reach it before any layer edits them); the live state adds what came after
    the last offload.
    """
    messages = messages_from_dict(list(transcript))
    seen = {m.id for m in messages}
    messages += [m for m in live if m.id not in seen]
    return [m for m in messages if not is_summary(m)]


def uncompacted_contexts(
    history: Sequence[BaseMessage], last_ids: Iterable[str | None], counter: TokenCounter
) -> list[int]:
    """Return, per model call, the tokens of the whole history up to the newest message that call saw."""
    position = {m.id: i for i, m in enumerate(history)}
    prefix = [0]
    for count in counter.counts(list(history)):
        prefix.append(prefix[-1] + count)
    return [prefix[position[i] + 1] if i in position else prefix[-1] for i in last_ids]


class EventLine:
    """Turns the stream's compaction events into one line per compaction (a flush joins its summary's line)."""

    def __init__(self) -> None:
        self._memories = 0

    def __call__(self, turn: int, call: int, event: dict) -> str | None:
        """Return the line to print for an event, or None while a compaction is still in progress."""
        stage = event.get("stage")
        if event.get("phase"):  # a step's start and end marks: its outcome has an event of its own
            return None
        where = f"turn {turn:>3} call {call:>4}  "
        if event.get("error"):
            return where + f"{stage} failed: {event['error']}"
        if stage == "flush":
            self._memories += event.get("memories") or 0
            return None
        if stage == "gate" and event.get("layer") and event.get("tokens_before") is not None:
            return where + (
                f"{event['layer']:<10} {event['tokens_before']:>7,} → {event['tokens_after']:>7,} tokens  "
                f"{event.get('edited', 0)} old messages shortened"
            )
        if stage == "summarize":
            line = where + (
                f"{event.get('layer', 'summary'):<10} {event.get('tokens_before') or 0:>7,} → {event.get('tokens_after') or 0:>7,} tokens  "
                f"{event.get('evicted', 0)} offloaded, {self._memories} memor{'y' if self._memories == 1 else 'ies'}"
            )
            self._memories = 0
            return line
        return None


def demo_config(window: int) -> CompactionConfig:
    """Return the demo's settings: the defaults, with layer 2 scaled down to the small window so it acts too."""
    trigger = CompactionConfig(context_window=window).resolve().trigger_tokens
    return CompactionConfig(
        context_window=window, prune=PruneConfig(protect_tokens=trigger // 2, minimum_tokens=trigger // 6)
    )


def _offline_agent(seed: int, counter: TokenCounter, steps: dict[str, int]) -> Callable[[list[BaseMessage]], AIMessage]:
    cache = PromptCache(counter)

    def decide(messages: list[BaseMessage]) -> AIMessage:
        request = messages[latest_user_index(messages)]
        turn = int(request.content.split()[1].rstrip(":")) - 1
        # the step counter lives outside the view: compaction may evict this turn's first rounds
        step = steps.get(request.id, 0)
        steps[request.id] = step + 1
        reply = scripted_round(turn, step, seed)
        return reply.model_copy(update={"usage_metadata": cache.usage(messages, reply)})

    return decide


def _openai_agent(model: Any, tools: list, rounds: dict[str, int]) -> Callable[[list[BaseMessage]], AIMessage]:
    with_tools = model.bind_tools(tools, parallel_tool_calls=True)
    answer_now = model.bind_tools(tools, tool_choice="none")

    def decide(messages: list[BaseMessage]) -> AIMessage:
        request = messages[latest_user_index(messages)]
        used = rounds.get(request.id, 0)
        rounds[request.id] = used + 1
        return (with_tools if used < MAX_TOOL_ROUNDS else answer_now).invoke(messages)

    return decide


def _tool_result_ids() -> Callable[[Any, Callable[[Any], Any]], Any]:
    """Return a ToolNode ``wrap_tool_call`` that gives each tool result the id ``tool-<tool call id>``.

    ToolNode leaves results without an id, so ``add_messages`` would give
    each a random uuid4; summaries quote the ids of the messages they
    compact, so a random id would change every later context's token count
    from run to run (and the offline demo's figures with it). A tool call id
    seen before (a server that reuses them) keeps the random id rather than
    replace the earlier result.
    """
    given: set[str] = set()
    lock = threading.Lock()

    def wrap(request: Any, execute: Callable[[Any], Any]) -> Any:
        result = execute(request)
        if isinstance(result, ToolMessage) and result.id is None and result.tool_call_id:
            ident = f"tool-{result.tool_call_id}"
            with lock:
                fresh = ident not in given
                given.add(ident)
            if fresh:
                return result.model_copy(update={"id": ident})
        return result

    return wrap


def build_demo_graph(
    decide,
    tools: list,
    summarizer: Any,
    flush_model: Any,
    config: CompactionConfig,
    storage: FileStorage,
    checkpointer: Any,
    on_call: Callable[[list[BaseMessage], AIMessage], None],
):
    """Return the compiled agent graph: agent -> tools loop with compaction in front of the agent."""
    from langgraph.graph import START, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from ..engine.state import CompactionState
    from ..fronts.graph import add_compaction

    def agent(state: dict) -> dict:
        messages = list(state["messages"])
        reply = decide(messages)
        on_call(messages, reply)
        return {"messages": [reply]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools, wrap_tool_call=_tool_result_ids()))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=summarizer, flush_model=flush_model, config=config, storage=storage)
    return builder.compile(checkpointer=checkpointer)


def storage_folder(spec: str) -> Path:
    """Return the storage folder ``spec`` names, made (``0700``) when missing; raise ValueError naming --storage when it cannot be one."""
    root = Path(spec)
    if root.exists() and not root.is_dir():
        raise ValueError(
            f"--storage {spec}: it is a file, not a folder; pass a folder for the demo's checkpoints and files"
        )
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"--storage {spec}: cannot make the folder ({exc.strerror}); pass a folder the demo may create"
        ) from exc
    return root


def default_thread() -> str:
    """Return a fresh thread id for a demo run (``demo-YYYYMMDD-HHMMSS``)."""
    return "demo-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def _models(
    options: DemoOptions, counter: TokenCounter, rounds: dict[str, int]
) -> tuple[str, Callable, Any, Any, Any, list]:
    """Return (mode line, agent, summarizer, memory model, consolidation model, tools) for the environment.

    ``counter`` counts the offline agent's reported usage; ``rounds`` holds
    the replies each request (by message id) has had, which the agent
    counts on from (compaction may evict a request's earlier rounds).
    """
    tools = make_tools(options.seed)
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(model=options.model, base_url=os.environ.get("OPENAI_BASE_URL") or None, temperature=0)
        where = os.environ.get("OPENAI_BASE_URL") or "api.openai.com"
        line = f"online: ChatOpenAI {options.model} at {where} is the agent, the summarizer and the memory extractor"
        return line, _openai_agent(llm, tools, rounds), llm, llm, llm, tools
    from ..testing import ScriptedModel

    line = (
        "offline: no OPENAI_API_KEY, so a scripted coding agent, deterministic extractive summaries and "
        "scripted memory extraction and consolidation run this session (set OPENAI_API_KEY to use ChatOpenAI)"
    )
    return line, _offline_agent(options.seed, counter, rounds), None, ScriptedModel(), ScriptedModel(), tools


def run_demo(options: DemoOptions, out: Any | None = None) -> DemoReport:
    """Run the demo session and return its report; progress and compaction lines go to ``out`` (a rich Console).

    Raises ValueError for bad options, a thread that already has checkpoints
    (unless ``resume``) or, with ``resume``, one that has none. A resumed
    thread goes on as if never stopped: an interrupted request from its next
    step, then the requests up to ``turns``; the report counts this run's calls.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    options.check()
    console = out if out is not None else Console()
    thread = default_thread() if options.thread is None else options.thread
    root = storage_folder(options.storage)
    storage = FileStorage(root)
    counter = TokenCounter()
    config = demo_config(options.window)
    budget = config.resolve()
    rounds: dict[str, int] = {}
    mode, decide, summarizer, flush_model, consolidator, tools = _models(options, counter, rounds)
    console.print(mode)
    console.print(
        f"thread {thread} · window {options.window:,} tokens · compaction at {budget.trigger_tokens:,} tokens or "
        f"{budget.trigger_messages} messages · tail kept {budget.keep_tokens:,} tokens · storage {root}/",
        markup=False,
    )

    report = DemoReport(mode=mode.split(":")[0], thread=thread, window=options.window, trigger=budget.trigger_tokens)
    usage = CompactionModelUsage(counter)

    def on_call(messages: list[BaseMessage], reply: AIMessage) -> None:
        reported = (getattr(reply, "usage_metadata", None) or {}).get("input_tokens")
        if isinstance(reported, int):
            report.usage = add_usage(report.usage, reported, cache_details(reply))
        last_id = messages[-1].id if messages else None
        report.calls.append(CallRecord(counter.total(messages), last_id, usage.take()))

    # made 0600 first, as the storage's own files are: sqlite3 would create it with the umask's mode (its journals copy the file's)
    os.close(os.open(root / CHECKPOINTS_FILE, os.O_WRONLY | os.O_CREAT, 0o600))
    conn = sqlite3.connect(root / CHECKPOINTS_FILE, check_same_thread=False)
    try:
        checkpointer = SqliteSaver(conn)
        # a model call takes at most five steps (gate, flush+offload, summarize, agent, tools)
        steps = 5 * (MAX_TOOL_ROUNDS + 2) + 10
        run_config = {"configurable": {"thread_id": thread}, "recursion_limit": steps, "callbacks": [usage]}
        started_before = checkpointer.get_tuple({"configurable": {"thread_id": thread}}) is not None
        if started_before and not options.resume:
            inspect = shlex.join(["langgraph-compaction", "inspect", "--thread", thread, "--storage", str(root)])
            raise ValueError(
                f"thread {thread!r} already has checkpoints in {root / CHECKPOINTS_FILE}; pass --resume to continue it, "
                f"another --thread to start anew, or look at it with `{inspect}`"
            )
        if options.resume and not started_before:
            raise ValueError(
                f"--resume: thread {thread!r} has no checkpoints in {root / CHECKPOINTS_FILE}; start it without --resume"
            )
        graph = build_demo_graph(decide, tools, summarizer, flush_model, config, storage, checkpointer, on_call)
        first, unfinished = 0, False
        if options.resume:
            snapshot = graph.get_state({"configurable": {"thread_id": thread}})
            rounds.update(
                rounds_taken(
                    thread, uncompacted_history(storage.read_transcript(thread), snapshot.values.get("messages") or [])
                )
            )
            first, unfinished = len(rounds), bool(snapshot.next)
            if first >= options.turns and not unfinished:
                raise ValueError(f"--resume: thread {thread!r} already has {first} requests; pass a larger --turns")
            console.print(
                f"resuming thread {thread} at request {first + 1 - unfinished} of {options.turns} (the totals count this run's calls)",
                markup=False,
            )
        line_for = EventLine()
        started = time.monotonic()
        progress = Progress(
            TextColumn("[bold]turns"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            disable=options.quiet,
            transient=False,
        )
        with progress:
            task = progress.add_task("turns", total=options.turns, completed=first - unfinished, status="")
            # an interrupted request first goes on from its checkpoint (no input), then the requests still to come
            for turn in [first - 1] * unfinished + list(range(first, options.turns)):
                inputs = (
                    None
                    if turn < first
                    else {
                        "messages": ([SystemMessage(SYSTEM_PROMPT, id=f"{thread}-system")] if turn == 0 else [])
                        + [HumanMessage(request_text(turn, options.seed), id=f"{thread}-request-{turn + 1}")]
                    }
                )
                for event in graph.stream(inputs, run_config, stream_mode="custom"):
                    if isinstance(event, dict) and event.get("type") == "compaction":
                        report.events.append({**event, "turn": turn + 1, "call": len(report.calls) + 1})
                        line = line_for(turn + 1, len(report.calls) + 1, event)
                        if line and not options.quiet:
                            progress.console.print(line)
                last = report.calls[-1].tokens if report.calls else 0
                progress.update(task, advance=1, status=f"{len(report.calls)} model calls · context {last:,} tokens")
        report.seconds = time.monotonic() - started
        state = graph.get_state({"configurable": {"thread_id": thread}}).values
        report.checkpoints, report.checkpoint_bytes = checkpoint_size(conn, thread)
    finally:
        conn.close()

    history = uncompacted_history(storage.read_transcript(thread), state.get("messages") or [])
    report.without = uncompacted_contexts(history, [c.last_id for c in report.calls], counter)
    compaction = state.get("compaction") or {}
    report.counts = dict(compaction.get("counts") or {})
    report.edited = dict(compaction.get("edited_messages") or {})
    report.compaction_calls = usage.calls
    report.consolidation = consolidate_memory(storage, consolidator, timezone=config.timezone, force=True).status
    day = local_now(config.timezone).date().isoformat()
    transcript = Path(storage.transcript_location(thread))
    report.transcript_bytes = transcript.stat().st_size if transcript.is_file() else 0
    report.paths = {
        "checkpoints": str(root / CHECKPOINTS_FILE),
        "transcript": storage.transcript_location(thread),
        "ledger": storage.memory_location(DEFAULT_USER, ledger_relpath(day)),
        "memory": storage.memory_location(DEFAULT_USER, MEMORY_FILE),
    }
    return report


def rounds_taken(thread: str, history: Sequence[BaseMessage]) -> dict[str, int]:
    """Return, per request of the demo's thread (by message id), the agent replies that follow it in ``history``."""
    taken: dict[str, int] = {}
    request = None
    for message in history:
        if isinstance(message, HumanMessage) and str(message.id).startswith(f"{thread}-request-"):
            request = message.id
            taken[request] = 0
        elif isinstance(message, AIMessage) and request is not None:
            taken[request] += 1
    return taken


def checkpoint_size(conn: sqlite3.Connection, thread: str) -> tuple[int, int]:
    """Return (checkpoints, bytes) a thread holds in a SqliteSaver database: checkpoint blobs, metadata and pending writes."""
    count, stored = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints WHERE thread_id = ?",
        (thread,),
    ).fetchone()
    writes = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?", (thread,)
    ).fetchone()[0]
    return count, stored + writes


def compaction_counts(counts: dict[str, int], edited: dict[str, int]) -> str:
    """Return ``"prune: 12 compactions, 38 messages · ..."``: per layer, how often it acted and the messages it touched."""
    return " · ".join(
        f"{layer}: {times:,} compaction{'' if times == 1 else 's'}"
        + (f", {edited[layer]:,} message{'' if edited[layer] == 1 else 's'}" if layer in edited else "")
        for layer, times in sorted(counts.items())
    )


def totals_table(report: DemoReport) -> Any:
    """Return the rich Table of the session's totals: calls, compactions by layer, peak and cumulative tokens."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Session totals ({report.mode}, thread {escape(report.thread)})", show_lines=False)
    table.add_column("", no_wrap=True)
    table.add_column("with compaction", justify="right")
    table.add_column("without compaction", justify="right")
    calls = len(report.calls)
    table.add_row("agent model calls", f"{calls:,}", f"{calls:,}")
    table.add_row("compaction model calls", f"{report.compaction_calls:,}", "0")
    table.add_row(
        "peak context tokens", f"{max(report.with_tokens, default=0):,}", f"{max(report.without, default=0):,}"
    )
    table.add_row("agent input tokens, cumulative", f"{sum(report.with_tokens):,}", f"{report.cumulative_without:,}")
    table.add_row("compaction model input tokens", f"{report.compaction_input_tokens:,}", "0")
    saved = 1 - report.cumulative_with / report.cumulative_without if report.cumulative_without else 0.0
    table.add_row(
        "[bold]total input tokens", f"[bold]{report.cumulative_with:,}", f"[bold]{report.cumulative_without:,}"
    )
    table.caption = (
        f"Compaction saved {saved:.1%} of the input tokens. 'Without' is computed: each of the same calls re-sending "
        "the whole conversation so far (rebuilt from the transcript plus the live state), counted with the same "
        "estimator; past the window those calls would have failed."
    )
    if report.usage:
        without = report.usage_without
        table.add_row("agent input tokens (API usage)", f"{report.usage['input']:,}", "-")
        table.add_row(
            "agent input tokens read from the cache", f"{report.usage['cache_read']:,}", f"{without['cache_read']:,}"
        )
        billed_with, billed_without = report.billed_with, report.billed_without
        table.add_row(
            f"[bold]billed input (cached prefix at {CACHED_PRICE}×)",
            f"[bold]{billed_with:,.0f}",
            f"[bold]{billed_without:,.0f}",
        )
        outcome = (
            f"the input costs {billed_without / max(1.0, billed_with):.1f}× as much without compaction as with it."
            if billed_without >= billed_with
            else f"without compaction the input would have cost less ({billed_without:,.0f} against {billed_with:,.0f}): "
            "this session is too short for compaction to pay for its own model calls and the cache reads it gives up."
        )
        table.caption += (
            f" Billed at OpenAI's prices (a cached prefix at {CACHED_PRICE}×, the compaction model's input in full; "
            f"without compaction each call reads the previous call's whole request from the cache), {outcome}"
        )
    table.add_row("transcript (every message once)", _size(report.transcript_bytes), "-")
    table.add_row(f"checkpoints ({report.checkpoints:,} in SQLite)", _size(report.checkpoint_bytes), "-")
    return table


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def layer_totals(report: DemoReport) -> str:
    """Return, per layer that acted, how often it acted and the messages it shortened or summarized (``compaction_counts``)."""
    totals: dict[str, tuple[int, int]] = {}
    for event in report.events:
        if event.get("error") or event.get("tokens_before") is None or event.get("stage") not in ("gate", "summarize"):
            continue
        for layer in str(event.get("layer")).split("+"):
            times, messages = totals.get(layer, (0, 0))
            totals[layer] = (times + 1, messages + (event.get("evicted") or 0))
    # the gate reports one edit count for all its layers; the state counts the messages each layer touched
    edited = {
        layer: messages if layer in ("summarize", "extractive") else report.edited.get(layer, 0)
        for layer, (_, messages) in totals.items()
    }
    return compaction_counts({layer: times for layer, (times, _) in totals.items()}, edited)


def save_plot(report: DemoReport, path: str) -> str:
    """Draw context tokens per call and cumulative input tokens, with and without compaction, to a PNG; return its path."""
    import matplotlib

    matplotlib.use("Agg")
    from itertools import accumulate

    import matplotlib.pyplot as plt

    calls = range(1, len(report.calls) + 1)
    with_cum = list(accumulate(c.tokens + c.compaction_tokens for c in report.calls))
    without_cum = list(accumulate(report.without))
    compaction_at = {e["call"] for e in report.events if e.get("stage") == "summarize" and not e.get("error")}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), dpi=110)
    left.plot(calls, report.without, color="#c0392b", linestyle="--", label="without compaction")
    left.plot(calls, report.with_tokens, color="#2471a3", label="with compaction")
    left.axhline(
        report.window, color="#555555", linewidth=0.8, linestyle=":", label=f"context window {report.window:,}"
    )
    left.axhline(report.trigger, color="#999999", linewidth=0.8, linestyle="-.", label=f"trigger {report.trigger:,}")
    for call in compaction_at:
        left.axvline(call, color="#2471a3", alpha=0.12, linewidth=0.8)
    left.set(title="Context sent per model call", xlabel="model call", ylabel="tokens (log scale)", yscale="log")
    left.set_ylim(1_000, max(max(report.without, default=0), report.window) * 2)
    left.legend(loc="lower right", fontsize=8)
    right.plot(calls, [v / 1e6 for v in without_cum], color="#c0392b", linestyle="--", label="without compaction")
    right.plot(
        calls, [v / 1e6 for v in with_cum], color="#2471a3", label="with compaction (incl. compaction model calls)"
    )
    right.set(title="Cumulative input tokens", xlabel="model call", ylabel="million tokens")
    right.legend(loc="upper left", fontsize=8)
    fig.suptitle(
        f"langgraph-compaction demo: {len(report.calls)} model calls, {len(compaction_at)} summaries", fontsize=11
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb"
    ) as png:  # private, as the storage's files are
        fig.savefig(png, format="png")
    plt.close(fig)
    return str(path)
