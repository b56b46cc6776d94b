"""Secrets out of long-lived text: the default redactor for memory and, on request, transcripts.

``redact_secrets`` replaces what looks like a credential by ``[REDACTED]``
and leaves everything else as it was: API keys (OpenAI ``sk-...``,
Anthropic, Google, Stripe, Slack), AWS access keys, GitHub tokens, bearer
and basic authorization headers, JSON web tokens, private key blocks,
passwords in URLs, ``key=value`` assignments of secret-named keys
(``OPENAI_API_KEY=...``, ``"password": "..."``), secrets said in plain
English (``the staging db password is hunter2-staging``, ``the api key is
9f8e...``: a secret word, ``is``/``was``, then a value with a digit or a
symbol) and IBANs (their mod-97 checksum must hold). It is idempotent:
redacting twice gives the same text.

It does not catch: card numbers, phone numbers, names and addresses, a
secret with no secret word before it, a value of plain letters (``the
password is swordfish``), or phrasing in other languages. Pass your own
detector as ``CompactionConfig.guards.redactor`` for those.

Any ``Callable[[str], str]`` can replace it (``CompactionConfig.guards.redactor``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

REDACTED = "[REDACTED]"

#: Whole-token secrets: the match is replaced entirely.
_TOKENS = re.compile(
    "|".join(
        (
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{16,}",
            r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
            r"\b(?:AKIA|ASIA|AIDA|AROA|AGPA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}",
            r"\bgithub_pat_[A-Za-z0-9_]{30,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"\bAIza[0-9A-Za-z_-]{35}",
            r"\bhf_[A-Za-z0-9]{30,}",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        )
    ),
    re.DOTALL,
)

#: ``Authorization: <scheme> <credential>``, and ``Bearer <token>`` anywhere (a token has a digit,
#: so "bearer of bad news" stays): the scheme is kept, the credential goes.
_AUTH_HEADER = re.compile(
    r"(\bAuthorization[\"']?\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest)?\s*|\bBearer\s+(?=[A-Za-z._~+/-]*\d))"
    r"(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{8,}=*",
    re.IGNORECASE,
)

#: ``scheme://user:password@host``: the user is kept, the password goes.
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s:/?#@]+:)(?!\[REDACTED\]@)([^\s@/?#]+)(@)", re.IGNORECASE)

#: ``<secret-named key> = value`` in env files, shell, YAML, JSON and Python.
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<key>\b[A-Za-z0-9_.-]*?(?:
        api[_-]?key|secret(?:[_-]?access)?[_-]?key|client[_-]?secret|secret|access[_-]?token|
        auth[_-]?token|refresh[_-]?token|token|private[_-]?key|password|passwd
    ))
    (?P<sep>["']?\s*(?::|=|:=)\s*)
    (?P<quote>["']?)
    (?P<value>(?!\[REDACTED\])[^\s"',;}{)]+)
    """
)
_SHORT_OK = ("password", "passwd")

#: ``<secret word> [for the VPN] is|was <value>``: only a value of 6 characters or more with a digit or a symbol is
#: taken for a secret, so "the password is required" and "the token is 5 characters" stay as they are.
_PHRASE = re.compile(
    r"""(?ix)
    (?P<head>\b(?:password|passwd|passphrase|passcode|pin|secret|api[\s_-]?key|access[\s_-]?key|secret[\s_-]?key|
        private[\s_-]?key|(?:access|auth|refresh|api)[\s_-]?token|token|credentials?)
      (?:\s+(?:for|of|to|on)(?:\s+[\w.@/-]+){1,3})?
      \s+(?:is|was|are|were|reads|=)\s+(?:now\s+|still\s+|set\s+to\s+)?)
    (?P<quote>["'`]?)
    (?P<value>(?!\[REDACTED\])(?=[^\s"'`,;]{6})(?=[^\s"'`]*[0-9!#$%&*+=?@^~…_-])[^\s"'`,;]*[^\s"'`,;.!?)])
    """
)

#: Two letters, two check digits, 11-30 letters and digits, in groups of four or not: checked by mod 97 below.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")


def _iban(match: re.Match[str]) -> str:
    text = match.group(0)
    code = text.replace(" ", "")
    if not 15 <= len(code) <= 34:
        return text
    digits = "".join(str(int(c, 36)) for c in code[4:] + code[:4])
    return REDACTED if int(digits) % 97 == 1 else text


def _assignment(match: re.Match[str]) -> str:
    key, value = match.group("key"), match.group("value")
    # short values of token-like keys are counts and flags (``token: 5``), not secrets
    if len(value) < 8 and not key.lower().endswith(_SHORT_OK):
        return match.group(0)
    return f"{key}{match.group('sep')}{match.group('quote')}{REDACTED}"


def redact_secrets(text: str) -> str:
    """Return the text with credentials replaced by ``[REDACTED]``.

    >>> redact_secrets("export OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234 and go")
    'export OPENAI_API_KEY=[REDACTED] and go'
    >>> redact_secrets("postgres://app:hunter2@db:5432/main")
    'postgres://app:[REDACTED]@db:5432/main'
    """
    if not isinstance(text, str) or not text:
        return text
    text = _TOKENS.sub(REDACTED, text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", text)
    text = _IBAN.sub(_iban, text)
    text = _PHRASE.sub(lambda m: f"{m.group('head')}{m.group('quote')}{REDACTED}", text)
    return _ASSIGNMENT.sub(_assignment, text)


def _redact_value(value: Any, redactor: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, (list, tuple, set, frozenset)):  # artifacts keep their type (the codec encodes it)
        return type(value)(_redact_value(v, redactor) for v in value)
    if isinstance(value, dict):
        return {k: _redact_value(v, redactor) for k, v in value.items()}
    return value


#: Parts of a ``messages_to_dict`` record that carry what was said (ids, types and names stay).
_RECORD_TEXT_FIELDS = ("content", "tool_calls", "invalid_tool_calls", "additional_kwargs", "artifact")


def redact_record(record: dict[str, Any], redactor: Callable[[str], str]) -> dict[str, Any]:
    """Return a ``messages_to_dict`` record with its content and tool arguments redacted.

    Ids, types, names and ``tool_call_id`` are left alone, so the record
    still loads with ``messages_from_dict`` and still pairs with its call.
    """
    data = record.get("data")
    if not isinstance(data, dict):
        return record
    cleaned = dict(data)
    for field in _RECORD_TEXT_FIELDS:
        if field not in cleaned:
            continue
        if field in ("tool_calls", "invalid_tool_calls") and isinstance(cleaned[field], list):
            cleaned[field] = [
                {**call, "args": _redact_value(call.get("args"), redactor)} if isinstance(call, dict) else call
                for call in cleaned[field]
            ]
        else:
            cleaned[field] = _redact_value(cleaned[field], redactor)
    return {**record, "data": cleaned}
