"""The command line's errors, printed as one line each, the console the commands print to, and what makes text safe
to print: DSNs without their secrets, text without terminal control sequences."""

from __future__ import annotations

import argparse
import re
from typing import Any, NoReturn

USAGE_ERROR = 2
DEMO_EXTRA = "pip install 'langgraph-compaction[demo]'"


class CommandError(Exception):
    """A run that could not be done (an API that refused it): printed as one line, exit status 1."""

    status = 1


class UsageError(CommandError):
    """A mistake in the command line or its inputs: printed as one line, exit status 2."""

    status = USAGE_ERROR


def console() -> Any:
    """Return the console the commands print to, once the packages of the ``[demo]`` extra they use are there.

    Every text it prints passes `printable` (its ``render_str``): a message, a
    summary or a thread id cannot send the terminal a control sequence.
    """
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401 - demo writes and inspect reads the SQLite checkpoints
        from rich.console import Console
    except ImportError as exc:
        raise UsageError(
            f"the command needs rich, matplotlib and langgraph-checkpoint-sqlite ({exc}): {DEMO_EXTRA}"
        ) from exc

    class _PrintableConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(printable(text), **kwargs)

    return _PrintableConsole(highlight=False, soft_wrap=True)


#: Characters a terminal acts on rather than shows: C0 and C1 controls, DEL, and the bidirectional overrides.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Return ``text`` with every character a terminal would act on written as its escape (``\\x1b``, ``\\u202e``).

    Lines and tabs stay; an escape sequence in a message (OSC 52 writing the
    clipboard, cursor moves) is shown, never interpreted. Everything the
    command line prints passes here.

    >>> printable("ok\\x1b]52;c;eA==\\x07")
    'ok\\\\x1b]52;c;eA==\\\\x07'

    Args:
        text: what is about to be printed.
    """
    return _CONTROLS.sub(lambda found: ascii(found.group())[1:-1], text)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose error line passes `printable` (it quotes what the user typed)."""

    def error(self, message: str) -> NoReturn:
        super().error(printable(message))


#: Query parameters of a DSN whose values are secrets.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def _split_dsn(dsn: str) -> tuple[str, str, str | None, str, str]:
    """Return (scheme, user, password or None, host and path, query) of a URL DSN, read as libpq reads it.

    The user part ends at the last ``@`` (a password may hold ``/``, ``?``,
    ``#`` or ``@`` unencoded); the query starts at the first ``?`` after it.
    """
    scheme, _, rest = dsn.partition("://")
    userinfo, at, location = rest.rpartition("@")
    if not at:
        userinfo, location = "", rest
    user, colon, password = userinfo.partition(":")
    user = re.split(r"[/?#]", user, maxsplit=1)[0]  # whatever follows is no user name
    host, _, query = location.partition("?")
    return scheme, user, password if colon or user != userinfo else None, host, query


def shown_dsn(dsn: str) -> str:
    """Return the DSN as messages print it: its password and secret parameters replaced by ``***``.

    >>> shown_dsn("postgresql://app:s3#cret@db:5432/prod?sslmode=require&password=x")
    'postgresql://app:***@db:5432/prod?sslmode=require&password=***'

    Args:
        dsn: a ``postgresql://`` URL.
    """
    scheme, user, password, host, query = _split_dsn(dsn)
    userinfo = f"{user}:***@" if password is not None else (f"{user}@" if user else "")
    shown = [
        f"{key}=***" if key.lower() in _SECRET_PARAMETERS else f"{key}{sep}{value}"
        for key, sep, value in (part.partition("=") for part in query.split("&") if part)
    ]
    return f"{scheme}://{userinfo}{host}" + (f"?{'&'.join(shown)}" if shown else "")


def dsn_secrets(dsn: str) -> list[str]:
    """Return the secrets a DSN holds: its password and the values of its secret parameters, as written and decoded."""
    from urllib.parse import unquote

    _, _, password, _, query = _split_dsn(dsn)
    found = [password] if password else []
    for key, _, value in (part.partition("=") for part in query.split("&")):
        if key.lower() in _SECRET_PARAMETERS and value:
            found.append(value)
    return [s for secret in found for s in dict.fromkeys((secret, unquote(secret)))]


def without_secrets(text: str, dsn: str) -> str:
    """Return a driver's message about ``dsn`` with the DSN's secrets, and any quoted part of one, as ``***``.

    libpq quotes the pieces it could not use (``invalid integer value "pa"
    for connection option "port"``): a piece of a password is hidden too.

    Args:
        text: the message (a psycopg error's text).
        dsn: the DSN it is about.
    """
    secrets = dsn_secrets(dsn)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")

    def quoted(found: re.Match) -> str:
        inner = found.group(2)
        return f"{found.group(1)}***{found.group(1)}" if inner and any(inner in s for s in secrets) else found.group()

    return re.sub(r"([\"'])([^\"']*)\1", quoted, text)


def driver_reason(exc: BaseException, dsn: str) -> str:
    """Return the first line of a database driver's error about ``dsn``, without the DSN's secrets.

    Args:
        exc: the driver's exception.
        dsn: the DSN it was given.
    """
    text = str(exc).strip()
    return without_secrets(text.splitlines()[0], dsn) if text else type(exc).__name__
