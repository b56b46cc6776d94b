"""An application's controls over a thread: its user's ``/compact``, how full the context is, the jobs in the background.

Each on every front (``create_agent`` with ``CompactionMiddleware``, a graph
built with ``add_compaction``, ``create_deep_agent``), sync and async, with a
checkpointer, as an application between two runs of a thread uses them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langgraph_compaction import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    acompact_thread,
    add_compaction,
    compact_thread,
    context_usage,
    is_summary,
    load_transcript,
)
from langgraph_compaction.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
#: A trigger at 40,000 tokens: deepagents' system prompt and tools take ~7,000 of them.
CONFIG = CompactionConfig(context_window=60_000, background={"enabled": False})
REQUESTS = 4  # ~2,900 tokens each: ~11,700 tokens, under the trigger
THREAD = {"configurable": {"thread_id": "user-42"}}


def _request(n: int) -> HumanMessage:
    return HumanMessage(f"Request {n}: migrate table t{n}. " + "details " * 2_000, id=f"req-{n}")


def _create_agent(storage):
    compaction = CompactionMiddleware(ScriptedModel(), config=CONFIG, storage=storage)
    return create_agent(ScriptedModel(reply="Done."), middleware=[compaction], checkpointer=InMemorySaver())


def _deep_agent(storage):
    compaction = CompactionMiddleware(ScriptedModel(), config=CONFIG, storage=storage, name="SummarizationMiddleware")
    return create_deep_agent(model=ScriptedModel(reply="Done."), middleware=[compaction], checkpointer=InMemorySaver())


def _graph(storage, **compile_args):
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage("Done.")]})
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), config=CONFIG, storage=storage)
    return builder.compile(checkpointer=InMemorySaver(), **compile_args)


FRONTS = {"create_agent": _create_agent, "add_compaction": _graph, "deepagents": _deep_agent}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("front", list(FRONTS))
async def test_compact_thread_leaves_one_summary_and_the_evicted_messages_in_the_transcript(tmp_path, front, mode):
    agent = FRONTS[front](tmp_path)
    for n in range(REQUESTS):
        agent.invoke({"messages": [_request(n)]}, THREAD)
    before = agent.get_state(THREAD).values["messages"]
    usage = context_usage(agent, THREAD)
    assert not any(is_summary(m) for m in before) and usage.used < usage.trigger  # nothing compacted it yet

    if mode == "sync":
        done = compact_thread(agent, THREAD, focus="the table names")
    else:
        done = await acompact_thread(agent, THREAD, focus="the table names")

    after = agent.get_state(THREAD).values["messages"]
    assert done.summarized and done.tokens_after < done.tokens_before / 2
    assert sum(is_summary(m) for m in after) == 1
    evicted = {m.id for m in before} - {m.id for m in after}
    assert {"req-0", "req-1", "req-2"} <= evicted
    assert evicted <= {m.id for m in load_transcript(tmp_path, "user-42")}
    shrunk = context_usage(agent, THREAD)
    assert usage.used - shrunk.used == done.tokens_before - done.tokens_after  # the prompt and tools stay counted
    assert shrunk.left == shrunk.window - shrunk.used == 60_000 - shrunk.used

    agent.invoke({"messages": [HumanMessage("And the last table?", id="next")]}, THREAD)  # the thread goes on
    following = agent.get_state(THREAD).values["messages"]
    assert sum(is_summary(m) for m in following) == 1 and following[-1].content == "Done."


def test_the_focus_reaches_the_summarizer(tmp_path):
    summarizer = ScriptedModel()
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage("Done.")]})
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=summarizer, config=CONFIG, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    for n in range(REQUESTS):
        graph.invoke({"messages": [_request(n)]}, THREAD)
    compact_thread(graph, THREAD, focus="every table name t0..t3")
    prompt = next(p for p in summarizer.calls if "Context Extraction Assistant" in p)
    assert "every table name t0..t3" in prompt


def test_a_short_thread_is_left_as_it_is(tmp_path):
    graph = _graph(tmp_path)
    graph.invoke({"messages": [HumanMessage("Hello")]}, THREAD)
    done = compact_thread(graph, THREAD)
    assert not done.summarized and done.tokens_after == done.tokens_before
    assert [m.content for m in graph.get_state(THREAD).values["messages"]] == ["Hello", "Done."]


def test_compact_thread_refuses_what_it_cannot_compact(tmp_path):
    plain = StateGraph(CompactionState)
    plain.add_node("agent", lambda state: {"messages": [AIMessage("Done.")]})
    plain.add_edge(START, "agent")
    with pytest.raises(ValueError, match="has no compaction: pass a graph built with CompactionMiddleware"):
        compact_thread(plain.compile(checkpointer=InMemorySaver()), THREAD)
    with pytest.raises(ValueError, match="config names no thread"):
        compact_thread(_graph(tmp_path), {})
    paused = _graph(tmp_path, interrupt_before=["agent"])
    paused.invoke({"messages": [HumanMessage("Hello")]}, THREAD)
    with pytest.raises(ValueError, match=r"the thread is paused before \['agent'\]"):
        compact_thread(paused, THREAD)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage("Done.")]})
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), config=CONFIG, storage=tmp_path)
    with pytest.raises(ValueError, match="needs the graph compiled with a checkpointer"):
        compact_thread(builder.compile(), THREAD)


# --- the jobs in the background ------------------------------------------------------

_SCRIPT = """
import asyncio, sys, tempfile
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_compaction import CompactionConfig, CompactionMiddleware, await_compaction, wait_for_compaction
from langgraph_compaction.testing import ScriptedModel

ASYNC = sys.argv[1] == "async"


async def main():
    with tempfile.TemporaryDirectory() as folder:
        summarizer = ScriptedModel(latency=2.0)  # a summary takes two seconds to prepare
        compaction = CompactionMiddleware(summarizer, config=CompactionConfig(context_window=30_000), storage=folder)
        agent = create_agent(ScriptedModel(reply="Done."), middleware=[compaction], checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "bg"}}
        for n in range(12):
            request = {"messages": [HumanMessage(f"Request {n}: " + "details " * 2_000)]}
            await agent.ainvoke(request, thread) if ASYNC else agent.invoke(request, thread)
            if not wait_for_compaction(agent, thread_id="bg", timeout=0):
                break  # a summary is being prepared next to the agent
        else:
            sys.exit("no background job was started")
        done = await await_compaction(agent, "bg") if ASYNC else wait_for_compaction(agent, "bg")
        assert done and wait_for_compaction(timeout=0)
        assert list(Path(folder).glob("prepared/*/*.json")), "the job wrote nothing into the storage"
    print("removed")


asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_temporary_folder_used_as_storage_is_removed_after_waiting_for_the_background_jobs(mode):
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT), mode], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "removed"
    assert "Directory not empty" not in run.stderr
