"""What an ``after_compaction`` hook returns goes after the summary only if it keeps every call paired.

The hook may give back a re-read of the file being edited; given as a bare
``ToolMessage`` it answers no call, and an assistant message with tool calls
alone leaves calls nothing answers. Either would be in every later request,
which OpenAI and Anthropic refuse: such messages are refused, with an event
that says so. A complete pair (the call, then its result) is welcome.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import CONFIG, REQUESTS, TOOLS, ToolCallingModel, edge_builder, request

from langgraph_compaction import CompactionMiddleware, is_summary
from langgraph_compaction.testing import ScriptedModel, openai_violations

REREAD = "   1  def handler(event):\n   2      return event['value']\n"


def orphan_result(info) -> list:
    return [ToolMessage(f"(re-read of src/app.py)\n{REREAD}", tool_call_id="reread-app", name="read_file")]


def unanswered_call(info) -> list:
    call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": "reread-app"}
    return [AIMessage("Let me re-read the file I am editing.", tool_calls=[call])]


def complete_pair(info) -> list:
    call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": f"reread-{info.summary_id[-8:]}"}
    return [
        AIMessage("Re-reading the file I am editing.", tool_calls=[call]),
        ToolMessage(REREAD, tool_call_id=call["id"], name="read_file"),
    ]


def _run(front: str, hook, tmp_path, background: bool = False) -> tuple[ToolCallingModel, list[dict]]:
    """Run the scripted session with the hook; return the model (its requests) and every streamed event."""
    model = ToolCallingModel()
    config = CONFIG.model_copy(update={"background": background, "summary": {"after_compaction": hook}})
    graph: Any
    if front == "graph":
        graph = edge_builder(model, tmp_path, config).compile(checkpointer=InMemorySaver())
    else:
        middleware = CompactionMiddleware(model=ScriptedModel(), config=config, storage=tmp_path, add_tools=False)
        graph = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": f"hook-{front}"}}
    events = []
    for n in range(REQUESTS):
        events += [e for e in graph.stream({"messages": [request(n)]}, thread, stream_mode="custom")]
    return model, events


def _problems(model: ToolCallingModel) -> list[str]:
    return [f"request {i}: {p}" for i, r in enumerate(model.inputs) for p in openai_violations(r)]


def _applied(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("stage") == "summarize" and e.get("layer") in ("summarize", "extractive")]


CASES = [("graph", False), ("middleware", False), ("graph", True)]
IDS = ["graph", "middleware", "graph-background"]
REFUSED = CASES


@pytest.mark.parametrize(("front", "background"), REFUSED, ids=IDS)
def test_a_hooks_bare_tool_result_is_refused_with_an_event(tmp_path, front, background):
    model, events = _run(front, orphan_result, tmp_path, background)
    assert _applied(events)
    assert _problems(model) == []
    assert [e for e in events if e.get("hook") == "after_compaction" and (e.get("error") or e.get("note"))]


@pytest.mark.parametrize(("front", "background"), REFUSED, ids=IDS)
def test_a_hooks_call_without_its_result_is_refused_with_an_event(tmp_path, front, background):
    model, events = _run(front, unanswered_call, tmp_path, background)
    assert _applied(events)
    assert _problems(model) == []
    assert [e for e in events if e.get("hook") == "after_compaction" and (e.get("error") or e.get("note"))]


@pytest.mark.parametrize(("front", "background"), CASES, ids=IDS)
def test_a_hooks_complete_call_and_result_follow_the_summary(tmp_path, front, background):
    model, events = _run(front, complete_pair, tmp_path, background)
    assert _applied(events) and _problems(model) == []
    rereads = [
        (i, m) for i, r in enumerate(model.inputs) for m in r if isinstance(m, ToolMessage) and m.content == REREAD
    ]
    assert rereads  # the re-read reached the model, right after the summary it came with
    i, message = rereads[0]
    at = model.inputs[i].index(message)
    assert is_summary(model.inputs[i][at - 2])
