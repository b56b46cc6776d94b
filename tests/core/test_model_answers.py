"""What a real model writes, read as it is written: summaries without the four headings, memories without bullets.

Small open models (SmolLM2, Llama 3.2 1B, Qwen2.5 0.5B under Ollama or llama.cpp) follow the summary's four
headings and the memory prompt's bullets loosely. Their text is used whenever it says something: a summary
without the headings becomes the SUMMARY section with the deterministic sections built around it, and a
memory answer's plain or numbered lines are facts. Refused, with the reason in an event, is only what is really
unusable: empty, a refusal, a placeholder, a loop, longer than what it replaces, the prompt written back.
"""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from support import SMALL_WINDOW, build_graph, first_input

from langgraph_compaction.core.fidelity import complete_summary
from langgraph_compaction.core.prompts import MEMORY_PROMPT, SUMMARY_PROMPT
from langgraph_compaction.core.sections import section
from langgraph_compaction.core.summary import own_summary, summary_problem
from langgraph_compaction.memory.ledger import memory_answer, parse_bullets
from langgraph_compaction.testing import ScriptedModel

#: A short exchange: the user's request, a file read, the answer.
MESSAGES = [
    HumanMessage("Read config.yaml and tell me which port the service uses.", id="h1"),
    AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": "config.yaml"}, "id": "c1"}], id="a1"),
    ToolMessage("port: 8080\nhost: 0.0.0.0\n", tool_call_id="c1", name="read_file", id="t1"),
    AIMessage("The service listens on port 8080.", id="a2"),
]

# --- summaries ----------------------------------------------------------------------------------

#: (what a small model wrote, what the SUMMARY section must hold, what NEXT STEPS must hold or None)
USED_SUMMARIES = {
    "plain-prose": (
        "The user asked which port the service uses. I read config.yaml: the port is 8080.",
        "I read config.yaml: the port is 8080.",
        None,
    ),
    "markdown-title-case": (
        "## Summary\nRead config.yaml; the service listens on port 8080.\n\n## Next Steps\nNone yet.",
        "the service listens on port 8080",
        "None yet.",
    ),
    "colon-inline": (
        "Session intent: find the service port\nSummary: config.yaml sets port 8080\nNext steps: tell the user",
        "config.yaml sets port 8080",
        "tell the user",
    ),
    "bold-headers": (
        "**Session Intent:** find the port\n\n**Summary:**\n- read config.yaml\n- port is 8080\n\n"
        "**Next steps:** answer",
        "- port is 8080",
        "answer",
    ),
    "bullets-only": ("- Read config.yaml\n- Port is 8080\n- Host is 0.0.0.0", "- Port is 8080", None),
    "lead-in-then-prose": (
        "Sure! Here is the summary:\n\nThe user wants the port; config.yaml says 8080.",
        "config.yaml says 8080",
        None,
    ),
    "numbered-headings": (
        "1. Session intent: port lookup\n2. Summary: port 8080 from config.yaml\n3. Artifacts: config.yaml\n"
        "4. Next steps: none",
        "port 8080 from config.yaml",
        "none",
    ),
    "a-quoted-repeat-then-more-text": (
        "The log said 'retry in 5s, retry in 5s, retry in 5s, retry in 5s' until port 8080 was free.\n\n"
        "Next steps: check the retry loop.",
        "'retry in 5s, retry in 5s, retry in 5s, retry in 5s' until port 8080 was free.",
        "check the retry loop.",
    ),
    "free-text-and-next-steps": (
        "We looked up the port in config.yaml and found 8080.\n\nNEXT STEPS\nReport it.",
        "We looked up the port in config.yaml and found 8080.",
        "Report it.",
    ),
}


