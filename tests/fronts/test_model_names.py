"""A model name whose provider's API key is not set says which variable to set, not that the name is unknown."""

import pytest

from langgraph_compaction import CompactionMiddleware
from langgraph_compaction.fronts.models import chat_model

KEYS = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY")


@pytest.mark.parametrize(
    "name, variable",
    [
        ("google_genai:gemini-2.5-pro", "GOOGLE_API_KEY (or GEMINI_API_KEY)"),
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
    ],
)
def test_a_name_without_its_providers_key_names_the_variable_to_set(monkeypatch, name, variable):
    pytest.importorskip("langchain_google_genai", reason="the provider package of google_genai")
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError) as refused:
        CompactionMiddleware(model=name)
    message = str(refused.value)
    assert message.startswith(f"model={name!r} could not be built: its API key is missing; set {variable}")
    assert "names no model" not in message


def test_a_name_with_its_key_set_is_built(monkeypatch):
    pytest.importorskip("langchain_google_genai", reason="the provider package of google_genai")
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    assert type(chat_model("google_genai:gemini-2.5-pro")).__name__ == "ChatGoogleGenerativeAI"
