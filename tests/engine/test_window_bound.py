"""No front sends a request over the trigger that an edit could have brought under it, whatever the cost rule.

One request; the agent reads five logs in one parallel round (about 130k
tokens) on a 128k window with the defaults (``prompt_cache=True``). The
provider refuses anything over the window. Layer 2 can prune the older logs;
no summary can help (the whole conversation is the newest round). Every front
must make those edits before the model is called: the prebuilt hook has no
overflow recovery to fall back on, and the others must not need it.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from langgraph_compaction import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    add_compaction,
    compact_messages,
    make_pre_model_hook,
)
from langgraph_compaction.core.plan import plan_compaction
from langgraph_compaction.core.tokens import TokenCounter, estimate_text_tokens, estimate_tokens
from langgraph_compaction.testing import ScriptedModel

with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent, and still used
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

WINDOW = 128_000
CONFIG = CompactionConfig(context_window=WINDOW)  # the defaults: prompt_cache=True
TRIGGER = CONFIG.resolve().trigger_tokens
LOGS = 5
LOG_LINES = 1_048  # about 26k tokens a log: the five of them 130.7k with the request


def _log(name: str) -> str:
    return "\n".join(f"2026-01-01 12:00:{j % 60:02d} {name} step {j} ok value={j * 7}" for j in range(LOG_LINES))


@tool
def read_log(name: str) -> str:
    """Return the whole log of a worker."""
    return _log(name)


REQUEST = HumanMessage("Read the five worker logs and tell me which step failed.", id="request")


class WideReader(BaseChatModel):
    """Reads the five logs in one parallel round, then answers; refuses any request over the window."""

    sent: list = Field(default_factory=list)
    tool_schemas: list = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-wide-reader"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tool_schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=self.tool_schemas)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        size = estimate_tokens(messages) + estimate_text_tokens(json.dumps(self.tool_schemas))
        self.sent.append(size)
        if size > WINDOW:
            raise ContextOverflowError(
                f"maximum context length is {WINDOW} tokens. However, your messages resulted in {size} tokens"
            )
        if any(isinstance(m, ToolMessage) for m in messages):
            reply = AIMessage("Every step passed; no worker failed.")
        else:
            calls = [{"name": "read_log", "args": {"name": f"worker{i}"}, "id": f"read-{i}"} for i in range(LOGS)]
            reply = AIMessage("Reading the logs.", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _round() -> list[BaseMessage]:
    """Return the conversation right after the parallel round: the request, the calls, the five logs."""
    calls = [{"name": "read_log", "args": {"name": f"worker{i}"}, "id": f"read-{i}"} for i in range(LOGS)]
    results = [
        ToolMessage(_log(f"worker{i}"), tool_call_id=f"read-{i}", name="read_log", id=f"log-{i}") for i in range(LOGS)
    ]
    return [REQUEST, AIMessage("Reading the logs.", tool_calls=calls, id="calls"), *results]


def _check(model: WideReader) -> None:
    assert len(model.sent) == 2, model.sent  # the round and the answer: nothing refused, nothing retried
    assert model.sent[0] < TRIGGER
    assert model.sent[1] <= TRIGGER, f"sent {model.sent[1]:,} tokens, over the trigger of {TRIGGER:,}"


def test_the_round_is_over_the_window_and_layer_2_alone_brings_it_under_the_trigger():
    messages = _round()
    counter = TokenCounter()
    counts = counter.counts(messages)
    assert sum(counts) > WINDOW  # the setting of the case: one round, over the window, no cut that helps
    for prompt_cache in (True, False):
        config = CONFIG.model_copy(update={"prompt_cache": prompt_cache})
        plan = plan_compaction(messages, counts, config.resolve(), config, counter.message)
        assert plan.layer_counts.get("prune"), prompt_cache  # a cost rule never holds back what makes it fit
        assert plan.tokens_after_layers < TRIGGER, prompt_cache


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_prebuilt_hook_prunes_the_round_before_the_model_sees_it(tmp_path, mode):
    model = WideReader()
    hook = make_pre_model_hook(
        model=ScriptedModel(), config=CONFIG, storage=tmp_path, agent_model=model.bind_tools([read_log])
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            model, [read_log], pre_model_hook=hook, state_schema=hook.state_schema, checkpointer=InMemorySaver()
        )
    config = {"configurable": {"thread_id": mode}}
    if mode == "sync":
        agent.invoke({"messages": [REQUEST]}, config)
    else:
        await agent.ainvoke({"messages": [REQUEST]}, config)
    _check(model)


def test_the_middleware_prunes_the_round_before_the_model_sees_it(tmp_path):
    model = WideReader()
    middleware = CompactionMiddleware(model=ScriptedModel(), config=CONFIG, storage=tmp_path, add_tools=False)
    agent = create_agent(model, [read_log], middleware=[middleware], checkpointer=InMemorySaver())
    agent.invoke({"messages": [REQUEST]}, {"configurable": {"thread_id": "m"}})
    _check(model)


def test_the_graph_nodes_prune_the_round_before_the_model_sees_it(tmp_path):
    model = WideReader()
    bound = model.bind_tools([read_log])
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([read_log]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), config=CONFIG, storage=tmp_path, agent_model=bound)
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"messages": [REQUEST]}, {"configurable": {"thread_id": "g"}})
    _check(model)


def test_compact_messages_returns_a_view_under_the_trigger(tmp_path):
    result = compact_messages(_round(), model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="f")
    assert estimate_tokens(result.view) < TRIGGER
    assert [m.id for m in result.view] == [m.id for m in _round()]  # pruned in place: nothing evicted, nothing lost
