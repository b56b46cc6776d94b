"""A tool-using agent with compaction in front of its model node, for LangGraph Studio.

``langgraph dev`` (see ``langgraph.json``) serves ``graph``: the agent works in
a simulated workspace (``run_tests``, ``read_file``, ``write_file`` return
large, realistic outputs without touching the disk), can search and recall
what compaction kept (``memory_search``, ``memory_get``, ``session_search``,
``recall``) and can ask for compaction itself (``compact``).

With ``OPENAI_API_KEY`` set the agent and the summarizer are ``ChatOpenAI``
(``OPENAI_BASE_URL`` and ``COMPACTION_MODEL`` are honoured); without it an
offline scripted agent and the scripted summarizer answer, so the graph runs
anywhere. ``graph`` is compiled without checkpointer or store: the server
injects its own, and the transcripts and memory files go to that store.

Per run, the context (Studio's "Context" form) sets the user whose memory is
used and the compaction thresholds, e.g.
``{"user_id": "alice", "trigger_tokens": 6000}``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.conversation import is_user_turn, text_of
from langgraph_compaction.fronts.tools import make_compaction_tools
from langgraph_compaction.testing import ScriptedModel

SYSTEM_PROMPT = (
    "You are a careful coding agent working in a repository. Use run_tests, read_file and write_file "
    "to do the user's task. Earlier parts of this conversation may have been compacted into a summary; "
    "when you need a detail it left out, use session_search or recall, and memory_search or memory_get "
    "for what you learned in earlier sessions. Call compact when you finish a large sub-task."
)

#: The window the offline agent pretends to have: small, so Studio shows compaction within a few turns.
OFFLINE_CONTEXT_WINDOW = 32_000


@dataclass
class AgentContext:
    """Per-run settings (Studio's context form): whose memory, and compaction thresholds.

    A threshold left at None keeps the graph's configured value; see
    ``CompactionConfig`` for what each one means.
    """

    user_id: str = "default"
    context_window: int | None = None
    trigger_tokens: int | None = None
    trigger_messages: int | None = None
    keep_tokens: int | None = None
    keep_messages: int | None = None


def input_schema(state_schema: type) -> type:
    """Return the input schema of a state: its ``messages`` key only, so Studio's form hides ``compaction``."""
    messages = get_type_hints(state_schema, include_extras=True)["messages"]
    return TypedDict(f"{state_schema.__name__}Input", {"messages": messages})


# -- the simulated workspace ------------------------------------------------


def _seed(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


@tool
def run_tests(target: str) -> str:
    """Run the test suite of a module or directory and return the full pytest output."""
    seed = _seed(target)
    failing = seed % 7
    lines = [
        f"tests/test_{target}.py::test_case_{i} {'FAILED' if i == failing else 'PASSED'} [{i * 100 // 80:3d}%]"
        for i in range(80)
    ]
    trace = (
        f"\n___ test_case_{failing} ___\n    def test_case_{failing}():\n"
        f">       assert handle({seed % 97}) == {seed % 89}\n"
        f"E       AssertionError: assert {seed % 83} == {seed % 89}\nsrc/{target}.py:{seed % 300}: AssertionError"
    )
    return f"$ pytest tests/test_{target}.py -q\n" + "\n".join(lines) + trace + "\n1 failed, 79 passed in 2.31s"


@tool
def read_file(path: str) -> str:
    """Return the numbered lines of a file in the repository."""
    seed = _seed(path)
    return "".join(
        f"{i:4d}  def handler_{i}(event):\n{i:4d}      return event['v{seed % 10}'] * {i}\n" for i in range(1, 61)
    )


@tool
def write_file(path: str, content: str) -> str:
    """Write a file in the repository (replacing it) and return what was written."""
    return f"wrote {len(content)} characters ({content.count(chr(10)) + 1} lines) to {path}"


WORKSPACE_TOOLS = [run_tests, read_file, write_file]


# -- the offline agent --------------------------------------------------------

_CALL_ID = re.compile(r"^call_(?P<topic>[a-z0-9]+)_(?P<round>\d+)_\d+$")


def _topic(request: str) -> str:
    """Return the module a request is about: a named module, else a stable short slug."""
    words = re.findall(r"[a-z][a-z0-9_]{2,}", request.lower())
    named = [w for w in words if re.fullmatch(r"(module|pkg|src)?[a-z]+\d+", w)]
    return (named[-1] if named else (words[-1] if words else "main"))[:24].replace("_", "")


class OfflineAgentModel(BaseChatModel):
    """A scripted tool-calling chat model: the offline stand-in for ChatOpenAI in the demo graph.

    Each user request gets a fixed plan. A request mentioning "compact" calls
    ``compact``; one asking to search or recall calls ``memory_search`` and
    ``session_search``; any other runs the tests and reads the module (two
    parallel calls), writes a fix (a large argument), then answers. Which step
    comes next is read from the id of the call the last tool message answers,
    so the plan survives compaction of the turn's earlier rounds.
    """

    @property
    def _llm_type(self) -> str:
        return "offline-agent"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Return this model bound to the tools' OpenAI schemas (the plan only calls tools it was given)."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        names = {t["function"]["name"] for t in kwargs.get("tools") or []}
        return ChatResult(generations=[ChatGeneration(message=self.respond(messages, names))])

    def respond(self, messages: Sequence[BaseMessage], tools: set[str]) -> AIMessage:
        """Return the next assistant message for a conversation, calling only tools named in ``tools``."""
        request = next((text_of(m) for m in reversed(messages) if is_user_turn(m)), "")
        last = messages[-1] if messages else None
        match = _CALL_ID.match(last.tool_call_id) if isinstance(last, ToolMessage) else None
        topic = match["topic"] if match else _topic(request)
        step = int(match["round"]) + 1 if match else 0
        lowered = request.lower()
        if "compact" in lowered and "compact" in tools:
            plan = [[("compact", {"focus": request[:200]})]]
        elif re.search(r"\b(search|recall|remember)\b", lowered) and "memory_search" in tools:
            plan = [[("memory_search", {"query": request[:200]}), ("session_search", {"query": request[:200]})]]
        else:
            plan = [
                [("run_tests", {"target": topic}), ("read_file", {"path": f"src/{topic}.py"})],
                [("write_file", {"path": f"src/{topic}.py", "content": _fixed_module(topic)})],
            ]
        if step < len(plan):
            calls = [
                {"name": name, "args": args, "id": f"call_{topic}_{step}_{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(plan[step])
                if name in tools
            ]
            if calls:
                return AIMessage(
                    content=f"Step {step + 1} for {topic}: {', '.join(c['name'] for c in calls)}.", tool_calls=calls
                )
        found = text_of(last)[:300] if isinstance(last, ToolMessage) else ""
        return AIMessage(content=f"Done with {topic}: {request[:120]}" + (f"\n\nLast result: {found}" if found else ""))


def _fixed_module(topic: str) -> str:
    body = "".join(f"def handler_{i}(event):\n    return event['value'] * {i}  # {topic}\n\n" for i in range(1, 90))
    return f'"""The {topic} module, fixed."""\n\n' + body


# -- the graph ------------------------------------------------------------------


def openai_chat_model(**kwargs: Any) -> Any:
    """Return the graph's ChatOpenAI: model ``COMPACTION_MODEL`` (default gpt-4o-mini), ``kwargs`` on top.

    ``stream_usage`` is on so that streamed replies (Studio streams) still
    report ``input_tokens``, which calibrates compaction's token counts.
    """
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(**{"model": os.environ.get("COMPACTION_MODEL", "gpt-4o-mini"), "stream_usage": True, **kwargs})


def default_models() -> tuple[Any, Any, CompactionConfig]:
    """Return (agent model, summarizer, config): ChatOpenAI with OPENAI_API_KEY, else the offline pair."""
    if os.environ.get("OPENAI_API_KEY"):
        model = openai_chat_model()
        return model, model, CompactionConfig()
    return OfflineAgentModel(), ScriptedModel(), CompactionConfig(context_window=OFFLINE_CONTEXT_WINDOW)


def build_agent(
    model: Any, summarizer: Any, config: CompactionConfig | None = None, *, state_schema: type = CompactionState
) -> StateGraph:
    """Return the agent's graph builder (not compiled): compaction in front of the model node.

    ``model`` is a chat model that supports ``bind_tools``; ``summarizer`` a
    chat model (None: deterministic extractive summaries). Transcripts and
    memory go to the store the graph is compiled or served with.
    ``state_schema`` may declare ``messages`` differently (e.g. a
    ``DeltaChannel``) as long as it has ``messages`` and ``compaction``.
    """
    tools = [*WORKSPACE_TOOLS, *make_compaction_tools(config=config)]
    bound = model.bind_tools(tools)
    system = SystemMessage(content=SYSTEM_PROMPT)

    def call_model(state: dict) -> dict:
        return {"messages": [bound.invoke([system, *state["messages"]])]}

    async def acall_model(state: dict) -> dict:
        return {"messages": [await bound.ainvoke([system, *state["messages"]])]}

    builder = StateGraph(state_schema, context_schema=AgentContext, input_schema=input_schema(state_schema))
    builder.add_node("agent", RunnableLambda(call_model, afunc=acall_model, name="agent"))
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=summarizer, config=config, agent_model=bound, system_prompt=system)
    return builder


graph = build_agent(*default_models()).compile(name="compaction-agent")
