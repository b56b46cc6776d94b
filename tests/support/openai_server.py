"""A strict, local, OpenAI-compatible chat-completions server for tests.

Standard library only (``http.server.ThreadingHTTPServer`` in a background
thread) plus ``bpe-openai`` for exact o200k token counts.  It speaks enough of
the real API for ``langchain_openai.ChatOpenAI`` (``invoke``/``ainvoke``/
``stream``, including LangGraph's ``stream_mode="messages"``) and rejects, with
the real API's HTTP 400 error bodies, the requests the real API rejects:

* empty ``messages``;
* a ``tool`` message that does not answer a ``tool_calls`` id of the closest
  preceding assistant message (only tool messages may stand between);
* an assistant message with ``tool_calls`` not all answered by the tool
  messages that immediately follow it;
* a prompt over ``context_limit`` tokens (``code: context_length_exceeded``).

Usage::

    with StrictOpenAIServer(responder=[{"content": "hi"}], context_limit=4000) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="test",
                         model="gpt-4o-mini", max_retries=0)
        llm.invoke("hello")
        server.requests   # every received request body, in order
        server.errors     # every (status, error_body) answered
        server.context_limit = 200   # changeable at run time

What ChatOpenAI raises (langchain-openai 1.7.4 with openai 3.57, installed
here): every 400 goes through ``_handle_openai_bad_request`` in
``langchain_openai/chat_models/base.py`` and comes out as
``OpenAIInvalidRequestError`` -- a subclass of both ``openai.BadRequestError``
and ``langchain_core.exceptions.ModelInvalidRequestError`` -- INCLUDING the
over-limit case.  langchain-openai would raise ``OpenAIContextOverflowError``
(``openai.BadRequestError`` + ``langchain_core.exceptions.ContextOverflowError``)
only if ``"context_length_exceeded" in str(e)``, but openai 3.57 builds the
exception text as ``"Error code: 400 - <error.message>"`` without the code, so
that check misses for the real API's message (and for this server's, which is
the same).  Detect overflow with ``exc.code == "context_length_exceeded"``
(also ``exc.body["code"]``).  The same holds for ``stream``/``astream``: the
400 is answered before any event is sent.

Validation order: messages are checked in index order and the first problem
is reported, so an assistant whose tool call is answered by a tool message with
the wrong id is reported as "did not have response messages" (at the
assistant's index), before the stray tool message.

Token accounting (``count_prompt_tokens``), following OpenAI's published
recipe for gpt-4o-class models: per message 3 tokens + o200k(role) +
o200k(text content) + o200k(name) + 1 if a name is given + o200k(function
name) + o200k(arguments string) for each tool call; plus 3 tokens priming the
reply.  Tool schemas (``tools``) are NOT counted.  ``usage.prompt_tokens`` and
the context-limit check both use this number.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

with warnings.catch_warnings():
    # bpe-openai 0.1.4 loads its tables at import time via the deprecated
    # importlib.resources.open_binary; keep that out of -W error runs.
    warnings.simplefilter("ignore", DeprecationWarning)
    import bpe_openai

__all__ = [
    "StrictOpenAIServer",
    "count_prompt_tokens",
    "count_text_tokens",
    "default_responder",
    "message_text",
    "request_text",
]

# --------------------------------------------------------------------------
# token counting
# --------------------------------------------------------------------------

_ENCODING_LOCK = threading.Lock()
_ENCODING: Any = None

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3


def _encoding() -> Any:
    global _ENCODING
    if _ENCODING is None:
        with _ENCODING_LOCK:
            if _ENCODING is None:
                with warnings.catch_warnings():
                    # bpe-openai 0.1.4 uses the deprecated importlib.resources.open_binary
                    warnings.simplefilter("ignore", DeprecationWarning)
                    _ENCODING = bpe_openai.get_encoding("o200k_base")
    return _ENCODING


def count_text_tokens(text: str) -> int:
    """Exact o200k_base token count of ``text`` (special tokens as plain text)."""
    if not text:
        return 0
    enc = _encoding()
    # The bpe-openai Encoding keeps per-call state (``_last_result``); serialize.
    with _ENCODING_LOCK:
        return len(enc.encode_ordinary(text))


def message_text(message: dict[str, Any]) -> str:
    """The text of a message's ``content`` (a string or a list of parts)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif isinstance(part.get("refusal"), str):
                    parts.append(part["refusal"])
        return "".join(parts)
    return str(content)


