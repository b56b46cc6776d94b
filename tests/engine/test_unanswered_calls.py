"""Calls left unanswered by a crash or a rejected approval: every front answers them before the model call.

A run that dies between the agent's tool calls and their results, then is
sent again (a client's retry), leaves the calls in the history with nothing
answering them; so does an approval interrupt the user answers with a new
message instead of a decision. OpenAI refuses such a request (the strict
local server, ``tests/support/openai_server.py``, answers it with the real 400), and
so does Anthropic. Each front must answer every such call before the model
call: a tool result saying the call was not run, right after the call's
message (after the results of its siblings that did run), written to the
state so that the next run neither sends the gap nor adds a second answer,
with an event; nothing else moves.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import SecretStr

from langgraph_compaction import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    add_compaction,
    compact_messages,
    make_pre_model_hook,
)
from langgraph_compaction.testing import ScriptedModel, openai_violations

#: a roomy window: nothing is compacted, so anything that moves was moved by the repair
CONFIG = CompactionConfig(context_window=128_000)
FRONTS = ["graph", "middleware", "prebuilt"]


class Crash(Exception):
    """The worker dying while a tool runs (the run ends there; no result is written)."""


def make_tools(crashes: dict) -> list:
    @tool
    def run_tests(module: str) -> str:
        """Run the test suite of a module."""
        return f"pytest {module}: 42 passed"

    @tool
    def deploy(env: str) -> str:
        """Deploy the service to an environment."""
        if crashes["left"]:
            crashes["left"] -= 1
            raise Crash("the worker died while deploying")
        return f"deployed to {env}"

    return [run_tests, deploy]


def agent_responder(body: dict) -> dict | None:
    """The agent's model: a user turn gets two parallel calls (tests, deploy); tool results get an answer."""
    if not body.get("tools"):
        return None  # a summary or memory prompt: the server's canned answer
    last = body["messages"][-1]
    if last.get("role") == "user":
        return {
            "content": "Running the tests and deploying.",
            "tool_calls": [
                {"name": "run_tests", "arguments": {"module": "billing"}},
                {"name": "deploy", "arguments": {"env": "staging"}},
            ],
        }
    return {"content": "Done: the tests pass and staging is deployed."}


def _chat(server) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("test"), model="gpt-4o-mini", max_retries=0)


def build(front: str, server, tools: list, storage, interrupt: bool = False) -> Any:
    """Return the compiled agent of a front, with compaction, an in-memory checkpointer and ChatOpenAI."""
    server.responder = agent_responder
    model = _chat(server)
    stop = ["tools"] if interrupt else None
    if front == "graph":
        bound = model.bind_tools(tools)
        builder = StateGraph(CompactionState)
        builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
        builder.add_node("tools", ToolNode(tools))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        add_compaction(
            builder, before="agent", model=ScriptedModel(), config=CONFIG, storage=storage, agent_model=bound
        )
        return builder.compile(checkpointer=InMemorySaver(), interrupt_before=stop)
    if front == "middleware":
        middleware = CompactionMiddleware(model=ScriptedModel(), config=CONFIG, storage=storage, add_tools=False)
        return create_agent(model, tools, middleware=[middleware], checkpointer=InMemorySaver(), interrupt_before=stop)
    from langgraph.prebuilt import create_react_agent

    hook = make_pre_model_hook(model=ScriptedModel(), config=CONFIG, storage=storage)
    with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent, and still used
        warnings.simplefilter("ignore")
        return create_react_agent(
            model,
            tools,
            pre_model_hook=hook,
            state_schema=hook.state_schema,
            checkpointer=InMemorySaver(),
            interrupt_before=stop,
        )


def drive(graph, payload: Any, thread: dict, events: list[dict]) -> str | None:
    """Run one request, keeping the compaction events it streams; return why it failed (None: it ran).

    A crash ends the run as a killed worker's would, and is no failure here.
    """
    try:
        for chunk in graph.stream(payload, thread, stream_mode="custom"):
            if isinstance(chunk, dict) and chunk.get("type") == "compaction":
                events.append(chunk)
    except Crash:
        return None
    except Exception as exc:  # noqa: BLE001 - a refused request (HTTP 400, LangGraph's own history check)
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


NOT_RUN = re.compile(r"\bnot\b|cancel", re.IGNORECASE)


def last_call(messages: list[BaseMessage]) -> AIMessage:
    """Return the last assistant message with tool calls."""
    return [m for m in messages if isinstance(m, AIMessage) and m.tool_calls][-1]


def unanswered(messages: list[BaseMessage]) -> list[str]:
    """Return the ids of the last assistant message's calls that no result answers."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [str(c["id"]) for c in last_call(messages).tool_calls if c["id"] not in answered]


def repairs_of(messages: list[BaseMessage], call: AIMessage) -> list[str]:
    """Return what is wrong with the answers to ``call``'s tool calls (empty: each answered once, right after it)."""
    at = next(i for i, m in enumerate(messages) if m.id == call.id)
    ids = [str(c["id"]) for c in call.tool_calls]
    block = []
    for m in messages[at + 1 :]:
        if not isinstance(m, ToolMessage):
            break
        block.append(m)
    problems = []
    if sorted(m.tool_call_id for m in block) != sorted(ids):
        problems.append(f"the results right after {call.id} answer {[m.tool_call_id for m in block]}, not {ids}")
    answers = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in ids]
    if len(answers) != len(ids):
        problems.append(f"{len(answers)} results answer the {len(ids)} calls of {call.id}")
    return problems


def repair_events(events: list[dict], call_ids: list[str]) -> list[dict]:
    """Return the events that report an answered call: they name it, or say a call was unanswered or repaired."""
    return [
        e
        for e in events
        if any(i in json.dumps(e, default=str) for i in call_ids) or re.search(r"unanswered|repair", json.dumps(e))
    ]


