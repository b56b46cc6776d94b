"""What LangChain's ``SummarizationMiddleware`` takes besides the settings: its ``summarizer``, its old names.

``summarizer=`` says who writes the summary text: a chat model or a model
name, prompted as the summarizer is, or a ``Runnable`` or a function given
the evicted messages and returning the text (``SummarizerFunction`` makes it a
chat model the engine calls like any other). ``model`` then only gives the
window (``with_window_of``). ``learn_window`` narrows an engine's window to
that of the agent's own model, read from each request.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.runnables.base import coerce_to_runnable
from pydantic import ValidationError

from ..core.config import CompactionConfig, model_context_window
from ..engine.nodes import CompactionEngine
from .models import chat_model

logger = logging.getLogger("langgraph_compaction")


class SummarizerFunction(BaseChatModel):
    """A ``summarizer=`` function or ``Runnable`` as a chat model: given the evicted messages, it answers the text.

    The engine sends it the messages themselves (``takes_messages``), not a
    prompt; it must return a ``str`` (anything else is a failed summary).
    """

    function: Any
    #: The engine sends this summarizer the messages to summarize, not the summary prompt.
    takes_messages: ClassVar[bool] = True

    @property
    def _llm_type(self) -> str:
        return "summarizer-function"

    @property
    def _runnable(self) -> Runnable:
        return coerce_to_runnable(self.function)

    @staticmethod
    def _result(text: object) -> ChatResult:
        if not isinstance(text, str):
            raise TypeError(f"summarizer= must return a str, got {type(text).__name__}")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return self._result(self._runnable.invoke(messages))

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return self._result(await self._runnable.ainvoke(messages))


def summarizer_model(summarizer: Any) -> Any:
    """Return who writes the summary for ``summarizer=``: a chat model as it is, a name resolved, a function wrapped."""
    if isinstance(summarizer, (str, BaseChatModel)):
        return chat_model(summarizer, "summarizer")
    if isinstance(summarizer, Runnable) or callable(summarizer):
        return SummarizerFunction(function=summarizer)
    raise TypeError(
        "summarizer must be a chat model, a model name, a Runnable or a function returning the summary text, "
        f"not {type(summarizer).__name__}"
    )


def with_window_of(model: Any, config: CompactionConfig | None) -> CompactionConfig | None:
    """Return ``config`` with ``model``'s window as its own, unless it states one (``model`` gives the window)."""
    window = model_context_window(model)
    if window is None or (config is not None and config.context_window is not None):
        return config
    return (config or CompactionConfig()).model_copy(update={"context_window": window})


def deprecated_arguments(given: dict[str, Any], trigger: Any, keep: Any) -> tuple[Any, Any]:
    """Return ``(trigger, keep)`` with LangChain's deprecated ``max_tokens_before_summary`` and ``messages_to_keep``.

    Raises:
        TypeError: an argument LangChain's middleware does not take either.
    """
    for name, value in given.items():
        if name == "max_tokens_before_summary":
            trigger = ("tokens", value) if trigger is None and value is not None else trigger
            replacement = "trigger=('tokens', value)"
        elif name == "messages_to_keep":
            keep = ("messages", value) if keep is None and value is not None else keep
            replacement = "keep=('messages', value)"
        else:
            raise TypeError(f"CompactionMiddleware() got an unexpected keyword argument {name!r}")
        warnings.warn(f"{name} is deprecated. Use {replacement} instead.", DeprecationWarning, stacklevel=3)
    return trigger, keep


def learn_window(engine: CompactionEngine, window: int | None) -> bool:
    """Narrow ``engine``'s window to ``window`` (the agent's own model's) when it is smaller; return True if it did.

    A token trigger set over that window gives way to the one derived from
    it. Settings that do not fit so small a window leave the engine as it is
    and say so in the log (the overflow recovery still catches a request the
    model refuses).
    """
    known = engine.budget.context_window
    if window is None or (known is not None and known <= window):
        return False
    try:
        config = engine.config.model_copy(update={"context_window": window})
        budget = config.resolve()
        if budget.trigger_tokens > window:
            logger.warning(
                "the trigger (%s tokens) is over the agent model's window (%s): the trigger derived from it is used",
                budget.trigger_tokens,
                window,
            )
            config = config.model_copy(update={"trigger_tokens": None, "trigger_fraction": None})
            budget = config.resolve()
    except ValueError as exc:  # pydantic's ValidationError too
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        logger.warning("the agent model's window (%s tokens) is not used: %s", window, reason)
        return False
    engine.setup.config, engine.setup.budget = config, budget
    return True
