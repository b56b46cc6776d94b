"""A retried run writes each request's memory once: after a killed worker, after a database outage.

A worker process dies (``kill -9``) inside the summary call, after its
memory flush wrote the ledger; the client sends the same request again and
another worker process serves it, on the same checkpointer (SQLite or
PostgreSQL) and the same storage folder. The retry redoes the work since the
last checkpoint: the tools run again, their results get new ids, and the
compaction it makes covers another set of messages. Whatever the memory
model words differently the second time, the user's ledger must end with
one entry about each request. The same holds when the database drops the
worker's connection in the middle of a run and the client retries.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from support import SMALL_WINDOW, build_graph, first_input

from langgraph_compaction import FileStorage
from langgraph_compaction.invariants import ledgers_of
from langgraph_compaction.memory.ledger import parse_bullets
from langgraph_compaction.testing import ScriptedModel, scripted_memories, scripted_summary

TURNS = 8


def _models(worker: str, die_in_summary: bool) -> ScriptedModel:
    """The summarizer and memory model of one worker: its memory bullets worded its own way, as any LLM's are.

    ``die_in_summary``: the process kills itself at its first summary call (its flush has written the ledger).
    """

    def summary(prompt: str) -> str:
        if die_in_summary:
            os.kill(os.getpid(), signal.SIGKILL)
        return scripted_summary(prompt)

    def memory(prompt: str) -> str:
        return scripted_memories(prompt).replace("- The user asked:", f"- As {worker} heard it, the user asked:")

    return ScriptedModel(summary=summary, memory=memory)


def _checkpointer(dsn: str, db: str):
    if dsn:
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver.from_conn_string(dsn)
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver.from_conn_string(db)


def _serve(root: str, dsn: str, thread: str, worker: str, first: int, die_in_summary: bool) -> None:
    """Serve requests ``first``.. of the thread, recording in ``progress`` which one is in flight."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support
    with _checkpointer(dsn, str(Path(root, "checkpoints.sqlite"))) as saver:
        saver.setup()
        graph, _ = build_graph(_models(worker, die_in_summary), config=SMALL_WINDOW, storage=root, checkpointer=saver)
        for turn in range(first, TURNS):
            Path(root, "progress").write_text(str(turn))
            graph.invoke(first_input(turn), {"configurable": {"thread_id": thread}})


def _run_worker(*args: object) -> int | None:
    process = multiprocessing.get_context("spawn").Process(target=_serve, args=args)
    process.start()
    process.join(timeout=300)
    if process.is_alive():
        process.kill()
        process.join()
    return process.exitcode


def requests_in_bullets(root: Path) -> Counter:
    """Return, for each user request the ledger mentions, how many bullets mention it."""
    bullets = [b for text in ledgers_of(FileStorage(root), "default").values() for b in parse_bullets(text)]
    return Counter(m for b in bullets for m in re.findall(r"Task \d+ please", b))


@pytest.mark.parametrize("checkpointer", ["sqlite", "postgres"])
def test_a_request_retried_on_another_worker_after_a_kill_in_the_summary_is_remembered_once(
    tmp_path, postgres_for, checkpointer
):
    dsn = postgres_for(checkpointer)
    thread = f"retried-{uuid.uuid4().hex[:8]}"  # one PostgreSQL schema serves the whole test run
    assert _run_worker(str(tmp_path), dsn, thread, "worker-a", 0, True) == -signal.SIGKILL
    in_flight = int((tmp_path / "progress").read_text())
    written = requests_in_bullets(tmp_path)
    assert written, "the killed worker's flush wrote nothing before its summary call"
    # the client sends request ``in_flight`` again; another worker serves it and the next ones
    assert _run_worker(str(tmp_path), dsn, thread, "worker-b", in_flight, False) == 0
    twice = {request: n for request, n in requests_in_bullets(tmp_path).items() if n > 1}
    assert twice == {}, f"requests in more than one ledger bullet: {twice}"


# --- a database outage in the middle of a run, then the client's retry --------------------------------------


def test_a_request_retried_after_the_database_dropped_the_connection_is_remembered_once(tmp_path, postgres_dsn):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    dropped: list[int] = []
    asked: list[str] = []
    thread = {"configurable": {"thread_id": f"outage-{uuid.uuid4().hex[:8]}"}}
    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()

        def memory(prompt: str) -> str:
            if not dropped:  # the database drops this worker's connection while its memory flush is under way
                dropped.append(saver.conn.info.backend_pid)
                with psycopg.connect(postgres_dsn, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (dropped[0],))
            asked.append(prompt)  # each answer worded its own way, as any LLM's are
            return scripted_memories(prompt).replace("- The user asked:", f"- In call {len(asked)}, the user asked:")

        models = ScriptedModel(memory=memory)
        graph, _ = build_graph(models, config=SMALL_WINDOW, storage=tmp_path, checkpointer=saver)
        failed_at = None
        for turn in range(TURNS):
            try:
                graph.invoke(first_input(turn), thread)
            except psycopg.OperationalError:
                failed_at = turn
                break
    assert failed_at is not None, "the outage did not fail the run"
    assert requests_in_bullets(tmp_path), "the flush wrote nothing before the outage"
    with PostgresSaver.from_conn_string(postgres_dsn) as saver:  # the worker reconnects; the client retries
        graph, _ = build_graph(models, config=SMALL_WINDOW, storage=tmp_path, checkpointer=saver)
        for turn in range(failed_at, TURNS):
            graph.invoke(first_input(turn), thread)
    twice = {request: n for request, n in requests_in_bullets(tmp_path).items() if n > 1}
    assert twice == {}, f"requests in more than one ledger bullet: {twice}"


# --- a worker killed between the agent's tool calls and their results ---------------------------------------


def _serve_tools(root: str, worker: str, die_in_tool: bool) -> None:
    """Serve request 0 of the thread on the SQLite checkpointer; ``die_in_tool``: ``bash`` kills this process."""
    import json

    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from support import ScriptedAgent, agent_builder, read_file, write_file

    from langgraph_compaction import add_compaction

    @tool
    def bash(cmd: str) -> str:
        """Run a shell command."""
        if die_in_tool:
            time.sleep(1)  # a command takes a while: the agent's step is checkpointed by then
            os.kill(os.getpid(), signal.SIGKILL)
        return f"$ {cmd}\n42 passed\nexit code 0"

    agent = ScriptedAgent()
    builder = agent_builder(agent, tools=[bash, read_file, write_file])
    add_compaction(builder, before="agent", model=ScriptedModel(), config=SMALL_WINDOW, storage=root)
    with SqliteSaver.from_conn_string(str(Path(root, "checkpoints.sqlite"))) as saver:
        graph = builder.compile(checkpointer=saver)
        for turn in range(3):
            graph.invoke(first_input(turn), {"configurable": {"thread_id": "killed-in-a-tool"}})
    Path(root, f"problems-{worker}.json").write_text(json.dumps(agent.problems))


def test_a_request_retried_after_a_worker_died_in_a_tool_sends_every_call_answered(tmp_path):
    import json

    context = multiprocessing.get_context("spawn")
    first = context.Process(target=_serve_tools, args=(str(tmp_path), "worker-a", True))
    first.start()
    first.join(timeout=120)
    assert first.exitcode == -signal.SIGKILL  # died in the agent's first tool call
    second = context.Process(target=_serve_tools, args=(str(tmp_path), "worker-b", False))
    second.start()
    second.join(timeout=120)
    assert second.exitcode == 0
    assert json.loads((tmp_path / "problems-worker-b.json").read_text()) == []
