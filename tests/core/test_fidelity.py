"""Summary fidelity: the artifact trail, the user's own words and pinned constraints survive every compaction.

Golden tests replay real trajectories (tests/data/trajectories, see SOURCES.md)
through the compiled graph with the scripted summarizer; the others build the
messages a user would have.
"""

import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from support import SMALL_WINDOW, build_graph, first_input
from support.replay import replay

from langgraph_compaction import CompactionConfig
from langgraph_compaction.core.config import FidelityConfig
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME, is_user_turn, text_of
from langgraph_compaction.core.fidelity import (
    PINS_HEADER,
    complete_summary,
    merge_pins,
    pin_constraint,
    pin_id,
    stated_rules,
    unpin_constraint,
)
from langgraph_compaction.core.summary import build_summary_message, extractive_summary, section
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.core.trail import tool_trail
from langgraph_compaction.engine.gate import GATE
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.testing import ScriptedModel, scripted_summary
from langgraph_compaction.trajectories import load_trajectory

DATA = Path(__file__).resolve().parents[1] / "data" / "trajectories"
THREAD = {"configurable": {"thread_id": "fidelity"}}
# a small window, so that the short OpenHands runs are compacted again and again
TIGHT = CompactionConfig(context_window=24_000, keep_tokens=3_000)


def _summary(messages):
    return next(m for m in messages if m.name == SUMMARY_MESSAGE_NAME)


def _summary_texts(graph, turns, config=THREAD, first=None, start=0):
    """Run user turns ``start`` .. ``start + turns - 1``; return every distinct summary in the state, in order."""
    seen: dict[str, str] = {}
    for t in range(start, start + turns):
        turn = first if (t == 0 and first) else first_input(t)
        if "compaction" in turn:  # pins are the operator's: set between runs, never through a run's input
            graph.update_state(config, {"compaction": turn["compaction"]}, as_node=GATE)
        graph.invoke({"messages": turn["messages"]}, config)
        for m in graph.get_state(config).values["messages"]:
            if m.name == SUMMARY_MESSAGE_NAME:
                seen.setdefault(m.id, m.content)
    return list(seen.values())


def _calls(*specs):
    """Return an assistant message calling tools and the results: specs are (name, args, result)."""
    calls = [{"name": n, "args": a, "id": f"c{i}-{n}"} for i, (n, a, _) in enumerate(specs)]
    results = [ToolMessage(r, tool_call_id=c["id"], name=c["name"]) for c, (_, _, r) in zip(calls, specs, strict=False)]
    return [AIMessage("", tool_calls=calls), *results]


# --- golden tests on real trajectories ------------------------------------------------------


@pytest.mark.parametrize("name", ["oh_claude35_swebv_django-11292", "oh_claude35_swebv_astropy-14598"])
def test_files_an_openhands_run_edited_are_all_in_artifacts_after_two_compactions(name, tmp_path):
    trajectory = load_trajectory(DATA / f"{name}.jsonl")
    edits = [
        (m.id, c["args"]["path"])
        for m in trajectory
        for c in getattr(m, "tool_calls", None) or []
        if c["name"] == "str_replace_editor" and c["args"].get("command") in ("create", "str_replace", "insert")
    ]
    # chained summaries are what is tested: without superseded results shortened, astropy's repeated runs compact twice
    replayer, state = replay(
        trajectory, ScriptedModel(), TIGHT.model_copy(update={"dedupe_results": False}), tmp_path, InMemorySaver()
    )
    assert replayer.problems == []
    assert state["compaction"]["counts"]["summarize"] >= 2
    artifacts = section(_summary(state["messages"]).content, "ARTIFACTS")
    in_state = {m.id for m in state["messages"]}
    compacted = {path for message_id, path in edits if message_id not in in_state}
    assert compacted, "the run's edits must have been compacted for this test to mean anything"
    for path in compacted:
        assert re.search(rf"^- {re.escape(path)} \((?:[a-z]+, )*(?:edited|wrote)\b", artifacts, re.MULTILINE), path
    # the edits still in the tail are in the context anyway
    tail_calls = json.dumps([getattr(m, "tool_calls", None) for m in state["messages"]])
    assert all(path in artifacts or path in tail_calls for _, path in edits)


