"""Each stage stepped by hand: its generator yields effects, the test answers each one, the result is asserted.

No model, hook or storage runs here: the run's storage raises when touched, so
a stage that reached it other than through a yielded ``StorageCall`` fails.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, messages_to_dict
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_compaction.core.background import covered
from langgraph_compaction.core.config import CompactionConfig
from langgraph_compaction.core.summary import build_summary_message, is_summary
from langgraph_compaction.engine.effects import CallModel, StorageCall, advance
from langgraph_compaction.engine.nodes import CompactionEngine
from langgraph_compaction.engine.offload import OFFLOAD_ATTEMPTS, transcript_records
from langgraph_compaction.engine.passes import apply_update
from langgraph_compaction.engine.prepare import job_key, published_key
from langgraph_compaction.engine.results import FlushResult, OffloadResult, SummaryResult, update_of
from langgraph_compaction.engine.run import Run
from langgraph_compaction.engine.state import read_compaction
from langgraph_compaction.engine.swap import GateCall, swap
from langgraph_compaction.testing import ScriptedModel

THREAD, USER = "t1", "u1"
SUMMARY = "## SUMMARY\nThe user is fixing the date parser; the tests pass."
MEMORY = "- The user maintains the date parser."


class Untouched:
    """A storage that fails when a stage calls it directly instead of yielding a ``StorageCall``."""

    def __getattr__(self, name: str) -> Any:
        def called(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"the stage called storage.{name} itself")

        return called


def conversation() -> list[BaseMessage]:
    """Eight exchanges (~640 tokens): over a 300-token trigger that keeps the last two messages."""
    messages: list[BaseMessage] = []
    for i in range(8):
        messages.append(HumanMessage(f"question {i} about the date parser " + "detail " * 30, id=f"h{i}"))
        messages.append(AIMessage(f"answer {i} " + "detail " * 30, id=f"a{i}"))
    return messages


EVICTED = [f"{kind}{i}" for i in range(7) for kind in ("h", "a")]  # all but the last exchange


def by_hand(steps: Generator, answer: Callable[[Any], Any]) -> tuple[list[Any], Any]:
    """Step ``steps`` to its end: each effect is answered by ``answer`` (a raise is thrown in); return (effects, result)."""
    effects: list[Any] = []
    done, item = advance(steps, None, None)
    while not done:
        effects.append(item)
        try:
            value, error = answer(item), None
        except Exception as exc:  # noqa: BLE001 - thrown into the step, as the driver does
            value, error = None, exc
        done, item = advance(steps, value, error)
    return effects, item


def no_effect(effect: Any) -> Any:
    raise AssertionError(f"unexpected effect {effect!r}")


def storage(reads: dict[str, Any] | None = None, fail: dict[str, Exception] | None = None) -> Callable[[Any], Any]:
    """Answer storage calls: ``fail[op]`` raises, ``reads[op]`` is returned, a write returns its location."""
    reads, fail = reads or {}, fail or {}

    def answer(effect: Any) -> Any:
        assert isinstance(effect, StorageCall), f"expected a storage call, got {effect!r}"
        if effect.op in fail:
            raise fail[effect.op]
        if effect.op == "append_memory_entry":
            entry = effect.args[2]("")  # the ledger as the storage holds it: empty
            return f"memory/{effect.args[1]}", entry
        return reads.get(effect.op, f"{effect.op}:{THREAD}")

    return answer


def answering(model: Callable[[CallModel], str], rest: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Answer a model call with ``model``, every other effect with ``rest``."""
    return lambda effect: model(effect) if isinstance(effect, CallModel) else rest(effect)


@pytest.fixture
def engine() -> CompactionEngine:
    config = CompactionConfig(trigger_tokens=300, keep_messages=2, background=False)  # the stages, one by one
    return CompactionEngine(before="agent", model=ScriptedModel(), config=config, storage=Untouched())


@pytest.fixture
def run(engine: CompactionEngine) -> Run:
    return Run(thread_id=THREAD, user_id=USER, storage=Untouched(), budget=engine.budget)  # type: ignore[arg-type]


@pytest.fixture
def pending(engine: CompactionEngine, run: Run) -> dict:
    """The state after the gate asked for a summary (the gate, in blocking mode, yields no effect)."""
    state = {"messages": conversation(), "compaction": {}}
    _, update = by_hand(engine.gate_steps(state, run), no_effect)
    state = apply_update(state, update)
    assert read_compaction(state["compaction"])["pending"]["evict_ids"] == EVICTED
    return state


@pytest.fixture
def offloaded(engine: CompactionEngine, run: Run, pending: dict) -> dict:
    """The state after the offload wrote every message to an empty transcript."""
    _, result = by_hand(engine.offload_steps(pending, run), storage({"read_transcript": []}))
    return apply_update(pending, update_of(result))


def ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


# -- offload


