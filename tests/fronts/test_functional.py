"""compact_messages / acompact_messages: an ``@entrypoint`` agent that keeps its own history, for 22 requests."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from support.fronts import CONFIG, REQUESTS, TOOLS, WINDOW, Session, ToolCallingModel, request, summaries_counted

from langgraph_compaction import CompactionConfig, FileStorage, acompact_messages, compact_messages, is_summary
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.core.tokens import estimate_tokens
from langgraph_compaction.testing import ScriptedModel

BY_NAME = {t.name: t for t in TOOLS}


@task
def call_tool(call: dict):
    return BY_NAME[call["name"]].invoke({**call, "type": "tool_call"})


def _sync_agent(model, storage, kept: dict, settings=CONFIG):
    llm, summarizer = model.bind_tools(TOOLS), ScriptedModel()

    @entrypoint(checkpointer=InMemorySaver())
    def agent(new: HumanMessage, *, previous=None, config):
        history = [*(previous or {}).get("messages", []), new]
        compaction = (previous or {}).get("compaction")
        while True:
            result = compact_messages(
                history,
                model=summarizer,
                config=settings,
                storage=storage,
                thread_id=config["configurable"]["thread_id"],
                state=compaction,
                agent_model=llm,
            )
            history, compaction = result.messages, result.state
            reply = llm.invoke(result.view)
            history.append(reply)
            if not reply.tool_calls:
                kept.update(messages=history, compaction=compaction)
                return entrypoint.final(value=reply, save=dict(kept))
            history += [future.result() for future in [call_tool(c) for c in reply.tool_calls]]

    return agent


def _async_agent(model, storage, kept: dict):
    llm, summarizer = model.bind_tools(TOOLS), ScriptedModel()

    @entrypoint(checkpointer=InMemorySaver())
    async def agent(new: HumanMessage, *, previous=None, config):
        history = [*(previous or {}).get("messages", []), new]
        compaction = (previous or {}).get("compaction")
        while True:
            result = await acompact_messages(
                history,
                model=summarizer,
                config=CONFIG,
                storage=storage,
                thread_id=config["configurable"]["thread_id"],
                state=compaction,
            )
            history, compaction = result.messages, result.state
            reply = await llm.ainvoke(history)
            history.append(reply)
            if not reply.tool_calls:
                kept.update(messages=history, compaction=compaction)
                return entrypoint.final(value=reply, save=dict(kept))
            history += [await future for future in [call_tool(c) for c in reply.tool_calls]]

    return agent


def _exchange(n: int) -> list:
    """Return request ``n`` and a long answer (about 1,400 tokens together)."""
    return [request(n), AIMessage(f"Answer {n}: " + "detail " * 1_000, id=f"answer-{n}")]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_entrypoint_agent_stays_valid_inside_the_window_and_loses_nothing(tmp_path, mode):
    model = ToolCallingModel()
    saved: dict = {}  # what the agent saves for its next call (``previous``)
    agent = (_sync_agent if mode == "sync" else _async_agent)(model, tmp_path, saved)
    session = Session(model)
    config = {"configurable": {"thread_id": mode}}
    for n in range(REQUESTS):
        if mode == "sync":
            agent.invoke(request(n), config)
        else:
            await agent.ainvoke(request(n), config)
        session.check(request(n))

    assert len(model.inputs) == 2 * REQUESTS
    assert session.problems == []
    assert session.peak <= WINDOW
    assert session.summaries_seen() >= 2
    # the state passed back each call chains the summaries: one count per summary the model saw
    assert summaries_counted(saved["compaction"]) == session.summaries_seen()
    assert session.lost(saved["messages"], tmp_path, mode) == []


def test_in_view_mode_the_history_is_kept_whole_and_the_model_is_sent_the_view(tmp_path):
    model, saved = ToolCallingModel(), {}
    agent = _sync_agent(model, tmp_path, saved, CompactionConfig(context_window=WINDOW, mode="view"))
    session = Session(model)
    for n in range(REQUESTS):
        agent.invoke(request(n), {"configurable": {"thread_id": "view"}})
        session.check(request(n))

    history = saved["messages"]
    assert len(history) == 5 * REQUESTS and not any(is_summary(m) for m in history)  # request, call, 2 results, answer
    assert session.problems == [] and session.peak <= WINDOW
    assert summaries_counted(saved["compaction"]) == session.summaries_seen() >= 2
    current = [m for m in model.inputs[-1] if is_summary(m)]
    assert session.lost(history + current, tmp_path, "view") == []


def test_a_short_history_comes_back_unchanged_with_ids_and_a_state_to_pass_back(tmp_path):
    history = [HumanMessage("hello"), AIMessage("hi")]
    result = compact_messages(history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="t")
    assert [m.content for m in result.messages] == ["hello", "hi"]
    assert all(m.id for m in result.messages)
    assert result.events == []
    assert result.state["summary_id"] is None and result.state["counts"] == {}


def test_a_manual_request_in_the_state_summarizes_now(tmp_path):
    history = _long_history()
    result = compact_messages(
        history,
        model=ScriptedModel(),
        config=CONFIG,
        storage=tmp_path,
        thread_id="t",
        state={"manual": {"focus": "answers"}},
    )
    assert is_summary(result.messages[0]) and result.messages[-1].id == history[-1].id
    assert result.state["counts"] == {"summarize": 1}
    assert [e["stage"] for e in result.events][-1] == "summarize"


def test_the_tool_schemas_the_agent_sends_are_counted(tmp_path):
    # a history just under the trigger alone, over it with about 2,000 tokens of tool schemas
    trigger, history, n = CONFIG.resolve().trigger_tokens, [], 0
    while estimate_tokens([*history, *_exchange(n)]) < trigger - 300:
        history, n = [*history, *_exchange(n)], n + 1
    manual = [
        {
            "name": f"tool_{i}",
            "description": "Look up a record. " * 60,
            "parameters": {"type": "object", "properties": {}},
        }
        for i in range(8)
    ]
    agent_model = ToolCallingModel().bind_tools([{"type": "function", "function": schema} for schema in manual])
    alone = compact_messages(history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="a")
    counted = compact_messages(
        history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="b", agent_model=agent_model
    )
    assert not any(is_summary(m) for m in alone.messages)
    assert is_summary(counted.messages[0])


class FullDisk(FileStorage):
    """A storage whose transcript cannot be written (the disk is full)."""

    def append_transcript(self, thread_id, records):
        raise OSError(28, "No space left on device")


def _long_history():
    return [m for n in range(6) for m in _exchange(n)]


def test_a_failing_summarizer_or_disk_loses_no_message_and_says_why(tmp_path):
    history = _long_history()
    manual = {"manual": {"focus": None}}
    down = compact_messages(
        history,
        model=ScriptedModel(summary=RuntimeError("summarizer down")),
        config=CONFIG,
        storage=tmp_path,
        thread_id="t",
        state=manual,
    )
    full = compact_messages(
        history, model=ScriptedModel(), config=CONFIG, storage=FullDisk(tmp_path), thread_id="u", state=manual
    )
    for result in (down, full):
        assert [m.id for m in result.messages] == [m.id for m in history]  # nothing removed
        assert result.state["last_error"] and any(e.get("error") for e in result.events)
    assert "summarizer down" in down.state["last_error"]
    assert any("No space left" in e.get("error", "") for e in full.events if e["stage"] == "offload")
    assert full.state["last_error"] == "offload did not complete; nothing was removed"


def test_a_missing_thread_id_is_a_clear_error():
    with pytest.raises(ValueError, match="thread_id is required"):
        compact_messages([HumanMessage("hi")], model=ScriptedModel(), thread_id="")


def test_an_id_less_history_of_openai_dicts_is_summarized_and_offloaded_once_per_message(tmp_path):
    # an app of any framework: its history is OpenAI-style dicts without ids, `.state` is passed back each call
    summarizer = ScriptedModel()
    settings = CompactionConfig(context_window=12_000, mode="view")
    history, compaction = [], None
    for turn in range(14):
        history.append({"role": "user", "content": f"Turn {turn}: " + "please look at the logs again " * 60})
        result = compact_messages(
            history, model=summarizer, config=settings, storage=tmp_path, thread_id="app", state=compaction
        )
        compaction = result.state
        history.append({"role": "assistant", "content": f"Answer {turn}: " + "the logs show nothing new " * 60})
    summaries = len([c for c in summarizer.calls if "Context Extraction Assistant" in str(c)])
    compactions = compaction["counts"].get("summarize", 0)
    assert 1 <= compactions <= 2  # 14 turns of ~900 tokens on a 12k window: not one compaction per call
    assert summaries <= 2 * compactions  # (a summary may take two calls), not the whole history again each call
    lines = FileStorage(tmp_path).read_transcript("app")
    ids = [line["data"]["id"] for line in lines if not line["data"]["id"].startswith(SUMMARY_MESSAGE_NAME)]
    assert len(ids) == len(set(ids)) <= 28  # each message of the history once (and the summaries made)
    # the ids are the same at every call: derived from each message's place and content
    again = compact_messages(history[:2], model=summarizer, config=settings, thread_id="other", state=None)
    assert [m.id for m in again.messages] == ids[:2]
