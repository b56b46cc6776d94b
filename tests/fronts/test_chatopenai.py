"""``ChatOpenAI`` over real HTTP as the agent AND the summarizer of the compacting graph.

The strict local server (``tests/support/openai_server.py``) answers like the real
chat-completions API and rejects with the real 400 bodies what the API
rejects: an orphaned tool message, an unanswered tool call, an empty message
list, a prompt over its context limit. The agent's replies are scripted (the
Studio graph's offline plan: parallel tool calls, a large write, an answer);
the summaries and memory bullets are the server's canned ones. Every request
goes through ``langchain-openai``.
"""

from __future__ import annotations

from langchain_core.messages import AIMessageChunk, HumanMessage, convert_to_messages
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from support.openai_server import count_prompt_tokens

from graphs.agent import OfflineAgentModel, build_agent, openai_chat_model
from langgraph_compaction import CompactionConfig
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.engine.nodes import FLUSH, GATE, OFFLOAD, SUMMARIZE
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.testing import openai_violations

#: The server refuses prompts over this many o200k tokens, as a 12k-window model would.
CONTEXT_LIMIT = 12_000
CONFIG = CompactionConfig(context_window=CONTEXT_LIMIT, reserved=4_000, summary={"context_window": CONTEXT_LIMIT})
SUMMARY_MARKER = "Context Extraction Assistant"
MEMORY_MARKER = "memory extraction assistant"
COMPACTION_NODES = {GATE, FLUSH, OFFLOAD, SUMMARIZE}


def scripted_agent(body: dict) -> dict | None:
    """Answer agent requests (they carry tools) with the offline plan; leave the rest to the server's canned replies."""
    if not body.get("tools"):
        return None
    tools = {t["function"]["name"] for t in body["tools"]}
    reply = OfflineAgentModel().respond(convert_to_messages(body["messages"]), tools)
    calls = [{"name": c["name"], "arguments": c["args"], "id": c["id"]} for c in reply.tool_calls]
    return {"content": reply.content, "tool_calls": calls}


def _graph(server):
    server.responder = scripted_agent
    server.context_limit = CONTEXT_LIMIT
    model = openai_chat_model(base_url=server.base_url, api_key="test", max_retries=0)
    summarizer = openai_chat_model(base_url=server.base_url, api_key="test", max_retries=0)
    return build_agent(model, summarizer, CONFIG).compile(checkpointer=InMemorySaver(), store=InMemoryStore())


def _request(turn: int) -> dict:
    return {"messages": [HumanMessage(f"Task {turn}: fix module{turn} and run its tests")]}


def _kinds(server) -> dict[str, list[dict]]:
    """Split the server's requests into agent, summary and memory-flush requests."""
    kinds: dict[str, list[dict]] = {"agent": [], "summary": [], "flush": []}
    for body in server.requests:
        text = body["messages"][-1]["content"] if body["messages"] else ""
        kind = (
            "agent"
            if body.get("tools")
            else "summary"
            if SUMMARY_MARKER in text
            else "flush"
            if MEMORY_MARKER in text
            else "other"
        )
        kinds.setdefault(kind, []).append(body)
    return kinds


def test_a_long_session_through_chatopenai_gets_no_400_and_stays_in_the_window(openai_server):
    graph = _graph(openai_server)
    config = {"configurable": {"thread_id": "long"}}
    for turn in range(20):
        graph.invoke(_request(turn), config, context={"user_id": "alice"})

    assert openai_server.errors == []
    kinds = _kinds(openai_server)
    assert set(kinds) == {"agent", "summary", "flush"}
    assert len(kinds["agent"]) == 60  # three model calls per request, none retried
    assert max(count_prompt_tokens(b["messages"]) for b in kinds["agent"]) <= CONTEXT_LIMIT
    values = graph.get_state(config).values
    compaction = read_compaction(values["compaction"])
    # every compaction was a real summary from the HTTP summarizer, none a fallback (a prefix
    # over the summarizer's window is summarized in parts: more requests than compactions); 13 here, as
    # background jobs started at the default message trigger cover what blocking would, while the agent goes on
    assert len(kinds["summary"]) >= compaction["counts"]["summarize"] >= 12
    assert "extractive" not in compaction["counts"] and "failed" not in compaction["counts"]
    assert len(kinds["flush"]) >= 8
    # the server's usage reports calibrated the counts
    assert compaction["calibration"]["samples"] > 0
    messages = values["messages"]
    assert messages[0].name == SUMMARY_MESSAGE_NAME and "earlier message(s) were condensed" in messages[0].content
    assert openai_violations(messages) == []
    assert messages[-1].content.startswith("Done with module19")


async def test_streamed_messages_show_the_agent_tokens_and_no_summarizer_tokens(openai_server):
    graph = _graph(openai_server)
    config = {"configurable": {"thread_id": "streamed"}}
    streamed = []
    for turn in range(4):
        streamed += [item async for item in graph.astream(_request(turn), config, stream_mode="messages")]

    assert openai_server.errors == []
    kinds = _kinds(openai_server)
    assert len(kinds["summary"]) >= 2 and all(b.get("stream") for b in kinds["agent"])
    agent_chunks = [c for c, meta in streamed if isinstance(c, AIMessageChunk) and meta["langgraph_node"] == "agent"]
    assert len(agent_chunks) > len(kinds["agent"])  # token by token, not whole replies
    assert not [
        c for c, meta in streamed if isinstance(c, AIMessageChunk) and meta["langgraph_node"] in COMPACTION_NODES
    ]
    streamed_text = "".join(
        c.content for c, _ in streamed if isinstance(c, AIMessageChunk) and isinstance(c.content, str)
    )
    assert "## SESSION INTENT" not in streamed_text and "The user is working on" not in streamed_text
    # what compaction itself puts on the stream is its state update: the summary message and removals
    from_compaction = [c for c, meta in streamed if meta["langgraph_node"] in COMPACTION_NODES]
    assert all(c.type == "remove" or c.name == SUMMARY_MESSAGE_NAME for c in from_compaction)
