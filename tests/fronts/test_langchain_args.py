"""LangChain's own arguments on every front: a model name, ``trigger``, ``keep``, ``token_counter``, ``summary_prompt``.

A user coming from LangChain's ``SummarizationMiddleware`` writes
``model="openai:gpt-4o-mini"``, ``trigger=("tokens", 4000)``,
``keep=("messages", 20)``; each front takes them with LangChain's meaning:
driven side by side with LangChain's own middleware over the same agent, the
history is compacted at the same turns and keeps the same messages. Model
names are resolved by LangChain's ``init_chat_model`` and reach the strict
local OpenAI-compatible server (tests/support/openai_server.py), offline.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from support.fronts import TOOLS, ToolCallingModel, request

from langgraph_compaction import (
    CompactionConfig,
    CompactionMiddleware,
    CompactionState,
    acompact_messages,
    add_compaction,
    compact_messages,
    is_summary,
    make_pre_model_hook,
)
from langgraph_compaction.testing import ScriptedModel

with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent, and still used
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

SUMMARY_MARKER = "Context Extraction Assistant"
MEMORY_MARKER = "memory extraction assistant"
#: An answer of about 700 tokens: a summary of a few of them is shorter than they are.
ANSWER = "The billing service is healthy: " + "invoice batch checked, totals match the ledger; " * 60


@pytest.fixture
def openai_env(openai_server, monkeypatch):
    """Point LangChain's OpenAI models at the local server with a key that is not a real one."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    return openai_server


def _shape(messages: list) -> str:
    """Return the history as one letter a message: S a summary, h the user, a the assistant, t a tool result."""
    summary = lambda m: is_summary(m) or m.text.startswith("Here is a summary of the conversation")  # noqa: E731
    return "".join("S" if summary(m) else {"human": "h", "ai": "a", "tool": "t"}[m.type] for m in messages)


