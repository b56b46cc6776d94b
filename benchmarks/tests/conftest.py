"""The fixtures the benchmarks' own tests share with the package's: this run's PostgreSQL schema, the OpenAI server."""

import pytest
from support.fixtures import openai_server, postgres_dsn
from support.tiers import mark_slow

__all__ = ["openai_server", "postgres_dsn"]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark; also when these tests run without tests/
def pytest_collection_modifyitems(items):
    """Mark the long benchmark tests `support.tiers` names ``slow`` (CI's second run)."""
    mark_slow(items)