def count_prompt_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """The server's ``prompt_tokens`` for a list of OpenAI-format messages."""
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        total += TOKENS_PER_MESSAGE
        total += count_text_tokens(str(message.get("role") or ""))
        total += count_text_tokens(message_text(message))
        if message.get("name"):
            total += TOKENS_PER_NAME + count_text_tokens(str(message["name"]))
        for call in message.get("tool_calls") or []:
            function = (call or {}).get("function") or {}
            total += count_text_tokens(str(function.get("name") or ""))
            args = function.get("arguments")
            if not isinstance(args, str):
                args = json.dumps(args) if args is not None else ""
            total += count_text_tokens(args)
    return total + REPLY_PRIMING_TOKENS


def request_text(body: dict[str, Any]) -> str:
    """All message text of a request (content, tool-call names and arguments)."""
    chunks: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        chunks.append(message_text(message))
        for call in message.get("tool_calls") or []:
            function = (call or {}).get("function") or {}
            chunks.append(str(function.get("name") or ""))
            chunks.append(str(function.get("arguments") or ""))
    return "\n".join(c for c in chunks if c)


# --------------------------------------------------------------------------
# default responder
# --------------------------------------------------------------------------

_SUMMARY_MARKER = "Context Extraction Assistant"
_MEMORY_MARKER = "memory extraction assistant"
_XML_HUMAN = re.compile(r'<message type="human"[^>]*>(.*?)</message>', re.S)
_PLAIN_HUMAN = re.compile(r"^(?:Human|User|user|human):\s*(.+)$", re.M)
_XML_TOOL_CALL = re.compile(r'<tool_call [^>]*name="([^"]+)"')
_PATHISH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|txt|json|toml|yaml|yml|js|ts|csv|cfg|ini|sh|html|rs|go))\b"
)


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _last_user_request(body: dict[str, Any]) -> str:
    """Best guess at the end user's latest request.

    Looks inside a summarization/extraction prompt first (the conversation is
    usually embedded in it, as ``get_buffer_string`` XML or ``Human:`` lines),
    then at the request's own user messages that are not the prompt itself.
    """
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for message in reversed(messages):
        text = message_text(message)
        if _SUMMARY_MARKER in text or _MEMORY_MARKER in text.lower():
            found = _XML_HUMAN.findall(text) or _PLAIN_HUMAN.findall(text)
            if found:
                return _one_line(found[-1])
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = message_text(message)
        if text and _SUMMARY_MARKER not in text and _MEMORY_MARKER not in text.lower():
            return _one_line(text)
    return ""


def _tool_names(body: dict[str, Any], text: str) -> list[str]:
    names: list[str] = []
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            for call in message.get("tool_calls") or []:
                name = ((call or {}).get("function") or {}).get("name")
                if name:
                    names.append(name)
    names.extend(_XML_TOOL_CALL.findall(text))
    return list(dict.fromkeys(names))


