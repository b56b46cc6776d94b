"""Given no storage, compaction keeps what it evicts (the graph's store, else the process's memory) and says so once.

The agent's reading tools read the same place, so ``recall`` brings an evicted
message back on every front; a builder picks which tools the agent gets, and
those are the tools its model is bound with.
"""

from __future__ import annotations

import logging

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from pydantic import Field
from support import SMALL_WINDOW, build_graph, first_input

from langgraph_compaction import CompactionMiddleware, is_summary, load_transcript
from langgraph_compaction.engine import setup
from langgraph_compaction.fronts.tools import TOOL_NAMES
from langgraph_compaction.testing import ScriptedModel

REQUESTS = 9  # ~2,900 tokens each: over SMALL_WINDOW's 15,000-token trigger by the 8th


def _request(n: int) -> HumanMessage:
    return HumanMessage(f"Request {n}: migrate table t{n}. " + "details " * 2_000, id=f"req-{n}")


@pytest.fixture
def fresh_process_storage(monkeypatch):
    """The process's in-memory storage as a new process has it: not made yet, its warning not given yet."""
    monkeypatch.setattr(setup, "_process_storage", [])


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if setup.DEFAULT_STORAGE_WARNING in r.getMessage()]


class _Agent:
    """The agent's replies: "Done.", or once the tool call the test asks for next."""

    def __init__(self) -> None:
        self.next: AIMessage | None = None

    def __call__(self, prompt: str) -> AIMessage | str:
        answer, self.next = self.next, None
        return answer or "Done."


def _recall(agent: _Agent, message_id: str) -> None:
    agent.next = AIMessage("", tool_calls=[{"name": "recall", "args": {"message_ids": [message_id]}, "id": "r"}])


def _recalled(messages: list) -> str:
    return next(m.content for m in messages if isinstance(m, ToolMessage) and m.name == "recall")


def test_create_agent_without_storage_keeps_evicted_messages_for_recall_and_warns_once(fresh_process_storage, caplog):
    caplog.set_level(logging.WARNING, logger="langgraph_compaction")
    script = _Agent()
    agent = create_agent(
        ScriptedModel(reply=script),
        middleware=[CompactionMiddleware(ScriptedModel(), config=SMALL_WINDOW)],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "no-storage"}}
    for n in range(REQUESTS):
        agent.invoke({"messages": [_request(n)]}, thread)
    kept = agent.get_state(thread).values["messages"]
    assert sum(is_summary(m) for m in kept) == 1 and "req-0" not in {m.id for m in kept}

    _recall(script, "req-0")
    messages = agent.invoke({"messages": [HumanMessage("What was the first table?")]}, thread)["messages"]
    assert "Request 0: migrate table t0." in _recalled(messages)
    transcript_ids = {m.id for m in load_transcript(setup.process_storage(), "no-storage")}
    assert {f"req-{n}" for n in range(REQUESTS)} <= transcript_ids
    assert len(_warnings(caplog)) == 1 and "pass storage=" in _warnings(caplog)[0]


def test_a_graph_with_a_store_keeps_the_transcript_there_and_gives_no_warning(fresh_process_storage, caplog):
    caplog.set_level(logging.WARNING, logger="langgraph_compaction")
    store = InMemoryStore()
    graph, _ = build_graph(
        ScriptedModel(), config=SMALL_WINDOW, storage=None, store=store, checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "with-store"}}
    for turn in range(4):
        graph.invoke(first_input(turn), thread)
    assert any(is_summary(m) for m in graph.get_state(thread).values["messages"])
    assert len(load_transcript(store, "with-store")) > 10
    assert _warnings(caplog) == []
    assert setup._process_storage == []  # never made


def test_add_compaction_without_storage_or_store_keeps_the_transcript_in_the_process(fresh_process_storage, caplog):
    caplog.set_level(logging.WARNING, logger="langgraph_compaction")
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=None, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "graph-no-storage"}}
    for turn in range(4):
        graph.invoke(first_input(turn), thread)
    kept = {m.id for m in graph.get_state(thread).values["messages"]}
    transcript = load_transcript(setup.process_storage(), "graph-no-storage")
    evicted = [m for m in transcript if m.id not in kept and not is_summary(m)]
    assert len(evicted) > 10 and any("pytest -q module0" in str(m.content) for m in evicted)
    assert len(_warnings(caplog)) == 1


def test_deepagents_without_storage_keeps_evicted_messages_for_recall(fresh_process_storage):
    script = _Agent()
    compaction = CompactionMiddleware(ScriptedModel(), config=SMALL_WINDOW, name="SummarizationMiddleware")
    agent = create_deep_agent(model=ScriptedModel(reply=script), middleware=[compaction], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "deep-no-storage"}}
    for n in range(REQUESTS):
        agent.invoke({"messages": [_request(n)]}, thread)
    assert "req-0" not in {m.id for m in agent.get_state(thread).values["messages"]}
    _recall(script, "req-0")
    messages = agent.invoke({"messages": [HumanMessage("What was the first table?")]}, thread)["messages"]
    assert "Request 0: migrate table t0." in _recalled(messages)


class BoundTools(ScriptedModel):
    """A scripted agent model that records the names of the tools it is bound with."""

    bound: list = Field(default_factory=list)

    def bind_tools(self, tools, **kwargs):
        self.bound.append([getattr(t, "name", None) or t["function"]["name"] for t in tools])
        return self


@pytest.mark.parametrize(
    "add_tools,expected",
    [
        (True, list(TOOL_NAMES)),
        (("compact", "recall"), ["recall", "compact"]),
        (
            ["session_search", "recall", "compact", "pin", "unpin"],
            ["session_search", "recall", "compact", "pin", "unpin"],
        ),
        (False, []),
    ],
)
def test_the_tools_a_builder_picks_are_the_tools_the_model_is_bound_with(tmp_path, add_tools, expected):
    model = BoundTools(reply="Done.")
    compaction = CompactionMiddleware(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, add_tools=add_tools)
    agent = create_agent(model, middleware=[compaction], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "picked"}})
    assert model.bound in ([expected], [])  # create_agent binds no tools when there are none
    assert bool(model.bound) == bool(expected)


@pytest.mark.parametrize(
    "add_tools,message",
    [
        (("recall", "search"), r"add_tools: \['search'\] are not compaction tools; pick from \('memory_search'"),
        ("recall", r"add_tools='recall' is not a list of tool names: pass e.g. add_tools=\('recall', 'compact'\)"),
    ],
)
def test_a_tool_name_that_is_not_one_is_refused_naming_the_argument(tmp_path, add_tools, message):
    with pytest.raises(ValueError, match=message):
        CompactionMiddleware(ScriptedModel(), storage=tmp_path, add_tools=add_tools)