def test_offload_reads_the_transcript_then_appends_only_the_messages_it_lacks(engine, run, pending):
    messages = pending["messages"]
    written = transcript_records(messages[:4], engine.config)
    effects, result = by_hand(engine.offload_steps(pending, run), storage({"read_transcript": written}))

    assert effects == [
        StorageCall("read_transcript", (THREAD,)),
        StorageCall("append_transcript", (THREAD, transcript_records(messages[4:], engine.config))),
    ]
    assert isinstance(result, OffloadResult) and result.last_error is None
    assert list(result.offloaded_ids or ()) == ids(messages)
    assert result.offload_path == f"append_transcript:{THREAD}"
    assert result.events[-1]["offloaded"] == 12
    assert "messages" not in update_of(result)


def test_a_failed_offload_vouches_for_no_message_and_the_summary_then_removes_none(engine, run, pending):
    fail = storage({"read_transcript": []}, fail={"append_transcript": OSError("disk full")})
    _, result = by_hand(engine.offload_steps(pending, run), fail)

    assert result.offloaded_ids == ()
    assert "disk full" in (result.last_error or "")
    state = apply_update(pending, update_of(result))
    effects, summarized = by_hand(engine.summarize_steps(state, run), no_effect)  # no model call: nothing to replace
    assert effects == [] and summarized.applied is None and summarized.failed
    assert summarized.last_error == "offload did not complete; nothing was removed"
    assert ids(apply_update(state, update_of(summarized))["messages"]) == ids(conversation())


# -- flush


def test_flush_asks_the_memory_model_about_the_evicted_messages_and_appends_its_answer(engine, run, pending):
    effects, result = by_hand(
        engine.flush_steps(pending, run), answering(lambda call: MEMORY, storage({"read_memory_file": ""}))
    )

    reads = [e for e in effects if isinstance(e, StorageCall) and e.op == "read_memory_file"]
    assert reads and all(e.args[0] == USER for e in reads)
    (ask,) = [e for e in effects if isinstance(e, CallModel)]
    assert ask.model is engine.setup.flush_model
    assert "question 0 about the date parser" in str(ask.request) and "question 6" in str(ask.request)
    assert "question 7" not in str(ask.request)  # the kept tail is not the flush's
    write = effects[-1]
    assert write.op == "append_memory_entry" and write.args[0] == USER
    assert "The user maintains the date parser." in write.args[2]("")
    assert effects.index(ask) < effects.index(write)
    assert isinstance(result, FlushResult) and result.held is None
    assert list(result.flushed_ids or ()) == EVICTED
    assert result.events[-1]["memories"] == 1


def test_a_failing_memory_model_writes_nothing_marks_nothing_flushed_and_counts_a_failure(engine, run, pending):
    def down(call: CallModel) -> str:
        raise TimeoutError("the memory model did not answer")

    effects, result = by_hand(engine.flush_steps(pending, run), answering(down, storage({"read_memory_file": ""})))

    assert not [e for e in effects if isinstance(e, StorageCall) and e.op == "append_memory_entry"]
    assert result.flushed_ids is None  # the next compaction asks again
    assert "did not answer" in (result.last_error or "") and result.events[-1]["error"]
    assert result.breakers[engine.setup.flush_breaker]["failures"] == 1  # the memory model's breaker counts it
    assert "messages" not in update_of(result)


# -- summarize


def test_summarize_sends_the_evicted_messages_and_returns_the_summary_in_their_place(engine, run, offloaded):
    effects, result = by_hand(engine.summarize_steps(offloaded, run), answering(lambda call: SUMMARY, storage()))
    assert isinstance(result, SummaryResult) and result.applied is not None
    update = update_of(result)

    ask, *writes = effects
    assert isinstance(ask, CallModel) and ask.model is engine.model
    assert "question 0 about the date parser" in str(ask.request) and "answer 6" in str(ask.request)
    assert "question 7" not in str(ask.request)
    # the summary is written to the transcript after the model answered, so recall can open it
    assert [(e.op, e.args[0]) for e in writes] == [("append_transcript", THREAD)]
    assert writes[0].args[1][0]["data"]["content"] == update["messages"][1].content

    remove_all, summary, *kept = update["messages"]
    assert isinstance(remove_all, RemoveMessage) and remove_all.id == REMOVE_ALL_MESSAGES
    assert is_summary(summary) and "The user is fixing the date parser" in summary.content
    assert ids(kept) == ["h7", "a7"]
    compaction = update["compaction"]
    assert compaction["pending"] is None and compaction["summary_id"] == summary.id
    assert compaction["counts"] == {"summarize": 1} and compaction["edited_messages"] == {"summarize": 14}
    assert [e.get("event") for e in compaction["events"]][-1] == "compaction_applied"


def down(call: CallModel) -> str:
    raise RuntimeError("503 Service Unavailable")