def default_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Canned replies: a 4-section summary, two memory bullets, or a short reply."""
    text = request_text(body)
    request = _last_user_request(body)
    if _SUMMARY_MARKER in text:
        tools = _tool_names(body, text)
        paths = list(dict.fromkeys(_PATHISH.findall(text)))[:5]
        n_messages = len(_XML_HUMAN.findall(text)) or len(body.get("messages") or [])
        intent = request or "Continue the user's current task."
        summary = (
            f"The user asked: {request}. " if request else "The conversation so far covered the user's task. "
        ) + f"{n_messages} earlier message(s) were condensed"
        summary += f"; tools used: {', '.join(tools)}." if tools else "; no tools were used."
        artifacts = "\n".join(f"- {p}" for p in paths) if paths else "None"
        next_steps = f"- Continue with: {request}" if request else "- Wait for the user's next request."
        content = (
            f"## SESSION INTENT\n{intent}\n\n"
            f"## SUMMARY\n{summary}\n\n"
            f"## ARTIFACTS\n{artifacts}\n\n"
            f"## NEXT STEPS\n{next_steps}"
        )
        return {"content": content, "tool_calls": []}
    if _MEMORY_MARKER in text.lower():
        topic = request or "the current task"
        content = f"- The user is working on: {topic}\n- The user prefers concise, direct answers."
        return {"content": content, "tool_calls": []}
    if request:
        return {"content": f"Understood: {_one_line(request, 60)}", "tool_calls": []}
    return {"content": "Understood.", "tool_calls": []}


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


class _RequestError(Exception):
    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int = 400,
        type_: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": type_, "param": param, "code": code}}


_VALID_ROLES = ("system", "developer", "user", "assistant", "tool", "function")

_TOOL_WITHOUT_CALL = (
    "Invalid parameter: messages with role 'tool' must be a response to a "
    "preceeding message with 'tool_calls'."  # sic: the real API's spelling
)
_UNANSWERED_CALLS = (
    "An assistant message with 'tool_calls' must be followed by tool messages "
    "responding to each 'tool_call_id'. The following tool_call_ids did not "
    "have response messages: {ids}"
)
_CONTEXT_EXCEEDED = (
    "This model's maximum context length is {limit} tokens. However, your "
    "messages resulted in {n} tokens. Please reduce the length of the messages."
)


def _validate_messages(messages: Any) -> None:
    if messages is None:
        raise _RequestError(
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list):
        raise _RequestError(
            f"Invalid type for 'messages': expected an array, but got {type(messages).__name__} instead.",
            param="messages",
            code="invalid_type",
        )
    if not messages:
        raise _RequestError("[] is too short - 'messages'", param="messages")

    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _RequestError(
                f"Invalid type for 'messages[{i}]': expected an object, but got {type(message).__name__} instead.",
                param=f"messages[{i}]",
                code="invalid_type",
            )
        role = message.get("role")
        if role is None:
            raise _RequestError(
                f"Missing required parameter: 'messages[{i}].role'.",
                param=f"messages[{i}].role",
                code="missing_required_parameter",
            )
        if role not in _VALID_ROLES:
            raise _RequestError(
                f"Invalid value: '{role}'. Supported values are: 'system', "
                "'assistant', 'user', 'function', 'tool', and 'developer'.",
                param=f"messages[{i}].role",
                code="invalid_value",
            )
        if role in ("system", "developer", "user", "tool") and message.get("content") is None:
            raise _RequestError(
                "Invalid value for 'content': expected a string, got null.",
                param=f"messages.[{i}].content",
            )

        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            ids: list[str] = []
            for j, call in enumerate(calls):
                function = (call or {}).get("function") or {}
                if not isinstance(function.get("arguments"), str):
                    raise _RequestError(
                        f"Invalid type for 'messages[{i}].tool_calls[{j}].function."
                        "arguments': expected a string, but got an object instead.",
                        param=f"messages[{i}].tool_calls[{j}].function.arguments",
                        code="invalid_type",
                    )
                ids.append(str((call or {}).get("id")))
            answered = set()
            k = i + 1
            while k < len(messages) and isinstance(messages[k], dict) and messages[k].get("role") == "tool":
                answered.add(messages[k].get("tool_call_id"))
                k += 1
            missing = [cid for cid in ids if cid not in answered]
            if missing:
                raise _RequestError(
                    _UNANSWERED_CALLS.format(ids=", ".join(missing)),
                    param=f"messages.[{i}].role",
                )

        if role == "tool":
            k = i - 1
            while k >= 0 and isinstance(messages[k], dict) and messages[k].get("role") == "tool":
                k -= 1
            owner = messages[k] if k >= 0 else None
            owner_ids = (
                {(call or {}).get("id") for call in ((owner or {}).get("tool_calls") or [])}
                if isinstance(owner, dict) and owner.get("role") == "assistant"
                else set()
            )
            if message.get("tool_call_id") not in owner_ids:
                raise _RequestError(_TOOL_WITHOUT_CALL, param=f"messages.[{i}].role")


# --------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------

Responder = Callable[[dict[str, Any]], Any]


def _new_id(prefix: str, n: int = 24) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(secrets.choice(alphabet) for _ in range(n))


class StrictOpenAIServer:
    """Local strict OpenAI chat-completions server (see module docstring).

    ``responder`` is a callable ``responder(request_body) -> dict | str | None``
    or a list of replies consumed in order (the last one repeats).  A reply is
    ``{"content": str | None, "tool_calls": [{"name": ..., "arguments": dict |
    str, "id": optional}]}`` (a bare string means ``{"content": s}``); ``None``
    falls back to :func:`default_responder`.  ``responder``, ``context_limit``
    and ``model`` may be reassigned while the server runs.
    """

    def __init__(
        self,
        responder: Responder | list[Any] | dict[str, Any] | None = None,
        context_limit: int | None = None,
        model: str = "gpt-4o-mini",
    ) -> None:
        self._lock = threading.Lock()
        self._reply_index = 0
        self.responder = responder
        self.context_limit = context_limit
        self.model = model
        self.requests: list[Any] = []
        self.errors: list[tuple[int, dict[str, Any]]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def responder(self) -> Responder | list[Any] | dict[str, Any] | None:
        return self._responder

    @responder.setter
    def responder(self, value: Responder | list[Any] | dict[str, Any] | None) -> None:
        """Assigning a new responder (e.g. a fresh reply list) restarts the list."""
        with self._lock:
            self._responder = value
            self._reply_index = 0

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> StrictOpenAIServer:
        if self._httpd is not None:
            return self
        _encoding()  # load the tokenizer before the first request
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"StrictOpenAIServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> StrictOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def last_request(self) -> Any:
        return self.requests[-1] if self.requests else None

    def reset(self) -> None:
        """Forget recorded requests/errors and restart a reply list from its start."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self._reply_index = 0

    # -- request handling ---------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        responder = self.responder
        if isinstance(responder, list):
            with self._lock:
                if not responder:
                    reply = None
                else:
                    reply = responder[min(self._reply_index, len(responder) - 1)]
                    self._reply_index += 1
        elif isinstance(responder, (dict, str)):
            reply = responder
        elif callable(responder):
            reply = responder(body)
        else:
            reply = None
        if reply is None:
            reply = default_responder(body)
        if isinstance(reply, str):
            reply = {"content": reply}
        return reply

    def _complete(self, body: Any) -> tuple[dict[str, Any], int, list[dict[str, Any]], str | None]:
        """Validate; returns (body, prompt_tokens, tool_calls, content) or raises."""
        if not isinstance(body, dict):
            raise _RequestError("Invalid type for request body: expected an object.", code="invalid_type")
        if not body.get("model"):
            raise _RequestError("you must provide a model parameter")
        messages = body.get("messages")
        _validate_messages(messages)
        prompt_tokens = count_prompt_tokens(messages)
        limit = self.context_limit
        if limit is not None and prompt_tokens > limit:
            raise _RequestError(
                _CONTEXT_EXCEEDED.format(limit=limit, n=prompt_tokens),
                param="messages",
                code="context_length_exceeded",
            )
        reply = self._next_reply(body)
        tool_calls = []
        for call in reply.get("tool_calls") or []:
            args = call.get("arguments", call.get("args", {}))
            if not isinstance(args, str):
                args = json.dumps(args)
            tool_calls.append(
                {
                    "id": call.get("id") or _new_id("call_"),
                    "type": "function",
                    "function": {"name": call["name"], "arguments": args},
                }
            )
        content = reply.get("content")
        if content is None and not tool_calls:
            content = ""
        return body, prompt_tokens, tool_calls, content