@pytest.mark.parametrize("pin", ["api", "rule in english", "rule in chinese"])
def test_a_pinned_never_push_to_main_survives_five_chained_compactions(pin, tmp_path):
    graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    first = first_input(0)
    if pin == "api":
        constraint = "Never push to main."
        first = {**first, **pin_constraint(constraint)}
    else:
        constraint = "Never push to main." if pin == "rule in english" else "永远不要推送到 main 分支。"
        request = first["messages"][-1]
        first = {"messages": [*first["messages"][:-1], HumanMessage(f"{request.content}. {constraint}")]}
    summaries = _summary_texts(graph, 16, first=first)
    assert agent.problems == []
    assert len(summaries) >= 5
    for text in summaries:
        intent = section(text, "SESSION INTENT")
        assert f"{PINS_HEADER}\n- {constraint}\n" in intent
        assert intent.count(f"- {constraint}") == 1


@pytest.mark.parametrize(
    ("name", "config"),
    [
        # blocking: the compaction comes at the trigger, so that at least three requests are compacted by the end
        (
            "tau_grok3_retail_task54",
            CompactionConfig(context_window=24_000, keep_tokens=2_000, trigger_messages=20, background=False),
        ),
        (
            "tau2_gpt4o_telecom_data_usage",
            CompactionConfig(context_window=24_000, keep_tokens=1_000, trigger_messages=12, background=False),
        ),
        (
            "cc_opus46_entire-cli_32parallel",
            CompactionConfig(context_window=60_000, keep_tokens=8_000, background=False),
        ),
    ],
)
def test_the_latest_three_compacted_requests_are_verbatim_in_session_intent(name, config, tmp_path):
    trajectory = load_trajectory(DATA / f"{name}.jsonl")
    replayer, state = replay(trajectory, ScriptedModel(), config, tmp_path, InMemorySaver())
    assert replayer.problems == []
    in_state = {m.id for m in state["messages"]}
    fed = trajectory[
        : max(i for i, m in enumerate(trajectory) if m.type == "ai")
    ]  # what follows the last reply is never sent
    compacted = [text_of(m).strip() for m in fed if is_user_turn(m) and m.id not in in_state]
    # requests, not pasted documents: the recorded Claude Code summary (4,358 tokens) is cut to its start
    short = [r for r in compacted if len(r) < 2_000]
    assert len(short) >= 3
    intent = section(_summary(state["messages"]).content, "SESSION INTENT")
    for request in short[-3:]:
        assert f"<request>\n{request}\n</request>" in intent


def test_a_200_path_history_over_the_trail_budget_names_every_changed_file_and_counts_the_reads_by_folder():
    reads = [("Read", {"file_path": f"src/pkg/module_{i:03d}.py"}, "ok") for i in range(200)]
    edits = [
        ("Edit", {"file_path": f"src/pkg/module_{i:03d}.py", "old_string": "a", "new_string": "b"}, "ok")
        for i in (3, 50)
    ]
    messages = [HumanMessage("Rename the logger everywhere.", id="u1")]
    for k, spec in enumerate(edits[:1] + reads + edits[1:]):
        messages += _calls(spec)
        messages[-2].id, messages[-1].id = f"a{k}", f"t{k}"
    text = extractive_summary(messages)
    artifacts = section(text, "ARTIFACTS")
    entries = [line for line in artifacts.splitlines() if line.startswith("- ")]
    # 198 names on the folder's line alone are over the 1,200-token trail: the reads are counted, changed files stay
    assert sum(estimate_text_tokens(e[2:]) + 2 for e in entries) <= FidelityConfig().trail_tokens
    assert entries == [
        "- src/pkg/module_050.py (edited, read)",
        "- src/pkg/module_003.py (read, edited)",
        "- src/pkg/ (198 other files)",
    ]
    assert "198 other files counted by folder" in artifacts
    assert "session_search('src/pkg/')" in artifacts and "recall(message_ids)" in artifacts

    # chained: the next summary carries the count on, and the new command and its file come first
    later = [build_summary_message(text), HumanMessage("Now run the tests.", id="u2")]
    later += _calls(("Bash", {"command": "pytest -q tests/test_logging.py"}, "3 passed\nexit code 0"))
    again = section(extractive_summary(later), "ARTIFACTS")
    lines = again.splitlines()
    assert lines[1:] == [  # under the budget again: newest first, the carried count as it was
        "- $ pytest -q tests/test_logging.py (exit 0)",
        "- tests/test_logging.py (ran)",
        "- src/pkg/module_050.py (edited, read)",
        "- src/pkg/module_003.py (read, edited)",
        "- src/pkg/ (198 other files)",
    ]


