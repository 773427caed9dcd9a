"""Pluggable reranker stage (the slot of HTM-EAR's MS MARCO cross-encoder)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, candidate text) pairs; higher is more relevant."""

    name: str

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        query_embedding: np.ndarray | None = None,
        item_embeddings: np.ndarray | None = None,
        encoder_name: str | None = None,
    ) -> np.ndarray:
        """Return one float score per text (float64 array of ``len(texts)``).

        Args:
            query: Query text.
            texts: Candidate texts.
            query_embedding: The memory's query vector (may be reused by bi-encoders).
            item_embeddings: The memory's stored candidate vectors, aligned with ``texts``.
            encoder_name: Name of the encoder that produced those vectors.
        """
        ...


class BiEncoderReranker:
    """Cosine re-scorer under a registered sentence encoder (default ``"minilm"``).

    Args:
        encoder_name: Encoder registry name used to score (built lazily on first use).
    """

    def __init__(self, encoder_name: str = "minilm") -> None:
        self.name = "bi_encoder"
        self.encoder_name = encoder_name
        self._cache: dict[str, np.ndarray] = {}  # text -> vector, for a foreign encoder

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        query_embedding: np.ndarray | None = None,
        item_embeddings: np.ndarray | None = None,
        encoder_name: str | None = None,
    ) -> np.ndarray:
        """Cosine of the query with each text (see :class:`Reranker`)."""
        if not texts:
            return np.empty(0, dtype=np.float64)
        if encoder_name == self.encoder_name and query_embedding is not None and item_embeddings is not None:
            return (item_embeddings @ query_embedding).astype(np.float64)
        from memory.encoder import get_encoder

        enc = get_encoder(self.encoder_name)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for t, v in zip(missing, enc.encode(missing), strict=True):
                self._cache[t] = v
            if len(self._cache) > 50_000:  # bound memory in long runs
                self._cache.clear()
        q = enc.encode([query])[0]
        mat = np.stack([self._cache[t] if t in self._cache else enc.encode([t])[0] for t in texts])
        return (mat @ q).astype(np.float64)


_WORD_RE = re.compile(r"[a-z0-9]+")
_STOP_TEXT = (
    "a an the of for in on at to and or is are was were be by with from what which who when "
    "where how me my i you your it its this that these those do does did retrieve find show "
    "give tell about regarding involving containing entry event log logs "
)
_STOP = frozenset(_STOP_TEXT.split())


def content_tokens(text: str) -> set[str]:
    """Lower-cased alphanumeric tokens of ``text`` without stop words."""
    return {t for t in _WORD_RE.findall(text.lower()) if t not in _STOP}


class LexicalReranker:
    """Fraction of the query's content tokens that appear in the candidate (0 if the query has none)."""

    def __init__(self) -> None:
        self.name = "lexical"

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        query_embedding: np.ndarray | None = None,
        item_embeddings: np.ndarray | None = None,
        encoder_name: str | None = None,
    ) -> np.ndarray:
        """Query-token coverage of each text (see :class:`Reranker`)."""
        q = content_tokens(query)
        if not q:
            return np.zeros(len(texts), dtype=np.float64)
        return np.array([len(q & content_tokens(t)) / len(q) for t in texts], dtype=np.float64)


#: name -> zero-argument factory.
RERANKERS: dict[str, Callable[[], Reranker]] = {
    "bi_encoder": BiEncoderReranker,
    "lexical": LexicalReranker,
}


def register_reranker(name: str, factory: Callable[[], Reranker], *, overwrite: bool = False) -> None:
    """Register a reranker factory under ``name``.

    Raises:
        ValueError: If ``name`` is taken and ``overwrite`` is false.
    """
    if name in RERANKERS and not overwrite:
        raise ValueError(f"reranker {name!r} is already registered")
    RERANKERS[name] = factory


def get_reranker(name: str) -> Reranker:
    """Build the reranker registered as ``name``.

    Raises:
        ValueError: For an unknown name (the message lists the known ones).
    """
    if name not in RERANKERS:
        raise ValueError(f"unknown reranker {name!r}; known: {sorted(RERANKERS)}")
    return RERANKERS[name]()
