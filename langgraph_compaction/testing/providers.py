"""Local stand-ins for Anthropic's Messages API and OpenAI's Responses API, with their compaction: part of the API.

Standard library only (``http.server`` on 127.0.0.1, an ephemeral port, a
background thread). The real clients talk to them: ``ChatAnthropic(base_url=
stand_in.base_url)`` and ``ChatOpenAI(base_url=stand_in.base_url + "/v1",
use_responses_api=True)``. The shapes are the SDKs' (anthropic 2.15, openai 3.57):

- Anthropic on-demand compaction (beta ``compact-2026-09-04``): a request with a
  top-level ``compaction={"type": "summarize", "instructions": ...}`` is answered
  with one block ``{"type": "compaction", "content": <readable summary>,
  "signature": ...}`` and ``stop_reason="compaction"``; the top-level ``usage`` is
  zero and the cost is the one ``usage.iterations`` entry of type ``compaction``
  (``BetaCompactionIterationUsage``). It is refused (HTTP 400) without the beta,
  together with ``context_management``, on the 4.5 models, and when the last
  assistant turn has an unanswered ``tool_use``. Its iteration reads from the
  cache the longest prefix (tools, system, messages) an earlier request shared.
- Anthropic threshold compaction (``compact_20260112`` in
  ``context_management.edits``, beta ``compact-2026-01-12``): when the input
  reaches ``trigger`` (default 150,000, at least 50,000) the answer starts with a
  ``compaction`` block; ``usage.iterations`` holds a ``compaction`` entry and a
  ``message`` entry, and the top-level ``usage`` is the ``message`` one. A later
  request's messages before the block are dropped (not counted).
- OpenAI Responses ``context_management=[{"type": "compaction",
  "compact_threshold": N}]``: over the threshold the output starts with an opaque
  item ``{"type": "compaction", "id": ..., "encrypted_content": ...}``
  (``ResponseCompactionItem``); input items before the newest one are dropped.

Tokens are counted as characters / 4 of the text a request holds. Each stand-in
answers ``replies`` in order (a string, or a list of content blocks / output
items), then ``NO_REPLY`` to a prompt that allows it (the memory flush's) and a
short text to any other; ``requests`` holds every request body received,
``answers`` every answer sent and ``errors`` every refusal's message.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["AnthropicStandIn", "ResponsesStandIn", "count_tokens", "default_summary"]

ON_DEMAND_BETA = "compact-2026-09-04"
THRESHOLD_BETA = "compact-2026-01-12"
THRESHOLD_MIN = 50_000
THRESHOLD_DEFAULT = 150_000


def count_tokens(value: Any) -> int:
    """Return the stand-ins' token count of a request part: the characters of the strings it holds, / 4."""
    if isinstance(value, str):
        return len(value) // 4
    if isinstance(value, dict):
        return sum(count_tokens(v) for k, v in value.items() if k not in ("type", "id", "signature"))
    if isinstance(value, list):
        return sum(count_tokens(v) for v in value)
    return 0


def default_summary(messages: list[dict]) -> str:
    """Return the readable summary both stand-ins write: the first and the last user text, and the tools used."""
    users = [_user_text(m) for m in messages if m.get("role") == "user" and _user_text(m)]
    tools = sorted({b.get("name", "") for m in messages for b in _blocks(m) if b.get("type") == "tool_use"})
    first, last = (users[0][:200], users[-1][:200]) if users else ("", "")
    return f"The user asked: {first}. Tools used: {', '.join(tools) or 'none'}. Last request: {last}."


