"""Background compaction in the apps users write: never over the trigger, and right where it meets other features.

A new user's app (``benchmarks.measures.background_apps``: ``create_agent`` +
``CompactionMiddleware(config=CompactionConfig(context_window=32_000,
background=True))``, trigger 16,000, two tools of about 5,000 tokens, the
agent's model answering in 0.05 s, the summarizer in 0.2 s, or 0.3 s async;
30 requests) must send no request over the trigger, as the same app does
blocking, and must keep its transcript in the order the messages appeared.
Then where background compaction meets other features: an app's own
middleware answering a declined call, the gate's dedupe with
``prompt_cache=False``, the ``after_compaction`` hook, and a manual
``compact`` whose summarizer fails once.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import ToolNode, tools_condition
from support.fronts import CONFIG, REQUESTS, TOOLS, ToolCallingModel, request

from langgraph_compaction import CompactionMiddleware, CompactionState, FileStorage, is_summary
from langgraph_compaction.invariants import ledgers_of
from langgraph_compaction.memory.ledger import parse_bullets
from langgraph_compaction.testing import ScriptedModel, openai_violations, scripted_memories, scripted_summary
from langgraph_compaction.testing.scenarios import AppModel, AppRun, run_app


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, tuple[AppRun, object]]:
    """The new user's app run once each way, the three side by side (they wait on models): (the run, its folder)."""
    ways = {"sync": ("sync", True), "async": ("async", True), "blocking": ("sync", False)}
    roots = {name: tmp_path_factory.mktemp(f"app-{name}") for name in ways}
    with ThreadPoolExecutor(len(ways)) as pool:
        runs = {name: pool.submit(run_app, roots[name], mode=mode, background=bg) for name, (mode, bg) in ways.items()}
        return {name: (run.result(), roots[name]) for name, run in runs.items()}


def _over_trigger(app: AppRun) -> str:
    sizes = app.request_sizes()
    over = [s for s in sizes if s > app.trigger]
    return f"{len(over)} of {len(sizes)} requests over the {app.trigger:,}-token trigger, the largest {max(sizes):,}"


@pytest.mark.parametrize(
    "name",
    [
        "sync",
        "async",
        "blocking",
    ],
)
def test_the_new_users_app_sends_no_request_over_the_trigger(apps, name):
    app, _ = apps[name]
    assert len(app.model.inputs) == 90  # 30 requests: the tests, the documentation, the answer
    assert max(app.request_sizes()) <= app.trigger, _over_trigger(app)


def test_the_async_app_discards_at_most_a_tenth_of_the_summaries_it_prepares(apps):
    app, _ = apps["async"]
    prepared, discarded = app.background_events("compaction_started"), app.background_events("compaction_discarded")
    assert prepared
    assert len(discarded) <= 0.1 * len(prepared), [e.get("why") for e in discarded]


def transcript_order_problems(agent, thread: dict, root) -> list[str]:
    """Return the transcript records that come before a message which appeared in the thread earlier than them.

    A message appears when a checkpoint first holds it (oldest first); the
    transcript must list messages in that order, a summary after every
    message it covers and before nothing older than itself.
    """
    appeared: dict[str, int] = {}
    for snapshot in reversed(list(agent.get_state_history(thread))):
        for message in snapshot.values.get("messages") or []:
            appeared.setdefault(message.id, len(appeared))
    order: list[str] = []
    for record in FileStorage(root).read_transcript(thread["configurable"]["thread_id"]):
        if (rid := record["data"].get("id")) not in order:
            order.append(rid)
    problems, newest = [], None
    for rid in order:
        if rid not in appeared:
            continue
        if newest is not None and appeared[rid] < appeared[newest]:
            problems.append(f"{rid} is recorded after {newest}, which appeared after it")
        if newest is None or appeared[rid] > appeared[newest]:
            newest = rid
    return problems


