"""``make_pre_model_hook``: compaction for ``langgraph.prebuilt.create_react_agent(pre_model_hook=...)``.

The hook runs one whole compaction pass (``engine.run_pass``) before every
model call and returns its update; the history it rewrites is the state's, so
the model, the checkpoint and the next call see the same thing. In view mode
(``CompactionConfig(mode="view")``) the state keeps every message and the
model is sent the view (``llm_input_messages``). Its state needs a
``compaction`` key: pass ``state_schema=hook.state_schema``.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt.chat_agent_executor import AgentState
from langgraph.utils.runnable import RunnableCallable

from ..core.config import CompactionConfig
from ..engine.nesting import check_nesting
from ..engine.nodes import CompactionEngine, PassResult
from ..engine.state import merge_compaction


class CompactionReactState(AgentState):
    """``create_react_agent``'s state plus ``compaction``."""

    compaction: NotRequired[Annotated[dict, merge_compaction]]


def make_pre_model_hook(
    *,
    model: Any,
    config: CompactionConfig | None = None,
    storage: Any = None,
    flush_model: Any = None,
    agent_model: Any = None,
    system_prompt: Any = None,
) -> RunnableCallable:
    """Return a ``pre_model_hook`` node that compacts the history before every model call.

    ``model`` summarizes, ``flush_model`` (default: ``model``) extracts
    memories, ``storage`` is a directory, a ``BaseStore`` or None for the
    agent's store. ``agent_model`` (the agent's model, tools bound) and
    ``system_prompt`` (its ``prompt``) are counted in every request. The
    hook's ``.state_schema`` is the state it needs::

        hook = make_pre_model_hook(model=summarizer, storage="./.compaction")
        agent = create_react_agent(llm, tools, pre_model_hook=hook, state_schema=hook.state_schema)
    """
    nodes = CompactionEngine(
        before="agent",
        model=model,
        config=config,
        storage=storage,
        flush_model=flush_model,
        agent_model=agent_model,
        system_prompt=system_prompt,
    )

    def update(result: PassResult) -> dict:
        if not nodes.sends_other_messages():
            return result.update
        # the state keeps every message; the agent node is sent the view (create_react_agent's llm_input_messages)
        return {**result.update, "llm_input_messages": nodes.model_messages(result.state)}

    def hook(state: Any, config: RunnableConfig) -> dict:
        check_nesting(nodes, state, config)
        return update(nodes.run_pass(state, nodes.where(config, state)))

    async def ahook(state: Any, config: RunnableConfig) -> dict:
        check_nesting(nodes, state, config)
        return update(await nodes.arun_pass(state, nodes.where(config, state)))

    node = RunnableCallable(hook, ahook, name="compaction", trace=False)
    node.state_schema = CompactionReactState
    node.nodes = nodes
    return node
