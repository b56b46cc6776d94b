"""``inspect`` on a deployment: the transcript and memory in a LangGraph store, and a thread a LangGraph server serves.

The store is a real ``PostgresStore`` or ``SqliteStore`` that compaction wrote to (``--store``); the server is the
real ``langgraph dev`` of the Studio scenario, read over HTTP through ``langgraph_sdk`` (``--url``).
"""

from __future__ import annotations

import re
import socket
from contextlib import closing

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph_sdk import get_sync_client
from scenarios.test_studio import USER, _request, dev_server  # noqa: F401 - the running langgraph dev server

from langgraph_compaction import CompactionState, StoreStorage, compact_messages
from langgraph_compaction.cli import main
from langgraph_compaction.storage.transcript import load_transcript, summary_covers

MEMORY_MD = "# Memory\n\n- The deploy target is eu-west-1\n- Tests run with pytest -x\n"


def _thread(store, saver, thread: str) -> str:
    """Compact a 16-message thread into ``store`` and checkpoint the result with ``saver``; return its summary id."""
    messages = []
    for turn in range(8):
        answer = f"done {turn}: " + "the build log said nothing new, " * 40
        messages += [HumanMessage(f"fix module{turn}", id=f"u{turn}"), AIMessage(answer, id=f"a{turn}")]
    result = compact_messages(
        messages, model=None, thread_id=thread, storage=store, trigger=("messages", 6), keep=("messages", 2)
    )
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", MEMORY_MD)
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "agent")
    state = {"messages": result.messages, "compaction": result.state}  # as the graph that compacted it keeps them
    builder.compile(checkpointer=saver).invoke(state, {"configurable": {"thread_id": thread}})
    (summary_id,) = summary_covers(load_transcript(StoreStorage(store), thread))
    return summary_id


def _assert_store_shown(out: str, thread: str, summary_id: str) -> None:
    # the 16 messages and the summary; it replaced all but the 2 kept
    assert f"transcript: store://compaction/transcripts/{thread} · 17 messages\n" in out
    assert (
        f"summaries in the transcript: 1 (open one with --summary ID)\n  {summary_id}: replaced 14 messages (u0 .. a6)"
        in out
    )
    assert "memory files of user 'ada': 1" in out
    assert "store://compaction/memory/ada/MEMORY.md · 70 bytes · 2 bullets" in out


