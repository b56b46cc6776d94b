"""The command line's errors, printed as one line each, the console the commands print to, and DSNs as they print."""

from __future__ import annotations

from typing import Any

USAGE_ERROR = 2
DEMO_EXTRA = "pip install 'langgraph-compaction[demo]'"


class CommandError(Exception):
    """A run that could not be done (an API that refused it): printed as one line, exit status 1."""

    status = 1


class UsageError(CommandError):
    """A mistake in the command line or its inputs: printed as one line, exit status 2."""

    status = USAGE_ERROR


def console() -> Any:
    """Return the console the commands print to, once the packages of the ``[demo]`` extra they use are there."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401 - demo writes and inspect reads the SQLite checkpoints
        from rich.console import Console
    except ImportError as exc:
        raise UsageError(
            f"the command needs rich, matplotlib and langgraph-checkpoint-sqlite ({exc}): {DEMO_EXTRA}"
        ) from exc
    return Console(highlight=False, soft_wrap=True)


def hidden_password(dsn: str) -> str:
    """Return the DSN with its password replaced by ``***``, for messages that print it.

    Args:
        dsn: a ``postgresql://`` URL.
    """
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