# --- the artifact trail ----------------------------------------------------------------------


def test_trail_has_paths_commands_with_exit_status_and_urls_newest_first():
    messages = [HumanMessage("go", id="u")]
    messages += _calls(
        ("str_replace_editor", {"command": "view", "path": "/repo/app/models.py"}, "1 class A: ..."),
        (
            "execute_bash",
            {"command": "cd /repo && python -m pytest tests/test_models.py -q"},
            "1 failed\n[Command finished with exit code 1]",
        ),
    )
    messages += _calls(
        (
            "str_replace_editor",
            {"command": "str_replace", "path": "/repo/app/models.py", "old_str": "a", "new_str": "b"},
            "ok",
        ),
        ("write_file", {"filename": "notes/plan.md", "content": "..."}, "ok"),
        ("fetch", {"url": "https://docs.djangoproject.com/en/5.0/ref/models/"}, "<html>"),
        ("Bash", {"command": "curl -s https://api.example.com/v1/status | tee out/status.json"}, "{}"),
        ("execute_bash", {"command": "cd /repo && python -m pytest tests/test_models.py -q"}, "2 passed\nexit code 0"),
        ("execute_bash", {"command": "rm /repo/app/old_models.py"}, "Exit code 0"),
    )
    assert [e.render() for e in tool_trail(messages)] == [
        "$ rm /repo/app/old_models.py (exit 0)",
        "/repo/app/old_models.py (deleted)",
        "$ cd /repo && python -m pytest tests/test_models.py -q (exit 0)",  # the newest run's status
        "tests/test_models.py (ran)",
        "$ curl -s https://api.example.com/v1/status | tee out/status.json",
        "out/status.json (wrote)",
        "https://api.example.com/v1/status (fetched)",
        "https://docs.djangoproject.com/en/5.0/ref/models/ (fetched)",
        "notes/plan.md (wrote)",
        "/repo/app/models.py (edited, read)",  # an editor's sub-command is what it did, not a shell command
    ]


def test_summarizer_copying_the_last_summary_repeats_nothing(tmp_path):
    def echo_previous(prompt):
        # a summarizer that pastes the previous summary's sections back, then its own
        body = prompt.split("<messages>", 1)[-1]
        previous = body.split("[summary of earlier conversation]\n", 1)[-1] if "[summary of earlier" in body else ""
        own = scripted_summary(prompt)
        return "\n\n".join(
            f"## {name}\n{section(previous, name)}\n{section(own, name)}"
            for name in ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
        )

    graph, agent = build_graph(
        ScriptedModel(summary=echo_previous), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver()
    )
    summaries = _summary_texts(graph, 10, first={**first_input(0), **pin_constraint("Never push to main.")})
    assert len(summaries) >= 3
    last = summaries[-1]
    assert last.count("Never push to main.") == 1
    assert last.count("Trail from the tool calls") == 1
    assert last.count("<request>\nTask 0 please fix module0 and run its tests\n</request>") == 1
    entries = [line for line in section(last, "ARTIFACTS").splitlines() if line.startswith("- ")]
    assert len(entries) == len(set(entries))
    assert "- src/module0.py (wrote, read)" in entries


# --- session intent ------------------------------------------------------------------------------


