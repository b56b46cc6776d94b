"""A scripted tool-calling chat model and the checks every front's long-session test makes.

``ToolCallingModel`` is a real ``BaseChatModel`` (``bind_tools`` included),
so ``create_agent``, ``create_deep_agent`` and ``create_react_agent`` drive
it as they would a provider's model. For each user request it makes one
round of two parallel tool calls, each answered with 4,000 characters, then
answers. It records every input it is sent; ``Session`` checks each one
against the promises (provider ordering rules, the latest request verbatim,
the window) and, at the end, that no message it saw was lost.
"""

from __future__ import annotations

import json
import time
from typing import Any

from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, messages_to_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import ensure_config
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction, is_summary, load_transcript
from langgraph_compaction.core.tokens import estimate_text_tokens, estimate_tokens
from langgraph_compaction.invariants import lost_messages
from langgraph_compaction.storage import record_id
from langgraph_compaction.testing import ScriptedModel, view_violations

WINDOW = 30_000
CONFIG = CompactionConfig(context_window=WINDOW)
RESULT_CHARS = 4_000
REQUESTS = 22
_PRUNED = " chars pruned)..."


def _result(kind: str, subject: str) -> str:
    """Return exactly RESULT_CHARS characters of tool output about ``subject``."""
    line = f"{kind} {subject}: case ok, value computed and checked against the reference table\n"
    text = f"$ {kind} {subject}\n" + line * (RESULT_CHARS // len(line) + 1)
    return text[:RESULT_CHARS]


@tool
def run_tests(module: str) -> str:
    """Run the test suite of a module."""
    return _result("pytest", module)


@tool
def fetch_docs(topic: str) -> str:
    """Fetch the documentation of a topic."""
    return _result("docs", topic)


TOOLS = [run_tests, fetch_docs]


class TimedModel(ScriptedModel):
    """A summarizer and memory model recording each call: (its kind, when it began and ended, whether a job made it)."""

    spans: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        kind = "summary" if "Context Extraction Assistant" in str(messages[-1].content) else "memory"
        began = time.monotonic()
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            self.spans.append((kind, began, time.monotonic(), in_a_job()))


def in_a_job() -> bool:
    """Return True when the call comes from a background job: it runs outside the run (no thread id in its config)."""
    return not ensure_config().get("configurable", {}).get("thread_id")


def request(n: int) -> HumanMessage:
    """Return user request ``n`` (with a fixed id, so a test can find it verbatim)."""
    return HumanMessage(f"Task {n}: please check module{n} and its documentation", id=f"request-{n}")


def until_a_job_starts(graph: Any, thread: dict, events: Any) -> int:
    """Send requests to ``graph`` until it starts a background job; return the next request's number."""
    n = 0
    while not any(e["event"] == "compaction_started" and e.get("mode") == "background" for e in events()):
        graph.invoke({"messages": [request(n)]}, thread)
        n += 1
        assert n < 40, "no background job started"
    return n


class ToolCallingModel(BaseChatModel):
    """Two parallel tool calls per request, then an answer; every input is recorded.

    ``delegate`` names a tool that takes ``description`` and
    ``subagent_type`` (deepagents' ``task``): every ``delegate_every``-th
    request is handed to the ``delegate_to`` subagent first, which makes
    ``subtask_rounds`` rounds of tool calls before it answers.
    At request ``compact_at`` it first calls the ``compact`` tool.
    ``refuse_once_over`` makes the model refuse, once, a request larger than
    that many estimated tokens, as a provider does with a too-long request.
    """

    inputs: list = Field(default_factory=list)
    tool_schemas: list = Field(default_factory=list)
    steps: dict = Field(default_factory=dict)
    delegate: str | None = None
    delegate_every: int = 4
    delegate_to: str = "general-purpose"
    subtask_rounds: int = 1
    compact_at: int | None = None
    refuse_once_over: int | None = None
    refused: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-calling"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        self.tool_schemas = schemas
        return self.bind(tools=schemas, **{k: v for k, v in kwargs.items() if v is not None})

    def request_tokens(self, messages: list[BaseMessage]) -> int:
        """Return the estimated size of a request: its messages and the tool schemas sent with them."""
        return estimate_tokens(messages) + estimate_text_tokens(json.dumps(self.tool_schemas))

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if self.refuse_once_over is not None and not self.refused:
            size = self.request_tokens(messages)
            if size > self.refuse_once_over:
                self.refused += 1
                raise ContextOverflowError(
                    f"maximum context length is {self.refuse_once_over} tokens. However, your messages resulted in {size} tokens"
                )
        self.inputs.append(list(messages))
        latest = [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)][-1]
        text = latest.content
        number = int(text.split(":")[0].split()[-1])
        subject = f"{'sub' if text.startswith('Subtask') else ''}task{number}"
        step = self.steps.get(text, 0)  # kept outside the view: compaction may evict this turn's rounds
        self.steps[text] = step + 1
        delegating = self.delegate is not None and text.startswith("Task") and number % self.delegate_every == 1
        rounds = self.subtask_rounds if text.startswith("Subtask") else 1
        compacting = number == self.compact_at and text.startswith("Task")
        plan = (
            (["delegate"] if delegating else []) + (["compact"] if compacting else []) + ["tools"] * rounds + ["answer"]
        )
        action = plan[min(step, len(plan) - 1)]
        if action == "delegate":
            args = {
                "description": f"Subtask of Task {number}: check module{number} again",
                "subagent_type": self.delegate_to,
            }
            return AIMessage(
                "Delegating.", tool_calls=[{"name": self.delegate, "args": args, "id": f"{subject}-delegate"}]
            )
        if action == "compact":
            args = {"focus": f"the checks of module{number}"}
            return AIMessage(
                "Compacting first.", tool_calls=[{"name": "compact", "args": args, "id": f"{subject}-compact"}]
            )
        if action == "tools":
            calls = [
                {"name": "run_tests", "args": {"module": f"{subject}-{step}"}, "id": f"{subject}-tests-{step}"},
                {"name": "fetch_docs", "args": {"topic": f"{subject}-{step}"}, "id": f"{subject}-docs-{step}"},
            ]
            return AIMessage(f"Checking {subject}.", tool_calls=calls)
        return AIMessage(f"{text.split(':')[0]} is done: tests pass and the docs agree.")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(list(messages)))])


