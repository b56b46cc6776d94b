"""SmolLM2-135M-Instruct, run by llama.cpp, as the summarizer and memory model of a real create_agent loop.

These run a real model on the CPU (minutes), so they are marked ``real_model``: the default ``python -m pytest``
leaves them out and CI runs them (``python -m pytest -m "slow or real_model"``) with the ``localmodel`` extra.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest
from langchain_core.messages import HumanMessage

from benchmarks.measures.real_model import TASKS, RecordingModel, session

pytestmark = pytest.mark.real_model

PROMPT = [HumanMessage("Name two colours of the sky, in one short sentence.")]


def test_the_same_prompt_gets_the_same_answer(smollm2):
    first = smollm2.invoke(PROMPT).content
    assert first.strip()
    assert smollm2.invoke(PROMPT).content == first


def test_two_threads_calling_one_model_at_once_both_get_the_answer_alone(smollm2):
    alone = smollm2.invoke(PROMPT).content
    answers: list[str] = []
    threads = [threading.Thread(target=lambda: answers.append(smollm2.invoke(PROMPT).content)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [alone, alone]


async def test_two_async_calls_side_by_side_both_get_the_answer_alone(smollm2):
    alone = smollm2.invoke(PROMPT).content
    answers = await asyncio.gather(smollm2.ainvoke(PROMPT), smollm2.ainvoke(PROMPT))
    assert [a.content for a in answers] == [alone, alone]


#: A process that runs the model and exits. Its exit hook, registered before the package's and so run after it, takes
#: away a function llama.cpp's finaliser calls, as the interpreter's teardown of the modules does.
AT_EXIT = """
import atexit

import llama_cpp.llama_cpp

atexit.register(setattr, llama_cpp.llama_cpp, "llama_model_free", None)

from langgraph_compaction.localmodel import LocalChatModel

print(LocalChatModel(max_tokens=4).invoke("Say hi.").content)
"""


def test_a_process_that_ran_the_model_exits_without_an_error_from_llama_cpp(smollm2):
    done = subprocess.run([sys.executable, "-c", AT_EXIT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip()
    assert "Error" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


@pytest.mark.timeout(2400)
def test_a_create_agent_loop_summarized_by_smollm2_keeps_every_path_and_request(smollm2, tmp_path):
    model = RecordingModel()
    result = session(model, tmp_path)

    applied = result["counts"].get("summarize", 0) + result["counts"].get("extractive", 0)
    assert applied >= 2, result["counts"]
    assert {kind for kind, _ in model.answers} >= {"summary", "memory"}  # both ran on the real model
    assert result["paths_missing"] == [] and result["requests_missing"] == []
    assert result["violations"] == []
    assert 2 <= len(result["compactions"]) <= applied  # the summaries the agent was sent
    assert sum(row["paths"] for row in result["compactions"]) >= TASKS // 2
    # every evicted path is named by the summary as applied (its deterministic sections at least)
    assert all(row["paths_in_summary"] == row["paths"] for row in result["compactions"])
