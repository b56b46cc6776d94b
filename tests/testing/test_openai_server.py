"""Tests for the strict local OpenAI-compatible server (tests/support/openai_server.py).

Everything goes over real HTTP on 127.0.0.1 through ``langchain_openai.ChatOpenAI``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

import openai
import pytest
from langchain_core.exceptions import ContextOverflowError, ModelInvalidRequestError
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for support

from support.openai_server import (  # noqa: E402
    StrictOpenAIServer,
    count_prompt_tokens,
    count_text_tokens,
)


@pytest.fixture(scope="module")
def server():
    with StrictOpenAIServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(server):
    server.reset()
    server.responder = None
    server.context_limit = None
    yield


def make_llm(server: StrictOpenAIServer, **kwargs) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key="test", model="gpt-4o-mini", max_retries=0, **kwargs)


def _tool_call(name: str, args: dict, call_id: str) -> dict:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


# ---------------------------------------------------------------- happy paths


def test_plain_reply_invoke(server):
    server.responder = [{"content": "Hello there!"}]
    msg = make_llm(server).invoke([SystemMessage("be nice"), HumanMessage("hi")])
    assert isinstance(msg, AIMessage)
    assert msg.content == "Hello there!"
    assert msg.tool_calls == []
    assert msg.response_metadata["finish_reason"] == "stop"
    assert msg.response_metadata["model_name"] == "gpt-4o-mini"
    body = server.requests[-1]
    assert body["model"] == "gpt-4o-mini"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert server.errors == []


def test_default_plain_reply(server):
    msg = make_llm(server).invoke("What is the capital of France?")
    assert "capital of France" in msg.content


def test_tool_call_reply_parsed_with_dict_args(server):
    server.responder = lambda body: {
        "content": None,
        "tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py", "lines": 10}}],
    }
    msg = make_llm(server).invoke("read src/app.py")
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call["name"] == "read_file"
    assert call["args"] == {"path": "src/app.py", "lines": 10}
    assert call["id"].startswith("call_")


def test_usage_matches_server_o200k_count(server):
    messages = [
        SystemMessage("You are terse."),
        HumanMessage("hello world"),
        AIMessage("", tool_calls=[_tool_call("lookup", {"q": "weather in Paris"}, "call_1")]),
        ToolMessage("sunny, 21C", tool_call_id="call_1"),
    ]
    server.responder = [{"content": "It is sunny."}]
    msg = make_llm(server).invoke(messages)
    sent = server.requests[-1]["messages"]
    expected = count_prompt_tokens(sent)
    assert msg.usage_metadata["input_tokens"] == expected
    assert msg.usage_metadata["output_tokens"] == count_text_tokens("It is sunny.")
    assert msg.usage_metadata["total_tokens"] == expected + count_text_tokens("It is sunny.")
    # Hand check of the accounting on a single message: 3/msg + role + content + 3 priming.
    assert count_prompt_tokens([{"role": "user", "content": "hello world"}]) == 3 + 1 + 2 + 3


@pytest.mark.asyncio
async def test_ainvoke(server):
    server.responder = [{"content": "async ok"}]
    msg = await make_llm(server).ainvoke("ping")
    assert msg.content == "async ok"
    assert msg.usage_metadata["input_tokens"] == count_prompt_tokens(server.requests[-1]["messages"])


def test_stream_content_and_usage(server):
    server.responder = [{"content": "This reply is streamed in several pieces."}]
    chunks = list(make_llm(server, stream_usage=True).stream("go"))
    assert len(chunks) > 3
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert full.content == "This reply is streamed in several pieces."
    body = server.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert full.usage_metadata["input_tokens"] == count_prompt_tokens(body["messages"])
    assert full.response_metadata["finish_reason"] == "stop"


def test_stream_tool_calls_without_usage(server):
    server.responder = [
        {
            "content": None,
            "tool_calls": [
                {"name": "search", "arguments": {"query": "langgraph compaction"}, "id": "call_a"},
                {"name": "read_file", "arguments": '{"path": "README.md"}', "id": "call_b"},
            ],
        }
    ]
    full = None
    for chunk in make_llm(server).stream("find things"):
        full = chunk if full is None else full + chunk
    # Custom base_url => langchain-openai does not request usage by default.
    assert "stream_options" not in server.requests[-1]
    assert full.usage_metadata is None
    assert [(c["name"], c["args"], c["id"]) for c in full.tool_calls] == [
        ("search", {"query": "langgraph compaction"}, "call_a"),
        ("read_file", {"path": "README.md"}, "call_b"),
    ]
    assert full.response_metadata["finish_reason"] == "tool_calls"


def test_parallel_tool_calls_answered_passes(server):
    messages = [
        HumanMessage("weather in Paris and Rome?"),
        AIMessage(
            "",
            tool_calls=[
                _tool_call("weather", {"city": "Paris"}, "call_p"),
                _tool_call("weather", {"city": "Rome"}, "call_r"),
            ],
        ),
        # answered in the other order: still valid
        ToolMessage("rainy", tool_call_id="call_r"),
        ToolMessage("sunny", tool_call_id="call_p"),
        AIMessage("Paris is sunny, Rome is rainy."),
        HumanMessage("thanks"),
    ]
    msg = make_llm(server).invoke(messages)
    assert msg.content
    assert server.errors == []


def test_list_responder_last_repeats_and_default_on_none(server):
    server.responder = [{"content": "one"}, None, "three"]
    llm = make_llm(server)
    assert llm.invoke("a").content == "one"
    assert llm.invoke("b").content.startswith("Understood")  # None -> default responder
    assert llm.invoke("c").content == "three"
    assert llm.invoke("d").content == "three"


def test_default_summary_and_memory_responders(server):
    llm = make_llm(server)
    history = (
        '<message type="human">Refactor utils/parse.py to use dataclasses</message>\n'
        '<message type="ai">\n  <tool_call id="c1" name="edit_file">{"path": "utils/parse.py"}</tool_call>\n</message>'
    )
    prompt = f"<role>\nContext Extraction Assistant\n</role>\n...\n<messages>\n{history}\n</messages>"
    summary = llm.invoke(prompt).content
    for section in ("## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS"):
        assert section in summary
    assert "Refactor utils/parse.py to use dataclasses" in summary
    assert "utils/parse.py" in summary.split("## ARTIFACTS")[1]
    assert "edit_file" in summary

    memory = llm.invoke(
        [SystemMessage("You are a Memory Extraction Assistant."), HumanMessage("I like short answers")]
    ).content
    bullets = [line for line in memory.splitlines() if line.startswith("- ")]
    assert len(bullets) == 2


# ---------------------------------------------------------------- rejections


def _error(server, idx=-1):
    status, body = server.errors[idx]
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]


def test_reject_empty_messages(server):
    with pytest.raises(openai.BadRequestError) as info:
        make_llm(server).invoke([])
    assert isinstance(info.value, ModelInvalidRequestError)
    assert not isinstance(info.value, ContextOverflowError)
    assert info.value.status_code == 400
    assert "[] is too short - 'messages'" in str(info.value)
    err = _error(server)
    assert err["param"] == "messages"


def test_reject_orphan_tool_message(server):
    with pytest.raises(openai.BadRequestError) as info:
        make_llm(server).invoke([HumanMessage("hi"), ToolMessage("result", tool_call_id="call_x")])
    assert isinstance(info.value, ModelInvalidRequestError)
    assert "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'" in str(info.value)
    assert _error(server)["param"] == "messages.[1].role"
    assert info.value.body["param"] == "messages.[1].role"


def test_reject_tool_message_after_user_turn_in_between(server):
    # The answering tool message is separated from its assistant by a user message.
    messages = [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[_tool_call("t", {}, "call_1")]),
        ToolMessage("ok", tool_call_id="call_1"),
        HumanMessage("again"),
        ToolMessage("late", tool_call_id="call_1"),
    ]
    with pytest.raises(openai.BadRequestError, match="preceeding message with 'tool_calls'"):
        make_llm(server).invoke(messages)
    assert _error(server)["param"] == "messages.[4].role"


def test_reject_unanswered_tool_calls(server):
    messages = [
        HumanMessage("weather?"),
        AIMessage(
            "",
            tool_calls=[
                _tool_call("weather", {"city": "Paris"}, "call_a"),
                _tool_call("weather", {"city": "Rome"}, "call_b"),
            ],
        ),
        ToolMessage("sunny", tool_call_id="call_a"),
        HumanMessage("and?"),
    ]
    with pytest.raises(openai.BadRequestError) as info:
        make_llm(server).invoke(messages)
    assert isinstance(info.value, ModelInvalidRequestError)
    assert (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b" in str(info.value)
    )
    assert _error(server)["param"] == "messages.[1].role"


def test_reject_unanswered_tool_calls_at_end_stream(server):
    messages = [HumanMessage("x"), AIMessage("", tool_calls=[_tool_call("t", {}, "call_z")])]
    with pytest.raises(openai.BadRequestError, match="did not have response messages: call_z"):
        list(make_llm(server).stream(messages))


def _assert_overflow(exc: BaseException, limit: int | None = None, n: int | None = None) -> None:
    """What a user sees for an over-limit prompt with the installed versions.

    The server answers exactly like the real API (400, code ``context_length_exceeded``).
    langchain-openai 1.7.4 only maps that to ``ContextOverflowError`` when
    ``"context_length_exceeded" in str(e)``; but openai 3.57's exception text is
    ``"Error code: 400 - <message>"`` (message only, no code), so the check misses and
    ChatOpenAI raises ``OpenAIInvalidRequestError`` (an ``openai.BadRequestError`` and
    ``ModelInvalidRequestError``), *not* ``ContextOverflowError``.  Detect overflow via
    ``exc.code == "context_length_exceeded"`` (or ``exc.body["code"]``).
    """
    assert isinstance(exc, openai.BadRequestError)
    assert exc.status_code == 400
    assert exc.code == "context_length_exceeded"
    assert exc.body["code"] == "context_length_exceeded" and exc.body["param"] == "messages"
    assert "maximum context length is" in str(exc)
    if limit is not None:
        assert (
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {n} tokens. Please reduce the length of the messages." in str(exc)
        )
    # Pins the installed-version behaviour described above; if this starts failing,
    # langchain-openai/openai fixed the mapping and ContextOverflowError is raised.
    assert isinstance(exc, ModelInvalidRequestError) and not isinstance(exc, ContextOverflowError), (
        "langchain-openai now maps context_length_exceeded to ContextOverflowError"
    )


def test_context_limit_rejects_and_is_changeable_at_runtime(server):
    llm = make_llm(server)
    messages = [HumanMessage("word " * 50)]
    n = count_prompt_tokens([{"role": "user", "content": "word " * 50}])
    server.context_limit = n - 1
    with pytest.raises(openai.BadRequestError) as info:
        llm.invoke(messages)
    _assert_overflow(info.value, n - 1, n)
    err = _error(server)
    assert err["code"] == "context_length_exceeded" and err["param"] == "messages"

    server.context_limit = n  # exactly at the limit is fine
    assert llm.invoke(messages).usage_metadata["input_tokens"] == n
    server.context_limit = None
    assert llm.invoke(messages).content


@pytest.mark.asyncio
async def test_context_limit_async_and_stream(server):
    server.context_limit = 5
    with pytest.raises(openai.BadRequestError) as info:
        await make_llm(server).ainvoke("this is definitely longer than five tokens")
    _assert_overflow(info.value)
    with pytest.raises(openai.BadRequestError) as info:
        async for _ in make_llm(server).astream("this is definitely longer than five tokens"):
            pass
    _assert_overflow(info.value)
    assert len(server.errors) == 2


# ---------------------------------------------------------------- plumbing


def test_models_endpoint_and_unknown_path(server):
    with urllib.request.urlopen(server.base_url + "/models", timeout=5) as resp:
        data = json.loads(resp.read())
    assert data["object"] == "list" and data["data"][0]["id"] == "gpt-4o-mini"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.base_url + "/nope", timeout=5)
    assert info.value.code == 404
    assert "error" in json.loads(info.value.read())


def test_raw_non_stream_shape(server):
    server.responder = [{"content": "hi", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]}]
    req = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        data = json.loads(resp.read())
    assert data["object"] == "chat.completion"
    assert {"id", "created", "model", "choices", "usage"} <= set(data)
    message = data["choices"][0]["message"]
    assert message["role"] == "assistant" and message["content"] == "hi"
    call = message["tool_calls"][0]
    assert call["type"] == "function" and json.loads(call["function"]["arguments"]) == {"a": 1}
    assert data["choices"][0]["finish_reason"] == "tool_calls"
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]


def test_start_stop_context_manager():
    with StrictOpenAIServer(responder=lambda body: {"content": "own server"}, context_limit=1000) as srv:
        url = srv.base_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert make_llm(srv).invoke("hi").content == "own server"
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=2)


def test_langgraph_stream_mode_messages_streams_over_sse(server):
    from langgraph.graph import START, MessagesState, StateGraph

    llm = make_llm(server)
    server.responder = [{"content": "streamed through langgraph"}]

    def agent(state: MessagesState):
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    app = graph.compile()
    pieces = [chunk.content for chunk, _meta in app.stream({"messages": [HumanMessage("hi")]}, stream_mode="messages")]
    assert len(pieces) > 2
    assert "".join(pieces) == "streamed through langgraph"
    assert server.requests[-1]["stream"] is True
