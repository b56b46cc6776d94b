"""``make_pre_model_hook``: compaction for ``langgraph.prebuilt.create_react_agent(pre_model_hook=...)``.

The hook runs one whole compaction pass (``engine.run_pass``) before every
model call and returns its update; the history it rewrites is the state's, so
the model, the checkpoint and the next call see the same thing. In view mode
(``CompactionConfig(mode="view")``) the state keeps every message and the
model is sent the view (``llm_input_messages``). The hook's node reads and
writes a ``compaction`` key of its own (``CompactionReactState``, found by
LangGraph from the hook's signature), which is not part of the agent's input:
a run's caller controls its messages only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NotRequired

from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt.chat_agent_executor import AgentState

from ..core.config import CompactionConfig
from ..core.langchain_args import ContextSize, Trigger, settings_with
from ..engine.langgraph_internals import RunnableCallable
from ..engine.nesting import check_nesting
from ..engine.nodes import CompactionEngine, PassResult
from ..engine.setup import EngineOptions
from ..engine.state import merge_compaction
from .models import named_models


class CompactionReactState(AgentState):
    """``create_react_agent``'s state plus ``compaction``: what the hook's node reads."""

    compaction: NotRequired[Annotated[dict, merge_compaction]]


class PreModelHook(RunnableCallable):
    """The hook's node. LangGraph reads the state it takes from ``__call__``'s signature and adds its
    ``compaction`` key to the agent's state, outside the agent's input (``StateGraph.add_node`` infers a node's
    input schema so)."""

    #: The agent's state the hook reads (``create_react_agent`` takes it from here).
    state_schema: type
    #: The compaction engine the hook runs.
    nodes: CompactionEngine

    def __call__(self, state: CompactionReactState, config: RunnableConfig) -> dict:
        return self.invoke(state, config)


def make_pre_model_hook(
    *,
    model: Any,
    config: CompactionConfig | None = None,
    storage: Any = None,
    flush_model: Any = None,
    agent_model: Any = None,
    system_prompt: Any = None,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    token_counter: Callable[..., int] | None = None,
    summary_prompt: str | None = None,
) -> PreModelHook:
    """Return a ``pre_model_hook`` node that compacts the history before every model call.

    The agent's state gains a ``compaction`` key that is not part of its
    input (read it with ``agent.get_state(config).values["compaction"]``)::

        hook = make_pre_model_hook(model=summarizer, storage="./.compaction")
        agent = create_react_agent(llm, tools, pre_model_hook=hook)

    ``hook.state_schema`` is ``create_react_agent``'s own state, for code that
    passes ``state_schema=hook.state_schema``.

    Args:
        model: The summarizer: a chat model, a name resolved as LangChain's
            ``init_chat_model`` does (``"openai:gpt-4o-mini"``), or None for
            extractive summaries.
        config: The settings; None for the defaults.
        storage: A directory, a ``BaseStore``, or None for the agent's store, else an in-memory store of the
            process (``engine.setup.storage_for``).
        flush_model: Extracts memories (a model or a name); None: ``model``.
        agent_model: The agent's model, tools bound: counted in every request.
        system_prompt: The agent's ``prompt``: counted in every request.
        trigger: When to compact, in LangChain's words, as ``CompactionMiddleware`` takes it.
        keep: The tail a compaction keeps, as ``CompactionMiddleware`` takes it.
        token_counter: Counts a list of messages, as ``CompactionMiddleware`` takes it.
        summary_prompt: The summarizer's prompt, as ``CompactionMiddleware`` takes it.

    Raises:
        ValueError: a model name that names no model, a bad ``trigger`` or
            ``keep``, or an argument that contradicts ``config``.
    """
    config = settings_with(
        config, trigger=trigger, keep=keep, token_counter=token_counter, summary_prompt=summary_prompt
    )
    nodes = CompactionEngine(
        named_models(EngineOptions("agent", model, config, storage, flush_model, agent_model, system_prompt))
    )

    def update(result: PassResult) -> dict[str, Any]:
        if not nodes.sends_other_messages():
            return {**result.update}
        # the state keeps every message; the agent node is sent the view (create_react_agent's llm_input_messages)
        return {**result.update, "llm_input_messages": nodes.model_messages(result.state)}

    def hook(state: Any, config: RunnableConfig) -> dict:
        check_nesting(nodes, state, config)
        return update(nodes.run_pass(state, nodes.where(config, state)))

    async def ahook(state: Any, config: RunnableConfig) -> dict:
        check_nesting(nodes, state, config)
        return update(await nodes.arun_pass(state, nodes.where(config, state)))

    node = PreModelHook(hook, ahook, name="compaction", trace=False)
    node.state_schema = AgentState
    node.nodes = nodes
    return node