@pytest.mark.parametrize("written, in_summary, next_steps", USED_SUMMARIES.values(), ids=USED_SUMMARIES.keys())
def test_a_summary_as_a_small_model_writes_it_is_used_inside_the_deterministic_sections(
    written, in_summary, next_steps
):
    assert summary_problem(written, replaced="x" * 2_000) is None
    text = complete_summary(written, MESSAGES).text
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## SESSION INTENT",
        "## SUMMARY",
        "## ARTIFACTS",
        "## NEXT STEPS",
    ]
    assert in_summary in section(text, "SUMMARY")
    assert section(text, "NEXT STEPS") == (next_steps or "None")
    # the deterministic parts: the user's request verbatim and the file read, whatever the model wrote
    intent = section(text, "SESSION INTENT")
    assert "<request>\nRead config.yaml and tell me which port the service uses.\n</request>" in intent
    assert re.search(r"^- config\.yaml \(read\)", section(text, "ARTIFACTS"), re.MULTILINE)


def test_a_completed_free_form_summary_reads_back_the_same():
    once = complete_summary(USED_SUMMARIES["plain-prose"][0], MESSAGES).text
    assert complete_summary(once, MESSAGES).text == once


#: Useful text, then a loop, as SmolLM2-135M writes it: (the answer, what is kept, the line looped on).
LOOPED_SUMMARIES = {
    "numbered-list-then-the-same-item": (
        "1. The user asked which port the service uses.\n2. I read config.yaml: the port is 8080.\n"
        + "".join(f"{n}. The service listens on port 8080 on host 0.0.0.0.\n" for n in range(3, 30)),
        "I read config.yaml: the port is 8080.",
        "The service listens on port 8080 on host 0.0.0.0.",
    ),
    "prose-then-the-transcript-again": (
        "The user asked which port the service uses; config.yaml, read with read_file, sets port 8080.\n\n"
        + "[user]\nRead config.yaml and tell me which port the service uses.\n\n" * 12,
        "config.yaml, read with read_file, sets port 8080.",
        "[user]",
    ),
    "sections-then-a-prompt-line": (
        "## SESSION INTENT\nFind the port of the service.\n\n## SUMMARY\nconfig.yaml sets port 8080 and host "
        "0.0.0.0; the assistant told the user.\n\n## NEXT STEPS\n"
        + "Specific tasks remaining to achieve the session intent.\n"
        * 15,
        "config.yaml sets port 8080 and host 0.0.0.0; the assistant told the user.",
        "Specific tasks remaining to achieve the session intent.",
    ),
    "a-phrase-without-end": (
        "The user wants the service port. The assistant read config.yaml, which sets port 8080 on host 0.0.0.0, "
        + "and the port and the port " * 60,
        "which sets port 8080 on host 0.0.0.0",
        "and the port and the port",
    ),
}


@pytest.mark.parametrize("written, kept, looped", LOOPED_SUMMARIES.values(), ids=LOOPED_SUMMARIES.keys())
def test_a_summary_that_loops_after_useful_text_keeps_the_text_before_the_loop(written, kept, looped):
    assert summary_problem(written, replaced="x" * 8_000) is None
    text, note = own_summary(written)
    assert kept in text and text.count(looped) <= 1
    assert note is not None and re.search(r"looped; its first \d+ lines were kept", note)
    assert kept in section(complete_summary(text, MESSAGES).text, "SUMMARY")


