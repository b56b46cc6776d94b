"""A tool-call id the model used before, left unanswered: only a result after the call answers it.

Models reuse call ids (real logs hold ``call_0`` again and again). When the
second call of an id is not run (the user rejects the approval with a new
message), the result the first call got earlier in the history does not
answer it: OpenAI and Anthropic pair results with the assistant message just
before them and refuse every later request. The gate adds a ``not-run``
result right after the second call, under an id no other message has.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from langgraph_compaction import CompactionConfig, CompactionMiddleware
from langgraph_compaction.core.repair import answer_unanswered
from langgraph_compaction.testing import ScriptedModel, anthropic_violations, openai_violations

CALL = {"name": "deploy", "args": {"env": "staging"}, "id": "call_0"}


def _history() -> list:
    return [
        HumanMessage("Deploy to staging.", id="h1"),
        AIMessage("", tool_calls=[CALL], id="a1"),
        ToolMessage("deployed to staging", tool_call_id="call_0", name="deploy", id="t1"),
        AIMessage("Deployed.", id="a2"),
        HumanMessage("Deploy again.", id="h2"),
        AIMessage("", tool_calls=[CALL], id="a3"),  # the same call id, not run: the approval was rejected
        HumanMessage("No, do not deploy.", id="h3"),
    ]


def test_a_result_before_a_reused_call_does_not_answer_it():
    repaired, added = answer_unanswered(_history())
    assert [(m.tool_call_id, m.id) for m in added] == [("call_0", "not-run-call_0")]
    assert [m.id for m in repaired] == ["h1", "a1", "t1", "a2", "h2", "a3", "not-run-call_0", "h3"]
    assert openai_violations(repaired) == [] and anthropic_violations(repaired) == []


def test_a_call_id_left_unanswered_twice_gets_two_results_of_distinct_ids():
    history = [
        HumanMessage("Deploy.", id="h1"),
        AIMessage("", tool_calls=[CALL], id="a1"),
        HumanMessage("No.", id="h2"),
        AIMessage("", tool_calls=[CALL], id="a2"),
        HumanMessage("No again.", id="h3"),
    ]
    repaired, added = answer_unanswered(history)
    assert [m.tool_call_id for m in added] == ["call_0", "call_0"]
    assert len({m.id for m in repaired}) == len(repaired)  # add_messages would merge two results of one id
    assert [m.id for m in repaired].index(added[1].id) == 5  # right after a2
    assert openai_violations(repaired) == []


def test_a_rejected_approval_of_a_reused_call_id_is_answered_before_the_next_request(openai_server, tmp_path):
    def responder(body: dict) -> dict | None:
        if not body.get("tools"):
            return None  # a summary or memory prompt
        if body["messages"][-1].get("role") == "user" and "No" not in body["messages"][-1]["content"]:
            return {
                "content": None,
                "tool_calls": [{"name": "deploy", "arguments": {"env": "staging"}, "id": "call_0"}],
            }
        return {"content": "Done."}

    @tool
    def deploy(env: str) -> str:
        """Deploy the service to an environment."""
        return f"deployed to {env}"

    openai_server.responder = responder
    model = ChatOpenAI(base_url=openai_server.base_url, api_key=SecretStr("t"), model="gpt-4o-mini", max_retries=0)
    middleware = CompactionMiddleware(
        model=ScriptedModel(), config=CompactionConfig(context_window=128_000), storage=tmp_path, add_tools=False
    )
    agent = create_agent(
        model, [deploy], middleware=[middleware], checkpointer=InMemorySaver(), interrupt_before=["tools"]
    )
    thread = {"configurable": {"thread_id": "reused"}}
    agent.invoke({"messages": [{"role": "user", "content": "Deploy to staging."}]}, thread)
    agent.invoke(None, thread)  # approved: the tool runs, the model answers
    agent.invoke({"messages": [{"role": "user", "content": "Deploy again."}]}, thread)  # the same call id
    agent.invoke({"messages": [{"role": "user", "content": "No, do not deploy. Say hello."}]}, thread)  # rejected

    assert openai_server.errors == []
    messages = agent.get_state(thread).values["messages"]
    second = [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls][1]
    after = messages[second + 1]
    assert isinstance(after, ToolMessage) and after.tool_call_id == "call_0" and after.id.startswith("not-run-")
    assert messages[-1].content == "Done."


def test_the_result_of_a_call_without_one_tells_the_model_to_check_before_repeating_it():
    _, added = answer_unanswered(_history())
    text = str(added[0].content)
    # the run may have died after the tool ran (a payment, an email): "call it again" alone would repeat it
    assert "may have run" in text and "check whether its effect already happened" in text
    assert "Call it again if it is still needed" not in text


def test_a_result_answers_the_latest_open_call_of_its_id():
    history = [
        HumanMessage("Deploy.", id="h1"),
        AIMessage("", tool_calls=[CALL], id="a1"),  # its run died: nothing answers it
        HumanMessage("Try again.", id="h2"),
        AIMessage("", tool_calls=[CALL], id="a2"),
        ToolMessage("deployed to staging", tool_call_id="call_0", name="deploy", id="t2"),
    ]
    repaired, added = answer_unanswered(history)
    assert [m.id for m in repaired] == ["h1", "a1", "not-run-call_0", "h2", "a2", "t2"]
    assert openai_violations(repaired) == []