def _check_repaired(
    graph, thread: dict, server, events: list[dict], before: list[BaseMessage], failure: str | None
) -> None:
    messages = graph.get_state(thread).values["messages"]
    assert server.errors == [], server.errors[0][1]["error"]["message"]
    assert failure is None, failure
    call = last_call(before)
    assert repairs_of(messages, call) == []
    ids = [c["id"] for c in call.tool_calls]
    # a result the crashed step had written as a pending write is LangGraph's to keep or drop, not the repair's
    final = {m.id for m in messages}
    persisted = [m.id for m in before if m.id in final or not isinstance(m, ToolMessage)]
    repairs = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in ids and m.id not in persisted]
    assert repairs and all(NOT_RUN.search(str(m.content)) for m in repairs), [m.content for m in repairs]
    assert repair_events(events, [m.tool_call_id for m in repairs])
    # nothing else moved: the history before the retry, in order, then what the retry added
    kept = [m.id for m in messages if m.id not in {r.id for r in repairs}]
    assert kept[: len(persisted)] == persisted


@pytest.mark.parametrize("front", FRONTS)
def test_a_retried_run_after_a_crash_between_calls_and_results_answers_the_calls(openai_server, tmp_path, front):
    graph = build(front, openai_server, make_tools({"left": 1}), tmp_path)
    thread = {"configurable": {"thread_id": f"crash-{front}"}}
    events: list[dict] = []
    retry = {"messages": [{"role": "user", "content": "Run the billing tests and deploy to staging."}]}
    drive(graph, retry, thread, events)  # dies in the deploy tool
    before = graph.get_state(thread).values["messages"]
    assert unanswered(before)  # the calls, and not every result
    failure = drive(graph, retry, thread, events)  # the client sends the request again
    _check_repaired(graph, thread, openai_server, events, before, failure)
    assert drive(graph, {"messages": [{"role": "user", "content": "And the docs?"}]}, thread, events) is None
    assert openai_server.errors == []
    assert repairs_of(graph.get_state(thread).values["messages"], last_call(before)) == []  # still one answer each


@pytest.mark.parametrize("front", FRONTS)
def test_a_rejected_approval_answers_the_pending_calls(openai_server, tmp_path, front):
    graph = build(front, openai_server, make_tools({"left": 0}), tmp_path, interrupt=True)
    thread = {"configurable": {"thread_id": f"approval-{front}"}}
    events: list[dict] = []
    drive(graph, {"messages": [{"role": "user", "content": "Deploy billing to staging."}]}, thread, events)
    assert set(graph.get_state(thread).next) == {"tools"}  # waiting for the user's approval
    before = graph.get_state(thread).values["messages"]
    # the user does not approve: they write something else instead
    rejected = {"messages": [{"role": "user", "content": "No, do not deploy. Just say hello."}]}
    _check_repaired(graph, thread, openai_server, events, before, drive(graph, rejected, thread, events))


def _partly_answered() -> list[BaseMessage]:
    calls = [
        {"name": "run_tests", "args": {"module": "billing"}, "id": "call-tests"},
        {"name": "deploy", "args": {"env": "staging"}, "id": "call-deploy"},
        {"name": "run_tests", "args": {"module": "docs"}, "id": "call-docs"},
    ]
    return [
        HumanMessage("Run the billing tests, deploy to staging and check the docs.", id="h1"),
        AIMessage("On it.", tool_calls=calls, id="a1"),
        ToolMessage("pytest billing: 42 passed", tool_call_id="call-tests", name="run_tests", id="t1"),
        HumanMessage("Are you still there?", id="h2"),  # the app crashed before the other results
    ]


def test_compact_messages_answers_the_calls_a_crash_left_after_their_answered_siblings(openai_server, tmp_path):
    history = _partly_answered()
    result = compact_messages(history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="functional")
    assert openai_violations(result.view) == []
    _chat(openai_server).invoke(result.view)
    assert openai_server.errors == []
    ids = [m.id for m in result.messages]
    # right after the call's message and its answered sibling, in the calls' order; the rest unmoved
    repairs = [m for m in result.messages if m.id not in {h.id for h in history}]
    assert [m.tool_call_id for m in repairs] == ["call-deploy", "call-docs"]
    assert ids == ["h1", "a1", "t1", *[m.id for m in repairs], "h2"]
    assert all(NOT_RUN.search(str(m.content)) for m in repairs)
    assert repair_events(result.events, ["call-deploy", "call-docs"])
    again = compact_messages(
        result.messages,
        model=ScriptedModel(),
        config=CONFIG,
        storage=tmp_path,
        thread_id="functional",
        state=result.state,
    )
    assert [m.id for m in again.messages] == ids  # the repair is kept, not made twice


def test_a_call_left_unanswered_at_the_end_is_answered_by_appending_not_by_rewriting_the_history():
    from langgraph_compaction.engine.nodes import CompactionEngine

    call = {"name": "Read", "args": {"file_path": "src/a.py"}, "id": "c-last"}
    history = [HumanMessage("Read a.py", id="h"), AIMessage("", tool_calls=[call], id="a")]
    nodes = CompactionEngine(before="agent", model=None, config=CompactionConfig(context_window=128_000))
    update = nodes.gate({"messages": history}, {"configurable": {"thread_id": "end"}})
    written = update["messages"]
    assert [type(m).__name__ for m in written] == ["ToolMessage"]  # no RemoveMessage: 20,000 messages stay put
    assert written[0].tool_call_id == "c-last" and written[0].id == "not-run-c-last"