_HEROKU = "app/.heroku/python/lib/python3.6/site-packages/django"
#: Structured summaries repeat line shapes without looping; a loop repeats the same text: (the answer, what is kept).
STRUCTURED_OR_LOOPING = {
    # ScriptedModel's answer on a Django trajectory: the dots in its paths are no sentence ends
    "scripted-answer-with-paths-under-one-tree": (
        "## SESSION INTENT\nContinue the task in progress.\n\n## SUMMARY\nThe conversation covered 0 user "
        "requests. Topics: openhands workspace django__django__ command finished install pytest django runner\n\n"
        "## ARTIFACTS\n- workspace/django__django__3.0\n- ./manage.py\n"
        + "".join(
            f"- {_HEROKU}/{p}.py\n"
            for p in (
                "core/management/__init__",
                "core/management/base",
                "db/models/query",
                "db/models/deletion",
                "db/models/sql/compiler",
                "db/backends/utils",
                "db/backends/mysql/base",
            )
        )
        + "- app/.heroku/python/lib/python3.6/site-packages/newrelic/hooks/framework_django.py\n"
        "- app/.heroku/python/lib/python3.6/site-packages/newrelic/api/function_trace.py\n"
        "- app/treeherder/model/models.py\n\n## NEXT STEPS\nContinue with the latest request and verify the result.",
        None,
    ),
    "many-edited-bullets": (
        "## SUMMARY\nThe user asked to rename the helper; the assistant renamed it everywhere.\n\n## ARTIFACTS\n"
        + "".join(f"- {_HEROKU}/db/models/m{n}.py: edited (renamed the helper)\n" for n in range(30))
        + "\n## NEXT STEPS\nRun the tests.",
        None,
    ),
    "bullets-with-one-prefix": (
        "## SUMMARY\n" + "".join(f"- The user asked: {verb} the file and run the tests again\n" for verb in "ABCDEFGH"),
        None,
    ),
    "headings-of-a-chained-summary": (
        "## SESSION INTENT\nFix the parser.\n\n## SUMMARY\nEarlier summary:\n## SUMMARY\nThe parser failed on tabs.\n"
        "## NEXT STEPS\nFix the tabs.\nSince then the tabs were fixed in parser.py.\n\n## NEXT STEPS\nRun the tests.",
        None,
    ),
    "the-same-line-again-and-again": (
        "The service listens on port 8080, set in config.yaml by the user.\n" + "- src/app.py: edited\n" * 20,
        "The service listens on port 8080, set in config.yaml by the user.\n- src/app.py: edited",
    ),
    "the-same-block-again-and-again": (
        "The user wants the port of the service.\n"
        + "## SUMMARY\nconfig.yaml sets port 8080.\n## NEXT STEPS\nTell the user.\n" * 6,
        "The user wants the port of the service.\n## SUMMARY\nconfig.yaml sets port 8080.\n## NEXT STEPS\nTell the user.",
    ),
}


@pytest.mark.parametrize("written, kept", STRUCTURED_OR_LOOPING.values(), ids=STRUCTURED_OR_LOOPING.keys())
def test_a_structured_summary_is_kept_whole_and_a_loop_is_cut(written, kept):
    assert summary_problem(written, replaced="x" * 40_000) is None
    assert own_summary(written)[0] == (kept or written.strip())


def test_a_looping_summary_is_used_up_to_its_loop_and_an_event_says_so(tmp_path):
    looping = "The user asked for the next task and the assistant answered it.\n" + "Then the user asked again.\n" * 30
    model = ScriptedModel(summary=looping)
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    for turn in range(6):
        graph.invoke(first_input(turn), {"configurable": {"thread_id": "t"}})
    state = graph.get_state({"configurable": {"thread_id": "t"}}).values
    assert state["compaction"]["counts"].get("summarize", 0) >= 1
    notes = [e.get("note") or "" for e in state["compaction"]["events"] if e["stage"] == "summarize"]
    assert any("the summarizer's answer looped; its first 2 lines were kept" in n for n in notes)
    summary = next(m for m in state["messages"] if m.name == "__compaction_summary__")
    assert "the assistant answered it" in summary.content and summary.content.count("Then the user asked") == 1