def test_oldest_requests_are_dropped_first_within_the_token_budget():
    requests = [f"Request {i}: " + "please look at the parser again " * 60 for i in range(10)]  # ~370 tokens each
    messages = [HumanMessage(r, id=f"u{i}") for i, r in enumerate(requests)]
    intent = section(extractive_summary(messages), "SESSION INTENT")
    shown = re.findall(r"<request>\n(.*?)\n</request>", intent, re.DOTALL)
    assert shown == [r.strip() for r in requests[-len(shown) :]]
    assert 3 <= len(shown) <= 5
    assert f"oldest first ({10 - len(shown)} earlier not shown; see the transcript):" in intent

    # over half of a small budget, the request before the newest is cut to its start
    small = section(extractive_summary(messages, settings=FidelityConfig(request_tokens=500)), "SESSION INTENT")
    cut, newest = re.findall(r"<request>\n(.*?)\n</request>", small, re.DOTALL)
    assert newest == requests[-1].strip()
    assert cut.startswith("Request 8: please") and cut.endswith("more characters of this request; see the transcript)")
    assert "oldest first (8 earlier not shown; see the transcript):" in small


def test_a_pasted_document_does_not_crowd_out_the_requests_before_it():
    document = "Here is the log:\n" + "ERROR worker 7 lost its lease and restarted\n" * 600  # ~5,000 tokens
    messages = [HumanMessage("Find why the worker restarts.", id="u1"), HumanMessage(document, id="u2")]
    intent = section(extractive_summary(messages), "SESSION INTENT")
    assert "<request>\nFind why the worker restarts.\n</request>" in intent
    assert re.search(r"more characters of this request; see the transcript\)\n</request>", intent)


def test_complete_summary_is_idempotent_and_keeps_the_summarizers_goal():
    messages = [HumanMessage("Add a --skip-checks option. Never push to main.", id="u1")]
    messages += _calls(
        ("Edit", {"file_path": "django/core/management/base.py", "old_string": "a", "new_string": "b"}, "ok")
    )
    llm = (
        "## SESSION INTENT\nAdd a --skip-checks flag to management commands.\n\n## SUMMARY\nDone.\n\n"
        "## ARTIFACTS\n- django/core/management/base.py: added the option\n\n## NEXT STEPS\nRun the tests."
    )
    once = complete_summary(llm, messages)
    assert complete_summary(once.text, messages).text == once.text
    intent = section(once.text, "SESSION INTENT")
    assert intent.startswith(f"{PINS_HEADER}\n- Never push to main.\n\nGoal: Add a --skip-checks flag")
    assert "<request>\nAdd a --skip-checks option. Never push to main.\n</request>" in intent
    assert section(once.text, "ARTIFACTS") == (
        "- django/core/management/base.py: added the option\n\n"
        "Trail from the tool calls, newest first:\n- django/core/management/base.py (edited)"
    )
    assert once.pins == [
        {
            "id": pin_id("Never push to main."),
            "text": "Never push to main.",
            "source": "auto",
            "active": True,
            "message_id": "u1",
        }
    ]


# --- pins ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Never push to main.", True),
        ("please always run the linter before committing", True),
        ("You must not change the public API", True),
        ("Don't touch the migrations folder.", True),
        ("不要修改测试文件。", True),
        ("部署前必须先跑完集成测试", True),
        ("It always fails on Fridays.", False),
        ("Why don't we retry?", False),
        ("**NEVER:**", False),
        ("Can you look at the parser?", False),
    ],
)
def test_rules_users_state_are_detected_word_for_word(text, rule):
    found = stated_rules([HumanMessage(f"Here is the plan.\n{text}", id="u")])
    assert found == ([(text, "u")] if rule else [])


def test_pin_and_unpin_through_a_checkpointed_graph(tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "c.sqlite")) as saver:
        graph, agent = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=saver)
        graph.update_state(THREAD, pin_constraint("Never push to main."), as_node=GATE)  # a new thread
        graph.invoke(first_input(0), THREAD)
        graph.update_state(THREAD, pin_constraint("Keep the public API stable."))
        graph.invoke(first_input(1), THREAD)
        pins = graph.get_state(THREAD).values["compaction"]["pins"]
        assert json.loads(json.dumps(pins)) == pins  # JSON-native: survives any checkpointer and a Studio edit
        assert [p["text"] for p in pins] == ["Never push to main.", "Keep the public API stable."]

        graph.update_state(THREAD, unpin_constraint("Never push to main."))  # what an application does between runs
        graph.invoke(first_input(2), THREAD)
        before = {m.content for m in graph.get_state(THREAD).values["messages"] if m.name == SUMMARY_MESSAGE_NAME}
        fresh = [s for s in _summary_texts(graph, 6, start=3) if s not in before]
        assert fresh and all("- Keep the public API stable." in s and "Never push to main." not in s for s in fresh)


