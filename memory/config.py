"""Configuration of a :class:`memory.HierarchicalMemory` (one frozen dataclass, validated on creation)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

#: Texts per encoder batch when a memory ingests. Batches are length-sorted, so small ones pad little: on
#: 2 cores MiniLM encodes LoCoMo's chunks (~100 tokens) 18% faster at 16 than at 64 (7.5 s vs 9.2 s for three
#: histories, AMD EPYC Zen 5), and the vectors differ by <= 1.5e-7, float rounding.
ENCODE_BATCH_SIZE = 16

#: Retrieval/eviction ablation modes of the HTM-EAR paper.
#:
#: * ``full``: importance-aware eviction, gated L1 -> L2 routing, hybrid score, reranker stage.
#: * ``no_ce``: as ``full`` without the reranker stage.
#: * ``no_gate``: as ``no_ce`` but queries search L1 only (the archive is never consulted).
#: * ``lru``: both levels evict by oldest ``last_access``; gate on, no reranker (as in the reference).
#: * ``oracle_unbounded``: one store that never evicts (an upper bound on retrievability).
MODES: tuple[str, ...] = ("full", "no_ce", "no_gate", "lru", "oracle_unbounded")

#: What to do with L1's candidates when the gate falls back to L2.
FALLBACKS: tuple[str, ...] = ("merge", "replace")


@dataclass(frozen=True)
class MemoryConfig:
    """All knobs of the hierarchical memory. Defaults follow the HTM-EAR paper unless noted.

    Attributes:
        l1_capacity: Logical capacity of L1 (working memory).
        l2_capacity: Logical capacity of L2 (archive). Ignored by ``oracle_unbounded``.
        mode: One of :data:`MODES`.
        eviction_policy: Registry name in :data:`memory.eviction.POLICIES`; ``None`` picks
            ``"lru"`` for mode ``lru`` and ``"importance"`` otherwise.
        eviction_fraction: Fraction of a level's capacity evicted in one batch when it is full.
        essential_threshold: Importance at or above which a fact counts as essential.
        protect_essential_in_l2: L2 pruning rule of the importance policy (see
            :mod:`memory.eviction`): prune non-essential facts first and essential ones only
            when nothing else is left (the paper's text). ``False`` prunes the lowest scores
            regardless (the reference code).
        gate_threshold: Top-1 similarity below which L1 is deemed to miss; ``None`` uses the
            calibrated value stored for the encoder (:mod:`memory.calibration`).
        fallback: ``"merge"`` (default; L1 and L2 candidates are scored together) or
            ``"replace"`` (the reference: L2's candidates replace L1's).
        l1_k: Candidates fetched from L1.
        l2_k: Candidates fetched from L2 (and from the single store of ``oracle_unbounded``).
        sim_power: Exponent of similarity in the hybrid score.
        entity_weight: Weight of the query/item entity overlap count in the hybrid score.
        importance_weight: Weight of importance in the hybrid score.
        reranker: Registry name in :data:`memory.rerank.RERANKERS` used by mode ``full``;
            ``None`` disables the stage everywhere.
        rerank_top: How many hybrid-ranked candidates the reranker rescores.
        rerank_weight: Final score = ``w * rerank + (1 - w) * hybrid`` over the reranked top.
        lexical_weight: Weight of the BM25 lexical channel (:mod:`memory.lexical`) in the final
            ranking, ``(1 - w) * z(dense score) + w * z(BM25)`` over the candidates; 0 turns the
            channel off (the HTM-EAR scenarios run without it, QA benchmarks with it).
        lexical_k: Lexical candidates added from the searched levels (the gate still decides
            whether L2 is searched).
        lexical_fields: Metadata fields indexed with an item's text (e.g. the session date).
        entity_patterns: Pattern set name in :data:`memory.entities.PATTERN_SETS`.
        hnsw_m: HNSW graph degree.
        hnsw_ef_construction: HNSW build-time beam width.
        hnsw_ef: HNSW query-time beam width (raised to k automatically when k is larger).
        encode_batch_size: Batch size for encoding during ingestion.
        seed: Seed of the HNSW level generator (deterministic graphs).
    """

    l1_capacity: int = 500
    l2_capacity: int = 5000
    mode: str = "full"
    eviction_policy: str | None = None
    eviction_fraction: float = 0.15
    essential_threshold: float = 0.85
    protect_essential_in_l2: bool = True
    gate_threshold: float | None = None
    fallback: str = "merge"
    l1_k: int = 100
    l2_k: int = 200
    sim_power: float = 3.0
    entity_weight: float = 0.8
    importance_weight: float = 0.1
    reranker: str | None = "bi_encoder"
    rerank_top: int = 20
    rerank_weight: float = 0.85
    lexical_weight: float = 0.0
    lexical_k: int = 50
    lexical_fields: tuple[str, ...] = ("timestamp",)
    entity_patterns: str = "synthetic"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 200
    hnsw_ef: int = 50
    encode_batch_size: int = ENCODE_BATCH_SIZE
    seed: int = 42

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"MemoryConfig.mode: unknown mode {self.mode!r}; known modes: {list(MODES)}")
        if self.fallback not in FALLBACKS:
            raise ValueError(f"MemoryConfig.fallback must be one of {list(FALLBACKS)}, got {self.fallback!r}")
        for name in (
            "l1_capacity", "l2_capacity", "l1_k", "l2_k", "rerank_top", "encode_batch_size", "lexical_k"
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"MemoryConfig.{name} must be a positive int, got {value!r}")
        for name in ("hnsw_m", "hnsw_ef_construction", "hnsw_ef"):
            if getattr(self, name) <= 0:
                raise ValueError(f"MemoryConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if not 0.0 < self.eviction_fraction <= 1.0:
            raise ValueError(
                f"MemoryConfig.eviction_fraction must be in (0, 1], got {self.eviction_fraction!r}"
            )
        for name in ("lexical_weight", "rerank_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"MemoryConfig.{name} must be in [0, 1], got {getattr(self, name)!r}")
        if isinstance(self.lexical_fields, str) or not all(isinstance(f, str) for f in self.lexical_fields):
            raise ValueError(
                "MemoryConfig.lexical_fields must be a tuple of metadata key names, "
                f"got {self.lexical_fields!r}"
            )
        if self.gate_threshold is not None and not -1.0 <= self.gate_threshold <= 1.0:
            raise ValueError(
                f"MemoryConfig.gate_threshold must be a cosine in [-1, 1], got {self.gate_threshold!r}"
            )
        # Registries are checked here so a typo fails at construction, not at the first eviction.
        from memory.entities import PATTERN_SETS
        from memory.eviction import POLICIES
        from memory.rerank import RERANKERS

        for name, what, known, optional in (
            ("entity_patterns", "pattern set", PATTERN_SETS, False),
            ("eviction_policy", "policy", POLICIES, True),
            ("reranker", "reranker", RERANKERS, True),
        ):
            value = getattr(self, name)
            if not (optional and value is None) and value not in known:
                raise ValueError(f"MemoryConfig.{name}: unknown {what} {value!r}; known: {sorted(known)}")

    @property
    def policy_name(self) -> str:
        """The eviction policy actually used (resolves the ``None`` default from the mode)."""
        if self.eviction_policy is not None:
            return self.eviction_policy
        return "lru" if self.mode == "lru" else "importance"

    @property
    def uses_gate(self) -> bool:
        """Whether retrieval can fall back to L2 (every two-level mode except ``no_gate``)."""
        return self.mode in ("full", "no_ce", "lru")

    @property
    def uses_reranker(self) -> bool:
        """Whether the reranker stage runs (mode ``full`` with a reranker configured)."""
        return self.mode == "full" and self.reranker is not None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (saved in manifests and run metadata)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryConfig:
        """Build a config from :meth:`to_dict` output, rejecting unknown keys by name."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"MemoryConfig: unknown field(s) {unknown}; known: {sorted(known)}")
        if isinstance(data.get("lexical_fields"), list):  # JSON has no tuples
            data = {**data, "lexical_fields": tuple(data["lexical_fields"])}
        return cls(**data)

    def replace(self, **changes: Any) -> MemoryConfig:
        """Return a copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)