#: What cannot be used, and the words of the reason the event gives.
_PROMPT_LINES = "\n".join(
    f"## {name}\n{line}"
    for name, line in zip(
        ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS"),
        SUMMARY_PROMPT.split("## SESSION INTENT\n")[1].split("</instructions>")[0].splitlines()[::3],
        strict=False,
    )
)
REFUSED_SUMMARIES = {
    "empty": ("", "empty text"),
    "blank": ("  \n ", "empty text"),
    "not-text": (None, "returned NoneType, not text"),
    "no-reply": ("**No_Reply**", "NO_REPLY"),
    "error": ("Error: rate limited (429)", "an error text"),
    "refusal": ("I'm sorry, but I can't help with summarizing this conversation.", "declined"),
    "apology": ("As an AI language model, I cannot access previous messages.", "declined"),
    "langchain-placeholder": ("Previous conversation was too long to summarize.", "placeholder"),
    "langchain-empty": ("No previous conversation history.", "placeholder"),
    "chatter-only": ("Sure! Here you go.", "placeholder"),
    "all-sections-none": (
        "## SESSION INTENT\nNone\n## SUMMARY\nN/A\n## ARTIFACTS\nNone\n## NEXT STEPS\n-",
        "placeholder",
    ),
    "repeated-lines": ("The user wants to read the file.\n" * 8, "repeats itself"),
    "looping-phrase": ("and then read the file " * 40, "repeats itself"),
    "prompt-echo": (_PROMPT_LINES, "wrote its prompt back"),
    "numbered-loop-from-the-start": (
        "".join(f"{n}. The user wants to read the file.\n" for n in range(1, 20)),
        "repeats itself",
    ),
    "a-prompt-line-in-a-loop": ("What is the user's primary goal or request?\n" * 12, "wrote its prompt back"),
    "too-little-before-the-loop": ("Port 8080.\n" + "and then read the file " * 30, "repeats itself"),
    "a-run-of-the-same-words-between-sections": (
        "## SUMMARY\nThe user asked for the port.\n"
        + "and then we talked some more " * 300
        + "\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nGo on.",
        "repeats itself",
    ),
}


@pytest.mark.parametrize("written, why", REFUSED_SUMMARIES.values(), ids=REFUSED_SUMMARIES.keys())
def test_an_unusable_summary_is_refused_and_says_why(written, why):
    problem = summary_problem(written, replaced="x" * 4_000)
    assert problem is not None and why in problem


def test_a_summary_longer_than_what_it_replaces_is_refused():
    written = "The user asked which port the service uses; config.yaml, read in full, says 8080 on host 0.0.0.0."
    assert "longer than the messages it replaces" in summary_problem(written, replaced="[user]\nport?")
    assert summary_problem(written, replaced="[user]\n" + "port? " * 200) is None


def test_an_echo_of_an_application_prompt_is_refused_and_its_words_in_a_summary_are_not():
    prompt = "Summarize the support ticket for the next agent on shift.\n{messages}\nList the customer's open asks."
    assert "wrote its prompt back" in summary_problem(
        "Summarize the support ticket for the next agent on shift.", prompt=prompt
    )
    assert summary_problem("The customer's open asks: a refund for order 1234.", prompt=prompt) is None


# --- memories -----------------------------------------------------------------------------------

#: (what a small model wrote, the facts read from it; () is NO_REPLY)
USED_MEMORIES = {
    "dash-bullets": (
        "- The user prefers tabs.\n- Deploys run on Fridays.",
        ("The user prefers tabs.", "Deploys run on Fridays."),
    ),
    "star-bullets": ("* Staging is staging-2\n* The on-call is Ana", ("Staging is staging-2", "The on-call is Ana")),
    "numbered": (
        "1. The service port is 8080\n2) The host is 0.0.0.0",
        ("The service port is 8080", "The host is 0.0.0.0"),
    ),
    "plain-lines": (
        "The user prefers tabs.\nThe project uses Python 3.11.",
        ("The user prefers tabs.", "The project uses Python 3.11."),
    ),
    "lead-in-and-closing": (
        "Sure! Here are the memories:\n\n- The service port is 8080\n\nI hope this helps!",
        ("The service port is 8080",),
    ),
    "heading": ("## Memories\n- The service port is 8080", ("The service port is 8080",)),
    "fenced": ("```markdown\n- The service port is 8080\n```", ("The service port is 8080",)),
    "fact-and-no-reply": ("- The service port is 8080\nNO_REPLY", ("The service port is 8080",)),
    "no-reply": ("NO_REPLY", ()),
    "no-reply-lower": ("no_reply", ()),
    "no-reply-bold": ("**NO_REPLY**", ()),
    "no-reply-code": ("`NO_REPLY`.", ()),
    "no-reply-words": ("No reply.", ()),
    "no-reply-spaced": ("NO REPLY - nothing new in this part.", ()),
    "nothing-to-remember": ("Nothing worth remembering here.", ()),
    "looped-bullets": (
        "- The service port is 8080\n" + "- The host is 0.0.0.0\n" * 12,
        ("The service port is 8080", "The host is 0.0.0.0"),
    ),
    "fact-then-a-prompt-line-in-a-loop": (
        "- The service port is 8080\n" + "- Extract user preferences, personal information, project decisions\n" * 9,
        ("The service port is 8080",),
    ),
    "prompt-line-and-fact": (
        "- Capture important technical decisions and their rationale\n- The service port is 8080",
        ("The service port is 8080",),
    ),
}