def test_an_unpinned_rule_is_not_pinned_again_automatically(tmp_path):
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    request = first_input(0)["messages"][-1].content + ". Never use sudo."
    first = {
        "messages": [*first_input(0)["messages"][:-1], HumanMessage(request)],
        **unpin_constraint("Never use sudo."),
    }
    summaries = _summary_texts(graph, 8, first=first)
    assert summaries and all(PINS_HEADER not in s for s in summaries)
    assert [p["active"] for p in graph.get_state(THREAD).values["compaction"]["pins"]] == [False]


def test_pin_updates_merge_by_id_and_bad_input_names_the_fix():
    pins = merge_pins([], pin_constraint("Never push to main.")["compaction"]["pins"])
    pins = merge_pins(pins, pin_constraint("Never  push to main. ")["compaction"]["pins"])  # same words: one pin
    assert len(pins) == 1
    pins = merge_pins(pins, unpin_constraint(pins[0]["id"])["compaction"]["pins"])
    assert pins[0]["active"] is False and pins[0]["text"] == "Never  push to main."
    # a Studio edit that breaks the records drops only the broken ones
    edited = read_compaction(
        {"pins": [1, {"id": 5}, {"id": "pin-x", "text": ["no"]}, {"id": "pin-y", "text": "Keep it."}]}
    )
    assert edited["pins"] == [{"id": "pin-y", "text": "Keep it."}]
    assert read_compaction({"pins": "never"})["pins"] == []
    with pytest.raises(ValueError, match=r"pin_constraint\(text=...\): text must be a non-empty string"):
        pin_constraint("  ")
    with pytest.raises(ValueError, match=r"unpin_constraint\(pin=...\)"):
        unpin_constraint(None)


def test_automatic_pins_are_bounded_and_application_pins_are_not():
    rules = [HumanMessage(f"Never edit generated file number {i}.", id=f"u{i}") for i in range(6)]
    stored = pin_constraint("Keep the public API stable.")["compaction"]["pins"]
    done = complete_summary(
        "## SUMMARY\nx\n\n## NEXT STEPS\ny", rules, pins=stored, settings=FidelityConfig(max_auto_pins=2)
    )
    intent = section(done.text, "SESSION INTENT")
    pinned = intent.split("\n\n")[0].splitlines()[1:]
    assert pinned == [
        "- Keep the public API stable.",
        "- Never edit generated file number 4.",
        "- Never edit generated file number 5.",
    ]


# --- redaction and the compaction note ---------------------------------------------------------


def test_no_secret_reaches_the_summary(tmp_path):
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    request = HumanMessage(
        f"Task 0 please fix module0 and run its tests. The key is OPENAI_API_KEY={secret} never commit it"
    )
    summaries = _summary_texts(graph, 8, first={"messages": [first_input(0)["messages"][0], request]})
    assert summaries
    assert all(secret not in s for s in summaries)
    assert "OPENAI_API_KEY=[REDACTED]" in summaries[0]


def test_the_summary_says_in_one_line_what_was_compacted(tmp_path):
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    summaries = _summary_texts(graph, 6)
    transcript = tmp_path / "sessions" / "fidelity.jsonl"
    note = re.search(
        r"^Compacted (\d+) messages \(~([\d,]+) tokens\), ids (\S+) \.\. (\S+); full transcript: (.+)\.$",
        summaries[0],
        re.MULTILINE,
    )
    assert note and int(note.group(1)) > 0 and note.group(5) == "sessions/fidelity.jsonl"
    ids = [json.loads(line)["data"]["id"] for line in transcript.read_text().splitlines()]
    assert ids.index(note.group(3)) < ids.index(note.group(4))
