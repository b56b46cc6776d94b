"""Property-based: any conversation shape, compacted, is one a provider accepts; no run reads another's transcript."""

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.graph.message import add_messages
from test_isolation import NASTY, hashed_label

from langgraph_compaction import CompactionConfig
from langgraph_compaction.core.plan import compacted_view, find_cutoff
from langgraph_compaction.core.summary import build_summary_message
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.engine.nodes import CompactionEngine
from langgraph_compaction.storage import safe_label
from langgraph_compaction.testing import view_violations


@st.composite
def conversations(draw):
    """Valid conversations with parallel, interleaved (a user note between a call and its results) and mixed rounds."""
    messages = [SystemMessage(content="system", id="sys")] if draw(st.booleans()) else []
    n_turns = draw(st.integers(1, 8))
    k = 0
    for t in range(n_turns):
        messages.append(HumanMessage(content=f"request {t} " + "w" * draw(st.integers(0, 400)), id=f"h{t}"))
        for _ in range(draw(st.integers(0, 4))):
            n_calls = draw(st.integers(1, 5))
            calls = [
                {"name": "bash", "args": {"cmd": "x" * draw(st.integers(0, 300))}, "id": f"c{k + j}"}
                for j in range(n_calls)
            ]
            k += n_calls
            messages.append(AIMessage(content="", tool_calls=calls, id=f"a{k}"))
            results = [
                ToolMessage(content="r" * draw(st.integers(0, 3000)), tool_call_id=c["id"], id=f"t{c['id']}")
                for c in calls
            ]
            if len(results) > 1 and draw(st.booleans()):
                # a queued user note logged between the results (real in Claude Code logs) -- then moved after them
                messages.extend(results)
                messages.append(HumanMessage(content="note", id=f"note{k}"))
            else:
                messages.extend(results)
        if draw(st.booleans()):
            messages.append(AIMessage(content="answer " + "a" * draw(st.integers(0, 500)), id=f"ans{t}"))
    return messages


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(0, 3000), st.integers(1, 12))
def test_compacted_view_obeys_provider_rules(messages, keep_tokens, keep_messages):
    counter = TokenCounter()
    counts = counter.counts(messages)
    cut = find_cutoff(messages, counts, keep_tokens, keep_messages)
    latest = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    if cut is None:
        return
    view = compacted_view(
        messages, {messages[i].id for i in cut.evict}, build_summary_message("## SESSION INTENT\nx\n## SUMMARY\ny")
    )
    assert view_violations(view, latest) == []
    assert sum(isinstance(m, SystemMessage) for m in view) == sum(isinstance(m, SystemMessage) for m in messages)
    # the update the summarize node writes produces exactly this view through the stock reducer
    applied = add_messages(messages, [RemoveMessage(id="__remove_all__"), *view])
    assert [m.id for m in applied] == [m.id for m in view]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_gate_plan_never_evicts_the_latest_request(messages):
    nodes = CompactionEngine(
        before="agent", model=None, config=CompactionConfig(context_window=4_000, trigger_tokens=2_000, keep_tokens=500)
    )
    plan = nodes.plan(messages, manual=True)
    latest = next(i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage))
    if plan.cut is not None:
        assert latest not in plan.cut.evict
        assert all(not isinstance(messages[i], SystemMessage) for i in plan.cut.evict)


@st.composite
def with_reminders(draw):
    """Conversations where the app adds a system reminder before some user turns (after the first)."""
    messages = draw(conversations())
    out = []
    for m in messages:
        if isinstance(m, HumanMessage) and m.id.startswith("h") and m.id != "h0" and draw(st.booleans()):
            out.append(SystemMessage(content=f"reminder before {m.id}", id=f"rem-{m.id}"))
        out.append(m)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_reminders(), st.integers(0, 3000), st.integers(1, 12))
def test_only_the_leading_system_messages_are_pinned(messages, keep_tokens, keep_messages):
    from langgraph_compaction.core.conversation import leading_systems
    from langgraph_compaction.invariants import history_problems

    counter = TokenCounter()
    cut = find_cutoff(messages, counter.counts(messages), keep_tokens, keep_messages)
    if cut is None:
        return
    lead = leading_systems(messages)
    assert not [i for i in cut.evict if i < lead]
    summary = build_summary_message("## SESSION INTENT\nx\n## SUMMARY\ny")
    view = compacted_view(messages, {messages[i].id for i in cut.evict}, summary)
    assert history_problems(view, messages) == []
    assert [m.id for m in view[: lead + 1]] == [m.id for m in messages[:lead]] + [summary.id]
    assert [m.id for m in add_messages(messages, [RemoveMessage(id="__remove_all__"), *view])] == [m.id for m in view]


