"""What the engine's tests share: the lifecycle events the package logged (``events()``)."""

from __future__ import annotations

import logging

import pytest
from support.events import lifecycle_events


@pytest.fixture
def events(caplog):
    """Return a function listing the lifecycle events logged so far."""
    caplog.set_level(logging.INFO, logger="langgraph_compaction")
    return lambda: lifecycle_events(caplog)
