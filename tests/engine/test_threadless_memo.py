"""A history sent whole at every call, without a thread id: the gate picks up where the last call left off.

A stateless endpoint sends the whole history with each request and no
thread id, so each run is a thread of its own. The gate's memo of the last
such run of the same conversation (its first messages) seeds the next one:
what was scanned is not scanned again. A message changed in place is still
recounted, and another conversation reuses nothing.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.engine.gate import Memos


def _history(result: str = "3 passed") -> list:
    return [
        HumanMessage("Run the tests.", id="h0"),
        AIMessage("", tool_calls=[{"name": "pytest", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage(result, tool_call_id="c1", name="pytest", id="t1"),
        AIMessage("They pass.", id="a2"),
    ]


def test_a_threadless_run_starts_from_the_memo_the_last_run_of_its_history_left():
    memos, counter = Memos(), TokenCounter()
    first = memos.get("no-thread:1", _history(), counter, threadless=True)
    first.settled = 4  # the gate scanned all four
    memos.keep_history(_history(), first)

    longer = [*_history(), HumanMessage("And the linter?", id="h1")]
    second = memos.get("no-thread:2", longer, counter, threadless=True)
    assert second is not first and second.settled == 4 and second.counts == counter.counts(longer)

    other = [HumanMessage("Another conversation.", id="x0"), *longer[1:]]
    assert memos.get("no-thread:3", other, counter, threadless=True).settled == 0
    # a thread of its own never starts from another run's memo
    assert memos.get("thread-a", longer, counter).settled == 0


def test_a_message_changed_in_place_is_recounted_and_rescanned():
    memos, counter = Memos(), TokenCounter()
    first = memos.get("no-thread:1", _history(), counter, threadless=True)
    first.settled = 4
    memos.keep_history(_history(), first)

    changed = _history("FAILED " * 2_000)  # the same ids, the tool result now long
    second = memos.get("no-thread:2", changed, counter, threadless=True)
    assert second.counts == counter.counts(changed) and second.counts[2] > 1_000
    assert second.settled == 2  # layers 1-2 look at the result again