def test_inspect_reads_transcript_and_memory_from_a_postgres_store(postgres_dsn, offline, capsys):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_dsn) as store, PostgresSaver.from_conn_string(postgres_dsn) as saver:
        store.setup()
        saver.setup()
        summary_id = _thread(store, saver, "pg-store")
    argv = ["inspect", "--thread", "pg-store", "--checkpointer", postgres_dsn, "--store", postgres_dsn, "--user", "ada"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("thread pg-store · ")
    _assert_store_shown(out, "pg-store", summary_id)
    assert main([*argv, "--summary", summary_id]) == 0
    opened = capsys.readouterr().out
    assert f"summary {summary_id} replaced" in opened and "--- message u0 (human) ---\n[user]\nfix module0" in opened


def test_a_transcript_kept_in_a_store_is_named_when_inspect_looks_in_a_folder(offline, capsys):
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string("store.db") as store, SqliteSaver.from_conn_string("checkpoints.db") as saver:
        store.setup()
        _thread(store, saver, "lite")
    (offline / "files" / "sessions").mkdir(parents=True)
    assert main(["inspect", "--thread", "lite", "--checkpointer", "checkpoints.db", "--storage", "files"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"transcript: none in \S*files/sessions/lite\.jsonl; the thread's state says it was written to "
        r"store://compaction/transcripts/lite: pass --store with the graph's store\n",
        out,
    )


@pytest.mark.parametrize("spelling", ["sqlite://{folder}/store.db", "store.db"])
def test_inspect_reads_transcript_and_memory_from_a_sqlite_store(offline, capsys, spelling):
    spelling = spelling.format(folder=offline)
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string("store.db") as store, SqliteSaver.from_conn_string("checkpoints.db") as saver:
        store.setup()
        summary_id = _thread(store, saver, "lite")
    argv = ["inspect", "--thread", "lite", "--checkpointer", "checkpoints.db", "--store", spelling, "--user", "ada"]
    assert main(argv) == 0
    _assert_store_shown(capsys.readouterr().out, "lite", summary_id)


def test_a_store_that_is_not_there_is_one_line_and_creates_nothing(offline, capsys):
    assert main(["inspect", "--thread", "t", "--store", "missing.db"]) == 2
    assert "--store missing.db: no such file; pass the SQLite file the graph's SqliteStore writes" in (
        capsys.readouterr().err
    )
    assert not (offline / "missing.db").exists()


def test_an_unknown_summary_id_is_an_error_naming_the_summaries_there(offline, capsys):
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string("store.db") as store, SqliteSaver.from_conn_string("checkpoints.db") as saver:
        store.setup()
        summary_id = _thread(store, saver, "lite")
    argv = ["inspect", "--thread", "lite", "--checkpointer", "checkpoints.db"]
    assert main([*argv, "--store", "store.db", "--summary", "nope"]) == 2
    err = capsys.readouterr().err
    assert f"--summary 'nope' is not a summary of this thread; its summaries: {summary_id}" in err
    # without a transcript to open it in, --summary is an error too, not silently ignored
    assert main([*argv, "--summary", summary_id]) == 2
    captured = capsys.readouterr()
    assert "--summary needs the thread's transcript: pass --storage, --store or --url" in captured.err
    assert captured.out == ""  # refused before anything is printed


# --- a thread served by langgraph dev -------------------------------------------------------------------------


def _closed_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # a real server
def test_inspect_shows_a_thread_the_dev_server_serves(dev_server, capsys):  # noqa: F811 - the imported fixture
    client = get_sync_client(url=dev_server, timeout=60)
    thread_id = client.threads.create()["thread_id"]
    for turn in range(4):
        events, errors = _request(client, thread_id, f"Task {turn}: fix module{turn} and run its tests")
        assert errors == []
        if any(e.get("stage") == "summarize" for e in events):
            break
    compaction = client.threads.get_state(thread_id)["values"]["compaction"]
    assert compaction["counts"]["summarize"] >= 1

    assert main(["inspect", "--url", dev_server, "--thread", thread_id, "--user", USER]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"thread {thread_id} · served by {dev_server}\n")
    assert f"summarize: {compaction['counts']['summarize']} compaction" in out
    assert "## SESSION INTENT" in out  # the current summary
    assert re.search(rf"transcript: store://compaction/transcripts/{thread_id} · [\d,]+ messages", out)
    summary_id = re.search(r"^  (\S+): replaced [\d,]+ messages", out, re.MULTILINE).group(1)
    assert re.search(rf"memory files of user '{USER}': [1-9]", out)
    assert re.search(rf"store://compaction/memory/{USER}/memory/\d{{4}}-\d\d-\d\d\.md · [\d,]+ bytes", out)

    assert main(["inspect", "--url", dev_server, "--thread", thread_id, "--summary", summary_id]) == 0
    assert "Task 0: fix module0" in capsys.readouterr().out

    assert main(["inspect", "--url", dev_server, "--thread", "no-such-thread"]) == 2
    assert "--thread 'no-such-thread' is not a thread of the server at" in capsys.readouterr().err


def test_inspect_url_with_no_server_there_is_one_line(capsys):
    url = f"http://127.0.0.1:{_closed_port()}"
    assert main(["inspect", "--url", url, "--thread", "t"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--url {url}: cannot reach the server" in err


def test_url_with_checkpointer_or_store_is_refused(capsys):
    assert main(["inspect", "--url", "http://127.0.0.1:2024", "--thread", "t", "--checkpointer", "c.db"]) == 2
    assert "--url and --checkpointer both name where the thread's state is; pass one" in capsys.readouterr().err
