"""The application's controls, on every front: instructions and prompts, hooks, superseded results, pins, opening a summary, the context status."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from pydantic import ValidationError
from support.fronts import CONFIG, TOOLS, ToolCallingModel, edge_builder, request

from langgraph_compaction import (
    CompactionConfig,
    CompactionInfo,
    CompactionMiddleware,
    CompactionState,
    acompact_messages,
    compact_messages,
    is_summary,
    load_transcript,
    make_compaction_tools,
    make_pre_model_hook,
    subgraph_node,
)
from langgraph_compaction.core.conversation import COMPACTION_MARKER, is_injected
from langgraph_compaction.core.plan import plan_compaction
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.storage.transcript import summarized_by
from langgraph_compaction.testing import ScriptedModel

with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent, and still used
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

#: Requests driven per front: enough for two compactions at the 30k window of ``fronts.CONFIG``.
DRIVEN = 14
#: The state of a thread whose agent asked for a compaction (the ``compact`` tool's update).
MANUAL = {"manual": {"focus": None}}
#: For one-call tests: a summarizer window that takes a long history in one part.
ONE_PART = CONFIG.model_copy(update={"summary": {"context_window": 200_000}})
FRONTS = ["graph nodes", "create_agent", "deepagents", "prebuilt hook", "compact_messages", "subgraph_node"]
INSTRUCTIONS = "Write the summary for a release manager."
HOOK_TEXT = "Name every module that was checked."
AGENTS_MD = "AGENTS.md: run the linters before every commit."


class Hooks:
    """A before_summary and an after_compaction hook (sync or async) that record what they are given."""

    def __init__(self, kind: str) -> None:
        self.before: list[CompactionInfo] = []
        self.after: list[CompactionInfo] = []
        if kind == "async":

            async def before(info):
                self.before.append(info)
                return HOOK_TEXT

            async def after(info):
                self.after.append(info)
                return [HumanMessage(AGENTS_MD)]

        else:

            def before(info):
                self.before.append(info)
                return HOOK_TEXT

            def after(info):
                self.after.append(info)
                return [HumanMessage(AGENTS_MD)]

        self.before_summary, self.after_compaction = before, after


def _call_tool(call: dict) -> ToolMessage:
    tool = next(t for t in TOOLS if t.name == call["name"])
    return ToolMessage(tool.invoke(call["args"]), tool_call_id=call["id"], name=call["name"])


async def drive(front: str, config: CompactionConfig, tmp_path, kind: str, requests: int = DRIVEN, model=None):
    """Drive one front for ``requests`` requests; return (summarizer, agent model, the state's messages)."""
    summarizer, model = ScriptedModel(), model or ToolCallingModel()
    thread = {"configurable": {"thread_id": "controls"}}
    if front == "compact_messages":
        bound, history, state = model.bind_tools(TOOLS), [], None
        for n in range(requests):
            history.append(request(n))
            while True:
                kwargs = dict(
                    model=summarizer,
                    config=config,
                    storage=tmp_path,
                    thread_id="controls",
                    state=state,
                    agent_model=bound,
                )
                result = (
                    await acompact_messages(history, **kwargs)
                    if kind == "async"
                    else compact_messages(history, **kwargs)
                )
                history, state = result.messages, result.state
                reply = (await bound.ainvoke(result.view)) if kind == "async" else bound.invoke(result.view)
                history = [*history, reply]
                if not reply.tool_calls:
                    break
                history += [_call_tool(c) for c in reply.tool_calls]
        return summarizer, model, history
    if front == "graph nodes":
        agent = edge_builder(model, tmp_path, config, summarizer).compile(checkpointer=InMemorySaver())
    elif front == "subgraph_node":
        parent = StateGraph(CompactionState)
        parent.add_node("assistant", subgraph_node(edge_builder(model, tmp_path, config, summarizer).compile()))
        parent.add_edge(START, "assistant")
        parent.add_edge("assistant", END)
        agent = parent.compile(checkpointer=InMemorySaver())
    elif front == "create_agent":
        middleware = CompactionMiddleware(model=summarizer, config=config, storage=tmp_path)
        agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    elif front == "deepagents":
        middleware = CompactionMiddleware(
            model=summarizer, config=config, storage=tmp_path, name="SummarizationMiddleware"
        )
        agent = create_deep_agent(model=model, tools=TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    else:
        hook = make_pre_model_hook(
            model=summarizer, config=config, storage=tmp_path, agent_model=model.bind_tools(TOOLS)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agent = create_react_agent(
                model, TOOLS, pre_model_hook=hook, state_schema=hook.state_schema, checkpointer=InMemorySaver()
            )
    for n in range(requests):
        if kind == "async":
            await agent.ainvoke({"messages": [request(n)]}, thread)
        else:
            agent.invoke({"messages": [request(n)]}, thread)
    return summarizer, model, agent.get_state(thread).values["messages"]


def summary_prompts(summarizer: ScriptedModel) -> list[str]:
    return [p for p in summarizer.calls if "Context Extraction Assistant" in p]


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("kind, mode", [("sync", "rewrite"), ("async", "view")])
async def test_instructions_and_hooks_shape_every_summary_on_every_front(tmp_path, front, kind, mode):
    hooks = Hooks(kind)
    config = CONFIG.model_copy(
        update={
            "mode": mode,
            "summary": {
                "instructions": INSTRUCTIONS,
                "before_summary": hooks.before_summary,
                "after_compaction": hooks.after_compaction,
            },
        }
    )
    summarizer, model, messages = await drive(front, config, tmp_path, kind)
    # a summary the last request started in the background may be between its hook and its summarizer call
    for _ in range(500):
        if len(summary_prompts(summarizer)) >= len(hooks.before):
            break
        await asyncio.sleep(0.01)

    prompts = summary_prompts(summarizer)
    assert len(prompts) >= 2, "two compactions at least"
    # the text the summarizer received holds the application's instructions and the hook's, every time
    assert all(INSTRUCTIONS in p and HOOK_TEXT in p for p in prompts)
    # before_summary shapes each summary made; after_compaction runs for each one applied (a summary prepared in
    # the background that the run ended before is made, not applied)
    assert len(hooks.before) == len(prompts) and 2 <= len(hooks.after) <= len(hooks.before)
    first = hooks.before[0]
    reasons = ("tokens", "messages", "background")
    assert first.thread_id == "controls" and first.user_id == "default" and first.reason in reasons
    assert first.tokens_before > 0 and first.messages and first.summary is None
    assert first.transcript_path and first.transcript_path.endswith(".jsonl")
    made = hooks.after[-1]
    assert made.summary and "## SESSION INTENT" in made.summary and made.summary_id.startswith("__compaction_summary__")
    # the messages after the summary: the hook's, marked, once (the next compaction replaced the earlier ones)
    sent = [m for m in model.inputs[-1] if not isinstance(m, SystemMessage)]
    at = next(i for i, m in enumerate(sent) if is_summary(m))
    assert sent[at].id == made.summary_id
    assert sent[at + 1].content == AGENTS_MD and is_injected(sent[at + 1])
    assert sent[at + 1].additional_kwargs[COMPACTION_MARKER]["summary_id"] == made.summary_id
    assert sum(1 for m in sent if m.content == AGENTS_MD) == 1
    # never summarized again: no summary prompt shows the injected text as conversation
    assert not any(AGENTS_MD in p for p in prompts)
    if mode == "view" and front != "compact_messages":
        assert not any(is_injected(m) for m in messages), "view mode: the state keeps the conversation only"


def test_a_replacement_prompt_must_hold_what_the_engine_reads_back():
    # the sections are read back when the answer has them: a prompt may ask for some, or none
    for prompt in ("Summarize this: {messages}\n## SUMMARY\n## NEXT STEPS", "Summarize this: {messages}"):
        assert CompactionConfig(summary={"prompt": prompt}).summary.prompt == prompt
    with pytest.raises(ValidationError, match=r"the \{messages\} placeholder"):
        CompactionConfig(summary={"prompt": "## SESSION INTENT ## SUMMARY ## ARTIFACTS ## NEXT STEPS"})
    with pytest.raises(ValidationError, match="memory.prompt lacks .*NO_REPLY"):
        CompactionConfig(memory={"prompt": "List the facts of {messages}"})


def _history(n: int = 40) -> list:
    """A history of ``n`` exchanges of about 1,000 tokens each: over a 30k window's trigger."""
    out = []
    for k in range(n):
        out += [
            HumanMessage(f"Task {k}: check module{k}. Never touch prod-{k}. " + "detail " * 600, id=f"h{k}"),
            AIMessage(f"Done {k}.", id=f"a{k}"),
        ]
    return out


def test_a_replacement_summary_prompt_is_sent_and_the_deterministic_parts_stay(tmp_path):
    prompt = (
        "MY PROMPT\n{messages}\nAnswer with ## SESSION INTENT, ## SUMMARY, ## ARTIFACTS and ## NEXT STEPS.\n{focus}"
    )
    summarizer = ScriptedModel(
        reply="## SESSION INTENT\nShip it.\n## SUMMARY\nShort.\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
    )
    config = CONFIG.model_copy(update={"summary": {"prompt": prompt, "instructions": "Be brief."}})
    result = compact_messages(
        _history(),
        model=summarizer,
        config=config,
        storage=tmp_path,
        thread_id="t",
        state={"manual": {"focus": "prod"}},
    )
    sent = next(p for p in summarizer.calls if p.startswith("MY PROMPT"))
    assert (
        sent.startswith("MY PROMPT\n[user]\nTask 0")
        and "Be brief." in sent
        and "Preserve everything about it in detail: prod" in sent
    )
    summary = next(m for m in result.messages if is_summary(m))
    text = summary.content
    # the verbatim requests and the rules the user stated are kept whatever the prompt says
    assert (
        "The user's most recent requests, verbatim" in text
        and "Pinned constraints" in text
        and "- Never touch prod-36." in text
    )
    assert result.state["counts"].get("summarize") == 1


def test_memory_instructions_reach_the_memory_model(tmp_path):
    summarizer = ScriptedModel()
    config = CONFIG.model_copy(update={"memory": {"instructions": "Keep only deadlines."}})
    compact_messages(_history(), model=summarizer, config=config, storage=tmp_path, thread_id="t", state=MANUAL)
    memory = [p for p in summarizer.calls if "memory extraction assistant" in p]
    assert memory and "Keep only deadlines." in memory[0]


def test_the_focus_of_compact_applies_to_that_compaction_only(tmp_path):
    summarizer = ScriptedModel()
    first = compact_messages(
        _history(),
        model=summarizer,
        config=ONE_PART,
        storage=tmp_path,
        thread_id="t",
        state={"manual": {"focus": "the prod rules"}},
    )
    later = first.messages + [m.model_copy(update={"id": f"later-{m.id}"}) for m in _history()]
    second = compact_messages(
        later, model=summarizer, config=ONE_PART, storage=tmp_path, thread_id="t", state=first.state
    )
    prompts = summary_prompts(summarizer)
    assert len(prompts) == 2 and second.state["counts"]["summarize"] == 2
    assert "the prod rules" in prompts[0] and "<focus>" not in prompts[1]


def test_before_summary_false_skips_the_summarizer_and_a_failing_hook_loses_nothing(tmp_path):
    skipped = ScriptedModel()
    result = compact_messages(
        _history(),
        model=skipped,
        config=CONFIG.model_copy(update={"summary": {"before_summary": lambda info: False}}),
        storage=tmp_path,
        thread_id="skip",
        state=MANUAL,
    )
    assert summary_prompts(skipped) == [] and result.state["counts"] == {"extractive": 1}
    assert any(e.get("hook") == "before_summary" and e.get("note") == "skipped the summarizer" for e in result.events)

    def boom(info):
        raise RuntimeError("hook down")

    summarizer = ScriptedModel()
    config = CONFIG.model_copy(update={"summary": {"before_summary": boom, "after_compaction": boom}})
    result = compact_messages(
        _history(), model=summarizer, config=config, storage=tmp_path, thread_id="boom", state=MANUAL
    )
    errors = [e for e in result.events if e.get("hook")]
    assert [(e["hook"], e["error"]) for e in errors] == [
        ("before_summary", "RuntimeError: hook down"),
        ("after_compaction", "RuntimeError: hook down"),
    ]
    assert result.state["counts"] == {"summarize": 1}
    evicted = {m.id for m in _history()} - {m.id for m in result.messages}
    assert evicted <= {m.id for m in load_transcript(tmp_path, "boom")}


def test_hook_messages_count_in_the_budget_a_compaction_that_would_not_shrink_is_refused(tmp_path):
    history = _history(12)
    config = CONFIG.model_copy(update={"summary": {"after_compaction": lambda info: [HumanMessage("x " * 100_000)]}})
    result = compact_messages(
        history, model=ScriptedModel(), config=config, storage=tmp_path, thread_id="t", state=MANUAL
    )
    assert [m.id for m in result.messages] == [m.id for m in history]
    assert any("would not shrink" in (e.get("note") or "") for e in result.events)


# --- superseded results ---------------------------------------------------------------


def _read(n: int, path: str, text: str, tool: str = "read_file", **args) -> list:
    call = {"name": tool, "args": {"path": path, **args}, "id": f"call-{n}"}
    return [
        AIMessage("", tool_calls=[call], id=f"ai-{n}"),
        ToolMessage(text, tool_call_id=f"call-{n}", name=tool, id=f"result-{n}"),
    ]


def _plan(messages, **config):
    counter = TokenCounter()
    settings = CompactionConfig(context_window=200_000, prompt_cache=False, **config)
    return plan_compaction(messages, counter.counts(messages), settings.resolve(), settings, counter.message)


def test_a_file_read_again_is_shortened_to_a_marker_naming_the_newer_result():
    old, new = "v1 " * 2_000, "v1 " * 2_000
    messages = [
        HumanMessage("Fix it.", id="h"),
        *_read(1, "src/a.py", old),
        *_read(2, "src/b.py", old),
        *_read(3, "src/a.py", new),
    ]
    plan = _plan(messages)
    assert set(plan.edits) == {2} and plan.layer_counts == {"dedupe": 1}
    marker = plan.edits[2].content
    assert plan.edits[2].id == "result-1" and "the newer result is message result-3 (tool_call_id call-3)" in marker
    assert "(6000 chars)" in marker and 'recall(["result-1"])' in marker
    assert _plan(messages, dedupe_results=False).edits == {}


def test_a_changed_file_is_never_deduplicated_across_the_edit():
    text = "line\n" * 1_000
    edit = AIMessage(
        "",
        tool_calls=[{"name": "edit_file", "args": {"path": "src/a.py", "old": "a", "new": "b"}, "id": "e"}],
        id="ai-e",
    )
    messages = [
        HumanMessage("Fix it.", id="h"),
        *_read(1, "src/a.py", text),
        edit,
        ToolMessage("ok", tool_call_id="e", name="edit_file", id="r-e"),
        *_read(2, "src/a.py", text),
        *_read(3, "src/a.py", text),
    ]
    plan = _plan(messages)
    # read 1 shows the file before the edit: kept; read 2 is superseded by read 3 (nothing changed in between)
    assert set(plan.edits) == {messages.index(next(m for m in messages if m.id == "result-2"))}
    assert "result-3" in next(iter(plan.edits.values())).content


def test_under_prompt_caching_a_dedupe_that_does_not_repay_waits_for_a_summary():
    text = "v1 " * 2_000
    messages = [HumanMessage("Fix it.", id="h"), *_read(1, "src/a.py", text), *_read(2, "src/a.py", text)]
    counter = TokenCounter()
    settings = CompactionConfig(context_window=30_000)
    plan = plan_compaction(messages, counter.counts(messages), settings.resolve(), settings, counter.message)
    assert plan.edits == {}


def test_a_superseded_result_keeps_its_original_in_the_transcript(tmp_path):
    text = "content of a.py\n" * 400
    history = [
        HumanMessage("Read a.py twice.", id="h"),
        *_read(1, "src/a.py", text),
        *_read(2, "src/a.py", text),
        AIMessage("Read.", id="done"),
    ]
    config = CompactionConfig(context_window=200_000, prompt_cache=False)
    result = compact_messages(history, model=ScriptedModel(), config=config, storage=tmp_path, thread_id="t")
    shortened = next(m for m in result.messages if m.id == "result-1")
    assert shortened.content.startswith("[Superseded: `read_file`") and "result-2" in shortened.content
    assert result.state["counts"] == {"dedupe": 1}
    assert next(m for m in load_transcript(tmp_path, "t") if m.id == "result-1").content == text


# --- the agent's pins ---------------------------------------------------------------


def _tools_graph():
    builder = StateGraph(CompactionState)
    from langgraph.prebuilt import ToolNode

    builder.add_node("tools", ToolNode(make_compaction_tools(config=CompactionConfig(fidelity={"max_pins": 2}))))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=InMemorySaver())


def _tool(graph, name, text, n):
    call = AIMessage("", tool_calls=[{"name": name, "args": {"text": text}, "id": f"c{n}"}], id=f"ai{n}")
    thread = {"configurable": {"thread_id": "pins"}}
    state = graph.invoke({"messages": [call], "compaction": {"wired": True}}, thread)
    return state["messages"][-1].content, state["compaction"]["pins"]


def test_the_agent_pins_and_unpins_and_is_told_when_the_cap_is_reached(tmp_path):
    graph = _tools_graph()
    answer, pins = _tool(graph, "pin", "Never push to main.", 1)
    assert (
        answer.startswith("Pinned (1 of 2)")
        and pins[0]["text"] == "Never push to main."
        and pins[0]["source"] == "agent"
    )
    assert _tool(graph, "pin", "Never push to main.", 2)[0].startswith("Already pinned")
    _tool(graph, "pin", "Use Python 3.11.", 3)
    answer, pins = _tool(graph, "pin", "Tabs, not spaces.", 4)
    assert answer.startswith("Error: not pinned: 2 of your pins are in force") and "unpin(text)" in answer
    assert [p["text"] for p in pins if p.get("active", True)] == ["Never push to main.", "Use Python 3.11."]
    answer, pins = _tool(graph, "unpin", "Use Python 3.11.", 5)
    assert answer.startswith("Unpinned") and [p["text"] for p in pins if p.get("active", True)] == [
        "Never push to main."
    ]
    # the pin is kept verbatim in the next summary
    history = _history()
    result = compact_messages(
        history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="t", state={"pins": pins, **MANUAL}
    )
    summary = next(m for m in result.messages if is_summary(m)).content
    assert "- Never push to main." in summary and "Use Python 3.11." not in summary


# --- a summary that can be opened ------------------------------------------------------


def test_recall_of_a_summary_id_returns_the_messages_it_replaced_in_order_and_paged(tmp_path):
    history = _history()
    result = compact_messages(
        history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="t", state=MANUAL
    )
    summary = next(m for m in result.messages if is_summary(m))
    replaced = [m.id for m in history if m.id not in {k.id for k in result.messages}]
    assert summary.additional_kwargs[COMPACTION_MARKER]["covers"] == replaced
    transcript = load_transcript(tmp_path, "t")
    assert summary.id in {m.id for m in transcript}, "written when it is made"
    assert all(summarized_by(transcript)[i] == summary.id for i in replaced)

    from langgraph_compaction import FileStorage
    from langgraph_compaction.fronts.tools import recall_messages

    storage = FileStorage(tmp_path)
    page = recall_messages(storage, "t", [summary.id])
    assert page.startswith(
        f"Recalled {len(replaced) + 1} of {len(replaced) + 1} messages; 1 summary opened (page 1 of "
    )
    pages = int(page.split("(page 1 of ")[1].split(")")[0])
    text = "".join(recall_messages(storage, "t", [summary.id], page=k).split(":\n", 1)[1] for k in range(1, pages + 1))
    order = [line.split()[2] for line in text.splitlines() if line.startswith("--- message ")]
    assert order == [summary.id, *replaced]


def test_a_summary_written_before_covers_is_opened_by_its_note(tmp_path):
    history = _history()
    result = compact_messages(
        history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="t", state=MANUAL
    )
    summary = next(m for m in result.messages if is_summary(m))
    old = summary.model_copy(update={"additional_kwargs": {COMPACTION_MARKER: {"kind": "summary"}}})
    replaced = [m.id for m in history if m.id not in {k.id for k in result.messages}]
    assert summarized_by([*history, old]) == {i: summary.id for i in replaced}


def test_inspect_opens_a_summary(tmp_path, capsys):
    from langgraph_compaction.cli import main

    compact_messages(_history(), model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="t", state=MANUAL)
    summary = next(m for m in load_transcript(tmp_path, "t") if is_summary(m))
    assert main(["inspect", "--thread", "t", "--storage", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "summaries in the transcript" in listed and summary.id in listed
    assert main(["inspect", "--thread", "t", "--storage", str(tmp_path), "--summary", summary.id]) == 0
    out = capsys.readouterr().out
    assert f"summary {summary.id} replaced" in out
    assert out.index("--- message h0 (human)") < out.index("--- message a0 (ai)") < out.index("--- message h1 (human)")
    assert main(["inspect", "--thread", "t", "--storage", str(tmp_path), "--summary", "nope"]) == 2
    assert "--summary 'nope' is not a summary of this thread" in capsys.readouterr().err


# --- the context status -----------------------------------------------------------------


def test_the_context_status_ends_the_view_and_is_never_stored(tmp_path):
    config = CONFIG.model_copy(update={"context_status": True})
    result = compact_messages(
        _history(), model=ScriptedModel(), config=config, storage=tmp_path, thread_id="b", state=MANUAL
    )
    *view, status = result.view
    assert view == result.messages, "after the newest message: what is sent before it is what is kept"
    assert status.content.startswith("[Context status: ") and "of 30,000 tokens used" in status.content
    assert "1 compaction so far" in status.content and "full transcript: sessions/b.jsonl" in status.content
    assert status.id not in {m.id for m in result.messages}


class StatusReader(ToolCallingModel):
    """Records the status line each call ends with, and answers from the rest."""

    statuses: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if messages and (messages[-1].additional_kwargs.get(COMPACTION_MARKER) or {}).get("kind") == "status":
            self.statuses.append(messages[-1].content)
            messages = messages[:-1]
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.mark.parametrize("mode", ["rewrite", "view"])
def test_the_context_status_reaches_a_create_agent_model_and_not_its_state(tmp_path, mode):
    model = StatusReader(statuses=[])
    middleware = CompactionMiddleware(
        model=ScriptedModel(), config=CONFIG.model_copy(update={"context_status": True, "mode": mode}), storage=tmp_path
    )
    agent = create_agent(model, TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "s"}}
    for n in range(10):
        agent.invoke({"messages": [request(n)]}, thread)
    assert len(model.statuses) == len(model.inputs) and "0 compactions so far" in model.statuses[0]
    assert any("1 compaction so far" in s for s in model.statuses)
    assert not any("Context status" in str(m.content) for m in agent.get_state(thread).values["messages"])


def test_under_prompt_caching_a_summary_brings_the_dedupe_and_its_cut_stays_where_it_was():
    text = "v1 " * 1_500
    messages = [HumanMessage("Fix it.", id="h")]
    for n in range(10):  # one file read again and again, git status after each read: over the trigger, under the window
        messages += [*_read(n, "src/a.py", text), *_read(100 + n, "", "clean " * 300, tool="git_status")]
    counter = TokenCounter()

    def plan(**config):
        settings = CompactionConfig(context_window=30_000, keep_tokens=6_000, **config)  # a tail of a few rounds
        return plan_compaction(messages, counter.counts(messages), settings.resolve(), settings, counter.message)

    with_dedupe, without = plan(), plan(dedupe_results=False)
    assert with_dedupe.summarize and with_dedupe.cut == without.cut
    kept = set(range(len(messages))) - set(with_dedupe.cut.evict)
    assert with_dedupe.layer_counts.get("dedupe") and set(with_dedupe.edits) <= kept


@pytest.mark.parametrize("mode", ["rewrite", "view"])
def test_a_summary_prepared_in_the_background_brings_the_hooks_messages_too(tmp_path, mode):
    from langgraph_compaction.engine.jobs import InstantRunner, use_runner

    hooks = Hooks("sync")
    config = CONFIG.model_copy(
        update={
            "mode": mode,
            "background": {"enabled": True},
            "summary": {"before_summary": hooks.before_summary, "after_compaction": hooks.after_compaction},
        }
    )
    with use_runner(InstantRunner()):
        summarizer, model, _ = asyncio.run(drive("graph nodes", config, tmp_path, "sync"))
    assert hooks.after and all(HOOK_TEXT in p for p in summary_prompts(summarizer))
    sent = model.inputs[-1]
    at = next(i for i, m in enumerate(sent) if is_summary(m))
    assert sent[at + 1].content == AGENTS_MD and is_injected(sent[at + 1])
    assert sum(1 for m in sent if m.content == AGENTS_MD) == 1


@pytest.mark.parametrize("front", FRONTS)
async def test_every_front_sends_the_context_status_and_never_stores_it(tmp_path, front):
    model = StatusReader(statuses=[])
    config = CONFIG.model_copy(update={"context_status": True})
    _, model, messages = await drive(front, config, tmp_path, "async", requests=10, model=model)
    assert model.statuses and len(model.statuses) == len(model.inputs)
    assert any("1 compaction so far" in s for s in model.statuses)
    assert not any("Context status" in str(m.content) for m in messages)