# --- bounded requests: huge parallel rounds at the default prompt_cache, 1,000+ changed files -------------------


@st.composite
def huge_parallel_rounds(draw):
    """One request answered by one parallel round whose results together are over the window (2-12 of them)."""
    window = draw(st.sampled_from([32_000, 64_000, 128_000, 200_000]))
    width = draw(st.integers(2, 12))
    share = draw(st.floats(1.05, 1.6))  # the round's size, as a share of the window
    chars = int(window * share * 3.2 / width)  # about 3.2 characters a token in these logs
    name = draw(st.sampled_from(["bash", "write_file", "read_file", "read_log"]))
    calls = [{"name": name, "args": {"cmd": f"cat log{i}"}, "id": f"c{i}"} for i in range(width)]
    line = "2026-01-01 12:00:00 worker step ok value=1234567\n"
    results = [
        ToolMessage(content=(line * (chars // len(line) + 1))[:chars], tool_call_id=c["id"], name=name, id=f"t{i}")
        for i, c in enumerate(calls)
    ]
    system = [SystemMessage(content="You are an operations agent.", id="sys")] if draw(st.booleans()) else []
    return window, [
        *system,
        HumanMessage(content="Read the logs and say what failed.", id="h"),
        AIMessage(content="", tool_calls=calls, id="a"),
        *results,
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(huge_parallel_rounds())
def test_a_huge_parallel_round_at_the_default_prompt_cache_is_brought_under_the_trigger(case):
    from langgraph_compaction.core.plan import plan_compaction

    window, messages = case
    config = CompactionConfig(context_window=window)  # the defaults: prompt_cache=True
    budget = config.resolve()
    counter = TokenCounter()
    counts = counter.counts(messages)
    assert sum(counts) > window
    plan = plan_compaction(messages, counts, budget, config, counter.message)
    # no summary can help (the conversation is the newest round): layers 1-2 must, whatever the cost rule says
    assert plan.tokens_after_layers < budget.trigger_tokens, (plan.tokens_after_layers, plan.layer_counts)


@st.composite
def codemods(draw):
    """1,000-3,000 changed files over 1-60 folders, edited 50-400 at a time, some deleted by ``git rm``."""
    total = draw(st.integers(1_000, 3_000))
    folders = draw(st.integers(1, 60))
    batch = draw(st.integers(50, 400))
    depth = draw(st.integers(1, 4))
    paths = [f"{'/'.join(f'd{(i * 7 + k) % folders}' for k in range(depth))}/file_{i}.py" for i in range(total)]
    messages = [HumanMessage(content="Apply the codemod everywhere.", id="h")]
    for start in range(0, total, batch):
        chunk = paths[start : start + batch]
        if draw(st.booleans()):
            calls = [{"name": "edit_file", "args": {"path": p}, "id": f"e{start}-{k}"} for k, p in enumerate(chunk)]
        else:
            calls = [{"name": "bash", "args": {"command": "git rm -q " + " ".join(chunk)}, "id": f"rm{start}"}]
        messages.append(AIMessage(content="", tool_calls=calls, id=f"a{start}"))
        messages += [ToolMessage(content="ok", tool_call_id=c["id"], id=f"t{c['id']}") for c in calls]
    return total, messages


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codemods(), st.integers(1, 3))
def test_the_trail_keeps_to_its_budget_and_accounts_for_every_changed_file(case, summaries):
    import re

    from langgraph_compaction.core.config import FidelityConfig
    from langgraph_compaction.core.sections import section
    from langgraph_compaction.core.summary import extractive_summary
    from langgraph_compaction.core.tokens import estimate_text_tokens

    total, messages = case
    budget = FidelityConfig().trail_tokens
    summary, start = None, 0
    for k in range(1, summaries + 1):  # chained: each summary carries the previous one's trail on
        end = len(messages) * k // summaries
        while end < len(messages) and isinstance(messages[end], ToolMessage):
            end += 1
        summary = extractive_summary(([build_summary_message(summary)] if summary else []) + messages[start:end])
        start = end
    lines = [line[2:] for line in section(summary, "ARTIFACTS").splitlines() if line.startswith("- ")]
    assert sum(estimate_text_tokens(line) + 2 for line in lines) <= budget
    named = sum(1 for line in lines if line.endswith(("(edited)", "(deleted)")))
    counted = sum(int(m.group(1)) for line in lines if (m := re.search(r"\((\d+) changed files", line)))
    assert named + counted == total


#: Lines of user, agent and application text that look like a summary's structure or a prompt's placeholders.
HOSTILE_LINES = [
    "SUMMARY of the incident: the worker lost its lease.",
    "NEXT STEPS:",
    "## ARTIFACTS",
    "**SESSION INTENT**",
    "</request>",
    "<request>",
    "Pinned constraints (none):",
    "- a dash line",
    "  an indented line",
    "",
    "Trail from the tool calls, newest first:",
    "{messages} {focus} {memory_md} {ledger} {today}",
]
_HOSTILE_TEXT = st.lists(st.sampled_from(HOSTILE_LINES), max_size=5).map("\n".join)


@st.composite
def hostile_chains(draw):
    """Rounds of requests holding hostile lines, hostile pins (one of them maybe huge), and a window."""
    rounds = [draw(st.lists(_HOSTILE_TEXT, min_size=1, max_size=4)) for _ in range(draw(st.integers(1, 4)))]
    pins = draw(st.lists(_HOSTILE_TEXT.map(lambda t: "Rule:\n" + t), max_size=3))
    if draw(st.booleans()):
        pins.append("Never deploy on Friday.\n" + "NEXT STEPS: drain every node.\n" * draw(st.integers(1, 2_000)))
    return rounds, pins, draw(st.sampled_from([16_000, 32_000, 128_000, None]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_chains())
def test_hostile_requests_and_pins_are_always_quoted_or_counted_and_pins_keep_to_their_budget(case):
    import re

    from langgraph_compaction.core.fidelity import complete_summary, pin_constraint
    from langgraph_compaction.core.pins import pin_budget
    from langgraph_compaction.core.sections import section
    from langgraph_compaction.core.tokens import estimate_text_tokens

    rounds, texts, window = case
    pins = [pin_constraint(t)["compaction"]["pins"][0] for t in texts]
    answer = "## SESSION INTENT\nShip it.\n## SUMMARY\nShort.\n## ARTIFACTS\nNone\n## NEXT STEPS\nRun the tests."
    summary, n = None, 0
    for requests in rounds:  # each round is summarized with the previous summary: a chain
        messages = [build_summary_message(summary)] if summary else []
        for text in requests:
            messages += [HumanMessage(f"Task {n}: {text}", id=f"h{n}"), AIMessage(f"Done {n}.", id=f"a{n}")]
            n += 1
        summary = complete_summary(answer, messages, pins=pins, window=window).text
        quoted = [int(k) for k in re.findall(r"<request>\nTask (\d+):", summary)]
        earlier = re.search(r"oldest first \((\d+) earlier not shown", summary)
        shown_from = int(earlier.group(1)) if earlier else 0
        assert quoted == list(range(shown_from, n))
        assert section(summary, "NEXT STEPS") == "Run the tests." and section(summary, "SUMMARY") == "Short."
        pins_block = section(summary, "SESSION INTENT").split("\n\n")[0]  # a pin's lines are indented, never blank
        assert pins_block.startswith("Pinned constraints") or not pins
        assert estimate_text_tokens(pins_block) <= pin_budget(window=window).pins + 60


@settings(max_examples=100, deadline=None)
@given(_HOSTILE_TEXT, _HOSTILE_TEXT, st.booleans(), st.booleans())
def test_a_hostile_focus_or_instruction_is_quoted_once_and_fills_nothing(focus, instruction, replaced, after):
    from langgraph_compaction.core.prompts import summary_request

    prompt = "Summarize.\n{messages}\n## SESSION INTENT ## SUMMARY ## ARTIFACTS ## NEXT STEPS" if replaced else None
    focus, instruction = f"FOCUS<{focus}>", f"APP<{instruction}>"
    request = summary_request(
        None if after else "[user]\nCONVERSATION", prompt=prompt, focus=focus, instructions=[instruction]
    )
    assert request.count(focus) == 1 and request.count(instruction) == 1
    assert request.count("CONVERSATION") == (0 if after else 1)


@st.composite
def two_runs(draw):
    """Two thread ids for two runs: none (a stateless run), nasty ones, the second built to collide with the first."""
    first = draw(st.one_of(st.none(), st.sampled_from(NASTY), st.text(max_size=20)))
    like = [] if first is None else [first, safe_label(first), hashed_label(first), first.upper(), first + "."]
    second = draw(st.one_of(st.none(), st.sampled_from(NASTY), *([st.sampled_from(like)] if like else [])))
    return [first, second], [draw(conversations()), draw(conversations())]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(two_runs(), st.sampled_from(["files", "store"]))
def test_runs_with_colliding_or_no_thread_ids_never_read_each_others_transcript(runs, backend):
    import random
    import tempfile

    from langgraph.store.memory import InMemoryStore

    from langgraph_compaction import FileStorage, StoreStorage
    from langgraph_compaction.engine.jobs import InstantRunner, use_runner
    from langgraph_compaction.testing import ScriptedModel
    from langgraph_compaction.testing.stress import Simulation, replay

    threads, conversations_ = runs
    # a summary prepared in the background is ready by the next call: no job of one example outlives its folder
    with tempfile.TemporaryDirectory() as tmp, use_runner(InstantRunner()):
        storage = FileStorage(tmp) if backend == "files" else StoreStorage(InMemoryStore())
        config = CompactionConfig(context_window=4_000, trigger_tokens=2_000, keep_tokens=500)
        keys = []
        for k, (thread, messages) in enumerate(zip(threads, conversations_, strict=True)):
            nodes = CompactionEngine(before="agent", model=ScriptedModel(), config=config, storage=storage)
            where = {"user_id": f"user-{k}", **({"thread_id": thread} if thread is not None else {})}
            sim = Simulation(nodes, {"configurable": where}, random.Random(k), 0.0, storage)
            replay(sim, [m.model_copy(update={"id": f"run{k}-{m.id}"}) for m in messages])
            keys.append(sim.transcript_key())
        if threads[0] is None or str(threads[0]) != str(threads[1]):  # else one thread, served twice
            for k, key in enumerate(keys):
                other = f"run{1 - k}-"
                assert not [r for r in storage.read_transcript(key) if (r["data"].get("id") or "").startswith(other)]


# --- retried runs, unanswered calls, update_state under a background job, two workers --------------------------


@st.composite
def fault_plans(draw):
    """What happens at each model call of a conversation (``langgraph_compaction.testing.retries.draw_plan``'s shape), drawn."""
    from langgraph_compaction.testing.retries import RETRY_FAULTS

    two = draw(st.booleans())
    step = st.fixed_dictionaries(
        {
            "worker": st.integers(0, 1) if two else st.just(0),
            "fault": st.sampled_from(RETRY_FAULTS),
            "edit": st.integers(0, 9).map(lambda n: n == 0),  # update_state before one call in ten
        }
    )
    return {
        "background": draw(st.booleans()),
        "two_workers": two,
        "calls": draw(st.lists(step, min_size=1, max_size=12)),
    }


#: Each example replays a whole conversation (about a second): a fixed set, and no shrinking, keeps the test short;
#: ``python -m benchmarks.stress`` runs the same examples by the thousand.
RETRIED = dict(
    max_examples=12,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)


def _retried(seed: int, plan: dict, backend: str) -> dict[str, list[str]]:
    import random

    from langgraph_compaction.testing.retries import run_retry_example

    return run_retry_example(random.Random(seed), storage=backend, plan=plan)


@settings(**RETRIED)
@given(st.integers(0, 2**20), fault_plans(), st.sampled_from(["file", "store"]))
def test_retried_runs_unanswered_calls_and_two_workers_keep_history_valid_and_memory_once(seed, plan, backend):
    problems = _retried(seed, plan, backend)
    kept = ("valid_history", "nothing_lost", "exactly_once", "contained")
    assert {name: problems[name][:3] for name in kept if problems[name]} == {}


@settings(**RETRIED)
@given(st.integers(0, 2**20), fault_plans(), st.sampled_from(["file", "store"]))
def test_retried_runs_unanswered_calls_and_two_workers_send_no_request_over_the_window(seed, plan, backend):
    assert _retried(seed, plan, backend)["bounded"][:3] == []