class SlowToolCallingModel(ToolCallingModel):
    """The fronts' agent answering in 0.05 s: a summary prepared in 0.2 s is ready a few calls later."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        time.sleep(0.05)
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.mark.parametrize(
    "background",
    [
        True,
        False,
    ],
    ids=["background", "blocking"],
)
def test_the_transcript_keeps_the_order_in_which_messages_appeared(tmp_path, background):
    config = CONFIG.model_copy(update={"background": background})
    middleware = CompactionMiddleware(model=ScriptedModel(latency=0.2), config=config, storage=tmp_path)
    agent = create_agent(SlowToolCallingModel(), TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "ordered"}}
    events = []
    for n in range(REQUESTS):
        events += list(agent.stream({"messages": [request(n)]}, thread, stream_mode="custom"))
    mode = "background" if background else "blocking"
    assert [e for e in events if e.get("event") == "compaction_applied" and e.get("mode") == mode]
    problems = transcript_order_problems(agent, thread, tmp_path)
    assert problems == [], f"{len(problems)} records out of order, e.g. {problems[:2]}"


# --- (a) the app answers a declined call itself, between messages a prepared summary covers -----------------


@tool
def deploy(env: str) -> str:
    """Deploy the service to an environment."""
    return f"deployed to {env}"


PASTE = "2026-01-01 12:00:00 worker 7 step ok value=1234567 and the error log goes on\n" * 80


class DeployingModel(ToolCallingModel):
    """Each request: both checks at once, then a deploy the user declines (the next request comes instead)."""

    latency: float = 0.05

    def _reply(self, messages):
        time.sleep(self.latency)
        self.inputs.append(list(messages))
        n, last = len(self.inputs), messages[-1]
        if isinstance(last, ToolMessage) and last.name in ("run_tests", "fetch_docs"):
            call = {"name": "deploy", "args": {"env": "staging"}, "id": f"deploy-{n}"}
            return AIMessage("Deploying to staging.", tool_calls=[call])
        if isinstance(last, ToolMessage):
            return AIMessage("Done.")
        calls = [
            {"name": "run_tests", "args": {"module": f"module{n}"}, "id": f"tests-{n}"},
            {"name": "fetch_docs", "args": {"topic": f"module{n}"}, "id": f"docs-{n}"},
        ]
        return AIMessage("Checking.", tool_calls=calls)


class AnswerDeclinedCalls(AgentMiddleware):
    """The app's own repair before each model call (as deepagents' patch middleware does before each run).

    A call nothing answered gets a result saying it was not run, right
    after the call's message and its answered results.
    """

    def before_model(self, state, runtime):
        messages = list(state["messages"])
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        out, i = [], 0
        while i < len(messages):
            out.append(messages[i])
            calls = messages[i].tool_calls if isinstance(messages[i], AIMessage) else []
            i += 1
            while calls and i < len(messages) and isinstance(messages[i], ToolMessage):
                out.append(messages[i])
                i += 1
            out += [
                ToolMessage(
                    "Not run: the user declined.", tool_call_id=c["id"], name=c["name"], id=f"declined-{c['id']}"
                )
                for c in calls
                if c["id"] not in answered
            ]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *out]} if len(out) > len(messages) else None


def test_an_apps_answer_to_a_declined_call_never_becomes_an_orphan_result(tmp_path):
    model = DeployingModel()
    compaction = CompactionMiddleware(
        model=ScriptedModel(latency=0.05),
        config=CONFIG.model_copy(update={"background": {"enabled": True}}),
        storage=tmp_path,
    )
    agent = create_agent(
        model,
        [*TOOLS, deploy],
        middleware=[compaction, AnswerDeclinedCalls()],
        checkpointer=InMemorySaver(),
        interrupt_before=["tools"],  # every tool call waits for the user's approval
    )
    thread = {"configurable": {"thread_id": "declines"}}
    for n in range(30):
        ask = HumanMessage(f"Task {n}: here is the log I got, please check it\n{PASTE}", id=f"request-{n}")
        agent.invoke({"messages": [ask]}, thread)
        while agent.get_state(thread).next:
            pending = agent.get_state(thread).values["messages"][-1].tool_calls
            if any(c["name"] == "deploy" for c in pending):
                break  # declined: the user sends the next request instead
            agent.invoke(None, thread)  # approved
    problems = [f"request {i}: {p}" for i, r in enumerate(model.inputs) for p in openai_violations(r)]
    assert problems == [], f"{len(problems)} problems, e.g. {problems[:2]}"


# --- (b) the gate's own dedupe under prompt_cache=False --------------------------------------------------------


class SameModuleModel(AppModel):
    """The app's model checking one module over and over: every read supersedes the one before (dedupe)."""

    def _reply(self, messages):
        self.inputs.append(list(messages))
        n, last = len(self.inputs), messages[-1]
        if not isinstance(last, ToolMessage):
            return AIMessage(
                "Tests.", tool_calls=[{"name": "run_tests", "args": {"module": "billing"}, "id": f"t-{n}"}]
            )
        if last.name == "run_tests":
            return AIMessage("Docs.", tool_calls=[{"name": "fetch_docs", "args": {"topic": "billing"}, "id": f"d-{n}"}])
        return AIMessage("Done: billing is fine.")


