"""The ARTIFACTS trail keeps to ``fidelity.trail_tokens`` whatever the number of changed files.

A codemod agent changes 100 files a request; a cleanup runs ``git rm`` on
1,000 paths at a time. Past the budget the changed files of the largest
folders are counted, not listed: the trail says how many, in which folders,
and which ``session_search`` query finds them again.
"""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import agent_loop, edit_file

from langgraph_compaction import CompactionConfig, add_compaction, is_summary
from langgraph_compaction.core.config import FidelityConfig
from langgraph_compaction.core.sections import section
from langgraph_compaction.core.summary import build_summary_message, extractive_summary
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.core.trail import expand_group
from langgraph_compaction.testing import ScriptedModel

BUDGET = FidelityConfig().trail_tokens
_COUNTED = re.compile(r"^- (\S*)/ \((\d+) changed files(?!:)")


def _paths(request: int, per_request: int = 100, folders: int = 12) -> list[str]:
    return [f"src/pkg{k % folders}/mod{request}_{k}.py" for k in range(per_request)]


def _codemod_round(request: int, paths: list[str]) -> list:
    calls = [
        {"name": "edit_file", "args": {"path": p, "old": "log", "new": "logger"}, "id": f"e{request}-{k}"}
        for k, p in enumerate(paths)
    ]
    results = [
        ToolMessage("ok", tool_call_id=c["id"], name="edit_file", id=f"r{request}-{k}") for k, c in enumerate(calls)
    ]
    return [
        HumanMessage(f"Request {request}: rename the logger in the next batch.", id=f"u{request}"),
        AIMessage("", tool_calls=calls, id=f"a{request}"),
        *results,
    ]


def _trail_lines(artifacts: str) -> list[str]:
    return [line for line in artifacts.splitlines() if line.startswith("- ")]


def _accounted(artifacts: str) -> int:
    """Return how many changed files the trail names one by one or counts on a folder's line."""
    named = sum(1 for line in _trail_lines(artifacts) if line.endswith(("(edited)", "(deleted)", "(changed)")))
    named += sum(len(expand_group(line[2:])) for line in _trail_lines(artifacts) if " changed files: " in line)
    return named + sum(int(m.group(2)) for line in _trail_lines(artifacts) if (m := _COUNTED.match(line)))


def test_sixteen_codemod_requests_keep_the_trail_to_its_budget_and_account_for_every_changed_file():
    summary = None
    sizes = []
    for request in range(16):  # one compaction per request, each summary chained on the previous one
        messages = ([build_summary_message(summary)] if summary else []) + _codemod_round(request, _paths(request))
        summary = extractive_summary(messages)
        artifacts = section(summary, "ARTIFACTS")
        sizes.append(sum(estimate_text_tokens(line[2:]) + 2 for line in _trail_lines(artifacts)))
        assert _accounted(artifacts) == 100 * (request + 1), request
    assert max(sizes) <= BUDGET, sizes
    header = artifacts.splitlines()[0]
    assert "1600 changed files" in header  # says how many ...
    counted = {m.group(1) for line in _trail_lines(artifacts) if (m := _COUNTED.match(line))}
    named = re.search(r"e\.g\. session_search\('(\S+)/'\)", header)
    assert named and named.group(1) in counted  # ... and names the query that finds them again


def test_git_rm_of_a_thousand_paths_at_a_time_keeps_the_summary_small():
    messages = [HumanMessage("Remove the generated fixtures.", id="u")]
    for batch in range(10):
        paths = [f"fixtures/gen{batch % 3}/case_{batch}_{k}.json" for k in range(1_000)]
        call = {"name": "bash", "args": {"command": "git rm -q " + " ".join(paths)}, "id": f"rm{batch}"}
        messages += [
            AIMessage("", tool_calls=[call], id=f"a{batch}"),
            ToolMessage("", tool_call_id=f"rm{batch}", name="bash", id=f"t{batch}"),
        ]
    summary = extractive_summary(messages)
    artifacts = section(summary, "ARTIFACTS")
    assert estimate_text_tokens(artifacts) <= BUDGET + 200  # the trail and its header
    assert _accounted(artifacts) == 10_000
    assert estimate_text_tokens(summary) < 3_000  # was 112k tokens at 1,000 paths a command


