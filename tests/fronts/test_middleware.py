"""CompactionMiddleware inside a real ``langchain.agents.create_agent``, driven for 22 requests."""

from __future__ import annotations

import subprocess
import sys

import pytest
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from support.fronts import CONFIG, REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, request, summaries_counted

from langgraph_compaction import CompactionConfig, CompactionMiddleware, is_summary, load_transcript
from langgraph_compaction.testing import ScriptedModel

SYSTEM_PROMPT = "You are a careful engineer. Check each module with the tools, then report."


def _agent(model, tmp_path, summarizer=None, **options):
    summarizer = summarizer or ScriptedModel()
    middleware = CompactionMiddleware(
        model=summarizer, config=options.pop("config", CONFIG), storage=tmp_path, **options
    )
    agent = create_agent(
        model, TOOLS, system_prompt=SYSTEM_PROMPT, middleware=[middleware], checkpointer=InMemorySaver()
    )
    return agent, middleware


def _long_session(agent, model, thread: str, requests: int = REQUESTS) -> Session:
    session = Session(model)
    config = {"configurable": {"thread_id": thread}}
    for n in range(requests):
        agent.invoke({"messages": [request(n)]}, config)
        session.check(request(n))
    return session


def test_a_long_create_agent_session_stays_valid_inside_the_window_and_loses_nothing(tmp_path):
    model = ToolCallingModel()
    agent, middleware = _agent(model, tmp_path)
    session = _long_session(agent, model, "t1")

    state = agent.get_state({"configurable": {"thread_id": "t1"}}).values
    assert len(model.inputs) == 2 * REQUESTS  # one tool round and the answer: no call lost or repeated
    assert session.problems == []
    assert session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    assert summaries_counted(state["compaction"]) == session.summaries_seen()
    assert session.lost(state["messages"], tmp_path, "t1") == []
    # the middleware's tools reach the model next to the agent's own
    assert {s["function"]["name"] for s in model.tool_schemas} >= {
        "run_tests",
        "fetch_docs",
        "memory_search",
        "recall",
        "compact",
    }
    # the system prompt and the tool schemas are counted in every request
    assert middleware.nodes.fixed_tokens > 500


async def test_in_view_mode_the_state_keeps_every_message_and_the_model_gets_the_view(tmp_path):
    model = ToolCallingModel()
    agent, _ = _agent(model, tmp_path, config=CompactionConfig(context_window=WINDOW, mode="view"))
    session = _long_session(agent, model, "view")

    state = agent.get_state({"configurable": {"thread_id": "view"}}).values
    messages = state["messages"]
    assert len(messages) == 5 * REQUESTS and not any(
        is_summary(m) for m in messages
    )  # request, call, 2 results, answer
    assert session.problems == [] and session.peak <= WINDOW
    assert summaries_counted(state["compaction"]) == session.summaries_seen() >= 2
    current = [m for m in model.inputs[-1] if is_summary(m)]
    assert session.lost(messages + current, tmp_path, "view") == []


def test_a_long_system_prompt_is_counted_in_every_request(tmp_path):
    # about 5,000 tokens of instructions: requests must still stay near the trigger, not 5,000 tokens over it
    rules = " ".join(f"Rule {i}: check the module named in the request against its documentation." for i in range(400))
    model = ToolCallingModel()
    middleware = CompactionMiddleware(model=ScriptedModel(), config=CONFIG, storage=tmp_path)
    agent = create_agent(model, TOOLS, system_prompt=rules, middleware=[middleware], checkpointer=InMemorySaver())
    session = _long_session(agent, model, "rules", requests=12)

    assert model.request_tokens([SystemMessage(rules)]) > 4_500
    assert session.problems == []
    assert session.peak < CONFIG.resolve().trigger_tokens + 2_000  # uncounted, the prompt's 5,000 tokens come on top