def _user_text(message: dict) -> str:
    """Return what a person wrote in a user message (its text, not the tool results it carries)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in _blocks(message) if b.get("type") in ("text", "input_text"))


def _blocks(message: dict) -> list[dict]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _StandIn:
    """The HTTP part both stand-ins share: start, stop, the request log, the reply queue."""

    path = ""

    def __init__(
        self, replies: list[Any] | None = None, summarizer: Callable[[list[dict]], str | None] | None = None
    ) -> None:
        self.replies: list[Any] = list(replies or [])
        self.summarizer = summarizer or default_summary
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        self.answers: list[dict] = []
        self._server: ThreadingHTTPServer | None = None
        self._count = 0

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> Any:
        """Serve on 127.0.0.1 at an ephemeral port, in a daemon thread; return self."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return

            def do_POST(self) -> None:  # noqa: N802 - the base class's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                status, answer = stand_in.handle(self.path.split("?")[0], dict(self.headers), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        """Return ``http://127.0.0.1:<port>``."""
        assert self._server is not None, "start the stand-in first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def handle(self, path: str, headers: dict[str, str], body: dict) -> tuple[int, dict]:
        """Answer one request: (HTTP status, JSON body)."""
        if path != self.path:
            return 404, self.error_body(f"no route {path}")
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in headers.items()})
        try:
            self.answers.append(self.answer(self.headers[-1], body))
            return 200, self.answers[-1]
        except _Refused as refused:
            self.errors.append(refused.message)
            return 400, self.error_body(refused.message)

    def next_reply(self, last_text: str) -> Any:
        """Return the next scripted reply; then NO_REPLY to a prompt that allows it (the memory flush's), else text."""
        if self.replies:
            return self.replies.pop(0)
        return "NO_REPLY" if "NO_REPLY" in last_text else "Done."

    def new_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count:06d}"

    def answer(self, headers: dict[str, str], body: dict) -> dict:
        raise NotImplementedError

    def error_body(self, message: str) -> dict:
        raise NotImplementedError


def _since_compaction(messages: list[dict]) -> list[dict]:
    """Return the messages the API reads: from the newest message holding a compaction block on."""
    starts = [i for i, m in enumerate(messages) if any(b.get("type") == "compaction" for b in _blocks(m))]
    return messages[starts[-1] :] if starts else messages


def _usage(input_tokens: int, output_tokens: int, cache_read: int = 0, **extra: Any) -> dict:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache_read,
        **extra,
    }


class AnthropicStandIn(_StandIn):
    """Anthropic's ``POST /v1/messages`` with on-demand and threshold compaction (see the module)."""

    path = "/v1/messages"

    def error_body(self, message: str) -> dict:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def _cached(self, prompt: list) -> int:
        """Return the tokens of the longest prefix this request shares with an earlier one (the prompt cache)."""
        shared = 0
        for earlier in self.requests[:-1]:
            before = [earlier.get("tools"), earlier.get("system"), *earlier.get("messages", [])]
            run = 0
            for a, b in zip(before, prompt, strict=False):
                if a != b:
                    break
                run += count_tokens(a)
            shared = max(shared, run)
        return shared

    def answer(self, headers: dict[str, str], body: dict) -> dict:
        betas = headers.get("anthropic-beta", "")
        messages = body.get("messages") or []
        if not messages:
            raise _Refused("messages: at least one message is required")
        _check_pairs(messages)
        if "compaction" in body:
            return self._compact(betas, body, messages)
        edit = _threshold_edit(body, betas)
        read = _since_compaction(messages)
        prompt_tokens = count_tokens(body.get("system")) + count_tokens(read)
        reply = self.next_reply(_user_text(messages[-1]))
        content = [{"type": "text", "text": reply}] if isinstance(reply, str) else list(reply)
        output = count_tokens(content) + 1
        stop = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        usage = _usage(prompt_tokens, output)
        if edit is not None and prompt_tokens >= edit["trigger"]:
            summary = self.summarizer(read)
            block = self._block(summary)
            kept = count_tokens(block) + count_tokens(read[-1:])
            iterations = [
                {"type": "compaction", **_usage(prompt_tokens, count_tokens(summary) + 1)},
                {"type": "message", **_usage(kept, output)},
            ]
            if edit.get("pause_after_compaction"):
                content, stop, iterations = [], "compaction", iterations[:1]
            content = [block, *content]
            usage = {**(_usage(kept, output) if content[1:] else _usage(0, 0)), "iterations": iterations}
        return self._message(body, content, stop, usage)

    def _compact(self, betas: str, body: dict, messages: list[dict]) -> dict:
        if ON_DEMAND_BETA not in betas:
            raise _Refused(f"compaction: requires the beta header anthropic-beta: {ON_DEMAND_BETA}")
        if "context_management" in body:
            raise _Refused("compaction: cannot be combined with context_management")
        if "-4-5" in str(body.get("model")):
            raise _Refused(f"compaction: model {body.get('model')} does not support the compaction parameter")
        last = messages[-1]
        if last.get("role") == "assistant" and any(b.get("type") == "tool_use" for b in _blocks(last)):
            raise _Refused("compaction: the last assistant turn has a tool_use without a tool_result")
        read = _since_compaction(messages)
        summary = self.summarizer(read)
        prompt = count_tokens([body.get("tools"), body.get("system")]) + count_tokens(read)
        cached = min(prompt, self._cached([body.get("tools"), body.get("system"), *messages]))
        iteration = {"type": "compaction", **_usage(prompt - cached, count_tokens(summary) + 1, cached)}
        return self._message(body, [self._block(summary)], "compaction", {**_usage(0, 0), "iterations": [iteration]})

    def _block(self, summary: str | None) -> dict:
        """Return a signed compaction block; ``None`` content is a failed compaction (the server then ignores it)."""
        signature = hashlib.sha256((summary or "").encode()).hexdigest()[:32]
        return {"type": "compaction", "content": summary, "signature": f"sig_{signature}"}

    def _message(self, body: dict, content: list, stop: str, usage: dict) -> dict:
        return {
            "id": self.new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }


