"""The literal swap: a LangChain app's ``SummarizationMiddleware(...)`` becomes ``CompactionMiddleware(...)``, unchanged.

LangChain's own middleware test cases (its constructor, ``summarizer=``,
``trim_tokens_to_summarize=``, a summary prompt of only ``{messages}``, a kept
tail at or above the trigger, canned test models, the deprecated names), each
run through ``create_agent`` with the class name swapped and nothing else.
"""

from __future__ import annotations

import logging
from itertools import cycle

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import TOOLS, ToolCallingModel, request

from langgraph_compaction import CompactionMiddleware, is_summary
from langgraph_compaction.core.sections import section
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "t"}}


def _run(middleware, requests: int = 6, model=None) -> tuple[list[BaseMessage], ToolCallingModel]:
    """Run a create_agent session of ``requests`` requests (two tool calls each); return its messages and model."""
    model = model or ToolCallingModel()
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    for n in range(requests):
        agent.invoke({"messages": [request(n)]}, THREAD)
    return agent.get_state(THREAD).values["messages"], model


def _summaries(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if m.additional_kwargs.get("lc_source") == "summarization"]


def _canned(text: str = "Generated summary: the user checked modules 0 to 3.") -> GenericFakeChatModel:
    """LangChain's canned test model, answering ``text`` to everything."""
    return GenericFakeChatModel(messages=cycle([AIMessage(text)]))


#: One LangChain app's middleware arguments, as its own tests write them.
LANGCHAIN_ARGUMENTS = dict(
    trigger=("tokens", 6_000),
    keep=("messages", 4),
    token_counter=count_tokens_approximately,
    summary_prompt="Custom prompt: {messages}",
    trim_tokens_to_summarize=4_000,
)


def test_the_literal_swap_runs_and_the_canned_summary_is_the_summary(tmp_path):
    langchains, _ = _run(SummarizationMiddleware(_canned(), **LANGCHAIN_ARGUMENTS))
    ours, _ = _run(CompactionMiddleware(_canned(), **LANGCHAIN_ARGUMENTS))

    for messages in (langchains, ours):
        [summary] = _summaries(messages)  # LangChain's own marker, on both
        assert "Generated summary: the user checked modules 0 to 3." in summary.text
    summary = _summaries(ours)[0]
    assert is_summary(summary) and "Generated summary" in section(summary.text, "SUMMARY")
    assert "<request>\nTask 0: please check module0 and its documentation\n</request>" in summary.text
    assert sum(isinstance(m, HumanMessage) and not is_summary(m) for m in ours) <= 6


def test_a_summary_prompt_of_only_messages_is_sent_and_its_free_text_answer_used(tmp_path):
    summarizer = ScriptedModel(summary=lambda prompt: "The user had modules 0-3 checked; all tests passed.")
    prompt = "Context Extraction Assistant: summarize this conversation in a paragraph.\n\n{messages}"
    messages, _ = _run(
        CompactionMiddleware(summarizer, trigger=("tokens", 6_000), keep=("messages", 4), summary_prompt=prompt)
    )

    [summary] = _summaries(messages)
    assert section(summary.text, "SUMMARY") == "The user had modules 0-3 checked; all tests passed."
    sent = next(c for c in summarizer.calls if "summarize this conversation in a paragraph" in c)
    assert "Task 0: please check module0" in sent


def test_trim_tokens_to_summarize_sends_only_the_newest_messages():
    summarizer = ScriptedModel()
    middleware = CompactionMiddleware(
        summarizer, trigger=("tokens", 6_000), keep=("messages", 2), trim_tokens_to_summarize=1_500
    )
    _run(middleware, requests=4)

    sent = [c for c in summarizer.calls if "Context Extraction Assistant" in c]
    assert sent
    assert "Task 0: please check module0" not in sent[0]  # the oldest request is left out
    assert count_tokens_approximately([HumanMessage(sent[0])]) < 3_500  # the prompt and ~1,500 tokens of history


def _summarize(messages: list[BaseMessage]) -> str:
    """A summarizer that is no model: it names the requests it was given."""
    asked = [m.text.split(":")[0] for m in messages if isinstance(m, HumanMessage) and not is_summary(m)]
    return f"Handled {', '.join(asked)}."


async def _asummarize(messages: list[BaseMessage]) -> str:
    return _summarize(messages)


