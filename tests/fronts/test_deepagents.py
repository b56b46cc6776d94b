"""CompactionMiddleware in place of deepagents' own summarization, in a real ``create_deep_agent``, subagents included."""

from __future__ import annotations

import pytest
from deepagents import create_deep_agent
from deepagents.middleware import summarization as deepagents_summarization
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import CONFIG, REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, request, summaries_counted

from langgraph_compaction import CompactionMiddleware, is_summary
from langgraph_compaction.testing import ScriptedModel

#: deepagents' summary message starts so (deepagents.middleware.summarization)
DEEPAGENTS_SUMMARY = "Here is a summary of the conversation to date"


@pytest.fixture
def deepagents_summarizations(monkeypatch):
    """Count the model calls deepagents' own summarization wraps (it summarizes inside (a)wrap_model_call)."""
    calls = []
    cls = deepagents_summarization._DeepAgentsSummarizationMiddleware
    original, aoriginal = cls.wrap_model_call, cls.awrap_model_call

    def counted(self, request, handler):
        calls.append(request)
        return original(self, request, handler)

    async def acounted(self, request, handler):
        calls.append(request)
        return await aoriginal(self, request, handler)

    monkeypatch.setattr(cls, "wrap_model_call", counted)
    monkeypatch.setattr(cls, "awrap_model_call", acounted)
    return calls


def test_without_ours_deepagents_summarization_wraps_every_model_call(deepagents_summarizations):
    agent = create_deep_agent(model=ToolCallingModel(), tools=TOOLS, checkpointer=InMemorySaver())
    agent.invoke({"messages": [request(0)]}, {"configurable": {"thread_id": "plain"}})
    assert len(deepagents_summarizations) == 2  # the tool round and the answer


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_ours_replaces_deepagents_summarization_in_the_agent_and_its_subagent(
    tmp_path, deepagents_summarizations, mode
):
    # every 4th request goes to the general-purpose subagent, which makes 6 tool rounds: over the trigger on its own
    model = ToolCallingModel(delegate="task", subtask_rounds=6)
    compaction = CompactionMiddleware(
        model=ScriptedModel(), config=CONFIG, storage=tmp_path, name="SummarizationMiddleware"
    )
    agent = create_deep_agent(model=model, tools=TOOLS, middleware=[compaction], checkpointer=InMemorySaver())
    session = Session(model)
    config = {"configurable": {"thread_id": "deep"}}
    for n in range(REQUESTS):
        if mode == "sync":
            agent.invoke({"messages": [request(n)]}, config)
        else:
            await agent.ainvoke({"messages": [request(n)]}, config)
        session.check(request(n))

    state = agent.get_state(config).values
    assert "SummarizationMiddleware.before_model" in agent.get_graph().nodes  # ours, under deepagents' name
    assert deepagents_summarizations == []  # deepagents' summarization never ran, in the agent or the subagent
    assert "_summarization_event" not in state
    assert not any(DEEPAGENTS_SUMMARY in str(m.content) for messages in model.inputs for m in messages)
    assert session.problems == []
    assert session.peak <= WINDOW
    # one count per summary the agent was sent: the subagent's compactions are its own, not merged back
    assert summaries_counted(state["compaction"]) == session.summaries_seen() >= 2
    # the subagent compacted its own history: 6 subtasks, each with a summary in its later calls
    assert len(session.subtasks) == 6
    assert all(any(is_summary(m) for m in runs[-1]) for runs in session.subtasks.values())
    assert session.lost(state["messages"], tmp_path, "deep") == []


def test_a_subagent_of_your_own_takes_ours_in_its_middleware(tmp_path, deepagents_summarizations):
    model = ToolCallingModel(delegate="task", delegate_to="researcher", subtask_rounds=6)
    compaction = CompactionMiddleware(
        model=ScriptedModel(), config=CONFIG, storage=tmp_path, name="SummarizationMiddleware"
    )
    researcher = {
        "name": "researcher",
        "description": "Checks a module in depth.",
        "system_prompt": "You check modules in depth.",
        "middleware": [compaction],
    }
    agent = create_deep_agent(
        model=model, tools=TOOLS, subagents=[researcher], middleware=[compaction], checkpointer=InMemorySaver()
    )
    session = Session(model)
    config = {"configurable": {"thread_id": "own"}}
    for n in range(6):
        agent.invoke({"messages": [request(n)]}, config)
        session.check(request(n))

    assert deepagents_summarizations == []
    assert len(session.subtasks) == 2 and all(
        any(is_summary(m) for m in runs[-1]) for runs in session.subtasks.values()
    )
    assert all(
        "You check modules in depth." in runs[0][0].content for runs in session.subtasks.values()
    )  # the researcher ran
    assert session.problems == []
    assert session.lost(agent.get_state(config).values["messages"], tmp_path, "own") == []


def test_a_role_text_pair_without_an_id_is_compacted_like_a_message(tmp_path):
    # deepagents' messages channel adds no ids: a ("user", text) pair reaches the middleware with id None
    model = ToolCallingModel()
    compaction = CompactionMiddleware(
        model=ScriptedModel(), config=CONFIG, storage=tmp_path, name="SummarizationMiddleware"
    )
    agent = create_deep_agent(model=model, tools=TOOLS, middleware=[compaction], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "pairs"}}
    for n in range(REQUESTS):
        agent.invoke({"messages": [("user", request(n).content)]}, config)

    state = agent.get_state(config).values
    assert all(m.id for m in state["messages"])
    assert state["compaction"]["counts"].get("summarize", 0) >= 1
    assert not [e for e in state["compaction"].get("events", []) if e.get("error")]
    # the requests are all still somewhere: the state or the thread's transcript
    from langgraph_compaction import load_transcript

    kept = {m.content for m in state["messages"]} | {m.content for m in load_transcript(tmp_path, "pairs")}
    assert {request(n).content for n in range(REQUESTS)} <= kept
