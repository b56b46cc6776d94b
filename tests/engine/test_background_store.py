"""A job that outlives its run never touches the application's store.

A request handler opens its store for the request and closes it when the run
returns (``with SqliteStore.from_conn_string(...) as store``); a summary being
prepared in the background is still running then. A closed SQLite connection
used from the job's thread crashed the process (the checkpointer suite died
this way, in the job's memory read). The gate does the storage work before it
starts a job, and the job calls the models only; a store of this process
alone gets nothing published for other workers.
"""

from __future__ import annotations

import time

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from support import build_graph, first_input

from langgraph_compaction import CompactionConfig, StoreStorage
from langgraph_compaction.testing import ScriptedModel


class RequestStore(InMemoryStore):
    """An in-process store its application closes after each run: what is asked of it while closed is recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.while_closed: list[str] = []

    def batch(self, ops):
        ops = list(ops)
        if self.closed:
            self.while_closed.extend(type(op).__name__ for op in ops)
        return super().batch(ops)


def test_a_job_running_after_its_run_returned_does_not_use_the_store():
    store = RequestStore()
    config = CompactionConfig(context_window=30_000)  # background compaction, the default
    graph, _ = build_graph(
        ScriptedModel(latency=0.3), config=config, storage=store, checkpointer=InMemorySaver(), store=store
    )
    thread = {"configurable": {"thread_id": "requests", "user_id": "u"}}
    for turn in range(14):
        store.closed = False  # the request opens it
        graph.invoke(first_input(turn), thread)
        store.closed = True  # and closes it when the run returns, while a job may still run
        time.sleep(0.4)
    events = graph.get_state(thread).values["compaction"]["events"]
    assert any(e.get("event") == "compaction_applied" and e.get("mode") == "background" for e in events)
    assert store.while_closed == []


def test_a_store_of_this_process_alone_is_not_shared_and_a_servers_is():
    assert StoreStorage(RequestStore()).shared is False
    assert StoreStorage(object()).shared is True  # PostgresStore, the server's store: other workers read it
