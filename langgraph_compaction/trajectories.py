"""Read recorded conversations in OpenAI chat format into LangChain messages."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from langchain_core.messages import BaseMessage, convert_to_messages


def messages_from_openai(records: Iterable[dict], id_prefix: str = "m") -> list[BaseMessage]:
    """Return LangChain messages for OpenAI-format dicts, with stable ids ``<prefix>-<index>``.

    Tool-call arguments are parsed from their JSON strings; ``name`` is kept
    (a recorded ``compact_summary`` user message stays recognisable).
    """
    messages: list[BaseMessage] = []
    for i, record in enumerate(records):
        record = dict(record)
        if record.get("content") is None:
            record["content"] = ""
        message = convert_to_messages([record])[0]
        message.id = f"{id_prefix}-{i}"
        messages.append(message)
    return messages


def load_trajectory(path: str | Path) -> list[BaseMessage]:
    """Return the messages of a ``.jsonl`` trajectory file (one OpenAI-format message a line)."""
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    return messages_from_openai(records, id_prefix=path.stem)
