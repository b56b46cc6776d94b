"""``CompactionMiddleware``: compaction for ``langchain.agents.create_agent`` and ``deepagents.create_deep_agent``.

A thin adapter over the engine (``engine.run_pass``): ``before_model`` runs
one whole pass (layers 1-2; when still over the trigger, offload and flush
side by side, then the summary) and returns its update; ``wrap_model_call``
counts what the agent sends besides the messages (its system prompt and tool
schemas), sends the compacted view in view mode (``CompactionConfig(mode="view")``)
and gives overflow recovery (``overflow``): a request the model refuses as
too long is compacted and retried once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.types import Command

from ..core.calibration import fixed_tokens
from ..core.config import CompactionConfig, model_context_window
from ..core.langchain_args import ContextSize, Trigger, settings_with
from ..engine.native import refuse_threshold
from ..engine.nesting import check_nesting
from ..engine.nodes import CompactionEngine, combined
from ..engine.passes import with_message_ids
from ..engine.setup import EngineOptions
from ..engine.state import GraphUpdate, merge_compaction
from .models import named_models
from .summarizers import deprecated_arguments, learn_window, summarizer_model, with_window_of
from .tools import chosen_tools, make_compaction_tools


class CompactionAgentState(AgentState):
    """The agent's state plus ``compaction``.

    Private to the agent (``PrivateStateAttr``): it is not part of the
    agent's input or output, and deepagents neither hands it to a subagent
    nor merges a subagent's back (each keeps its own summaries and counts).
    Read it with ``agent.get_state(config).values["compaction"]``.
    """

    compaction: NotRequired[Annotated[dict, PrivateStateAttr, merge_compaction]]


def _with_writes(writes: list[BaseMessage], update: GraphUpdate) -> dict[str, Any] | None:
    """Return the pass's update after the writes that gave the state's messages their ids (None: nothing to write)."""
    if writes:
        update = {**update, "messages": [*writes, *update.get("messages", [])]}
    return {**update} or None


def _tool_schema(tool: Any) -> Any:
    return tool if isinstance(tool, dict) else convert_to_openai_tool(tool)


class CompactionMiddleware(AgentMiddleware):
    """Keep a ``create_agent`` / ``create_deep_agent`` conversation inside its model's window.

    It takes what LangChain's ``SummarizationMiddleware`` takes, with its
    meaning (a model or a model name, ``trigger``, ``keep``,
    ``token_counter``, ``summary_prompt``, ``trim_tokens_to_summarize``,
    ``summarizer``, and the deprecated ``max_tokens_before_summary`` and
    ``messages_to_keep``), so moving over is a change of class name, and adds
    the settings of ``CompactionConfig``::

        CompactionMiddleware("openai:gpt-4o-mini", trigger=("tokens", 4000), keep=("messages", 20))

    The window is the smaller of the summarizer's (or ``config.context_window``)
    and that of the agent's own model, which the middleware reads from every
    request (``request.model``; a request over the narrower window is
    compacted before it is sent): the trigger never exceeds the smaller window
    of the two, for each agent and each deepagents subagent with a model of
    its own.

    deepagents replaces its own summarization with a middleware named
    ``"SummarizationMiddleware"`` (see the README).

    Args:
        model: The summarizer: a chat model, a name resolved as LangChain's
            ``init_chat_model`` does (``"openai:gpt-4o-mini"``), or None for
            extractive summaries. Its ``profile["max_input_tokens"]`` is the
            window when ``config.context_window`` is not set.
        config: The settings (a ``CompactionConfig`` or a dict of them); None for the defaults.
        storage: A directory, a LangGraph ``BaseStore``, or None for the store
            the agent is compiled with, else an in-memory store of the process
            (``engine.setup.storage_for``).
        flush_model: Extracts memories (a model or a name); None: ``model``.
        add_tools: Give the agent the memory tools and ``compact``
            (``make_compaction_tools``): True for all seven, False for none,
            or the names of some (``("recall", "compact")``).
        overflow_recovery: Compact and retry once when the model refuses a
            request as too long.
        name: The middleware's name; None: the class name.
        trigger: When to compact, as LangChain says it: ``("tokens", n)``,
            ``("messages", n)``, ``("fraction", f)`` of the window, or a list
            of them (when any is met). Written onto ``config``.
        keep: The tail a compaction keeps: one such pair.
        token_counter: A callable(messages) -> int counting a list of messages.
        summary_prompt: The summarizer's prompt, holding ``{messages}``; its
            answer's sections are read back when it has them, else its text is
            the summary's SUMMARY section.
        trim_tokens_to_summarize: About how many tokens of the newest evicted
            messages the summarizer reads, in one request
            (``summary.history_tokens``); None: all of them.
        summarizer: Who writes the summary text, as in LangChain: a chat model
            or a model name (prompted like ``model``), or a ``Runnable`` or a
            function (sync or async) given the evicted messages and returning
            the text. ``model`` then only gives the window, and extracts the
            memories unless ``flush_model`` does. The deterministic sections
            are built around the text either way.
        **deprecated: LangChain's ``max_tokens_before_summary`` (a token
            trigger) and ``messages_to_keep`` (a tail of messages), with a
            ``DeprecationWarning`` as LangChain gives.

    Raises:
        ValueError: a model name that names no model, a bad ``trigger`` or
            ``keep``, or an argument that contradicts ``config``.
        TypeError: an argument LangChain's middleware does not take either.
    """

    state_schema = CompactionAgentState

    def __init__(
        self,
        model: Any,
        *,
        config: CompactionConfig | Mapping[str, Any] | None = None,
        storage: Any = None,
        flush_model: Any = None,
        add_tools: bool | Sequence[str] = True,
        overflow_recovery: bool = True,
        name: str | None = None,
        trigger: Trigger | None = None,
        keep: ContextSize | None = None,
        token_counter: Callable[..., int] | None = None,
        summary_prompt: str | None = None,
        trim_tokens_to_summarize: int | None = None,
        summarizer: Any = None,
        **deprecated: Any,
    ) -> None:
        super().__init__()
        trigger, keep = deprecated_arguments(deprecated, trigger, keep)
        config = settings_with(
            config,
            trigger=trigger,
            keep=keep,
            token_counter=token_counter,
            summary_prompt=summary_prompt,
            trim_tokens_to_summarize=trim_tokens_to_summarize,
        )
        options = named_models(EngineOptions("model", model, config, storage, flush_model))
        if summarizer is not None:  # the summary's writer; ``model`` gives the window and extracts memories
            config = with_window_of(options.model, config)
            flush_model = options.flush_model or options.model
            options = replace(options, model=summarizer_model(summarizer), config=config, flush_model=flush_model)
        self.nodes = CompactionEngine(options)
        window = self.nodes.budget.context_window  # the pins' budget derives from it
        names = None if add_tools is True else chosen_tools(add_tools or (), "add_tools")
        self.tools = make_compaction_tools(self.nodes.storage, config=self.nodes.config, window=window, names=names)
        self.overflow_recovery = overflow_recovery
        self._name = name or type(self).__name__
        self._levels: dict[tuple, tuple[CompactionEngine, list]] = {}
        self._levels_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    def engines(self) -> list[CompactionEngine]:
        """Return the engine of each agent this middleware has run in: ``nodes`` first, then deepagents' subagents."""
        with self._levels_lock:
            return [self.nodes, *(engine for engine, _ in self._levels.values() if engine is not self.nodes)]

    def _level(self, config: RunnableConfig) -> tuple[CompactionEngine, list]:
        """Return the steps and the counted-request cache of the agent this call belongs to.

        deepagents runs the same middleware instance in the agent and in its
        subagents (same thread, different system prompt and tools): each gets
        its own, so neither recounts the other's history or prompt. An agent
        is told apart by its name and how deep it runs.
        """
        namespace = (config.get("configurable") or {}).get("checkpoint_ns") or ""
        key = ((config.get("metadata") or {}).get("lc_agent_name"), namespace.count("|"))
        with self._levels_lock:
            if key not in self._levels:  # steps of its own over the same settings and the same opened storage
                self._levels[key] = (CompactionEngine(self.nodes.options) if self._levels else self.nodes, [None])
            return self._levels[key]

    # -- before every model call
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        config = get_config()
        nodes, _ = self._level(config)
        check_nesting(nodes, state, config)
        state, writes = with_message_ids(state)
        return _with_writes(writes, nodes.run_pass(state, nodes.where(config, state)).update)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        config = get_config()
        nodes, _ = self._level(config)
        check_nesting(nodes, state, config)
        state, writes = with_message_ids(state)
        return _with_writes(writes, (await nodes.arun_pass(state, nodes.where(config, state))).update)

    # -- around the model call
    def _count_request(self, request: ModelRequest, nodes: CompactionEngine, counted: list) -> bool:
        """Count the system prompt and tool schemas this request carries, learn its model's window.

        The first request of an agent in a process is not counted yet; if it
        is refused as too long, the recovery below counts it. The first one
        also says what the provider would refuse of the model's own settings
        (``refuse_threshold``). Return True when the agent's model narrowed
        the window.
        """
        system = request.system_message.content if request.system_message is not None else None
        window = model_context_window(request.model)
        key = (tuple(id(t) for t in request.tools), str(system), window)
        if key == counted[0]:
            return False
        if counted[0] is None:  # the agent's model is known from its first request
            refuse_threshold(request.model)
        narrowed = learn_window(nodes, window)
        schemas = [_tool_schema(t) for t in request.tools]
        nodes.fixed_tokens = fixed_tokens(request.model.bind(tools=schemas) if schemas else None, system)
        counted[0] = key
        return narrowed

    def _state_to_send(
        self, request: ModelRequest, config: RunnableConfig
    ) -> tuple[CompactionEngine, Any, GraphUpdate]:
        """Return the call's engine, the state to send and its update: compacted now when the window just narrowed."""
        nodes, counted = self._level(config)
        if not self._count_request(request, nodes, counted):
            return nodes, request.state, {}
        passed = nodes.run_pass(request.state, nodes.where(config, request.state))
        return nodes, (passed.state if passed.update else request.state), passed.update

    async def _astate_to_send(
        self, request: ModelRequest, config: RunnableConfig
    ) -> tuple[CompactionEngine, Any, GraphUpdate]:
        """Return ``_state_to_send``'s answer, the pass awaited."""
        nodes, counted = self._level(config)
        if not self._count_request(request, nodes, counted):
            return nodes, request.state, {}
        passed = await nodes.arun_pass(request.state, nodes.where(config, request.state))
        return nodes, (passed.state if passed.update else request.state), passed.update

    @staticmethod
    def _model_request(request: ModelRequest, state: Any, nodes: CompactionEngine) -> ModelRequest:
        """Return the request for ``state``: its messages, or what ``Setup.model_messages`` sends the request's model.

        That is the compacted view and status line in view mode, and to
        Anthropic each summary its model wrote as that compaction block.
        """
        if nodes.sends_other_messages(request.model):
            # every message of the state is one of AnyMessage's kinds; the engine types them as BaseMessage
            messages = nodes.model_messages(state, request.model)
            return request.override(messages=cast("list[AnyMessage]", messages), state=state)
        return request if state is request.state else request.override(messages=list(state["messages"]), state=state)

    @staticmethod
    def _response(first: GraphUpdate, output: Mapping[str, Any], response: ModelResponse) -> Any:
        output = combined([first, output]) if first else output  # compacted before the call, then its reply
        if "compaction" not in output:  # the first call went through
            return response
        # create_agent applies the reply first, then this command: the compacted history, then the reply again
        update = {"messages": output["messages"], "compaction": output["compaction"]}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        config = get_config()
        nodes, state, first = self._state_to_send(request, config)
        if not self.overflow_recovery:
            response = handler(self._model_request(request, state, nodes))
            return self._response(first, {"messages": response.result}, response)
        run = nodes.where(config, state)
        responses: list[ModelResponse] = []

        def call(state: Any) -> dict:
            responses.append(handler(self._model_request(request, state, nodes)))
            return {"messages": responses[-1].result}

        output = nodes.recover(state, run, call)
        return self._response(first, output, responses[-1])

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        config = get_config()
        nodes, state, first = await self._astate_to_send(request, config)
        if not self.overflow_recovery:
            response = await handler(self._model_request(request, state, nodes))
            return self._response(first, {"messages": response.result}, response)
        run = nodes.where(config, state)
        responses: list[ModelResponse] = []

        async def call(state: Any) -> dict:
            responses.append(await handler(self._model_request(request, state, nodes)))
            return {"messages": responses[-1].result}

        output = await nodes.arecover(state, run, call)
        return self._response(first, output, responses[-1])