def summaries_counted(compaction: dict) -> int:
    """Return the compactions that wrote a summary (by the model, or extractive when it fell short)."""
    return compaction["counts"].get("summarize", 0) + compaction["counts"].get("extractive", 0)


def _latest_request(messages: list[BaseMessage]) -> HumanMessage:
    return [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)][-1]


class Session:
    """Checks the inputs a ``ToolCallingModel`` received, request by request.

    An input whose latest request is a subtask is a subagent's: it must hold
    that subtask verbatim (as the subagent's first call saw it), and its
    state ends with the subagent, so what it must not lose is what
    compaction evicted from its view.
    """

    def __init__(self, model: ToolCallingModel) -> None:
        self.model = model
        self.problems: list[str] = []
        self.checked = 0
        self.first_seen: dict[str, dict] = {}  # the agent's messages, as the model first saw each
        self.subtasks: dict[str, list[list[BaseMessage]]] = {}  # each subtask's inputs
        self.summaries: set[str] = set()  # ids of the summaries the agent (not a subagent) was sent
        self.peak = 0

    def check(self, latest: HumanMessage) -> None:
        """Check every input since the last check; ``latest`` is the request they answer."""
        for i, messages in enumerate(self.model.inputs[self.checked :], self.checked):
            request = _latest_request(messages)
            expected, first_seen = latest, self.first_seen
            if request.content.startswith("Subtask"):
                runs = self.subtasks.setdefault(request.content, [])
                runs.append(messages)
                expected, first_seen = _latest_request(runs[0]), {}
            else:
                self.summaries |= {m.id for m in messages if is_summary(m)}
            self.problems += [f"input {i}: {p}" for p in view_violations(messages, expected)]
            size = self.model.request_tokens(messages)
            self.peak = max(self.peak, size)
            if size > WINDOW:
                self.problems.append(f"input {i}: {size:,} tokens, over the {WINDOW:,}-token window")
            conversation = [m for m in messages if not (isinstance(m, SystemMessage) and m.id is None)]
            for record in messages_to_dict(conversation):
                first_seen.setdefault(record["data"]["id"], record)
        self.checked = len(self.model.inputs)

    def summaries_seen(self) -> int:
        """Return how many distinct summaries the agent was sent (a subagent's not counted)."""
        return len(self.summaries)

    def lost(self, state_messages: list[BaseMessage], storage: Any, thread_id: str) -> list[str]:
        """Return the messages the model saw that are in neither the state nor the thread's transcript.

        A message the model first saw already shortened by layer 2 (an
        overflow recovery compacts before the model sees the new results)
        must have its original, under the same id, in the transcript. A
        subagent's messages that left its view must be in the transcript.
        """
        transcript = messages_to_dict(load_transcript(storage, thread_id))
        originals = {record_id(r) for r in transcript}
        shortened = {i for i, r in self.first_seen.items() if _PRUNED in str(r["data"]["content"])}
        problems = lost_messages(
            [r for i, r in self.first_seen.items() if i not in shortened], state_messages, transcript
        )
        problems += [f"message {i!r}: its original is not in the transcript" for i in sorted(shortened - originals)]
        for runs in self.subtasks.values():
            last = {m.id for m in runs[-1]}
            evicted = {m.id for messages in runs[:-1] for m in messages if m.id is not None and m.id not in last}
            problems += [
                f"subagent message {i!r} left the view and is not in the transcript"
                for i in evicted
                if i not in originals
            ]
        return problems


@tool
def edit_file(path: str, old: str, new: str) -> str:
    """Replace ``old`` by ``new`` in a file."""
    return "ok"


def agent_loop(agent: Any, tools: list) -> StateGraph:
    """Return the usual agent <-> tools loop (tools -> agent by an edge) over ``CompactionState``, without compaction."""
    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def edge_builder(model: ToolCallingModel, storage: Any, config: CompactionConfig, summarizer: Any = None) -> StateGraph:
    """Return the usual agent <-> tools loop (tools -> agent by an edge) with compaction added, not yet compiled."""
    bound = model.bind_tools(TOOLS)
    builder = agent_loop(lambda state: {"messages": [bound.invoke(state["messages"])]}, TOOLS)
    add_compaction(
        builder, before="agent", model=summarizer or ScriptedModel(), config=config, storage=storage, agent_model=bound
    )
    return builder
