"""Build one hierarchical memory per history, and retrieve evidence for a question."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from benchmarks.chunking import Chunk, ChunkingConfig, chunk_history
from benchmarks.embedding_cache import EmbeddingCache
from benchmarks.importance import chunk_importance
from benchmarks.types import History, Question, Sample
from memory.bench import reranker_for
from memory.config import ENCODE_BATCH_SIZE, MemoryConfig
from memory.encoder import Encoder
from memory.hierarchical import HierarchicalMemory
from modules.types import Evidence


@dataclass(frozen=True)
class MemoryBuildConfig:
    """How a benchmark history becomes a memory.

    Attributes:
        chunking: Chunking options.
        mode: :class:`memory.MemoryConfig` mode (``"full"``, ``"oracle_unbounded"``, ...).
        l1_fraction: L1 capacity as a fraction of the history's chunk count.
        l2_fraction: L2 capacity as a fraction of the chunk count (1.0: nothing is pruned).
        min_l1: Smallest L1 capacity.
        entity_patterns: Entity pattern set of the memory (``"dialogue"`` for QA benchmarks).
        encode_batch_size: Encoder batch size.
        reranker: Reranker of mode ``full`` (``None`` disables the stage).
        gate_threshold: L1 -> L2 gate threshold; ``None`` uses the value calibrated for the
            encoder by :mod:`memory.calibration`.
        lexical_weight: Weight of the BM25 channel fused with the dense ranking (0: dense only);
            0.5 was the best of 0.3-1.0 on LoCoMo val (docs/results/retrieval.md).
        lexical_dates: Index each chunk's session date with its text, so a question naming a
            month or year matches what was said then (date-aware lexical queries).
    """

    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    mode: str = "full"
    l1_fraction: float = 0.1
    l2_fraction: float = 1.0
    min_l1: int = 16
    entity_patterns: str = "dialogue"
    encode_batch_size: int = ENCODE_BATCH_SIZE
    reranker: str | None = "bi_encoder"
    gate_threshold: float | None = None
    lexical_weight: float = 0.5
    lexical_dates: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.l1_fraction <= 1.0:
            raise ValueError(f"MemoryBuildConfig.l1_fraction must be in (0, 1], got {self.l1_fraction!r}")
        if not self.l2_fraction > 0.0:
            raise ValueError(f"MemoryBuildConfig.l2_fraction must be > 0, got {self.l2_fraction!r}")


def memory_config_for(n_chunks: int, build: MemoryBuildConfig | None = None) -> MemoryConfig:
    """A :class:`memory.MemoryConfig` sized to a history of ``n_chunks`` chunks."""
    b = build or MemoryBuildConfig()
    n = max(1, n_chunks)
    return MemoryConfig(
        l1_capacity=max(b.min_l1, math.ceil(b.l1_fraction * n)),
        l2_capacity=max(1, math.ceil(b.l2_fraction * n)),
        mode=b.mode,
        entity_patterns=b.entity_patterns,
        encode_batch_size=b.encode_batch_size,
        gate_threshold=b.gate_threshold,
        reranker=b.reranker,
        lexical_weight=b.lexical_weight,
        lexical_fields=("timestamp",) if b.lexical_dates else (),
    )


def chunk_importances(history: History, chunks: list[Chunk]) -> list[float]:
    """Importance of each chunk (max over its turns, see :mod:`benchmarks.importance`)."""
    by_id = {t.turn_id: t for t in history.turns()}
    return [chunk_importance([by_id[tid] for tid in c.turn_ids]) for c in chunks]


def build_memory(
    sample: Sample,
    encoder: Encoder,
    config: MemoryConfig | None = None,
    *,
    build: MemoryBuildConfig | None = None,
    embeddings: np.ndarray | None = None,
    cache: EmbeddingCache | None = None,
) -> HierarchicalMemory:
    """Build the memory of one sample's history.

    Args:
        sample: The sample (only its history is used).
        encoder: Sentence encoder.
        config: Explicit memory config; default: sized to the history by ``build``.
        build: Chunking and sizing options (default :class:`MemoryBuildConfig`).
        embeddings: Precomputed chunk vectors (aligned with ``chunk_history``'s output), e.g.
            shared between memories of different modes.
        cache: Optional on-disk embedding cache used when ``embeddings`` is not given.

    Returns:
        The filled memory; ``memory.chunks`` is not set, chunk data lives in item metadata.
    """
    b = build or MemoryBuildConfig()
    chunks = chunk_history(sample.history, b.chunking)
    cfg = config or memory_config_for(len(chunks), b)
    # A MiniLM-variant memory (e.g. minilm-int8) reranks with its own stored vectors.
    memory = HierarchicalMemory(cfg, encoder, reranker=reranker_for(cfg, encoder))
    if not chunks:
        return memory
    texts = [c.text for c in chunks]
    if embeddings is None:
        embeddings = (
            cache.encode(encoder, texts, b.encode_batch_size)
            if cache is not None
            else encoder.encode(texts, batch_size=b.encode_batch_size)
        )
    metadata = [
        {
            "chunk_id": c.chunk_id,
            "turn_ids": list(c.turn_ids),
            "session_id": c.session_id,
            "timestamp": c.timestamp,
        }
        for c in chunks
    ]
    memory.ingest(
        texts, importance=chunk_importances(sample.history, chunks), metadata=metadata, embeddings=embeddings
    )
    if cfg.lexical_weight > 0:
        memory.lexical_index()  # index now: building is the ingest's cost, not the first query's
    return memory


def retrieve_evidence(
    memory: HierarchicalMemory, question: Question, k: int, *, query_embedding: np.ndarray | None = None
) -> list[Evidence]:
    """Top-``k`` chunks for ``question`` as :class:`Evidence` (``source_ids`` = turn ids).

    Args:
        memory: A memory built by :func:`build_memory`.
        question: The question (its text is the query).
        k: Number of chunks.
        query_embedding: Precomputed query vector (skips encoding).
    """
    items = memory.retrieve(question.question, k, query_embedding=query_embedding)
    out = []
    for item in items:
        meta = item.metadata
        out.append(
            Evidence(
                chunk_id=str(meta.get("chunk_id", item.item_id)),
                text=item.text,
                timestamp=meta.get("timestamp"),
                score=float(item.score),
                source_ids=tuple(meta.get("turn_ids", ())),
            )
        )
    return out
