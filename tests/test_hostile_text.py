"""Text from the user, the agent or the application is material, never structure.

A compaction focus or an instruction is never filled as a template; a user's
line that looks like a section heading is never read as one; a pin is bounded
by a budget derived from the window, so no summary fails to shrink because of
its pins.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from langgraph_compaction import CompactionConfig, FileStorage, compact_messages
from langgraph_compaction.core.prompts import memory_request, summary_request
from langgraph_compaction.testing import ScriptedModel

#: A 30k window whose summarizer takes a long history in one request.
ONE_PART = CompactionConfig(context_window=30_000, summarizer_context_window=200_000)
FOUR_SECTIONS = "## SESSION INTENT\nShip it.\n## SUMMARY\nShort.\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"


def _history(n: int = 40, start: int = 0) -> list:
    """A history of ``n`` exchanges of about 1,000 tokens each: over a 30k window's trigger."""
    out = []
    for k in range(start, start + n):
        out += [
            HumanMessage(f"Task {k}: check module{k}. " + "detail " * 600, id=f"h{k}"),
            AIMessage(f"Done {k}.", id=f"a{k}"),
        ]
    return out


# --- the agent's focus and the application's instructions are never templates ---------------------


def test_a_focus_naming_a_placeholder_does_not_pull_the_conversation_in_again(tmp_path):
    sections = "Use ## SESSION INTENT, ## SUMMARY, ## ARTIFACTS, ## NEXT STEPS."
    prompt = "Summarize for the on-call engineer.\n{messages}\n" + sections
    focus = "the table names {messages}" * 20
    summarizer = ScriptedModel(reply=FOUR_SECTIONS)
    config = ONE_PART.model_copy(update={"summary_prompt": prompt})
    compact_messages(
        _history(), model=summarizer, config=config, storage=tmp_path, thread_id="t", state={"manual": {"focus": focus}}
    )
    [request] = [p for p in summarizer.calls if "on-call engineer" in p]
    assert request.count("Task 0: check module0.") == 1, "the conversation is in the request once"
    assert focus in request, "the focus is quoted as the agent wrote it"
    assert len(request) < 2 * sum(len(m.content) for m in _history())


def test_a_focus_after_the_agents_own_messages_stays_as_written():
    prompt = "Summarize.\n{messages}\nUse ## SESSION INTENT, ## SUMMARY, ## ARTIFACTS, ## NEXT STEPS."
    focus = "keep {messages} and {focus} and {today} literally"
    for rendered in (None, "[user]\nhello"):
        for template in (None, prompt):
            request = summary_request(rendered, prompt=template, focus=focus, instructions=["Mind {ledger}."])
            assert request.count(focus) == 1 and request.count("<focus>") == 1, (rendered, template)
            assert request.count("Mind {ledger}.") == 1, (rendered, template)


def test_memory_instructions_naming_a_placeholder_do_not_pull_in_the_memory_files(tmp_path):
    FileStorage(tmp_path).replace_memory_file("default", "MEMORY.md", "- The user's private note: XYZZY\n")
    summarizer = ScriptedModel()
    config = ONE_PART.model_copy(update={"memory_instructions": "Compare with {memory_md} and {ledger}."})
    compact_messages(_history(), model=summarizer, config=config, storage=tmp_path, thread_id="t", state=None)
    [request] = [p for p in summarizer.calls if "memory extraction assistant" in p]
    assert request.count("XYZZY") == 1, "MEMORY.md is shown once, in its read-only block"
    assert "Compare with {memory_md} and {ledger}." in request
    for rendered in (None, "[user]\nhello"):
        built = memory_request(
            rendered, instructions=["Keep {messages}."], memory_md="QWERTY", ledger="LEDGER", today="2025-01-01"
        )
        assert built.count("QWERTY") == 1 and "Keep {messages}." in built