def test_the_gates_dedupe_never_changes_what_a_prepared_summary_covers(tmp_path):
    app = run_app(tmp_path, model=SameModuleModel(), prompt_cache=False)
    assert app.background_events("compaction_started")
    changed = [e["why"] for e in app.background_events("compaction_discarded") if "has changed" in e.get("why", "")]
    assert changed == []


# --- (c) after_compaction runs when a summary is applied ------------------------------------------------------


def test_after_compaction_runs_for_each_applied_summary_and_no_other(tmp_path):
    hooked: list[str] = []
    app = run_app(tmp_path, summary={"after_compaction": lambda info: hooked.append(info.summary_id)})
    applied = {m.id for request in app.model.inputs for m in request if is_summary(m)}
    assert applied
    assert Counter(hooked) == Counter(applied), f"hook ran {len(hooked)} times for {len(applied)} applied summaries"


# --- (d) a manual compact whose summarizer fails once ------------------------------------------------------------


class CompactingModel(ToolCallingModel):
    """The fronts' agent, calling ``compact`` at the start of every third request."""

    every: int = 3

    def _reply(self, messages):
        time.sleep(0.05)
        latest = [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)][-1]
        number = int(latest.content.split(":")[0].split()[-1])
        self.compact_at = number if number % self.every == self.every - 1 else None
        return super()._reply(messages)


def requests_remembered_twice(background: bool, root) -> dict[str, int]:
    """Run the session with manual compactions whose first summary call fails; return requests in two bullets."""
    failed, asked = set(), []

    def summary(prompt: str) -> str:
        focus = re.search(r"module\d+", prompt.split("<focus>")[-1]) if "<focus>" in prompt else None
        if focus and focus.group(0) not in failed:  # each manual compaction's summary fails once
            failed.add(focus.group(0))
            raise RuntimeError("provider down")
        return scripted_summary(prompt)

    def memory(prompt: str) -> str:
        asked.append(prompt)  # each answer worded its own way, as any LLM's are
        return scripted_memories(prompt).replace("- The user asked:", f"- In call {len(asked)}, the user asked:")

    summarizer = ScriptedModel(latency=0.2, summary=summary, memory=memory)
    config = CONFIG.model_copy(update={"background": background})
    middleware = CompactionMiddleware(model=summarizer, config=config, storage=root)
    agent = create_agent(CompactingModel(), TOOLS, middleware=[middleware], checkpointer=InMemorySaver())
    for n in range(REQUESTS):
        agent.invoke(
            {"messages": [HumanMessage(f"Task {n}: please check module{n}", id=f"r-{n}")]},
            {"configurable": {"thread_id": "manual"}},
        )
    assert failed, "no manual compaction asked the summarizer"
    bullets = [b for text in ledgers_of(FileStorage(root), "default").values() for b in parse_bullets(text)]
    counts = Counter(m for b in bullets for m in re.findall(r"Task \d+:", b))
    assert counts, "nothing was remembered"
    return {request: n for request, n in counts.items() if n > 1}


