"""No thrash: compaction makes real progress, waits for new conversation, and stops calling a failing summarizer."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from support import SMALL_WINDOW, build_graph, first_input

from langgraph_compaction import CompactionConfig, CompactionState, add_compaction
from langgraph_compaction.core.plan import plan_compaction
from langgraph_compaction.core.summary import EXTRACTIVE_MARK, build_summary_message
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.engine.jobs import InstantRunner, use_runner
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "t"}}
SUMMARY_MARK = "Context Extraction Assistant"


def _chat_graph(summarizer, config):
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {"messages": [AIMessage(f"Sure, noted ({len(state['messages'])}).")]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=summarizer, config=config)
    return builder.compile()


def _chat(graph, turns):
    # the thread's state is carried by hand: a checkpointer would only add (quadratic) serialization time here
    state: dict = {"messages": []}
    for t in range(turns):
        state = graph.invoke(
            {**state, "messages": [*state["messages"], HumanMessage(f"Turn {t}: remind me to buy milk.")]}
        )
    return state


def test_400_tiny_chat_turns_are_never_summarized():
    summarizer = ScriptedModel()
    state = _chat(_chat_graph(summarizer, CompactionConfig(context_window=128_000)), 400)
    assert len(state["messages"]) == 800  # nothing was removed
    assert not [c for c in summarizer.calls if SUMMARY_MARK in c]
    assert "summarize" not in state.get("compaction", {}).get("counts", {})


def test_the_seeds_message_trigger_alone_summarizes_a_tiny_chat_again_and_again():
    # the design's rule (50 messages, no token floor), for contrast: a few hundred tokens per summary
    summarizer = ScriptedModel()
    seed = CompactionConfig(
        context_window=128_000,
        summary={"min_new_tokens": 0},
        guards={"trigger_messages_min_tokens": 0},
        background=False,  # each summarizer call made in its turn, so the count below waits for no job
    )
    _chat(_chat_graph(summarizer, seed), 60)
    assert len([c for c in summarizer.calls if SUMMARY_MARK in c]) >= 3


def _tool_history(rounds: int, result_chars: int) -> list:
    out = [SystemMessage("You are a coding agent.", id="sys"), HumanMessage("Fix the build.", id="h0")]
    for r in range(rounds):
        call = {"name": "bash", "args": {"cmd": f"make step{r}"}, "id": f"c{r}"}
        out.append(AIMessage(f"Step {r}.", tool_calls=[call], id=f"a{r}"))
        out.append(
            ToolMessage("build output line\n" * (result_chars // 18), tool_call_id=f"c{r}", name="bash", id=f"r{r}")
        )
    return out


def _plan(messages, config, **kwargs):
    counter = TokenCounter()
    return plan_compaction(messages, counter.counts(messages), config.resolve(), config, counter.message, **kwargs)


def test_a_compaction_leaves_at_most_the_target_share_of_the_trigger():
    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=None, checkpointer=InMemorySaver())
    for t in range(10):
        graph.invoke(first_input(t), THREAD)
    budget = SMALL_WINDOW.resolve()
    events = [e for e in graph.get_state(THREAD).values["compaction"]["events"] if e.get("layer") == "summarize"]
    assert events
    assert all(e["tokens_after"] <= budget.target_tokens for e in events)  # 60 % of the trigger
    assert agent.problems == []


def test_when_the_tail_alone_is_over_the_target_layers_reach_into_it():
    # the newest rounds hold big results: the kept tail (8k) would stay over 60 % of the trigger (6k)
    config = CompactionConfig(context_window=40_000, trigger_tokens=10_000, keep_tokens=8_000)
    messages = _tool_history(8, 12_000)
    plan = _plan(messages, config)
    assert plan.reason == "tokens"
    assert "r7" in {messages[i].id for i in plan.edits}  # even the newest result was pruned
    evicted = set(plan.cut.evict) if plan.cut else set()
    counter = TokenCounter()
    kept = sum(counter.message(plan.edits.get(i, m)) for i, m in enumerate(messages) if i not in evicted)
    assert kept + 1_000 <= config.resolve().target_tokens


def test_cooldown_holds_a_due_summary_until_new_conversation_arrives():
    config = CompactionConfig(context_window=60_000, trigger_tokens=6_000, keep_tokens=1_000)
    messages = _tool_history(8, 6_000)
    assert _plan(messages, config).summarize
    held = _plan(messages, config, new_tokens=200)  # 10 % of 6,000 is 600
    assert not held.summarize and held.held == "cooldown"
    assert _plan(messages, config, new_tokens=700).summarize


def test_cooldown_gives_way_when_the_window_would_overflow():
    config = CompactionConfig(context_window=7_000, trigger_tokens=3_000, keep_tokens=1_000)
    messages = _tool_history(8, 6_000)
    plan = _plan(messages, config, new_tokens=0)
    assert plan.tokens_before >= config.resolve().hard_limit
    assert plan.summarize and plan.held is None


def test_a_summary_plus_the_protected_tail_is_never_summarized_again():
    config = CompactionConfig(context_window=20_000, trigger_tokens=2_000, keep_tokens=1_500)
    summary = build_summary_message("## SESSION INTENT\nFix it.\n\n## SUMMARY\n" + "done so far. " * 900)
    messages = [summary, HumanMessage("Now run the tests.", id="h"), AIMessage("Running them.", id="a")]
    plan = _plan(messages, config)
    assert plan.reason == "tokens" and plan.cut is None and not plan.summarize


def test_a_summarizer_that_always_fails_opens_the_breaker_and_extracts():
    summarizer = ScriptedModel(summary=RuntimeError("provider down"))
    config = CompactionConfig(context_window=60_000, trigger_tokens=8_000, keep_tokens=2_000)
    graph, agent = build_graph(summarizer, config=config, storage=None, checkpointer=InMemorySaver())
    streamed = []
    with use_runner(InstantRunner()):  # a retry made next to the agent has failed by its next call
        for t in range(8):
            streamed += graph.stream(first_input(t), THREAD, stream_mode="custom")
    state = graph.get_state(THREAD).values

    assert len([c for c in summarizer.calls if SUMMARY_MARK in c]) == 3  # then never again while open
    breaker = state["compaction"]["breaker"]
    assert breaker["failures"] == 3 and breaker["open_until"] > 0
    assert "provider down" in breaker["reason"]
    opened = [e for e in streamed if e.get("breaker") == "open"]  # the state keeps the last 20 events only
    assert len(opened) == 1 and "using extractive summaries" in opened[0]["error"]
    summaries = [m for m in state["messages"] if m.name == "__compaction_summary__"]
    assert summaries and EXTRACTIVE_MARK in summaries[0].content
    assert state["compaction"]["counts"]["extractive"] >= 2
    assert agent.problems == [] and len(agent.views) == 24  # the thread kept running


def test_a_success_closes_the_breaker_again():
    answers = iter([RuntimeError("down"), RuntimeError("down")])

    def summary(prompt):
        answer = next(answers, None)
        if answer is not None:
            raise answer
        from langgraph_compaction.testing import scripted_summary

        return scripted_summary(prompt)

    config = CompactionConfig(context_window=60_000, trigger_tokens=8_000, keep_tokens=2_000)
    graph, _ = build_graph(ScriptedModel(summary=summary), config=config, storage=None, checkpointer=InMemorySaver())
    for t in range(8):
        graph.invoke(first_input(t), THREAD)
    compaction = graph.get_state(THREAD).values["compaction"]
    assert compaction["breaker"] == {"failures": 0, "open_until": 0.0, "reason": None}
    assert compaction["counts"]["summarize"] >= 1


def _endless_summary(prompt):
    # all four sections, then ~40k words: well formed, and far larger than what it replaces
    return (
        "## SESSION INTENT\nChat.\n\n## SUMMARY\n"
        + "and then we talked some more " * 8_000
        + "\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nGo on."
    )


def _windowed_chat_graph(summarizer, config, window):
    """A chat agent that refuses, like a provider, any request over ``window`` tokens."""
    from langchain_core.exceptions import ContextOverflowError

    from langgraph_compaction.core.tokens import estimate_tokens

    def agent(state):
        if estimate_tokens(state["messages"]) > window:
            raise ContextOverflowError(f"prompt is too long: over the {window} token window")
        return {"messages": [AIMessage("Understood; here is a longer answer about it. " * 12)]}

    builder = StateGraph(CompactionState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    add_compaction(builder, before="agent", model=summarizer, config=config)
    return builder.compile(checkpointer=InMemorySaver())


def test_an_endless_but_well_formed_summary_is_a_failed_summary_and_the_extractive_one_is_used():
    summarizer = ScriptedModel(summary=_endless_summary)
    config = CompactionConfig(context_window=6_000, trigger_tokens=3_000, keep_tokens=800)
    graph = _windowed_chat_graph(summarizer, config, 6_000)
    for t in range(70):  # the thread died at turn 16 when the long summary was taken for a success
        graph.invoke({"messages": [HumanMessage(f"Turn {t}: tell me more about the rounding rules.")]}, THREAD)
    compaction = graph.get_state(THREAD).values["compaction"]
    assert compaction["counts"]["extractive"] >= 3 and "summarize" not in compaction["counts"]
    assert any("repeats itself" in (e.get("error") or e.get("why") or "") for e in compaction["events"])
    assert compaction["breaker"]["failures"] == config.guards.breaker_failures
    assert compaction["breaker"]["open_until"] > 0
    summary = next(m for m in graph.get_state(THREAD).values["messages"] if m.name == "__compaction_summary__")
    assert EXTRACTIVE_MARK in summary.content and "talked some more" not in summary.content


def test_a_manual_compaction_never_grows_the_context():
    # the compact tool's request goes through the same "must shrink" check as every other reason
    summarizer = ScriptedModel(summary_words=3_000)
    graph = _windowed_chat_graph(summarizer, CompactionConfig(context_window=200_000), 200_000)
    for t in range(3):
        graph.invoke({"messages": [HumanMessage(f"Turn {t}: hi.")]}, THREAD)
    before = graph.get_state(THREAD).values["messages"]
    graph.update_state(THREAD, {"compaction": {"manual": {"focus": None}}})
    graph.invoke({"messages": [HumanMessage("Turn 3: hi.")]}, THREAD)
    state = graph.get_state(THREAD).values
    assert [m.id for m in state["messages"][: len(before)]] == [m.id for m in before]  # nothing replaced
    assert not any(m.name == "__compaction_summary__" for m in state["messages"])
    assert state["compaction"]["manual"] is None
    said = [(e.get("note") or "") + (e.get("error") or "") for e in state["compaction"]["events"]]
    assert any("would not shrink" in s or "longer than the messages it replaces" in s for s in said)


def test_layer_3_waits_when_pruning_alone_brings_the_context_under_the_trigger():
    # the quickstart's case: pruning takes ~12.8k tokens to ~3.6k under a 10k trigger; a summary would only lose detail
    from langgraph_compaction.core.config import PruneConfig

    config = CompactionConfig(
        context_window=60_000,
        trigger_tokens=10_000,
        keep_tokens=2_000,
        prune=PruneConfig(protect_tokens=2_000, minimum_tokens=1_000),
    )
    finished = [AIMessage("All steps done.", id="done"), HumanMessage("Now update the docs.", id="h1")]
    plan = _plan(_tool_history(6, 8_000) + finished, config)
    assert plan.tokens_before >= 10_000 > plan.tokens_after_layers
    assert plan.edits and plan.reason is None and not plan.summarize
    # still over the trigger after the layers: layer 3 runs
    assert _plan(_tool_history(40, 8_000), config).reason == "tokens"
