"""How long a compaction made inside one front's pass holds the agent: the memory call beside the summary call.

The middleware, the prebuilt hook and ``compact_messages`` run a whole
compaction pass in front of the model call (the graph of ``add_compaction``
runs its nodes: flush and offload side by side, then summarize). The pass offloads first, then
asks the memory model and the summarizer side by side: the agent waits one
compaction-model call, not the memory call and then the summary call.
"""

from __future__ import annotations

import time

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from support.fronts import TOOLS, WINDOW, TimedModel, ToolCallingModel, request

from langgraph_compaction import CompactionConfig, CompactionMiddleware, is_summary

LATENCY = 0.3


def _side_by_side(spans: list) -> None:
    summary = [s for s in spans if s[0] == "summary"]
    memory = [s for s in spans if s[0] == "memory"]
    assert summary and memory, spans
    (_, s_began, s_ended, _), (_, m_began, m_ended, _) = summary[0], memory[0]
    assert s_began < m_ended and m_began < s_ended, "the memory call and the summary call ran one after the other"


def test_a_blocking_compaction_in_the_middleware_asks_the_memory_model_beside_the_summarizer(tmp_path):
    # the pass asked the memory model, then the summarizer: the agent waited two compaction calls
    summarizer = TimedModel(latency=LATENCY, spans=[])
    config = CompactionConfig(context_window=WINDOW, background=False)
    compaction = CompactionMiddleware(summarizer, config=config, storage=tmp_path)
    agent = create_agent(ToolCallingModel(), TOOLS, middleware=[compaction], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "pass-wait", "user_id": "u"}}
    for n in range(40):
        summarizer.spans.clear()
        began = time.monotonic()
        state = agent.invoke({"messages": [request(n)]}, thread)
        if summarizer.spans:
            break
    else:
        raise AssertionError("no compaction in 40 requests")
    took = time.monotonic() - began
    assert any(is_summary(m) for m in state["messages"])
    _side_by_side(summarizer.spans)
    assert took < 2 * LATENCY, f"the compacting request took {took:.2f} s: two compaction calls one after the other"
