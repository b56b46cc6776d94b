"""Id-less user turns repeated over a long thread: each one reaches the model, the state and the transcript.

A client that sends ``("user", "continue")`` without an id, turn after turn,
to deepagents (whose messages channel adds no ids) or through
``compact_messages`` with OpenAI-style dicts, gets ids from the package. A
summary shortens the history, so a repeated message can land where an older
identical one once stood: an id derived from place and content would be the
old message's, and ``add_messages`` would merge the new request into the old
one (the model then answers a request that ends with its own previous
answer). Every turn must reach the model last in its request and stay in the
state or the transcript under an id of its own.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langgraph_compaction import CompactionConfig, CompactionMiddleware, compact_messages, is_summary, load_transcript
from langgraph_compaction.invariants import history_problems
from langgraph_compaction.testing import ScriptedModel

TURNS = 80
CONFIG = CompactionConfig(context_window=16_000)


class Agent(ScriptedModel):
    """The agent's model: a long answer to every request, each request it was sent kept."""

    requests: list = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self.requests.append(list(messages))
        answer = f"Answer {len(self.requests)}: " + "the build step was checked and it is fine. " * 40
        return ChatResult(generations=[ChatGeneration(message=AIMessage(answer))])


def user_turns(messages: list[BaseMessage]) -> set[str]:
    """Return the ids of the user's requests among ``messages`` (summaries are not requests)."""
    return {
        str(m.id) for m in messages if isinstance(m, HumanMessage) and m.content == "continue" and not is_summary(m)
    }


def test_deepagents_keeps_every_repeated_id_less_turn(tmp_path):
    agent_model = Agent()
    middleware = CompactionMiddleware(
        model=ScriptedModel(), config=CONFIG, storage=tmp_path, name="SummarizationMiddleware"
    )
    agent = create_deep_agent(model=agent_model, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "repeat"}}
    for _ in range(TURNS):
        agent.invoke({"messages": [("user", "continue")]}, config)

    state = agent.get_state(config).values
    assert state["compaction"]["counts"].get("summarize", 0) >= 3  # summaries shortened the history
    assert len(agent_model.requests) == TURNS
    ends = [r[-1] for r in agent_model.requests]
    assert [m.content for m in ends if not isinstance(m, HumanMessage)] == []  # no request ends with an answer
    kept = user_turns(state["messages"]) | user_turns(load_transcript(tmp_path, "repeat"))
    assert len(kept) == TURNS


def test_compact_messages_keeps_every_repeated_id_less_dict(tmp_path):
    history: list[Any] = []
    compaction = None
    answers = Agent()
    seen: list[BaseMessage] = []
    for _ in range(TURNS):
        history.append({"role": "user", "content": "continue"})
        result = compact_messages(
            history, model=ScriptedModel(), config=CONFIG, storage=tmp_path, thread_id="d", state=compaction
        )
        assert history_problems(result.view, result.messages) == []
        assert isinstance(result.view[-1], HumanMessage) and result.view[-1].content == "continue"
        seen += [m for m in result.messages if m.id not in {s.id for s in seen}]
        reply = answers.invoke(result.view)
        history, compaction = [*result.messages, {"role": "assistant", "content": reply.content}], result.state

    assert compaction["counts"].get("summarize", 0) >= 3
    kept = user_turns(seen) | user_turns(load_transcript(tmp_path, "d"))
    assert len(kept) == TURNS


def test_checker_flags_a_request_merged_into_an_older_one():
    history = [HumanMessage("continue", id="u1"), AIMessage("Answer 1", id="a1"), HumanMessage("continue", id="u1")]
    merged = [HumanMessage("continue", id="u1"), AIMessage("Answer 1", id="a1")]  # what add_messages makes of it
    assert history_problems(merged, history) == [
        "the view ends with ai message 'a1', not the latest human message",
        "id 'u1' is carried by 2 messages of the history",
    ]
    assert (
        history_problems(
            history[:2] + [HumanMessage("continue", id="u2")], history[:2] + [HumanMessage("continue", id="u2")]
        )
        == []
    )