@pytest.mark.parametrize("written, facts", USED_MEMORIES.values(), ids=USED_MEMORIES.keys())
def test_a_memory_answer_as_a_small_model_writes_it_is_read_as_facts(written, facts):
    read = memory_answer(written, requests=[MESSAGES[0].content])
    assert read.problem is None and read.facts == facts
    assert parse_bullets(read.text) == list(facts)  # what the ledger takes


REFUSED_MEMORIES = {
    "empty": ("", "empty text"),
    "not-text": (["- a list"], "returned list, not text"),
    "error": ("Error: rate limit exceeded, please retry later", "an error text"),
    "refusal": ("I'm sorry, I cannot extract memories from this conversation.", "declined"),
    "chatter-only": ("Sure! Here are the memories:", "states no fact and is not NO_REPLY"),
    "echo-of-the-request": ("Read config.yaml and tell me which port the service uses.", "the user's request"),
    "echo-of-the-request-as-bullet": (
        "- **Read config.yaml and tell me which port the service uses**",
        "the user's request",
    ),
    "echo-of-the-prompt": (
        "- Extract user preferences, personal information, project decisions\n"
        "- Note any commitments, deadlines, or action items",
        "the prompt",
    ),
}


@pytest.mark.parametrize("written, why", REFUSED_MEMORIES.values(), ids=REFUSED_MEMORIES.keys())
def test_an_unusable_memory_answer_is_refused_and_says_why(written, why):
    read = memory_answer(written, requests=[MESSAGES[0].content], prompt=MEMORY_PROMPT)
    assert read.facts == () and read.problem is not None and why in read.problem


def _today():
    from datetime import UTC, datetime

    return datetime.now(UTC).date().isoformat()


def test_plain_lines_from_the_memory_model_reach_the_ledger_and_an_echo_never_does(tmp_path):
    model = ScriptedModel(memory="Here are the facts:\nThe user wants every module fixed.\n1. Tests run with pytest -q")
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    for turn in range(6):
        graph.invoke(first_input(turn), {"configurable": {"thread_id": "t"}})
    ledger = (tmp_path / "memory" / f"{_today()}.md").read_text()
    assert parse_bullets(ledger) == ["The user wants every module fixed.", "Tests run with pytest -q"]
    assert "Here are the facts" not in ledger


def _echo_the_request(prompt: str) -> str:
    """Answer the memory prompt with the first user request it shows, as a small model does."""
    return re.search(r"\[user\]\n(.*)", prompt.split("<conversation>")[1]).group(1)


def test_a_memory_answer_that_echoes_the_request_is_an_event_and_writes_nothing(tmp_path):
    model = ScriptedModel(memory=_echo_the_request)
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    for turn in range(6):
        graph.invoke(first_input(turn), {"configurable": {"thread_id": "t"}})
    state = graph.get_state({"configurable": {"thread_id": "t"}}).values
    errors = [e["error"] for e in state["compaction"]["events"] if e["stage"] == "flush" and e.get("error")]
    assert len(errors) >= 2 and all("writes back the user's request: 'Task " in e for e in errors)
    assert not (tmp_path / "memory").exists()