def test_a_failing_summarizer_over_the_hard_limit_yields_an_error_event_and_an_extractive_summary(
    engine, run, offloaded
):
    effects, result = by_hand(engine.summarize_steps(offloaded, run), answering(down, storage()))

    assert isinstance(effects[0], CallModel) and [e.op for e in effects[1:]] == ["append_transcript"]
    assert result.applied is not None and result.applied.kind == "extractive"
    update = update_of(result)
    compaction = update["compaction"]
    assert "503 Service Unavailable" in compaction["last_error"] and compaction["counts"] == {"extractive": 1}
    summary = update["messages"][1]  # the extractive summary names every evicted request
    assert is_summary(summary) and all(f"question {i} about the date parser" in summary.content for i in range(7))
    after = apply_update(offloaded, update)
    kept = set(ids(after["messages"])) | set(read_compaction(after["compaction"])["offloaded_ids"])
    assert set(ids(conversation())) <= kept  # each message is in the state or in the transcript


def test_a_failing_summarizer_while_the_history_fits_the_window_keeps_every_message(offloaded):
    config = CompactionConfig(context_window=100_000, trigger_tokens=300, keep_messages=2)
    engine = CompactionEngine(before="agent", model=ScriptedModel(), config=config)
    run = Run(thread_id=THREAD, user_id=USER, storage=Untouched(), budget=engine.budget)  # type: ignore[arg-type]
    effects, result = by_hand(engine.summarize_steps(offloaded, run), answering(down, no_effect))

    assert [type(e) for e in effects] == [CallModel] and result.applied is None and result.failed
    assert "503 Service Unavailable" in (result.last_error or "")
    assert "history kept" in result.events[-1]["error"]
    assert "messages" not in update_of(result)


# -- swap (a summary prepared in the background, applied by the gate)


def prepared_gate(engine: CompactionEngine, run: Run, messages: list[BaseMessage]) -> tuple[GateCall, dict]:
    """Return the gate call of ``messages`` and a summary prepared for their first seven exchanges."""
    summary = build_summary_message(SUMMARY, covers=EVICTED)
    prepared = {
        "id": "job-1",
        "covered": covered(messages, EVICTED),
        "evict_ids": EVICTED,
        "cutoff_id": "h7",
        "tokens_before": engine.setup.counter.total(messages),
        "summary": messages_to_dict([summary])[0],
        "pins": [],
        "kind": "summarize",
        "offload_path": None,
        "flush": None,
        "usage": {},
        "fallback": None,
    }
    record = read_compaction({"prepared": prepared})
    counts = engine.setup.counter.counts(messages)
    gate = GateCall(engine.setup, engine.jobs, messages, counts, record, run.budget, run, job_key(run, messages))
    return gate, prepared


def test_swap_writes_the_kept_messages_then_the_summary_then_unpublishes_the_job(engine, run):
    messages = conversation()
    gate, prepared = prepared_gate(engine, run, messages)
    effects, applied = by_hand(swap(gate, prepared), storage({"read_transcript": []}))

    assert applied is True and gate.out.applied
    assert [e.op for e in effects] == ["read_transcript", "append_transcript", "append_transcript", "write_prepared"]
    assert [r["data"]["id"] for r in effects[1].args[1]] == ids(messages)  # the order messages entered the thread
    assert is_summary(gate.out.messages[1]) and effects[2].args[1][0]["data"]["id"] == gate.out.messages[1].id
    assert effects[3] == StorageCall("write_prepared", (THREAD, published_key(gate.key), None))
    assert ids(gate.out.after[1:]) == ["h7", "a7"]
    assert [e.get("mode") for e in gate.events if e.get("event") == "compaction_applied"] == ["background"]


def test_a_swap_whose_transcript_fails_waits_and_replaces_nothing(engine, run):
    gate, prepared = prepared_gate(engine, run, conversation())
    fail = storage({"read_transcript": []}, fail={"append_transcript": OSError("disk full")})
    effects, applied = by_hand(swap(gate, prepared), fail)

    assert applied is False and not gate.out.applied and gate.out.messages is None
    # each try reads the transcript again; nothing after the last failure
    assert [e.op for e in effects] == ["read_transcript", "append_transcript"] * OFFLOAD_ATTEMPTS
    assert "prepared" not in gate.out.compaction  # kept for a later call
    assert [e["event"] for e in gate.events if e.get("stage") == "background"] == ["compaction_postponed"]


def test_a_swap_over_a_changed_message_is_discarded_without_an_effect(engine, run):
    messages = conversation()
    gate, prepared = prepared_gate(engine, run, messages)
    messages[2] = HumanMessage("question 1, edited since the summary was prepared", id="h1")

    effects, applied = by_hand(swap(gate, prepared), no_effect)

    assert effects == [] and applied is False
    assert gate.out.compaction["prepared"] is None and gate.out.messages is None
    (discarded,) = [e for e in gate.events if e.get("event") == "compaction_discarded"]
    assert "h1" in discarded["why"] and "changed" in discarded["why"]
