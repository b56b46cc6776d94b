"""A thread a LangGraph server serves (``langgraph dev``, a deployment), read over HTTP through ``langgraph_sdk``.

``inspect --url`` reads the thread's state from the server's threads API and
the transcript and memory from the server's store, through `ServerStore`:
the same `StoreStorage` reads as in the graph, over the store API. Reads
only: nothing is written to the server.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, Op, Result, SearchItem, SearchOp

from .errors import UsageError, driver_reason, shown_dsn


class ServerStore(BaseStore):
    """A LangGraph server's store, read through a ``langgraph_sdk`` sync client: gets and searches, no writes.

    Args:
        client: ``langgraph_sdk.get_sync_client(url=...)``.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            found = self.client.store.search_items(
                list(op.namespace_prefix), filter=op.filter, limit=op.limit, offset=op.offset, query=op.query
            )
            return [SearchItem(**_item_fields(item), score=item.get("score")) for item in found["items"]]
        raise TypeError(f"the server's store is read here, never written ({type(op).__name__})")

    def _get(self, op: GetOp) -> Item | None:
        import httpx

        try:
            item = self.client.store.get_item(list(op.namespace), op.key)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                return None
            raise
        return Item(**_item_fields(item)) if item else None


def _item_fields(item: dict) -> dict:
    return {
        "namespace": tuple(item["namespace"]),
        "key": item["key"],
        "value": item["value"],
        "created_at": item["created_at"],
        "updated_at": item["updated_at"],
    }


def server_client(url: str) -> Any:
    """Return a ``langgraph_sdk`` sync client of the server at ``url``; UsageError in one line when it does not answer.

    Args:
        url: the server's ``http(s)://`` URL (``langgraph dev`` prints it).
    """
    import httpx
    from langgraph_sdk import get_sync_client

    shown = shown_dsn(url)
    if not url.startswith(("http://", "https://")):
        raise UsageError(
            f"--url {shown}: not an http:// or https:// URL; pass the server's URL, e.g. http://127.0.0.1:2024"
        )
    try:  # one probe without the client's retries: any answer, even a refusal, says a server is there
        httpx.get(url.rstrip("/") + "/ok", timeout=10)
    except httpx.TransportError as exc:
        raise UsageError(
            f"--url {shown}: cannot reach the server ({driver_reason(exc, url)}); check the URL and that "
            "`langgraph dev` or the deployment is running"
        ) from exc
    return get_sync_client(url=url, timeout=30)


def server_state(client: Any, url: str, thread: str) -> dict:
    """Return the latest state values of ``thread`` on the server; UsageError naming the thread when it has none.

    Args:
        client: the server's client (`server_client`).
        url: its URL, for messages.
        thread: the thread id.
    """
    import httpx
    from langchain_core.messages import convert_to_messages

    try:
        values = client.threads.get_state(thread)["values"]
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code not in (404, 422):
            raise UsageError(
                f"--url {shown_dsn(url)}: the server failed the request ({exc.response.status_code})"
            ) from exc
        raise UsageError(f"--thread {thread!r} is not a thread of the server at {shown_dsn(url)}") from exc
    values = dict(values) if isinstance(values, dict) else {}
    values["messages"] = convert_to_messages(values.get("messages") or [])
    return values
