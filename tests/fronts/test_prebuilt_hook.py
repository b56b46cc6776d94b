"""make_pre_model_hook inside a real ``langgraph.prebuilt.create_react_agent``, driven for 22 requests."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import CONFIG, REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, request, summaries_counted

from langgraph_compaction import CompactionConfig, is_summary, make_pre_model_hook
from langgraph_compaction.testing import ScriptedModel

with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent, and still used
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


def _agent(model, tmp_path, config=CONFIG):
    hook = make_pre_model_hook(
        model=ScriptedModel(), config=config, storage=tmp_path, agent_model=model.bind_tools(TOOLS)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            model, TOOLS, pre_model_hook=hook, state_schema=hook.state_schema, checkpointer=InMemorySaver()
        )
    return agent, hook


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_long_react_agent_session_stays_valid_inside_the_window_and_loses_nothing(tmp_path, mode):
    model = ToolCallingModel()
    agent, hook = _agent(model, tmp_path)
    session = Session(model)
    config = {"configurable": {"thread_id": mode}}
    for n in range(REQUESTS):
        if mode == "sync":
            agent.invoke({"messages": [request(n)]}, config)
        else:
            await agent.ainvoke({"messages": [request(n)]}, config)
        session.check(request(n))

    state = agent.get_state(config).values
    assert len(model.inputs) == 2 * REQUESTS
    assert session.problems == []
    assert session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    assert summaries_counted(state["compaction"]) == session.summaries_seen()
    assert session.lost(state["messages"], tmp_path, mode) == []
    assert hook.nodes.fixed_tokens > 100  # the bound tool schemas are counted


def test_in_view_mode_the_state_keeps_every_message_and_the_model_gets_the_view(tmp_path):
    model = ToolCallingModel()
    agent, _ = _agent(model, tmp_path, CompactionConfig(context_window=WINDOW, mode="view"))
    session = Session(model)
    config = {"configurable": {"thread_id": "view"}}
    for n in range(REQUESTS):
        agent.invoke({"messages": [request(n)]}, config)
        session.check(request(n))

    state = agent.get_state(config).values
    messages = state["messages"]
    assert len(messages) == 5 * REQUESTS and not any(
        is_summary(m) for m in messages
    )  # request, call, 2 results, answer
    assert session.problems == [] and session.peak <= WINDOW
    assert summaries_counted(state["compaction"]) == session.summaries_seen() >= 2
    current = [m for m in model.inputs[-1] if is_summary(m)]
    assert session.lost(messages + current, tmp_path, "view") == []


def test_the_hooks_node_keeps_compaction_in_the_state_and_out_of_the_input():
    hook = make_pre_model_hook(model=ScriptedModel())
    with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent, and still used
        warnings.simplefilter("ignore")
        agent = create_react_agent(ScriptedModel(), [], pre_model_hook=hook, checkpointer=InMemorySaver())
        legacy = create_react_agent(ScriptedModel(), [], pre_model_hook=hook, state_schema=hook.state_schema)
    assert "compaction" not in agent.get_input_jsonschema()["properties"]
    assert "compaction" not in legacy.get_input_jsonschema()["properties"]  # code that passes the old argument
    thread = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello", id="h")]}, thread)
    assert agent.get_state(thread).values["compaction"]["wired"] is True


def test_a_stale_pending_compaction_is_cleared_by_the_update_the_hook_returns():
    # a compaction planned for messages that are gone (a run stopped between gate and summary, then the history was edited)
    stale = {"pending": {"reason": "tokens", "evict_ids": ["gone-1", "gone-2"], "cutoff_id": "gone-3"}, "wired": True}
    hook = make_pre_model_hook(model=ScriptedModel(), config=CONFIG)
    update = hook.invoke(
        {"messages": [HumanMessage("hello", id="h")], "compaction": stale}, {"configurable": {"thread_id": "t"}}
    )
    assert "messages" not in update
    assert update["compaction"]["pending"] is None  # else every later call would run the summary step again