def test_a_trail_under_its_budget_still_names_every_changed_file():
    messages = _codemod_round(0, _paths(0, per_request=20))
    artifacts = section(extractive_summary(messages), "ARTIFACTS")
    assert not any(_COUNTED.match(line) for line in _trail_lines(artifacts))
    for path in _paths(0, per_request=20):
        assert f"- {path} (edited)" in artifacts


def test_a_codemod_agent_on_a_32k_window_ends_every_compaction_under_the_trigger(tmp_path):
    requests = 16
    state = {"n": 0}

    def agent(s):
        latest = [m for m in s["messages"] if isinstance(m, HumanMessage) and not is_summary(m)][-1]
        if isinstance(s["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(f"Batch done for: {latest.content[:20]}")]}
        n = state["n"]
        state["n"] += 1
        calls = [
            {"name": "edit_file", "args": {"path": p, "old": "log", "new": "logger"}, "id": f"e{n}-{k}"}
            for k, p in enumerate(_paths(n))
        ]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    builder = agent_loop(agent, [edit_file])
    config = CompactionConfig(context_window=32_000)
    add_compaction(builder, before="agent", model=ScriptedModel(), config=config, storage=tmp_path)
    graph = builder.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "codemod"}}
    for n in range(requests):
        graph.invoke({"messages": [HumanMessage(f"Request {n}: rename the logger in the next batch.")]}, thread)
    compaction = graph.get_state(thread).values["compaction"]
    summaries = [e for e in compaction["events"] if e.get("stage") == "summarize" and "tokens_after" in e]
    assert len(summaries) >= 5
    trigger = config.resolve().trigger_tokens
    assert all(e["tokens_after"] < trigger and not e.get("over_budget") for e in summaries), summaries
    summary = next(m for m in graph.get_state(thread).values["messages"] if is_summary(m))
    assert estimate_text_tokens(section(summary.content, "ARTIFACTS")) <= BUDGET + 200


def _busy_session(calls: int = 500, seed: int = 7) -> tuple[list, list[tuple[str, str]]]:
    """Return a session of ``calls`` reads and edits over 300 files in 10 folders, and its (path, verb) per call.

    Five modules are the agent's work: read and edited again and again all
    session long; the others are touched once or twice here and there.
    """
    import random

    rng = random.Random(seed)
    files = [f"src/pkg{k}/module_{j}.py" for k in range(10) for j in range(30)]
    hot = [
        "src/pkg3/module_7.py",
        "src/pkg3/module_8.py",
        "src/pkg5/module_1.py",
        "src/pkg0/module_29.py",
        "src/pkg9/module_4.py",
    ]
    steps = []
    for n in range(calls):
        path = hot[n % len(hot)] if n % 3 == 0 else rng.choice(files)
        steps.append((path, "edited" if rng.random() < 0.3 else "read"))
    messages = [HumanMessage("Refactor the billing modules.", id="u")]
    for n, (path, verb) in enumerate(steps):
        args = {"file_path": path} if verb == "read" else {"file_path": path, "old_string": "a", "new_string": "b"}
        call = {"name": "Read" if verb == "read" else "Edit", "args": args, "id": f"c{n}"}
        messages += [AIMessage("", tool_calls=[call], id=f"a{n}"), ToolMessage("ok", tool_call_id=f"c{n}", id=f"t{n}")]
    return messages, steps


def test_the_files_the_agent_works_on_most_keep_their_own_lines_when_the_trail_is_over_its_budget():
    from collections import Counter

    messages, steps = _busy_session()
    artifacts = section(extractive_summary(messages), "ARTIFACTS")
    assert estimate_text_tokens(artifacts) <= BUDGET + 200  # the trail is bounded ...
    lines = _trail_lines(artifacts)
    assert len({p for p, _ in steps}) > len(lines)  # ... with more files than it can name
    recent = Counter(path for path, _ in steps[-200:])
    worked_on = {path for path, n in recent.items() if n >= 3}
    assert len(worked_on) >= 5
    named = {line[2:].split(" (")[0] for line in lines}
    assert worked_on - named == set()  # each on its own line, not counted on its folder's line
    # and every changed file is still named or counted
    changed = {p for p, verb in steps if verb == "edited"}
    counted = {m.group(1) for line in lines if (m := _COUNTED.match(line))}
    assert {p for p in changed if p not in named and p.rsplit("/", 1)[0] not in counted} == set()
