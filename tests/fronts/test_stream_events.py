"""``astream_events``: the summarizer's and the memory model's text never streams as the agent's tokens.

A chat UI built on ``astream_events(version="v2")`` shows every
``on_chat_model_stream`` chunk as what the agent says. A blocking compaction
calls the summarizer and the memory model inside the graph's run; their
tokens must not reach that stream (``stream_mode="messages"`` holds as
well: ``tests/fronts/test_chatopenai.py``). ``ChatOpenAI`` over HTTP is the
agent, the summarizer and the memory model (the strict local server answers
the summary and memory prompts with its canned texts, and streams).
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, convert_to_messages
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from graphs.agent import OfflineAgentModel, build_agent, openai_chat_model
from langgraph_compaction import CompactionConfig, CompactionMiddleware

#: The server refuses prompts over this many tokens, as a 12k-window model would.
CONTEXT_LIMIT = 12_000
SUMMARY_MARKER = "Context Extraction Assistant"

#: blocking: the summary is made in front of the model, inside the run being streamed
CONFIG = CompactionConfig(
    context_window=CONTEXT_LIMIT,
    reserved=4_000,
    summary={"context_window": CONTEXT_LIMIT},
    background={"enabled": False},
)
#: what only the summarizer and the memory model write (the server's canned answers)
COMPACTION_TEXT = ("## SESSION INTENT", "## NEXT STEPS", "The user is working on", "concise, direct answers")


def scripted_agent(body: dict) -> dict | None:
    """Answer agent requests (they carry tools) with the offline plan; leave the rest to the server's canned replies."""
    if not body.get("tools"):
        return None
    reply = OfflineAgentModel().respond(
        convert_to_messages(body["messages"]), {t["function"]["name"] for t in body["tools"]}
    )
    calls = [{"name": c["name"], "arguments": c["args"], "id": c["id"]} for c in reply.tool_calls]
    return {"content": reply.content, "tool_calls": calls}


def _request(turn: int) -> dict:
    return {"messages": [HumanMessage(f"Task {turn}: fix module{turn} and run its tests " + "in detail " * 500)]}


async def _streamed_text(graph, server, turns: int) -> tuple[list[str], int]:
    """Return the text of every ``on_chat_model_stream`` chunk, and how many summaries the server wrote."""
    chunks = []
    for turn in range(turns):
        config = {"configurable": {"thread_id": "events"}}
        async for event in graph.astream_events(_request(turn), config, version="v2"):
            if event["event"] == "on_chat_model_stream":
                chunks.append(str(event["data"]["chunk"].content))
    assert server.errors == []
    summaries = [b for b in server.requests if b["messages"] and SUMMARY_MARKER in str(b["messages"][-1]["content"])]
    return chunks, len(summaries)


def _model(server):
    return openai_chat_model(base_url=server.base_url, api_key="test", max_retries=0)


async def test_add_compaction_streams_no_summary_or_memory_text_as_the_agents(openai_server):
    openai_server.responder = scripted_agent
    graph = build_agent(_model(openai_server), _model(openai_server), CONFIG)
    compiled = graph.compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    chunks, summaries = await _streamed_text(compiled, openai_server, 6)
    assert summaries >= 1 and chunks  # compactions ran, and the agent's own tokens streamed
    text = "".join(chunks)
    assert [t for t in COMPACTION_TEXT if t in text] == []


async def test_create_agent_streams_no_summary_or_memory_text_as_the_agents(openai_server, tmp_path):
    @tool
    def run_tests(target: str) -> str:
        """Run the test suite of a module."""
        return f"pytest {target}: 42 passed " + "ok " * 600

    openai_server.responder = scripted_agent
    middleware = CompactionMiddleware(model=_model(openai_server), config=CONFIG, storage=tmp_path, add_tools=False)
    agent = create_agent(_model(openai_server), [run_tests], middleware=[middleware], checkpointer=InMemorySaver())
    chunks, summaries = await _streamed_text(agent, openai_server, 6)
    assert summaries >= 1 and chunks
    text = "".join(chunks)
    assert [t for t in COMPACTION_TEXT if t in text] == []
