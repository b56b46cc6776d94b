"""The Studio graph under the real ``langgraph dev`` server, driven through ``langgraph_sdk``.

The server runs the repository's own ``langgraph.json`` (offline models: no
``OPENAI_API_KEY``) with its blocking-call checks on, its own checkpointer and
its own store; the test talks to it only over HTTP, as Studio does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 90
USER = "alice"
#: Small thresholds from Studio's context form, so the second request already compacts.
CONTEXT = {"user_id": USER, "trigger_tokens": 6_000, "keep_tokens": 2_000}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    """Stop the server and the workers it started (its own process group), politely first."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory):
    """Yield the URL of a ``langgraph dev`` serving this repository's langgraph.json on a free port."""
    workdir = tmp_path_factory.mktemp("studio")
    # the server resolves the config's paths against its working directory and keeps its
    # state in ./.langgraph_api there: run it in a scratch directory that sees the project
    shutil.copy(ROOT / "langgraph.json", workdir / "langgraph.json")
    (workdir / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        pytest.fail(f"{cli} is missing: install the dev extras (pip install -e '.[dev]' brings langgraph-cli[inmem])")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LANGSMITH_", "LANGCHAIN_"))}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", PYTHONUNBUFFERED="1")
    log = open(workdir / "server.log", "wb")
    process = subprocess.Popen(
        [str(cli), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"langgraph dev exited with {process.returncode}:\n{_tail(workdir)}")
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2) as reply:
                    if json.load(reply).get("ok"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev did not answer /ok within {STARTUP_SECONDS} s:\n{_tail(workdir)}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(process)
        log.close()
    assert b"BlockingError" not in (workdir / "server.log").read_bytes(), _tail(workdir)


def _tail(workdir: Path) -> str:
    return (workdir / "server.log").read_text(errors="replace")[-4000:]


def _request(client, thread_id: str, text: str) -> tuple[list[dict], list[str]]:
    """Run one user request on the server; return (custom events, error payloads) as streamed."""
    custom, errors = [], []
    for part in client.runs.stream(
        thread_id,
        "agent",
        input={"messages": [{"role": "user", "content": text}]},
        stream_mode=["custom", "updates"],
        context=CONTEXT,
    ):
        if part.event.startswith("custom"):
            custom.append(part.data)
        elif part.event == "error":
            errors.append(part.data)
    return custom, errors


def test_studio_form_shows_messages_and_the_context_not_the_compaction_key(dev_server):
    client = get_sync_client(url=dev_server, timeout=60)
    (assistant,) = client.assistants.search(graph_id="agent")
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    assert list(schemas["input_schema"]["properties"]) == ["messages"]
    assert "compaction" in schemas["state_schema"]["properties"]
    context = schemas["context_schema"]["properties"]
    assert {"user_id", "context_window", "trigger_tokens", "keep_tokens"} <= set(context)


def test_a_thread_compacts_on_the_dev_server_and_reports_it_through_the_api(dev_server):
    client = get_sync_client(url=dev_server, timeout=60)
    thread_id = client.threads.create()["thread_id"]
    custom: list[dict] = []
    for turn in range(4):  # bounded: the second request is already over 6,000 tokens
        events, errors = _request(client, thread_id, f"Task {turn}: fix module{turn} and run its tests")
        assert errors == []
        custom += events
        if any(e.get("stage") == "summarize" for e in events):
            break

    summarized = [e for e in custom if e["stage"] == "summarize"]
    assert summarized, custom
    event = summarized[0]
    assert event["type"] == "compaction" and event["layer"] == "summarize"
    assert event["tokens_after"] < event["tokens_before"]
    assert event["cutoff_id"] and event["evicted_ids"]
    assert event["offload_path"] == f"store://compaction/transcripts/{thread_id}"
    assert {"offload", "flush"} <= {e["stage"] for e in custom}

    values = client.threads.get_state(thread_id)["values"]
    messages, compaction = values["messages"], values["compaction"]
    assert messages[0]["name"] == SUMMARY_MESSAGE_NAME and "## SESSION INTENT" in messages[0]["content"]
    assert not {m["id"] for m in messages} & set(event["evicted_ids"])
    assert compaction["counts"]["summarize"] == len(summarized)
    assert compaction["pending"] is None and compaction["last_error"] is None
    assert compaction["events"][-1]["stage"] == "summarize"

    # what left the state is in the server's store, once, and the ledger got memories
    transcript = client.store.search_items(["compaction", "transcripts", thread_id], limit=1000)["items"]
    stored = [item["key"] for item in transcript]  # one item per version: "<message id>@<revision>"
    assert len(stored) == len(set(stored)) and set(event["evicted_ids"]) <= {key.rpartition("@")[0] for key in stored}
    # a store keeps each ledger bullet as an item of its own (two workers can never write one twice)
    entries = client.store.search_items(["compaction", "memory", USER, "entries"], limit=100)["items"]
    ledger = [item["value"] for item in entries if item["value"]["path"].startswith("memory/")]
    assert ledger and all("## Flush" in value["header"] for value in ledger)
    assert any(value["bullet"].startswith("The user asked: Task 0: fix module0") for value in ledger)


def test_the_agent_searches_memory_and_asks_for_compaction_on_the_dev_server(dev_server):
    client = get_sync_client(url=dev_server, timeout=60)
    thread_id = client.threads.create()["thread_id"]
    for turn in range(2):
        assert _request(client, thread_id, f"Task {turn}: fix module{turn} and run its tests")[1] == []

    assert _request(client, thread_id, "Please search memory for module0")[1] == []
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    found = {m["name"]: m["content"] for m in messages[-3:] if m["type"] == "tool"}
    assert "The user asked: Task 0: fix module0" in found["memory_search"]
    assert "memory/" in found["memory_search"] and "#" in found["memory_search"]
    assert "evicted" in found["session_search"]

    events, errors = _request(client, thread_id, "Please compact now, focus on module1")
    assert errors == []
    manual = [e for e in events if e["stage"] == "summarize" and e.get("reason") == "manual"]
    assert len(manual) == 1
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    assert messages[0]["name"] == SUMMARY_MESSAGE_NAME
    assert any(m["type"] == "tool" and m["name"] == "compact" for m in messages)


def test_a_bad_threshold_in_the_context_form_fails_the_run_naming_the_field(dev_server):
    client = get_sync_client(url=dev_server, timeout=60)
    thread_id = client.threads.create()["thread_id"]
    errors = [
        part.data
        for part in client.runs.stream(
            thread_id,
            "agent",
            input={"messages": [{"role": "user", "content": "Task 0: fix module0"}]},
            context={"user_id": USER, "trigger_tokens": -1},
        )
        if part.event == "error"
    ]
    assert len(errors) == 1 and "trigger_tokens" in errors[0]["message"]
    assert "greater than or equal to 1" in errors[0]["message"]


def _first_summarized_request(context) -> int:
    """Return which of the README's Studio requests is the first to be summarized, run in process with ``context``."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from graphs.agent import build_agent, default_models

    graph = build_agent(*default_models()).compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    config = {"configurable": {"thread_id": "readme"}}
    for turn in range(1, 6):
        request = {"messages": [{"role": "user", "content": f"Task {turn}: fix module{turn} and run its tests"}]}
        events = graph.stream(request, config, stream_mode="custom", context=context)
        if any(isinstance(e, dict) and e.get("stage") == "summarize" and e.get("layer") for e in events):
            return turn
    return 0


def test_the_readme_says_which_request_compacts_first_with_the_default_and_the_example_context(monkeypatch):
    from graphs.agent import AgentContext

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _first_summarized_request(AgentContext()) == 3
    assert _first_summarized_request(AgentContext(**CONTEXT)) == 2
