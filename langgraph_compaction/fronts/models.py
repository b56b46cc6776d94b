"""The chat models a front is given: an instance as it is, a name resolved as LangChain's ``init_chat_model`` does.

LangChain's ``SummarizationMiddleware(model="openai:gpt-4o-mini")`` takes a
model by name; every front here takes the same names for ``model`` and
``flush_model``. A name is resolved when the front is built, so a name that
names no model is refused there, not at the first summary. Resolving a name
needs LangChain (the ``agents`` extra); instances never do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..engine.setup import EngineOptions

_EXAMPLES = "'openai:gpt-4o-mini' or 'anthropic:claude-sonnet-4-5'"


def chat_model(value: Any, argument: str = "model") -> Any:
    """Return the chat model ``value`` stands for: an instance or None as it is, a name made into a model.

    Args:
        value: A chat model (any LangChain ``Runnable``), None (no model: an
            extractive summary, or ``model`` again for ``flush_model``), or a
            name such as ``"openai:gpt-4o-mini"`` or ``"gpt-4o-mini"``, resolved
            by LangChain's ``init_chat_model`` with the provider's package and
            its API key from the environment. Building the model calls nobody.
        argument: The parameter ``value`` was given as, named in errors.

    Raises:
        ValueError: the name names no model LangChain can build (the reason is given).
        ImportError: a name was given and LangChain, or the provider's package, is not installed.
        TypeError: ``value`` is neither a name, a model nor None.
    """
    if value is None or not isinstance(value, str):
        if value is not None and not hasattr(value, "invoke"):
            raise TypeError(
                f"{argument} must be a chat model, a model name such as {_EXAMPLES}, or None, "
                f"not {type(value).__name__}"
            )
        return value
    if not value.strip() or value.strip().endswith(":"):
        raise ValueError(f"{argument}={value!r} names no model; pass a name such as {_EXAMPLES}, or a chat model")
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ImportError(
            f"{argument}={value!r} is a model name, which LangChain's init_chat_model resolves: "
            "pip install 'langgraph-compaction[agents]', or pass a chat model instance"
        ) from exc
    try:
        return init_chat_model(value)
    except ImportError as exc:  # the provider's integration package, e.g. langchain-anthropic
        raise ImportError(f"{argument}={value!r} needs its provider's package: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - the provider's own check, e.g. a missing API key
        raise ValueError(_unbuilt(value, argument, exc)) from exc


def named_models(options: EngineOptions) -> EngineOptions:
    """Return a front's engine ``options`` with ``model`` and ``flush_model`` made models (``chat_model``)."""
    return replace(options, model=chat_model(options.model), flush_model=chat_model(options.flush_model, "flush_model"))


#: The environment variables each provider of ``init_chat_model`` reads its API key from, the first preferred.
API_KEY_VARIABLES = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "azure_openai": ("AZURE_OPENAI_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "mistralai": ("MISTRAL_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "perplexity": ("PPLX_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
}


def _unbuilt(value: str, argument: str, exc: Exception) -> str:
    """Return why ``init_chat_model(value)`` failed: the provider's key not set, a name it cannot place, or its reason.

    The key comes first: a provider's class refuses a missing key with a
    ``ValueError`` too (pydantic's), which is no unknown name.
    """
    import os

    from pydantic import ValidationError

    if ":" in value:
        provider = value.split(":", 1)[0].strip().lower()
    else:  # the names init_chat_model places without a prefix that need a key
        provider = "openai" if value.startswith(("gpt-", "o1", "o3", "o4")) else ""
    variables = API_KEY_VARIABLES.get(provider, ())
    if variables and not any(os.environ.get(name) for name in variables):
        alternatives = f" (or {', '.join(variables[1:])})" if variables[1:] else ""
        return (
            f"{argument}={value!r} could not be built: its API key is missing; set {variables[0]}{alternatives} "
            f"in the environment, or pass a chat model"
        )
    if isinstance(exc, ValueError) and not isinstance(exc, ValidationError):  # init_chat_model cannot tell the provider
        return (
            f"{argument}={value!r} names no model LangChain knows (it cannot tell the provider); write it as "
            f"'provider:model', such as {_EXAMPLES}, or pass a chat model"
        )
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"{argument}={value!r} could not be built: {reason}; set what the provider needs (its API key variable), "
        "or pass a chat model"
    )
