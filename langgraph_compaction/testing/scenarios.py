"""A new user's app with compaction, run request after request: for tests and benchmarks.

The app is what a new user writes first: ``create_agent`` (from the optional
``langchain``, imported when an app is built) with ``CompactionMiddleware``
over a ``context_window`` of 32,000 tokens. Its two tools each return about
5,000 tokens; for each request the agent's model (``AppModel``) calls one,
then the other, then answers (three model requests a request), in 0.05 s a
call, recording every request it receives. ``run_app`` sends the requests
through ``stream`` or ``astream`` and returns an ``AppRun``: what the model
received, the events streamed and the figures they give::

    app = run_app(tmp_path, mode="sync", requests=15, background=True)
    app.figures()["over_trigger"]  # model requests over the trigger: 0
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ..core.config import CompactionConfig
from ..core.tokens import TokenCounter, estimate_text_tokens
from . import ScriptedModel

__all__ = [
    "AGENT_LATENCY",
    "REQUESTS",
    "RESULT_TOKENS",
    "SUMMARIZER_LATENCY",
    "TOOLS",
    "WINDOW",
    "AppModel",
    "AppRun",
    "build_app",
    "fetch_docs",
    "request",
    "run_app",
    "run_tests",
]

#: The app's context window, in tokens.
WINDOW = 32_000
#: What each of the two tools returns, in estimated tokens.
RESULT_TOKENS = 5_000
#: Seconds the agent's model takes to answer.
AGENT_LATENCY = 0.05
#: Seconds the summarizer takes to answer, when the app runs sync and async.
SUMMARIZER_LATENCY = {"sync": 0.2, "async": 0.3}
#: User requests a run sends by default.
REQUESTS = 30


def _result(kind: str, subject: str) -> str:
    """Return about ``RESULT_TOKENS`` tokens of tool output about ``subject``."""
    line = f"{kind} {subject}: case passed, value computed and checked against the reference table\n"
    lines = RESULT_TOKENS * len(line) // max(1, estimate_text_tokens(line))
    return f"$ {kind} {subject}\n" + line * (lines // len(line))


@tool
def run_tests(module: str) -> str:
    """Run the test suite of a module."""
    return _result("pytest", module)


@tool
def fetch_docs(topic: str) -> str:
    """Fetch the documentation of a topic."""
    return _result("docs", topic)


TOOLS = [run_tests, fetch_docs]


class AppModel(BaseChatModel):
    """The app's agent model: a user request gets its tests run, then its documentation fetched, then an answer.

    Each request it receives is recorded with the tool schemas it was sent
    (``request_tokens`` counts both, as the package counts a request).
    """

    latency: float = AGENT_LATENCY
    inputs: list = Field(default_factory=list)
    tool_schemas: list = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-app-agent"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tool_schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=self.tool_schemas)

    def request_tokens(self, messages: Sequence[BaseMessage], counter: TokenCounter) -> int:
        """Return the size of a request: its messages and the tool schemas sent with them."""
        return counter.total(list(messages)) + estimate_text_tokens(json.dumps(self.tool_schemas))

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.inputs.append(list(messages))
        last = messages[-1]
        n = len(self.inputs)
        if not isinstance(last, ToolMessage):
            call = {"name": "run_tests", "args": {"module": f"module{n}"}, "id": f"tests-{n}"}
            return AIMessage("Running the module's tests.", tool_calls=[call])
        if last.name == "run_tests":
            call = {"name": "fetch_docs", "args": {"topic": f"module{n}"}, "id": f"docs-{n}"}
            return AIMessage("Now its documentation.", tool_calls=[call])
        return AIMessage("The tests pass and the documentation agrees.")

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        time.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=self._reply(list(messages)))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        await asyncio.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=self._reply(list(messages)))])


def request(n: int) -> dict:
    """Return the input of user request ``n``."""
    return {"messages": [HumanMessage(f"Request {n}: check module{n} and its documentation", id=f"request-{n}")]}


@dataclass
class AppRun:
    """One run of the app: what it was built from, what its model received and what it streamed."""

    agent: Any
    model: AppModel
    summarizer: ScriptedModel
    config: CompactionConfig
    thread: dict
    events: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def trigger(self) -> int:
        return self.config.resolve().trigger_tokens

    def request_sizes(self) -> list[int]:
        counter = TokenCounter()
        return [self.model.request_tokens(r, counter) for r in self.model.inputs]

    def background_events(self, name: str) -> list[dict]:
        """Return the streamed lifecycle events called ``name`` of background compactions."""
        return [e for e in self.events if e.get("event") == name and e.get("mode", "background") == "background"]

    def figures(self) -> dict:
        """Return the run's figures (JSON-native)."""
        sizes = self.request_sizes()
        counts = self.agent.get_state(self.thread).values["compaction"]["counts"]
        applied = counts.get("summarize", 0) + counts.get("extractive", 0)
        prepared = len(self.background_events("compaction_started"))
        discarded = len(self.background_events("compaction_discarded"))
        calls = len(self.summarizer.calls)
        return {
            "model_requests": len(sizes),
            "over_trigger": sum(size > self.trigger for size in sizes),
            "largest": max(sizes, default=0),
            "trigger": self.trigger,
            "prepared": prepared,
            "discarded": discarded,
            "discarded_share": discarded / prepared if prepared else 0.0,
            "applied": applied,
            "compaction_calls": calls,
            "calls_per_applied": calls / applied if applied else None,
            "seconds": round(self.seconds, 2),
        }