@pytest.mark.parametrize(
    "summarizer",
    [_summarize, RunnableLambda(_summarize), "chat-model"],
    ids=["function", "runnable", "chat-model"],
)
def test_a_summarizer_writes_the_summary_and_model_gives_the_window(summarizer):
    model = ScriptedModel(profile={"max_input_tokens": 40_000})
    if summarizer == "chat-model":
        summarizer = _canned("Handled Task 0, Task 1.")
    middleware = CompactionMiddleware(model, trigger=("fraction", 0.15), keep=("messages", 4), summarizer=summarizer)
    messages, _ = _run(middleware)

    assert middleware.nodes.budget.trigger_tokens == 6_000  # 15 % of the window of ``model``
    [summary] = _summaries(messages)
    assert section(summary.text, "SUMMARY") in ("Handled Task 0, Task 1.", "Handled Task 2, Task 3.")
    assert not [c for c in model.calls if "Context Extraction Assistant" in c]  # model writes no summary


async def test_an_async_summarizer_function_is_awaited():
    middleware = CompactionMiddleware(
        ScriptedModel(), trigger=("tokens", 6_000), keep=("messages", 4), summarizer=_asummarize
    )
    agent = create_agent(ToolCallingModel(), TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    for n in range(6):
        await agent.ainvoke({"messages": [request(n)]}, THREAD)
    [summary] = _summaries((await agent.aget_state(THREAD)).values["messages"])
    assert section(summary.text, "SUMMARY").startswith("Handled Task ")


@pytest.mark.parametrize(
    ("trigger", "keep"),
    [
        (("fraction", 0.8), ("fraction", 0.8)),
        (("fraction", 0.1), ("fraction", 0.5)),
        (("messages", 6), ("messages", 12)),
    ],
    ids=["equal-fractions", "keep-above-trigger", "messages"],
)
def test_a_tail_at_or_above_the_trigger_is_taken_and_compacts_only_what_outgrows_it(trigger, keep, caplog):
    model = ScriptedModel(profile={"max_input_tokens": 30_000})
    with caplog.at_level(logging.INFO, logger="langgraph_compaction"):
        middleware = CompactionMiddleware(model, trigger=trigger, keep=keep)
    [said] = [r.getMessage() for r in caplog.records if "is not below the trigger" in r.getMessage()]
    assert "as in LangChain's SummarizationMiddleware" in said

    messages, agent_model = _run(middleware, requests=8)
    budget = middleware.nodes.budget
    if keep[0] == "messages":
        assert budget.trigger_messages == keep[1] + 1
    else:
        assert budget.keep_tokens < budget.trigger_tokens <= int(30_000 * keep[1]) + 1
    largest = max(count_tokens_approximately(sent) for sent in agent_model.inputs)
    assert largest <= 30_000  # never over the window


def test_config_may_be_a_dict():
    middleware = CompactionMiddleware(ScriptedModel(), config={"context_window": 50_000, "background": False})
    assert middleware.nodes.budget.context_window == 50_000 and not middleware.nodes.config.background.enabled


def test_langchains_deprecated_names_still_work_with_its_warning():
    with pytest.warns(DeprecationWarning, match="max_tokens_before_summary is deprecated"):
        middleware = CompactionMiddleware(ScriptedModel(), max_tokens_before_summary=5_000)
    assert middleware.nodes.budget.trigger_tokens == 5_000
    with pytest.warns(DeprecationWarning, match="messages_to_keep is deprecated"):
        middleware = CompactionMiddleware(ScriptedModel(), messages_to_keep=5)
    assert middleware.nodes.config.keep_messages == 5
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_tokens'"):
        CompactionMiddleware(ScriptedModel(), max_tokens=5)


def test_a_refused_summary_is_one_readable_log_line(caplog):
    refusing = _canned("I'm sorry, but I can't help with that.")
    with caplog.at_level(logging.WARNING, logger="langgraph_compaction"):
        _run(CompactionMiddleware(refusing, trigger=("tokens", 6_000), keep=("messages", 4)), requests=5)
    lines = [r.getMessage() for r in caplog.records if "declined" in r.getMessage()]
    assert lines and all("\n" not in line and "{" not in line for line in lines)
    assert "the summarizer declined: \"I'm sorry, but I can't help with that.\"" in lines[0]
