"""A request the model refuses as too long: one compaction, one retry, or a clear error (never a loop)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import openai
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import _convert_message_to_dict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from support.openai_server import count_prompt_tokens
from support.replay import Replayer, replay

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.engine.overflow import (
    ContextTooLongError,
    invoke_with_recovery,
    is_context_overflow,
    overflow_figures,
)
from langgraph_compaction.testing import ScriptedModel
from langgraph_compaction.trajectories import load_trajectory

THREAD = {"configurable": {"thread_id": "t"}}
SUMMARY_MARK = "Context Extraction Assistant"
# The configured window is generous, so the gate never compacts: only the server's limit is real.
LARGE = CompactionConfig(context_window=100_000, summary={"context_window": 4_000})


def _llm(server) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key="test", model="gpt-4o-mini", max_retries=0)


def _history(turns: int) -> list:
    """Return earlier chat turns of about 140 tokens each (the thread before the failing call)."""
    out = []
    for t in range(turns):
        out.append(HumanMessage(f"Question {t}: how does the billing module round case {t}?"))
        out.append(AIMessage(f"Answer {t}: " + "amounts are rounded half-even to two decimals, then summed " * 10))
    return out + [HumanMessage("What did we decide about rounding?")]


def _compiled(agent, summarizer, config, **options):
    """Return (graph, nodes): START -> compaction -> agent -> END, with ChatOpenAI or scripted models."""
    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    nodes = add_compaction(
        builder, before="agent", model=summarizer, flush_model=ScriptedModel(), config=config, **options
    )
    return builder.compile(checkpointer=InMemorySaver()), nodes


def _graph(server, *, node=None, recovery=True):
    llm = _llm(server)
    agent = node or (lambda state: {"messages": [llm.invoke(state["messages"])]})
    return _compiled(agent, llm, LARGE, overflow_recovery=recovery)


def _agent_requests(server) -> list:
    return [r for r in server.requests if SUMMARY_MARK not in str(r["messages"][-1].get("content"))]


def test_a_refused_request_is_compacted_once_and_retried_once(openai_server, tmp_path):
    openai_server.context_limit = 2_000
    graph, _ = _graph(openai_server)
    state = graph.invoke({"messages": _history(20)}, THREAD)

    assert [status for status, _ in openai_server.errors] == [400]
    assert openai_server.errors[0][1]["error"]["code"] == "context_length_exceeded"
    first, retry = _agent_requests(openai_server)
    assert count_prompt_tokens(first["messages"]) > 2_000 >= count_prompt_tokens(retry["messages"])
    assert retry["messages"][-1]["content"] == "What did we decide about rounding?"
    assert state["messages"][-1].type == "ai"
    assert state["messages"][0].name == "__compaction_summary__"
    events = [e for e in state["compaction"]["events"] if e["stage"] == "overflow"]
    assert len(events) == 1 and events[0]["retried"] and events[0]["window"] == 2_000
    assert state["compaction"]["counts"]["overflow"] == 1
    assert state["compaction"]["calibration"]["window"] == 2_000  # learned from the error body


def test_the_next_turn_stays_under_the_learned_window(openai_server):
    openai_server.context_limit = 2_000
    graph, _ = _graph(openai_server)
    graph.invoke({"messages": _history(20)}, THREAD)
    for t in range(6):
        graph.invoke({"messages": [HumanMessage(f"Follow-up {t}: " + "and the tax lines too " * 5)]}, THREAD)
    assert len(openai_server.errors) == 1  # only the first, unforeseen refusal


def test_async_recovery_with_ainvoke(openai_server):
    openai_server.context_limit = 2_000
    llm = _llm(openai_server)

    async def agent(state):
        return {"messages": [await llm.ainvoke(state["messages"])]}

    graph, _ = _graph(openai_server, node=agent)
    state = asyncio.run(graph.ainvoke({"messages": _history(20)}, THREAD))
    assert len(openai_server.errors) == 1 and len(_agent_requests(openai_server)) == 2
    assert state["messages"][-1].type == "ai"


def test_one_message_over_the_window_is_a_clear_error_and_no_loop(openai_server):
    openai_server.context_limit = 500
    graph, _ = _graph(openai_server)
    huge = HumanMessage("Please review this log:\n" + "ERROR disk quota exceeded on /var/lib/app\n" * 200, id="huge")
    with pytest.raises(ContextTooLongError, match="message 'huge' \\(human\\) alone is ~[0-9,]+ tokens") as err:
        graph.invoke({"messages": [huge]}, THREAD)
    assert "window of 500" in str(err.value)
    assert len(_agent_requests(openai_server)) == 1  # the unchanged request was never sent again
    assert isinstance(err.value, ContextOverflowError)


def test_without_recovery_the_provider_error_surfaces(openai_server):
    openai_server.context_limit = 2_000
    graph, _ = _graph(openai_server, recovery=False)
    with pytest.raises(openai.BadRequestError) as err:
        graph.invoke({"messages": _history(20)}, THREAD)
    assert err.value.code == "context_length_exceeded"


def test_a_node_that_calls_the_model_itself(openai_server):
    openai_server.context_limit = 2_000
    llm = _llm(openai_server)
    holder = {}

    def agent(state, config):
        return invoke_with_recovery(holder["nodes"], llm, state, config, system_prompt="You are a billing assistant.")

    graph, holder["nodes"] = _graph(openai_server, node=agent, recovery=False)
    state = graph.invoke({"messages": _history(20)}, THREAD)
    first, retry = _agent_requests(openai_server)
    assert retry["messages"][0] == {"role": "system", "content": "You are a billing assistant."}
    assert count_prompt_tokens(retry["messages"]) <= 2_000
    assert state["messages"][0].name == "__compaction_summary__" and state["messages"][-1].type == "ai"


def test_other_errors_pass_through_untouched(openai_server):
    def agent(state):
        raise RuntimeError("tool registry is empty")

    graph, _ = _graph(openai_server, node=agent)
    with pytest.raises(RuntimeError, match="tool registry is empty"):
        graph.invoke({"messages": [HumanMessage("hi")]}, THREAD)


def _status_error(status: int, message: str, cls=openai.APIStatusError):
    response = httpx.Response(status, request=httpx.Request("POST", "http://x/v1/chat/completions"))
    return cls(message, response=response, body={"error": {"message": message}})


def _raised_in(module: str, exc: Exception) -> Exception:
    """Return ``exc`` raised (and caught) in code of ``module``, as an integration re-raises a service error."""
    scope = {"__name__": module, "exc": exc}
    exec("def fail():\n    raise exc\n", scope)
    try:
        scope["fail"]()
    except Exception as caught:  # noqa: BLE001 - the point is the traceback it now carries
        return caught
    raise AssertionError("unreachable")


def _rate_limit_429():
    text = (
        "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, "
        "Requested 45012. The input or output tokens must be reduced in order to run successfully."
    )
    response = httpx.Response(429, request=httpx.Request("POST", "http://x/v1/chat/completions"))
    body = {"error": {"message": text, "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}
    return openai.RateLimitError(text, response=response, body=body)


@pytest.mark.parametrize(
    "exc",
    [
        ContextOverflowError("too long"),
        _status_error(413, "Request Entity Too Large"),
        _status_error(400, "prompt is too long: 208310 tokens > 200000 maximum", openai.BadRequestError),
        _raised_in("langchain_aws.chat_models.bedrock", ValueError("Input is too long for requested model.")),
        _status_error(400, "This model's maximum context length is 8192 tokens", openai.BadRequestError),
        _status_error(400, "Please reduce the length of the messages or completion.", openai.BadRequestError),
    ],
    ids=["langchain", "http-413", "anthropic", "bedrock", "openai-text", "reduce-length"],
)
def test_overflow_is_recognised_across_providers(exc):
    assert is_context_overflow(exc)
    wrapped = RuntimeError("node failed")
    wrapped.__cause__ = exc
    assert is_context_overflow(wrapped)


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("provider down"),
        _status_error(429, "Rate limit reached"),
        _rate_limit_429(),
        _status_error(400, "Invalid parameter: messages with role 'tool' must be a response"),
        # the application's own errors may quote anything: their wording is not a provider's refusal
        ValueError("Input is too long for requested model."),
        RuntimeError("User asked: How large is your context window?"),
    ],
    ids=["runtime", "rate-limit", "openai-tpm-429", "tool-order", "app-value-error", "app-text"],
)
def test_other_failures_are_not_overflow(exc):
    assert not is_context_overflow(exc)


def test_an_openai_tokens_per_minute_429_reaches_the_caller_and_leaves_the_history_alone():
    # "Request too large ... tokens per min" is a rate limit: compacting and retrying would hide it
    calls = []

    def agent(state):
        calls.append(len(state["messages"]))
        raise _rate_limit_429()

    summarizer = ScriptedModel()
    graph, _ = _compiled(agent, summarizer, LARGE)
    history = _history(20)
    with pytest.raises(openai.RateLimitError, match="tokens per min"):
        graph.invoke({"messages": history}, THREAD)
    assert calls == [len(history)]  # one call, no compaction, no retry
    assert not [c for c in summarizer.calls if SUMMARY_MARK in c]
    assert [m.id for m in graph.get_state(THREAD).values["messages"]] == [m.id for m in history]


def test_interrupt_in_the_model_node_pauses_the_run_and_resumes_it():
    # a human-in-the-loop node: the interrupt's payload quotes the user's question about the context window
    from langgraph.types import Command, interrupt

    def agent(state):
        question = state["messages"][-1].content
        answer = interrupt({"approve": f"Send this to the model? {question}"})
        return {"messages": [AIMessage(f"approved: {answer}")]}

    graph, _ = _compiled(agent, ScriptedModel(), LARGE)
    paused = graph.invoke({"messages": [HumanMessage("How large is your context window?")]}, THREAD)
    assert "context window" in str(paused["__interrupt__"][0].value)
    done = graph.invoke(Command(resume="yes"), THREAD)
    assert done["messages"][-1].content == "approved: yes"
    assert [m.type for m in done["messages"]] == ["human", "ai"]


def test_provider_figures_are_read_from_the_message():
    openai_text = "This model's maximum context length is 4000 tokens. However, your messages resulted in 4512 tokens."
    assert overflow_figures(RuntimeError(openai_text)) == (4_000, 4_512)
    assert overflow_figures(RuntimeError("prompt is too long: 208310 tokens > 200000 maximum")) == (200_000, 208_310)
    assert overflow_figures(RuntimeError("context window exceeded")) == (None, None)


# --- the summarizer's own window: split the prefix, chain the partial summaries ---------------------


def test_a_prefix_larger_than_the_summarizers_window_is_summarized_in_parts(openai_server):
    openai_server.context_limit = 2_000
    config = CompactionConfig(
        context_window=40_000,
        trigger_tokens=8_000,
        keep_tokens=500,
        summary={"context_window": 2_000},
        background=False,  # the summary in this very call: at the message trigger a job would let the call go
    )
    graph, _ = _compiled(lambda state: {"messages": [AIMessage("ok")]}, _llm(openai_server), config)
    state = graph.invoke({"messages": _history(50)}, THREAD)  # ~12k tokens of prefix, 6x the summarizer's window

    summarizer_calls = [r for r in openai_server.requests if SUMMARY_MARK in str(r["messages"][-1]["content"])]
    assert openai_server.errors == []
    assert len(summarizer_calls) >= 6
    assert all(count_prompt_tokens(r["messages"]) <= 2_000 for r in summarizer_calls)
    assert "[summary of earlier conversation]" in summarizer_calls[-1]["messages"][-1]["content"]  # chained
    assert "Question 0:" in summarizer_calls[0]["messages"][-1]["content"]
    assert state["compaction"]["counts"]["summarize"] == 1


# --- real trajectories, a 32k window --------------------------------------------------------------

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectories"
WINDOW = 32_000


class WindowedReplayer(Replayer):
    """The replay's model node, refusing like a provider every view over ``WINDOW`` o200k tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0
        self.sizes: list[int] = []

    def __call__(self, state: dict) -> dict:
        size = count_prompt_tokens(_convert_message_to_dict(m) for m in state["messages"])
        self.sizes.append(size)
        if size > WINDOW:
            self.refused += 1
            raise ContextOverflowError(
                f"maximum context length is {WINDOW} tokens. However, your messages resulted in {size} tokens"
            )
        return super().__call__(state)


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.jsonl")))
def test_real_trajectories_in_a_32k_window_have_no_failed_model_call(name, tmp_path):
    trajectory = load_trajectory(DATA / f"{name}.jsonl")
    config = CompactionConfig(context_window=WINDOW)
    replayer, _ = replay(trajectory, ScriptedModel(), config, tmp_path, InMemorySaver(), replayer=WindowedReplayer())
    assert replayer.refused == 0
    assert replayer.calls == sum(m.type == "ai" for m in trajectory)
    assert replayer.problems == []
    assert max(replayer.sizes) <= WINDOW


def test_a_summarizer_with_a_smaller_window_than_configured_splits_again(openai_server):
    # nobody told compaction the summarizer's window: its 400 answers make the parts smaller
    openai_server.context_limit = 2_000
    config = CompactionConfig(context_window=40_000, trigger_tokens=8_000, keep_tokens=500, background=False)
    graph, _ = _compiled(lambda state: {"messages": [AIMessage("ok")]}, _llm(openai_server), config)
    state = graph.invoke({"messages": _history(50)}, THREAD)
    # one refusal: its body names the 2,000-token window, and the parts are cut to fit it
    assert [e["error"]["code"] for _, e in openai_server.errors] == ["context_length_exceeded"]
    assert state["compaction"]["counts"] == {"summarize": 1}  # an LLM summary, not the extractive fallback