def _agent_shapes(middleware, requests: int = 8) -> list[str]:
    """Return the history's shape after each request of a create_agent session (two tool calls a request)."""
    agent = create_agent(ToolCallingModel(), TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    shapes = []
    for n in range(requests):
        agent.invoke({"messages": [request(n)]}, config)
        shapes.append(_shape(agent.get_state(config).values["messages"]))
    return shapes


# -- model names


def test_a_model_name_summarizes_and_flushes_through_the_provider(openai_env, tmp_path):
    middleware = CompactionMiddleware(
        model="openai:gpt-4o-mini",
        flush_model="gpt-4o-mini",
        config=CompactionConfig(context_window=30_000),
        storage=tmp_path,
    )
    assert openai_env.requests == []  # building it called nobody
    agent = create_agent(ToolCallingModel(), TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for n in range(8):
        agent.invoke({"messages": [request(n)]}, config)

    texts = [body["messages"][-1]["content"] for body in openai_env.requests]
    assert any(SUMMARY_MARKER in t for t in texts) and any(MEMORY_MARKER in t for t in texts)
    summary = next(m for m in agent.get_state(config).values["messages"] if is_summary(m))
    assert "earlier message(s) were condensed" in summary.text  # the server's summary, not an extractive one
    assert openai_env.errors == []


def test_a_summarizer_name_writes_the_summary_and_model_only_gives_the_window(openai_env, tmp_path):
    model = ScriptedModel(profile={"max_input_tokens": 30_000})
    middleware = CompactionMiddleware(model, summarizer="openai:gpt-4o-mini", storage=tmp_path)
    assert openai_env.requests == [] and middleware.nodes.budget.context_window == 30_000
    agent = create_agent(ToolCallingModel(), TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for n in range(8):
        agent.invoke({"messages": [request(n)]}, config)

    texts = [body["messages"][-1]["content"] for body in openai_env.requests]
    assert any(SUMMARY_MARKER in t for t in texts)  # the named summarizer was asked
    assert not any(SUMMARY_MARKER in c for c in model.calls)  # model was not
    summary = next(m for m in agent.get_state(config).values["messages"] if is_summary(m))
    assert "earlier message(s) were condensed" in summary.text
    assert openai_env.errors == []


async def test_a_model_name_reaches_the_provider_from_compact_messages(openai_env, tmp_path):
    history = [HumanMessage(f"Question {n} about billing", id=f"h{n}") for n in range(4)]
    history = [m for h in history for m in (h, AIMessage(ANSWER, id=f"a-{h.id}"))]

    result = await acompact_messages(
        history,
        model="openai:gpt-4o-mini",
        thread_id="t",
        storage=tmp_path,
        trigger=("messages", 6),
        keep=("messages", 2),
    )

    assert _shape(result.messages) == "Sha"
    assert "earlier message(s) were condensed" in result.messages[0].text


@pytest.mark.parametrize("name", ["no-such-model", "nonsense:gpt-4o-mini", "openai:", ""])
def test_a_name_that_names_no_model_is_refused_when_the_middleware_is_built(name):
    with pytest.raises(ValueError, match=r"model=.*names no model") as refused:
        CompactionMiddleware(model=name)
    assert "'openai:gpt-4o-mini'" in str(refused.value)  # the form that works


def test_a_flush_model_name_that_names_no_model_is_refused_too():
    with pytest.raises(ValueError, match=r"flush_model='no-such-model' names no model"):
        CompactionMiddleware(model=ScriptedModel(), flush_model="no-such-model")


def test_a_name_without_the_providers_key_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match=r"model='openai:gpt-4o-mini' could not be built: .*OPENAI_API_KEY"):
        CompactionMiddleware(model="openai:gpt-4o-mini")


def test_something_that_is_no_model_is_refused():
    with pytest.raises(TypeError, match=r"model must be a chat model, a model name .* not int"):
        compact_messages([HumanMessage("hi")], model=42, thread_id="t")


def test_without_langchain_instances_work_and_a_name_says_which_extra_to_install(tmp_path):
    script = (
        "import sys; sys.modules['langchain'] = None\n"  # as if langchain were not installed
        "from langgraph.graph import StateGraph\n"
        "from langgraph_compaction import CompactionState, add_compaction\n"
        "from langgraph_compaction.testing import ScriptedModel\n"
        "def graph():\n"
        "    builder = StateGraph(CompactionState)\n"
        "    builder.add_node('agent', lambda state: {})\n"
        "    builder.set_entry_point('agent')\n"
        "    return builder\n"
        f"add_compaction(graph(), before='agent', model=ScriptedModel(), storage={str(tmp_path)!r})\n"
        "try:\n"
        "    add_compaction(graph(), before='agent', model='openai:gpt-4o-mini')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "model='openai:gpt-4o-mini' is a model name" in out
    assert "pip install 'langgraph-compaction[agents]'" in out


# -- trigger and keep, side by side with LangChain's SummarizationMiddleware

SIDE_BY_SIDE = {
    "messages": dict(trigger=("messages", 12), keep=("messages", 4)),
    "tokens": dict(trigger=("tokens", 6_000), keep=("tokens", 2_500), token_counter=count_tokens_approximately),
    "any of a list": dict(
        trigger=[("tokens", 9_000), ("messages", 14)], keep=("messages", 5), token_counter=count_tokens_approximately
    ),
    "all of a dict": dict(
        trigger={"messages": 12, "tokens": 5_000}, keep=("messages", 4), token_counter=count_tokens_approximately
    ),
    "a tail above the trigger": dict(trigger=("messages", 6), keep=("messages", 10)),
}


@pytest.mark.parametrize("case", SIDE_BY_SIDE)
def test_create_agent_compacts_where_langchains_middleware_does_and_keeps_the_same(case, tmp_path):
    arguments = SIDE_BY_SIDE[case]

    # blocking, as LangChain's middleware is: a background summary is prepared before the trigger and its cut
    # falls earlier (the same trigger and tail, a shape of its own)
    blocking = CompactionConfig(background=False)
    ours = _agent_shapes(
        CompactionMiddleware(ScriptedModel(), config=blocking, storage=tmp_path, add_tools=False, **arguments)
    )
    langchains = _agent_shapes(SummarizationMiddleware(ScriptedModel(), **arguments))

    assert ours == langchains
    assert sum(shape.startswith("S") for shape in ours) >= 4  # it did compact, more than once


def test_fractions_are_shares_of_the_models_window_as_in_langchain(tmp_path):
    arguments = dict(trigger=("fraction", 0.3), keep=("fraction", 0.125), token_counter=count_tokens_approximately)
    summarizer = ScriptedModel(profile={"max_input_tokens": 20_000})

    middleware = CompactionMiddleware(summarizer, storage=tmp_path, add_tools=False, **arguments)
    ours = _agent_shapes(middleware)
    langchains = _agent_shapes(SummarizationMiddleware(summarizer, **arguments))

    assert (middleware.nodes.budget.trigger_tokens, middleware.nodes.budget.keep_tokens) == (6_000, 2_500)
    assert ours == langchains and sum(shape.startswith("S") for shape in ours) >= 4


def test_a_fraction_without_a_known_window_is_refused_when_built():
    with pytest.raises(ValueError, match=r"trigger=\('fraction', 0.8\).*window.*unknown.*context_window"):
        CompactionMiddleware(ScriptedModel(), trigger=("fraction", 0.8))
    with pytest.raises(ValueError, match=r"keep=\('fraction', 0.1\).*context_window"):
        CompactionMiddleware(ScriptedModel(), keep=("fraction", 0.1))
    # a window from the settings is enough
    built = CompactionMiddleware(
        ScriptedModel(), trigger=("fraction", 0.8), config=CompactionConfig(context_window=50_000)
    )
    assert built.nodes.budget.trigger_tokens == 40_000


# -- every front takes them


def _history(turns: int) -> list:
    return [m for n in range(turns) for m in (HumanMessage(f"Question {n}", id=f"h{n}"), AIMessage(ANSWER, id=f"a{n}"))]


def _graph_front(tmp_path, **arguments):
    model = ScriptedModel(reply=ANSWER)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", model=ScriptedModel(), storage=tmp_path, **arguments)
    return builder.compile(checkpointer=InMemorySaver())


def _prebuilt_front(tmp_path, **arguments):
    hook = make_pre_model_hook(model=ScriptedModel(), storage=tmp_path, **arguments)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(
            ScriptedModel(reply=ANSWER),
            [],
            pre_model_hook=hook,
            state_schema=hook.state_schema,
            checkpointer=InMemorySaver(),
        )


def _middleware_front(tmp_path, **arguments):
    middleware = CompactionMiddleware(ScriptedModel(), storage=tmp_path, add_tools=False, **arguments)
    return create_agent(ScriptedModel(reply=ANSWER), [], middleware=[middleware], checkpointer=InMemorySaver())


def _functional_shapes(tmp_path, turns: int, **arguments) -> list[str]:
    """Return the history's shape after each turn of an app that compacts before every model call."""
    history: list = []
    state = None
    shapes = []
    for n in range(turns):
        history.append(HumanMessage(f"Question {n}", id=f"h{n}"))
        result = compact_messages(
            history, model=ScriptedModel(), thread_id="t", state=state, storage=tmp_path, **arguments
        )
        history, state = [*result.messages, AIMessage(ANSWER, id=f"a{n}")], result.state
        shapes.append(_shape(history))
    return shapes


@pytest.mark.parametrize("front", ["graph", "prebuilt", "middleware", "functional"])
def test_every_front_takes_trigger_and_keep(front, tmp_path):
    arguments = dict(trigger=("messages", 6), keep=("messages", 2))
    if front == "functional":
        shapes = _functional_shapes(tmp_path, 6, **arguments)
    else:
        build = {"graph": _graph_front, "prebuilt": _prebuilt_front, "middleware": _middleware_front}[front]
        app = build(tmp_path, **arguments)
        config = {"configurable": {"thread_id": "t"}}
        shapes = []
        for n in range(6):
            app.invoke({"messages": [HumanMessage(f"Question {n}", id=f"h{n}")]}, config)
            shapes.append(_shape(app.get_state(config).values["messages"]))

    # at the fourth model call there are 7 messages: the summary and the newest 2 stay, then the answer
    assert shapes == ["ha", "haha", "hahaha", "Saha", "Sahaha", "Saha"]


# -- bad arguments and settings given twice


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (dict(trigger=("token", 4000)), "trigger"),
        (dict(trigger=("tokens", 0)), "trigger"),
        (dict(trigger=("tokens", 4000.5)), "trigger"),
        (dict(trigger=("messages", True)), "trigger"),
        (dict(trigger=("fraction", 1.5)), "trigger"),
        (dict(trigger="tokens"), "trigger"),
        (dict(trigger=[]), "trigger"),
        (dict(trigger={"turns": 10}), "trigger"),
        (dict(trigger={"messages": 0}), "trigger"),
        (dict(trigger=[("tokens", 4000), ["messages", 10]]), "trigger"),
        (dict(keep=[("messages", 20)]), "keep"),
        (dict(keep=("fraction", 0)), "keep"),
    ],
)
def test_a_bad_pair_is_refused_naming_the_argument_and_the_accepted_forms(arguments, named):
    with pytest.raises(ValueError, match=rf"^{named}=.*\('tokens', n\), \('messages', n\) or \('fraction', f\)"):
        CompactionMiddleware(ScriptedModel(), **arguments)


@pytest.mark.parametrize(
    "trigger",
    [
        {},
        {"tokens": 4000, "fraction": 0.5},
        [{"messages": 10, "tokens": 4000}, {"messages": 5, "tokens": 9000}],
    ],
    ids=["empty", "tokens-and-fraction", "two-message-clauses"],
)
def test_a_clause_this_package_cannot_say_is_refused_with_what_to_write(trigger):
    with pytest.raises(ValueError, match=r"^trigger=.*(at least one of|one may count messages and tokens)"):
        CompactionMiddleware(ScriptedModel(), trigger=trigger)


def test_the_arguments_add_to_the_config_and_win_over_its_defaults(tmp_path):
    config = CompactionConfig(context_window=32_000, background={"enabled": True})

    nodes = CompactionMiddleware(ScriptedModel(), config=config, storage=tmp_path, trigger=("tokens", 4_000)).nodes

    assert nodes.config.context_window == 32_000 and nodes.config.background.enabled  # the config's own settings stay
    assert (nodes.budget.trigger_tokens, nodes.budget.trigger_messages) == (4_000, 0)  # tokens only, as LangChain
    assert nodes.budget.hard_limit == 32_000


@pytest.mark.parametrize(
    ("config", "arguments", "named"),
    [
        (CompactionConfig(trigger_tokens=8_000), dict(trigger=("tokens", 4_000)), r"trigger=\('tokens', 4000\) sets "),
        (CompactionConfig(trigger_messages=30), dict(trigger=("tokens", 4_000)), r"trigger_messages=0 .* sets"),
        (CompactionConfig(keep_tokens=3_000), dict(keep=("messages", 20)), r"keep=\('messages', 20\) sets keep_tokens"),
        (
            CompactionConfig(summary={"prompt": DEFAULT_SUMMARY_PROMPT}),
            dict(summary_prompt="{messages}" + DEFAULT_SUMMARY_PROMPT),
            "summary_prompt= sets",
        ),
    ],
)
def test_an_argument_that_contradicts_the_config_is_refused_naming_both(config, arguments, named):
    with pytest.raises(ValueError, match=named) as refused:
        make_pre_model_hook(model=ScriptedModel(), config=config, **arguments)
    assert "but config sets" in str(refused.value)


def test_a_guard_the_config_states_stays_next_to_a_message_trigger(tmp_path):
    config = CompactionConfig(guards={"trigger_messages_min_tokens": 5_000})

    nodes = make_pre_model_hook(model=ScriptedModel(), config=config, trigger=("messages", 6)).nodes

    assert (nodes.budget.trigger_messages, nodes.budget.messages_min_tokens) == (6, 5_000)


# -- token_counter and summary_prompt


def test_the_token_counter_decides_the_token_trigger(tmp_path):
    thousand_each = lambda messages: 1_000 * len(list(messages))  # noqa: E731
    history = [HumanMessage(f"Question {n}", id=f"h{n}") for n in range(6)]

    kept = compact_messages(
        history[:4],
        model=ScriptedModel(),
        thread_id="a",
        storage=tmp_path,
        trigger=("tokens", 5_000),
        token_counter=thousand_each,
        keep=("messages", 1),
    )
    compacted = compact_messages(
        history[:5],
        model=ScriptedModel(),
        thread_id="b",
        storage=tmp_path,
        trigger=("tokens", 5_000),
        token_counter=thousand_each,
        keep=("messages", 1),
    )

    assert _shape(kept.messages) == "hhhh"  # 4,000 by that counter
    assert _shape(compacted.messages) == "Sh"  # 5,000


def test_langchains_default_prompt_is_taken_as_the_summary_prompt(tmp_path):
    summarizer = ScriptedModel()

    result = compact_messages(
        _history(4),
        model=summarizer,
        thread_id="t",
        storage=tmp_path,
        summary_prompt=DEFAULT_SUMMARY_PROMPT,
        trigger=("messages", 6),
        keep=("messages", 2),
    )

    assert _shape(result.messages) == "Sha"
    prompt = next(c for c in summarizer.calls if SUMMARY_MARKER in c)
    assert "Messages to summarize:" in prompt  # LangChain's wording, the conversation put at its {messages}


def test_a_summary_prompt_of_only_messages_is_taken_and_one_without_them_says_how_to_fix_it():
    middleware = CompactionMiddleware(ScriptedModel(), summary_prompt="Summarize this conversation:\n{messages}")
    assert middleware.nodes.config.summary.prompt == "Summarize this conversation:\n{messages}"
    with pytest.raises(ValueError, match=r"summary.prompt lacks the \{messages\} placeholder") as refused:
        CompactionMiddleware(ScriptedModel(), summary_prompt="Summarize this conversation.")
    assert "summary.instructions" in str(refused.value)


def test_the_agents_compact_tool_works_with_a_share_of_the_models_window(tmp_path):
    model = ToolCallingModel(compact_at=2)
    summarizer = ScriptedModel(profile={"max_input_tokens": 200_000})
    middleware = CompactionMiddleware(summarizer, storage=tmp_path, trigger=("fraction", 0.8), keep=("fraction", 0.01))
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for n in range(3):
        agent.invoke({"messages": [request(n)]}, config)

    messages = agent.get_state(config).values["messages"]
    answer = next(m for m in messages if m.type == "tool" and m.name == "compact")
    assert answer.content.startswith("Compaction requested")
    assert is_summary(messages[0])
