"""The agent's own window bounds the trigger, whatever the summarizer's window: the smaller of the two counts.

``CompactionMiddleware(model=<a summarizer with a 200k window>)`` in front of
an agent whose model has a 20k window: the middleware reads the agent's
model from every request (``request.model``) and compacts under the smaller
window, for the agent and for each deepagents subagent with a model of its own.
"""

from __future__ import annotations

from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import TOOLS, ToolCallingModel, request

from langgraph_compaction import CompactionMiddleware, is_summary
from langgraph_compaction.testing import ScriptedModel

SUMMARIZER_WINDOW, AGENT_WINDOW = 200_000, 20_000


def _largest(model: ToolCallingModel) -> int:
    return max(count_tokens_approximately(sent) for sent in model.inputs)


def test_the_agents_smaller_window_sets_the_trigger_not_the_summarizers():
    summarizer = ScriptedModel(profile={"max_input_tokens": SUMMARIZER_WINDOW})
    model = ToolCallingModel(profile={"max_input_tokens": AGENT_WINDOW})
    middleware = CompactionMiddleware(summarizer, add_tools=False)
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for n in range(14):  # about 2,300 tokens a request: 32,000 in all, over the agent's window
        agent.invoke({"messages": [request(n)]}, config)

    assert middleware.nodes.budget.context_window == AGENT_WINDOW
    assert middleware.nodes.budget.trigger_tokens <= AGENT_WINDOW
    assert _largest(model) <= AGENT_WINDOW
    assert any(is_summary(m) for m in agent.get_state(config).values["messages"])


def test_a_long_thread_is_compacted_before_its_first_request_to_the_smaller_model(tmp_path):
    # 30,000 tokens already in the thread's first input: over the agent's window, under the summarizer's trigger
    history = [
        m
        for n in range(30)
        for m in (HumanMessage(f"Note {n}: " + "the invoice totals match the ledger. " * 110), AIMessage(f"Noted {n}."))
    ]
    model = ToolCallingModel(profile={"max_input_tokens": AGENT_WINDOW})
    middleware = CompactionMiddleware(ScriptedModel(profile={"max_input_tokens": SUMMARIZER_WINDOW}), storage=tmp_path)
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    assert count_tokens_approximately(history) > AGENT_WINDOW
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [*history, request(0)]}, config)

    assert _largest(model) <= AGENT_WINDOW  # the first request too
    messages = agent.get_state(config).values["messages"]
    assert is_summary(messages[0]) and messages[-1].text.startswith("Task 0 is done")


def test_a_token_trigger_over_the_agents_window_gives_way_to_the_one_derived_from_it(caplog):
    model = ToolCallingModel(profile={"max_input_tokens": AGENT_WINDOW})
    middleware = CompactionMiddleware(ScriptedModel(), trigger=("tokens", 50_000), add_tools=False)
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    for n in range(14):
        agent.invoke({"messages": [request(n)]}, {"configurable": {"thread_id": "t"}})

    assert middleware.nodes.budget.trigger_tokens <= AGENT_WINDOW and _largest(model) <= AGENT_WINDOW
    assert any("is over the agent model's window" in r.getMessage() for r in caplog.records)


def test_a_summarizers_smaller_window_still_counts():
    summarizer = ScriptedModel(profile={"max_input_tokens": 30_000})
    model = ToolCallingModel(profile={"max_input_tokens": SUMMARIZER_WINDOW})
    middleware = CompactionMiddleware(summarizer, add_tools=False)
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    agent.invoke({"messages": [request(0)]}, {"configurable": {"thread_id": "t"}})
    assert middleware.nodes.budget.context_window == 30_000


def test_a_deepagents_subagent_with_a_smaller_model_compacts_under_its_own_window(tmp_path):
    # the agent's model has a 200k window; the researcher's own model 20k, and it runs 12 tool rounds (~27k tokens)
    agent_model = ToolCallingModel(
        delegate="task", delegate_to="researcher", profile={"max_input_tokens": SUMMARIZER_WINDOW}
    )
    researcher_model = ToolCallingModel(subtask_rounds=12, profile={"max_input_tokens": AGENT_WINDOW})
    compaction = CompactionMiddleware(
        ScriptedModel(profile={"max_input_tokens": SUMMARIZER_WINDOW}), storage=tmp_path, name="SummarizationMiddleware"
    )
    researcher = {
        "name": "researcher",
        "description": "Checks a module in depth.",
        "system_prompt": "You check modules in depth.",
        "model": researcher_model,
        "middleware": [compaction],
    }
    agent = create_deep_agent(
        model=agent_model, tools=TOOLS, subagents=[researcher], middleware=[compaction], checkpointer=InMemorySaver()
    )
    for n in range(2):  # the second request is delegated
        agent.invoke({"messages": [request(n)]}, {"configurable": {"thread_id": "deep"}})

    engines = compaction.engines()
    windows = sorted(engine.budget.context_window for engine in engines)
    assert windows[0] == AGENT_WINDOW and windows[-1] == SUMMARIZER_WINDOW
    # each level is built from the middleware's options: one opened storage, one summarizer
    assert len(engines) == 2 and all(e.storage is compaction.nodes.storage for e in engines)
    assert all(e.model is compaction.nodes.model for e in engines)
    assert researcher_model.inputs and _largest(researcher_model) <= AGENT_WINDOW
