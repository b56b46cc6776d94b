"""The offline demo bills its input as a provider with prompt caching would.

Its scripted agent reports ``usage_metadata`` the way OpenAI's automatic prompt caching does (the longest run of
leading messages shared with one of the last four requests is read from the cache, for a request of at least
1,024 tokens), and the totals table shows the billed input (cached prefix at 0.1×) with and without compaction.
"""

import re
import sqlite3

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_compaction.cli import main
from langgraph_compaction.cli.demo import build_demo_graph, demo_config, make_tools
from langgraph_compaction.cli.demo_defaults import CHECKPOINTS_FILE, DEFAULT_WINDOW
from langgraph_compaction.cli.offline import PromptCache
from langgraph_compaction.core.tokens import TokenCounter
from langgraph_compaction.storage import FileStorage
from langgraph_compaction.testing import ScriptedModel

BILLED = "billed input (cached prefix at 0.1×)"

SYSTEM = SystemMessage("You are a careful engineer. " + "Read the code before changing it. " * 200, id="sys")
ASK = HumanMessage("Fix the rounding bug in invoice.py.", id="ask")
CALL = AIMessage(
    "Reading it.", id="ai-1", tool_calls=[{"name": "read_file", "args": {"path": "invoice.py"}, "id": "c1"}]
)
RESULT = ToolMessage("def total(lines): ...\n" * 50, tool_call_id="c1", id="tool-c1")


def _read(cache: PromptCache, messages: list) -> int:
    usage = cache.usage(messages, AIMessage("ok", id="reply"))
    assert usage["input_tokens"] == TokenCounter().total(messages)
    return usage["input_token_details"]["cache_read"]


def test_the_offline_models_cache_read_is_the_prefix_shared_with_a_recent_request():
    tokens = TokenCounter().total
    cache = PromptCache(TokenCounter())
    assert tokens([SYSTEM, ASK]) >= 1_024
    assert _read(cache, [SYSTEM, ASK]) == 0  # nothing cached yet
    assert _read(cache, [SYSTEM, ASK, CALL, RESULT]) == tokens([SYSTEM, ASK])  # the previous request is its prefix
    # an edited message ends the shared run: role, content, tool calls, tool call id and name all count
    edited = [
        ASK.model_copy(update={"content": "Fix the rounding bug in tax.py."}),
        CALL.model_copy(update={"tool_calls": [{**CALL.tool_calls[0], "args": {"path": "tax.py"}}]}),
        RESULT.model_copy(update={"tool_call_id": "c2"}),
        RESULT.model_copy(update={"name": "read_file"}),
        AIMessage(ASK.content, id="ask"),  # the same id, content and name in another role
    ]
    for change in edited:
        request = [SYSTEM, ASK, CALL, RESULT]
        position = next(i for i, m in enumerate(request) if m.id == change.id)
        request[position] = change
        assert _read(cache, request) == tokens(request[:position]), change
    # a request matches the best of the last four: the long one above has left the cache by now
    assert _read(cache, [SYSTEM, ASK, CALL, RESULT, HumanMessage("next", id="next")]) == tokens([SYSTEM, ASK, CALL])


def test_a_request_under_1024_tokens_reads_nothing_from_the_cache():
    cache = PromptCache(TokenCounter())
    short = [SystemMessage("Be brief.", id="s"), HumanMessage("Hi", id="h")]
    assert _read(cache, short) == 0
    assert _read(cache, short + [AIMessage("Hello.", id="a"), HumanMessage("Bye", id="b")]) == 0


def _row(output: str, label: str) -> list[str]:
    line = next(line for line in output.splitlines() if label in line)
    return [cell.strip() for cell in line.split(label, 1)[1].split("│")[1:3]]


def _state(root, thread: str) -> dict:
    """Return the values of a demo thread's latest checkpoint, read back through the demo's own graph."""
    with sqlite3.connect(root / CHECKPOINTS_FILE, check_same_thread=False) as conn:
        graph = build_demo_graph(
            None,
            make_tools(7),
            None,
            ScriptedModel(),
            demo_config(DEFAULT_WINDOW),
            FileStorage(root),
            SqliteSaver(conn),
            None,
        )
        return graph.get_state({"configurable": {"thread_id": thread}}).values


def test_the_demos_totals_bill_less_input_with_compaction_than_without(offline, capsys):
    assert main(["demo", "--turns", "5", "--thread", "billed", "--quiet", "--no-plot"]) == 0
    out = capsys.readouterr().out
    billed_with, billed_without = (int(cell.replace(",", "")) for cell in _row(out, BILLED))
    total_with, total_without = (int(cell.replace(",", "")) for cell in _row(out, "total input tokens"))
    assert 0 < billed_with < billed_without
    assert billed_with < total_with and billed_without < total_without  # the cache served part of each side
    ratio = float(re.search(r"([\d.]+)×\s+as\s+much\s+without\s+compaction\s+as\s+with\s+it", out).group(1))
    assert ratio == pytest.approx(billed_without / billed_with, abs=0.06)
    # the agent's replies report what the totals add up; the thread's calibration saw every reply but the last
    reported_with, _ = _row(out, "agent input tokens (API usage)")
    cached_with, _ = _row(out, "agent input tokens read from the cache")
    state = _state(offline / ".compaction", "billed")
    usage = state["compaction"]["calibration"]["usage"]
    last = state["messages"][-1].usage_metadata
    assert usage["input"] + last["input_tokens"] == int(reported_with.replace(",", ""))
    assert usage["cache_read"] + last["input_token_details"]["cache_read"] == int(cached_with.replace(",", ""))
    assert state["compaction"]["calibration"]["ratio"] == 1.0  # the replies report the estimator's own count