def build_app(
    storage: Path,
    *,
    background: bool,
    summarizer_latency: float,
    checkpointer: Any = None,
    model: AppModel | None = None,
    summarizer: ScriptedModel | None = None,
    middleware: Sequence[Any] = (),
    interrupt_before: list[str] | None = None,
    **settings: Any,
) -> AppRun:
    """Return the new user's app (not yet run), with compaction in the background or blocking.

    Args:
        storage: The folder of the transcripts and memory files.
        background: Prepare summaries next to the agent (else compact in front of the model call).
        summarizer_latency: Seconds the summarizer takes to answer.
        checkpointer: The agent's checkpointer (default: a new ``InMemorySaver``).
        model: The agent's model (default: a new ``AppModel``).
        summarizer: The summarizer and memory model (default: a ``ScriptedModel`` of that latency).
        middleware: The app's own middleware, after compaction's.
        interrupt_before: The nodes the agent stops in front of (``["tools"]``: an approval before each tool).
        **settings: Further ``CompactionConfig`` settings (``prompt_cache``, ``after_compaction``...).
    """
    from langchain.agents import create_agent

    from ..fronts.middleware import CompactionMiddleware

    model = model or AppModel()
    summarizer = summarizer or ScriptedModel(latency=summarizer_latency)
    config = CompactionConfig(context_window=WINDOW, background=background, **settings)
    compaction = CompactionMiddleware(model=summarizer, config=config, storage=storage)
    agent = create_agent(
        model,
        TOOLS,
        middleware=[compaction, *middleware],
        checkpointer=checkpointer or InMemorySaver(),
        interrupt_before=interrupt_before,
    )
    return AppRun(agent, model, summarizer, config, {"configurable": {"thread_id": "new-user"}})


def run_app(
    storage: Path, *, mode: str = "sync", requests: int = REQUESTS, background: bool = True, **options: Any
) -> AppRun:
    """Run ``requests`` requests through the app; return the run, with the events it streamed.

    Args:
        storage: The folder of the transcripts and memory files.
        mode: "sync" (``stream``) or "async" (``astream``, one event loop for every request).
        requests: How many user requests are sent, one after the other.
        background: Prepare summaries next to the agent (else compact in front of the model call).
        **options: What ``build_app`` takes besides (a model, a summarizer, middleware, settings).
    """
    app = build_app(storage, background=background, summarizer_latency=SUMMARIZER_LATENCY[mode], **options)
    started = time.perf_counter()
    if mode == "sync":
        for n in range(requests):
            app.events += list(app.agent.stream(request(n), app.thread, stream_mode="custom"))
    else:

        async def serve() -> None:
            for n in range(requests):
                app.events += [e async for e in app.agent.astream(request(n), app.thread, stream_mode="custom")]

        asyncio.run(serve())
    app.seconds = time.perf_counter() - started
    return app