async def test_the_async_path_runs_the_same_pass(tmp_path):
    model = ToolCallingModel()
    agent, _ = _agent(model, tmp_path)
    session = Session(model)
    config = {"configurable": {"thread_id": "t2"}}
    for n in range(REQUESTS):
        await agent.ainvoke({"messages": [request(n)]}, config)
        session.check(request(n))

    state = (await agent.aget_state(config)).values
    assert session.problems == []
    assert session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    assert session.lost(state["messages"], tmp_path, "t2") == []
    assert len(load_transcript(tmp_path, "t2")) > len(state["messages"])


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_model_that_refuses_once_is_compacted_and_retried(tmp_path, mode):
    # the configured window is generous, so only the model's refusal can start a compaction
    model = ToolCallingModel(refuse_once_over=12_000)
    agent, _ = _agent(model, tmp_path, config=CompactionConfig(context_window=200_000))
    config = {"configurable": {"thread_id": "t3"}}
    session = Session(model)
    for n in range(8):
        if mode == "sync":
            agent.invoke({"messages": [request(n)]}, config)
        else:
            await agent.ainvoke({"messages": [request(n)]}, config)
        session.check(request(n))

    state = agent.get_state(config).values
    assert model.refused == 1
    assert state["compaction"]["counts"].get("overflow") == 1
    assert is_summary(state["messages"][0])
    assert session.problems == []
    # the retried request (the first with a summary) fit the refused size; the reply follows the compacted history
    retried = next(m for m in model.inputs if any(is_summary(x) for x in m))
    assert model.request_tokens(retried) < 12_000
    assert state["messages"][-1].content == "Task 7 is done: tests pass and the docs agree."
    assert session.lost(state["messages"], tmp_path, "t3") == []


def test_the_compact_tool_summarizes_before_the_next_model_call(tmp_path):
    model, summarizer = ToolCallingModel(compact_at=5), ScriptedModel()
    agent, _ = _agent(model, tmp_path, summarizer, config=CompactionConfig(context_window=200_000))  # no trigger fires
    config = {"configurable": {"thread_id": "t4"}}
    session = Session(model)
    for n in range(6):
        agent.invoke({"messages": [request(n)]}, config)
        session.check(request(n))

    state = agent.get_state(config).values
    answer = next(m for m in state["messages"] if m.type == "tool" and m.name == "compact")
    assert answer.content.startswith("Compaction requested")
    after = model.inputs[-2]  # the call right after the compact tool answered
    assert is_summary(after[1])
    assert [
        p for p in summarizer.calls if "Context Extraction Assistant" in p and "the checks of module5" in p
    ]  # the focus
    assert summaries_counted(state["compaction"]) == 1 and state["compaction"]["manual"] is None
    assert session.problems == []
    assert session.lost(state["messages"], tmp_path, "t4") == []


def test_without_storage_the_agents_store_is_used_and_events_stream_from_every_stage(tmp_path):
    model, store = ToolCallingModel(), InMemoryStore()
    middleware = CompactionMiddleware(model=ScriptedModel(), config=CONFIG)
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "t5"}}
    events = []
    for n in range(10):
        events += [
            e
            for e in agent.stream({"messages": [request(n)]}, config, stream_mode="custom")
            if e.get("type") == "compaction"
        ]

    state = agent.get_state(config).values
    stages = {e["stage"] for e in events}
    assert {"offload", "flush", "summarize"} <= stages  # offload and flush run in worker threads, and still stream
    transcript = load_transcript(store, "t5")
    assert len(transcript) > len(state["messages"]) and transcript[0].id == "request-0"


def test_without_langchain_the_package_imports_and_the_middleware_says_what_to_install():
    script = (
        "import sys; sys.modules['langchain'] = None\n"  # as if langchain were not installed
        "import langgraph_compaction as lc\n"
        "assert lc.compact_messages and lc.add_compaction\n"
        "try:\n    lc.CompactionMiddleware\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "pip install 'langchain>=1.5'" in out
