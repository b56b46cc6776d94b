"""What a failed model call means: a context overflow (compact and retry), or anything else (let it through).

``is_context_overflow`` recognises the refusal by exception type and
provider error code first (LangChain's ``ContextOverflowError``, OpenAI's
``context_length_exceeded``, HTTP 413), and by its wording (Anthropic's
"prompt is too long" and the usual phrasings) only for errors a provider
raised. A rate limit (HTTP 429, ``rate_limit_exceeded``) is never an overflow,
and LangGraph's control flow (``interrupt()``, ``GraphBubbleUp``) always
passes through untouched. The summarize step and overflow recovery both ask.
``worth_retrying`` tells a failure a background job tries again (a 503, a
rate limit, a dropped connection) from one that would fail the same way.
"""

from __future__ import annotations

import re

from langchain_core.exceptions import ContextOverflowError
from langgraph.errors import GraphBubbleUp

_PHRASES = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|context limit|prompt is too long"
    r"|too many tokens|reduce the length|input is too long|request too large|exceeds the (?:model's )?max",
    re.IGNORECASE,
)
# "maximum context length is 4000 tokens. However, your messages resulted in 4512 tokens" (OpenAI),
# "prompt is too long: 208310 tokens > 200000 maximum" (Anthropic)
_OPENAI_FIGURES = re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.S)
_ANTHROPIC_FIGURES = re.compile(r"(\d+) tokens > (\d+) maximum")


class ContextTooLongError(ContextOverflowError):
    """The request is over the model's window even after compaction; the message says how large and why."""


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen and len(seen) < 8:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _error_code(exc: BaseException) -> str | None:
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if not isinstance(code, str) and isinstance(body, dict):
        inner = body.get("error")
        error = inner if isinstance(inner, dict) else body
        code = error.get("code") or error.get("type")
    return code if isinstance(code, str) else None


#: Error codes that say "too many tokens per minute", not "too many tokens for the window".
_RATE_LIMIT_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error", "insufficient_quota", "too_many_requests"})
#: Top-level packages of provider SDKs; an error they raise (or raised in their code) may be read by its text.
_PROVIDER_PACKAGES = frozenset(
    {
        "openai",
        "anthropic",
        "google",
        "vertexai",
        "botocore",
        "boto3",
        "httpx",
        "requests",
        "groq",
        "mistralai",
        "cohere",
        "ollama",
        "litellm",
        "together",
        "fireworks",
        "huggingface_hub",
    }
)


def _provider_package(module: str) -> bool:
    root = module.split(".", 1)[0]
    return root in _PROVIDER_PACKAGES or (root.startswith("langchain_") and root != "langchain_core")


def _raised_by_provider(e: BaseException) -> bool:
    """Return True for an error of a provider SDK's type, or raised inside a provider integration's code.

    Integrations such as langchain-aws re-raise a service error as a plain
    ``ValueError``; where it was raised tells it from an application's own
    error, whose text (an ``interrupt()`` payload, a tool's message) may quote anything.
    """
    if _provider_package(type(e).__module__):
        return True
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and _provider_package(tb.tb_frame.f_globals.get("__name__") or "")


def _status(e: BaseException) -> int | None:
    status = getattr(e, "status_code", None) or getattr(getattr(e, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_context_overflow(exc: BaseException) -> bool:
    """Return True when ``exc`` (or an exception it was raised from) says the input was too long for the model.

    By type and error code first; by wording only for an error a provider
    raised. A rate limit and LangGraph's control flow (``GraphInterrupt`` and
    the other ``GraphBubbleUp``) are never an overflow.
    """
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, GraphBubbleUp) or _status(e) == 429 or _error_code(e) in _RATE_LIMIT_CODES:
            return False
    for e in chain:
        if isinstance(e, ContextOverflowError) or _error_code(e) == "context_length_exceeded" or _status(e) == 413:
            return True
    return any(_raised_by_provider(e) and _PHRASES.search(str(e)) for e in chain)


def overflow_figures(exc: BaseException) -> tuple[int | None, int | None]:
    """Return (window, request size) in tokens when the provider's error states them, else Nones."""
    for e in _chain(exc):
        text = str(e)
        if match := _OPENAI_FIGURES.search(text):
            return int(match.group(1)), int(match.group(2))
        if match := _ANTHROPIC_FIGURES.search(text):
            return int(match.group(2)), int(match.group(1))
    return None, None


#: HTTP statuses of a request that may succeed when sent again: a timeout, a conflict, too early, a rate limit.
_RETRIED_CLIENT_STATUSES = frozenset({408, 409, 425, 429})
#: How a passing failure reads when its error has no status: "Error code: 503 - ...", an overloaded server, a reset.
_PASSING = re.compile(
    r"error code: (?:5\d\d|408|409|425|429)\b|service unavailable|temporarily unavailable|overloaded"
    r"|rate limit|connection (?:error|reset|refused|aborted)",
    re.IGNORECASE,
)


def worth_retrying(exc: BaseException) -> bool:
    """Return True when a compaction model's failure may pass if the call is made again at once.

    A server error (5xx), a rate limit or a dropped connection may, by the
    status the error carries or else by its type and wording; a request the
    provider refused (any other 4xx), a context overflow, a call that ran out
    of its time (``summary.timeout``: another try would take as long), a bug
    and LangGraph's control flow (an ``interrupt()`` needs the run) would not.
    """
    chain = _chain(exc)
    if any(isinstance(e, (GraphBubbleUp, TimeoutError)) for e in chain) or is_context_overflow(exc):
        return False
    for e in chain:
        if (status := _status(e)) is not None:
            return status >= 500 or status in _RETRIED_CLIENT_STATUSES
    return any(
        isinstance(e, ConnectionError) or _error_code(e) in _RATE_LIMIT_CODES or _PASSING.search(str(e)) for e in chain
    )