def _check_pairs(messages: list[dict]) -> None:
    """Refuse a tool_result that answers no tool_use of the assistant turn right before it, as the API does."""
    for i, message in enumerate(messages):
        results = [b.get("tool_use_id") for b in _blocks(message) if b.get("type") == "tool_result"]
        before = messages[i - 1] if i else {}
        calls = {b.get("id") for b in _blocks(before) if b.get("type") == "tool_use"}
        if stray := [r for r in results if r not in calls]:
            raise _Refused(f"messages.{i}: tool_result {stray[0]} has no matching tool_use in the previous message")


def _threshold_edit(body: dict, betas: str) -> dict | None:
    edits = (body.get("context_management") or {}).get("edits") or []
    edit = next((e for e in edits if e.get("type") == "compact_20260112"), None)
    if edit is None:
        return None
    if THRESHOLD_BETA not in betas:
        raise _Refused(f"context_management.edits: compact_20260112 requires the beta {THRESHOLD_BETA}")
    trigger = (edit.get("trigger") or {}).get("value", THRESHOLD_DEFAULT)
    if trigger < THRESHOLD_MIN:
        raise _Refused(f"context_management.edits.0.trigger.value: must be at least {THRESHOLD_MIN}, got {trigger}")
    return {**edit, "trigger": trigger}


class ResponsesStandIn(_StandIn):
    """OpenAI's ``POST /v1/responses`` with ``context_management`` compaction (see the module)."""

    path = "/v1/responses"

    def error_body(self, message: str) -> dict:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

    def answer(self, headers: dict[str, str], body: dict) -> dict:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
        starts = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
        read = items[starts[-1] :] if starts else items
        prompt = count_tokens(body.get("instructions")) + count_tokens(read)
        threshold = next(
            (c.get("compact_threshold") for c in body.get("context_management") or [] if c.get("type") == "compaction"),
            None,
        )
        output = self._output(self.next_reply(_user_text(read[-1]) if read else ""))
        if threshold is not None and prompt >= threshold:
            summary = self.summarizer([i for i in read if i.get("role")])
            encrypted = "enc_" + hashlib.sha256((summary or "").encode()).hexdigest()
            output = [{"type": "compaction", "id": self.new_id("cmp"), "encrypted_content": encrypted}, *output]
        tokens = count_tokens(output) + 1
        return {
            "id": self.new_id("resp"),
            "object": "response",
            "created_at": 1_700_000_000,
            "status": "completed",
            "model": body.get("model"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + tokens,
            },
        }

    def _output(self, reply: Any) -> list[dict]:
        if not isinstance(reply, str):
            return list(reply)
        text = {"type": "output_text", "text": reply, "annotations": []}
        return [
            {"type": "message", "id": self.new_id("msg"), "role": "assistant", "status": "completed", "content": [text]}
        ]