@pytest.mark.parametrize("background", [True, False], ids=["background", "blocking"])
def test_a_manual_compact_whose_summarizer_fails_once_records_each_request_once(tmp_path, background):
    assert requests_remembered_twice(background, tmp_path) == {}


# --- a tool artifact JSON cannot sort: a dict with int and str keys ----------------------------------------------


@tool(response_format="content_and_artifact")
def run_tests_with_counts(module: str) -> tuple[str, dict]:
    """Run the test suite of a module; the artifact counts the cases, by outcome and by case number."""
    return f"pytest {module}: " + "case ok, value computed and checked\n" * 110, {"passed": 42, 7: "flaky"}


class ArtifactModel(ToolCallingModel):
    """The fronts' agent, whose test runs come back with an artifact keyed by names and by case numbers."""

    def _reply(self, messages):
        reply = super()._reply(messages)
        calls = [{**c, "name": "run_tests_with_counts"} if c["name"] == "run_tests" else c for c in reply.tool_calls]
        return reply.model_copy(update={"tool_calls": calls})


def test_a_tool_artifact_with_int_and_str_keys_leaves_background_compaction_working(tmp_path):
    config = CONFIG.model_copy(update={"background": {"enabled": True}})
    middleware = CompactionMiddleware(model=ScriptedModel(), config=config, storage=tmp_path)
    tools = [run_tests_with_counts, *[t for t in TOOLS if t.name != "run_tests"]]
    agent = create_agent(ArtifactModel(), tools, middleware=[middleware], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "artifacts"}}
    events = []
    for n in range(REQUESTS):
        events += list(agent.stream({"messages": [request(n)]}, thread, stream_mode="custom"))
    errors = [e["error"] for e in events if e.get("error")]
    assert errors == [], f"{len(errors)} compaction errors, e.g. {errors[0]}"
    assert [e for e in events if e.get("event") == "compaction_applied" and e.get("mode") == "background"]


# --- the transcript's order through a storage outage at the swap ----------------------------------------------


class OutageAtTheSwap(FileStorage):
    """Files that cannot be read for a moment: the second transcript read (the swap's offload) fails, then all works.

    The first read is the offload before the job starts; the second, the
    offload at the swap of what is kept after the summary.
    """

    def __init__(self, root) -> None:
        super().__init__(root)
        self.reads = 0

    def read_transcript(self, thread_id: str) -> list[dict]:
        self.reads += 1
        if self.reads == 2:
            raise ConnectionError("the database is restarting")
        return super().read_transcript(thread_id)


def test_an_outage_at_the_swap_leaves_the_transcript_in_the_order_messages_appeared(tmp_path):
    """The summary is never written before messages kept after it that the transcript did not take yet."""
    from langgraph_compaction import add_compaction
    from langgraph_compaction.engine.jobs import InstantRunner, use_runner

    storage = OutageAtTheSwap(tmp_path)
    model = ToolCallingModel()
    graph = StateGraph(CompactionState)
    bound = model.bind_tools(TOOLS)
    graph.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    add_compaction(graph, before="agent", model=ScriptedModel(), config=CONFIG, storage=storage, agent_model=bound)
    agent = graph.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "outage"}}
    with use_runner(InstantRunner()):
        for n in range(REQUESTS):
            agent.invoke({"messages": [request(n)]}, thread)
    assert storage.reads > 2
    compaction = agent.get_state(thread).values["compaction"]
    assert compaction["counts"].get("summarize", 0) >= 2
    problems = transcript_order_problems(agent, thread, tmp_path)
    assert problems == [], f"{len(problems)} records out of order, e.g. {problems[:2]}"
