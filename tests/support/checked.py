"""A tool-using agent graph whose every model call and every run is checked against the invariants.

Used by the fault, hostile-input, invariant and concurrency tests: the agent
node checks each view it receives (invariant 1), and ``CheckedThread.check``
compares everything the thread ever held (read back from the checkpointer's
history) with the state and the transcript (invariants 2 and 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import RetryPolicy

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.conversation import is_user_turn
from langgraph_compaction.engine.nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE
from langgraph_compaction.invariants import ThreadLedger, history_problems, ledgers_of
from support import TOOLS

SYSTEM = SystemMessage(content="You are a careful coding agent. Use the tools.", id="system-prompt")
#: a window the scripted agent's history outgrows in about three turns
TIGHT = CompactionConfig(context_window=60_000, trigger_tokens=8_000, keep_tokens=2_000)


@dataclass
class CheckedAgent:
    """The model node: two parallel tool calls, a big write, then an answer per request; checks every view.

    Script positions are kept per (thread, request), so any number of
    threads can share one agent.
    """

    views: dict[str, list[list[BaseMessage]]] = field(default_factory=dict)
    steps: dict[tuple[str, str], int] = field(default_factory=dict)
    fail_once: BaseException | None = None

    def __call__(self, state: dict, config: RunnableConfig) -> dict:
        thread = config["configurable"]["thread_id"]
        messages = list(state["messages"])
        self.views.setdefault(thread, []).append(messages)
        if self.fail_once is not None:
            error, self.fail_once = self.fail_once, None
            raise error
        latest = next(m for m in reversed(messages) if is_user_turn(m))
        key = (thread, latest.id)
        step = self.steps.get(key, 0)
        self.steps[key] = step + 1
        tag = f"{thread}-{len(self.steps)}-{step}"
        if step == 0:
            calls = [
                {"name": "bash", "args": {"cmd": f"pytest -q module_{tag}"}, "id": f"call-{tag}-bash"},
                {"name": "read_file", "args": {"path": f"src/module_{tag}.py"}, "id": f"call-{tag}-read"},
            ]
            return {"messages": [AIMessage(content=f"Looking at it ({thread}).", tool_calls=calls)]}
        if step == 1:
            body = "".join(f"def handler_{i}(event):\n    return event['value'] * {i}\n" for i in range(120))
            calls = [
                {"name": "write_file", "args": {"path": f"src/{tag}.py", "content": body}, "id": f"call-{tag}-write"}
            ]
            return {"messages": [AIMessage(content=f"Writing the fix ({thread}).", tool_calls=calls)]}
        return {"messages": [AIMessage(content=f"Done ({thread}): src/{tag}.py updated and tests pass.")]}

    def calls(self, thread: str) -> int:
        """Return how many times the model node ran for a thread."""
        return len(self.views.get(thread, []))


def build_checked_graph(
    summarizer: Any,
    *,
    config: CompactionConfig = TIGHT,
    storage: Any,
    checkpointer: Any,
    flush_model: Any = None,
    store: Any = None,
    agent: CheckedAgent | None = None,
    retry_policy: RetryPolicy | None = None,
):
    """Return (compiled graph, agent): the checked agent and its tools with compaction in front.

    ``retry_policy`` goes on the agent's model node and on every compaction node.
    """
    agent = agent or CheckedAgent()
    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent, retry_policy=retry_policy)
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=summarizer, config=config, storage=storage, flush_model=flush_model)
    for name in (GATE, FLUSH, OFFLOAD, SUMMARIZE):
        builder.nodes[name].retry_policy = retry_policy
    return builder.compile(checkpointer=checkpointer, store=store), agent


def request(turn: int, thread: str = "t") -> dict:
    """Return the input of one user turn (the first one carries the system prompt)."""
    message = HumanMessage(content=f"Task {turn} ({thread}): please fix module{turn} and run its tests")
    return {"messages": ([SYSTEM] if turn == 0 else []) + [message]}


def thread_config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


@dataclass
class CheckedThread:
    """One thread of a checked graph: what it held, checked against invariants 1, 2 and 4."""

    graph: Any
    agent: CheckedAgent
    storage: Any
    thread: str = "t"
    user: str = "default"
    ledger: ThreadLedger = field(default_factory=ThreadLedger)

    @property
    def config(self) -> dict:
        return thread_config(self.thread)

    def _collect(self, snapshots) -> None:
        for snap in reversed(snapshots):  # oldest first: first sight of a message is as it was added
            self.ledger.added(snap.values.get("messages") or [])

    def check(self, *, skip_lost: frozenset = frozenset()) -> list[str]:
        """Return every broken promise so far: views (1), state vs transcript (2), duplicates (4)."""
        self._collect(list(self.graph.get_state_history(self.config)))
        return self._check(self.graph.get_state(self.config).values, skip_lost)

    async def acheck(self, *, skip_lost: frozenset = frozenset()) -> list[str]:
        self._collect([s async for s in self.graph.aget_state_history(self.config)])
        return self._check((await self.graph.aget_state(self.config)).values, skip_lost)

    def _check(self, values: dict, skip_lost: frozenset) -> list[str]:
        problems = []
        for view in self.agent.views.get(self.thread, []):
            newest = next(
                (i for i, m in enumerate(self.ledger.history) if m.id == view[-1].id), len(self.ledger.history) - 1
            )
            problems += [f"view: {p}" for p in history_problems(view, self.ledger.history[: newest + 1])]
        transcript = self.transcript()
        ledgers = ledgers_of(self.storage, self.user) if self.storage is not None else {}
        self.ledger.problems["nothing_lost"] = []
        self.ledger.problems["exactly_once"] = []
        found = self.ledger.check_store(values.get("messages") or [], transcript, ledgers)
        return problems + [p for p in found if not any(f"'{i}'" in p for i in skip_lost)]

    def transcript(self) -> list[dict]:
        """Return the thread's transcript records ([] when storage is missing or unreadable)."""
        try:
            return self.storage.read_transcript(self.thread) if self.storage is not None else []
        except Exception:  # noqa: BLE001 - an unreadable transcript holds nothing
            return []

    def values(self) -> dict:
        return self.graph.get_state(self.config).values


def events(values: dict, **match: Any) -> list[dict]:
    """Return the state's compaction events whose keys equal ``match`` (``error=True``: any error)."""
    found = []
    for e in (values.get("compaction") or {}).get("events") or []:
        if all((bool(e.get(k)) if v is True else e.get(k) == v) for k, v in match.items()):
            found.append(e)
    return found


__all__ = [
    "CheckedAgent",
    "CheckedThread",
    "SYSTEM",
    "TIGHT",
    "build_checked_graph",
    "events",
    "request",
    "thread_config",
]