def _completion_tokens(content: str | None, tool_calls: list[dict[str, Any]]) -> int:
    n = count_text_tokens(content or "")
    for call in tool_calls:
        n += count_text_tokens(call["function"]["name"])
        n += count_text_tokens(call["function"]["arguments"])
    return n


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _Handler(BaseHTTPRequestHandler):
    owner: StrictOpenAIServer
    protocol_version = "HTTP/1.1"
    server_version = "StrictOpenAIServer/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output quiet

    # -- plumbing ----------------------------------------------------------

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _send_error(self, err: _RequestError) -> None:
        with self.owner._lock:
            self.owner.errors.append((err.status, err.body))
        self._send_json(err.status, err.body)

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    # -- routes --------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802
        if self._path() == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": self.owner.model, "object": "model", "created": 1721172741, "owned_by": "system"}],
                },
            )
            return
        self._send_error(_RequestError(f"Invalid URL (GET {self.path})", status=404))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self._path() != "/v1/chat/completions":
            self._send_error(_RequestError(f"Invalid URL (POST {self.path})", status=404))
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            with self.owner._lock:
                self.owner.requests.append(raw.decode("utf-8", "replace"))
            self._send_error(
                _RequestError(
                    "We could not parse the JSON body of your request. (HINT: This "
                    "likely means you aren't using your HTTP library correctly. The "
                    "OpenAI API expects a JSON payload, but what was sent was not "
                    "valid JSON. If you have trouble figuring out how to fix this, "
                    "please contact us through our help center at help.openai.com.)"
                )
            )
            return
        with self.owner._lock:
            self.owner.requests.append(body)
        try:
            body, prompt_tokens, tool_calls, content = self.owner._complete(body)
        except _RequestError as err:
            self._send_error(err)
            return
        except Exception as exc:  # a broken responder: answer 500, keep serving
            err = _RequestError(
                f"The server had an error while processing your request: {exc!r}",
                status=500,
                type_="server_error",
            )
            self._send_error(err)
            return

        model = body.get("model") or self.owner.model
        completion_id = _new_id("chatcmpl-", 29)
        created = int(time.time())
        completion_tokens = _completion_tokens(content, tool_calls)
        finish_reason = "tool_calls" if tool_calls else "stop"
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(
                completion_id,
                created,
                model,
                content,
                tool_calls,
                finish_reason,
                _usage(prompt_tokens, completion_tokens) if include_usage else None,
                include_usage,
            )
            return
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "refusal": None,
            "annotations": [],
        }
        if tool_calls:
            message["tool_calls"] = tool_calls
        self._send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
                "usage": _usage(prompt_tokens, completion_tokens),
                "service_tier": "default",
                "system_fingerprint": "fp_strict_local",
            },
        )

    def _stream(
        self,
        completion_id: str,
        created: int,
        model: str,
        content: str | None,
        tool_calls: list[dict[str, Any]],
        finish_reason: str,
        usage: dict[str, Any] | None,
        include_usage: bool,
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict[str, Any], finish: str | None = None, choices: bool = True) -> None:
            payload: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "service_tier": "default",
                "system_fingerprint": "fp_strict_local",
                "choices": (
                    [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else []
                ),
            }
            if include_usage:
                payload["usage"] = None
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")

        if tool_calls and not content:
            chunk({"role": "assistant", "content": None, "refusal": None})
        else:
            chunk({"role": "assistant", "content": "", "refusal": None})
            for piece in _pieces(content or "", 8):
                if piece:
                    chunk({"content": piece})
        for index, call in enumerate(tool_calls):
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in _pieces(call["function"]["arguments"], 12):
                if piece:
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        chunk({}, finish_reason)
        if usage is not None:
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "service_tier": "default",
                "system_fingerprint": "fp_strict_local",
                "choices": [],
                "usage": usage,
            }
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
