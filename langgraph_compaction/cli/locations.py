"""Where the commands read from: what a ``--checkpointer``, ``--store`` or storage argument names.

A ``postgresql://`` DSN, a ``sqlite:///file`` URL, or a path. What is none of
them but looks like one (a libpq ``key=value`` string, a LangGraph server's
``http://`` URL, another scheme) is refused in one line, never read as the
name of a SQLite file.
"""

from __future__ import annotations

import importlib
import re
from typing import Literal

from .errors import DEMO_EXTRA, UsageError, shown_dsn

POSTGRES_EXTRA = 'pip install "langgraph-compaction[postgres]"'
#: The ``[demo]`` extra brings langgraph-checkpoint-sqlite: the SQLite checkpointer and store.
SQLITE_EXTRA = DEMO_EXTRA

#: libpq's connection keywords a ``key=value`` string starts with.
_LIBPQ_KEYWORDS = (
    "host|hostaddr|port|dbname|user|password|passfile|service|sslmode|options|connect_timeout|application_name"
)
_KEY_VALUE = re.compile(rf"^\s*({_LIBPQ_KEYWORDS})\s*=", re.IGNORECASE)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

Kind = Literal["postgres", "sqlite", "path"]


def location_kind(spec: str, flag: str, server_hint: str) -> Kind:
    """Return what ``spec`` names: ``postgres`` (a DSN), ``sqlite`` (a ``sqlite:`` URL) or ``path``.

    Args:
        spec: the argument as the user typed it.
        flag: the flag (or argument) to name in errors.
        server_hint: what to do instead when ``spec`` is a LangGraph server's ``http(s)://`` URL.

    Raises:
        UsageError: ``spec`` is a libpq ``key=value`` string, an ``http(s)://``
            URL or another scheme; the message never repeats a password.
    """
    if _KEY_VALUE.match(spec):
        raise UsageError(
            f"{flag}: a key=value connection string (host=... dbname=...) is not read here; write it as a URL: "
            "postgresql://USER:PASSWORD@HOST:PORT/DBNAME"
        )
    if spec.startswith("sqlite:"):
        return "sqlite"
    scheme = _SCHEME.match(spec)
    if scheme is None:
        return "path"
    name = scheme.group(1).lower()
    if name in ("postgres", "postgresql"):
        return "postgres"
    if name in ("http", "https"):
        raise UsageError(f"{flag} {shown_dsn(spec)}: a LangGraph server, not a database; {server_hint}")
    raise UsageError(
        f"{flag} {shown_dsn(spec)}: {name}:// names no database read here; pass a postgresql:// DSN, "
        "sqlite:///FILE or a path"
    )


def sqlite_path(spec: str) -> str:
    """Return the file a ``sqlite:`` URL names: the path after ``sqlite://`` (``sqlite:///srv/a.db``: /srv/a.db)."""
    return re.sub(r"^sqlite:(//)?", "", spec) or ":memory:"


def require(flag: str, install: str, *modules: str) -> None:
    """Import ``modules``; a missing one is a one-line UsageError naming the install command.

    Args:
        flag: the flag (or argument) that needs them, named in the message.
        install: the command that installs them.
        modules: the modules to import.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UsageError(f"{flag}: {module} cannot be imported ({exc}): {install}") from exc
