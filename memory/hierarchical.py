"""``HierarchicalMemory``: HTM-EAR's two-level memory with gated hybrid retrieval."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory.config import MemoryConfig
from memory.encoder import Encoder
from memory.entities import EntityExtractor
from memory.eviction import LevelView, batch_size, get_policy
from memory.level import ItemBatch, MemoryLevel
from memory.lexical import LexicalIndex, lexical_text, zscore
from memory.rerank import Reranker, get_reranker
from memory.validation import (
    DEFAULT_IMPORTANCE,
    check_embeddings,
    check_importance,
    check_metadata,
    check_texts,
)


@dataclass(frozen=True)
class RetrievedItem:
    """One retrieval result.

    Attributes:
        item_id: Memory-assigned id (from :meth:`HierarchicalMemory.ingest`).
        text: Stored text.
        score: Final ranking score (hybrid, or reranked in mode ``full``).
        similarity: Inner product of the query and item vectors (cosine; both unit norm).
        level: ``"L1"`` or ``"L2"`` (the oracle's single store reports ``"L1"``).
        importance: Stored importance in [0, 1].
        metadata: Caller metadata given at ingestion.
    """

    item_id: int
    text: str
    score: float
    similarity: float
    level: str
    importance: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateDecision:
    """Why the last query did or did not consult L2 (``reason``: off/pass/empty/similarity/entities)."""

    fell_back: bool
    reason: str
    top1_similarity: float | None


class HierarchicalMemory:
    """Two HNSW levels with importance-aware eviction and gated hybrid retrieval.

    Args:
        config: Memory configuration.
        encoder: Sentence encoder (its ``name`` and ``dim`` are saved with the memory).
        reranker: Reranker for mode ``full``; default built from ``config.reranker``.

    Raises:
        ValueError: If the gate threshold for ``encoder`` is not calibrated and none is given.
    """

    def __init__(self, config: MemoryConfig, encoder: Encoder, *, reranker: Reranker | None = None) -> None:
        if not isinstance(config, MemoryConfig):
            raise TypeError(f"HierarchicalMemory: config must be a MemoryConfig, got {type(config).__name__}")
        self.config = config
        self.encoder = encoder
        self.dim = int(encoder.dim)
        self.extractor = EntityExtractor(config.entity_patterns)
        self.policy = get_policy(config.policy_name)
        self.reranker = reranker
        if self.reranker is None and config.uses_reranker:
            self.reranker = get_reranker(config.reranker or "")
        self.gate_threshold: float | None = None
        if config.uses_gate:
            from memory.calibration import gate_threshold_for

            self.gate_threshold = (
                config.gate_threshold
                if config.gate_threshold is not None
                else gate_threshold_for(encoder.name)
            )

        def level(name: str, capacity: int | None, seed: int) -> MemoryLevel:
            return MemoryLevel(
                name,
                self.dim,
                capacity,
                m=config.hnsw_m,
                ef_construction=config.hnsw_ef_construction,
                ef=config.hnsw_ef,
                seed=seed,
            )

        self.levels: dict[str, MemoryLevel] = {}
        if config.mode == "oracle_unbounded":
            self.levels["L1"] = level("L1", None, config.seed)
        else:
            self.levels["L1"] = level("L1", config.l1_capacity, config.seed)
            self.levels["L2"] = level("L2", config.l2_capacity, config.seed + 1)
        self.next_id = 0
        self.clock = 0
        self.stats: dict[str, int] = {
            "ingested": 0,
            "l1_evicted": 0,
            "pruned_total": 0,
            "essential_lost": 0,
            "deleted": 0,
            "queries": 0,
            "gate_fallbacks": 0,
        }
        #: Seconds spent encoding vs inserting (for throughput reports).
        self.timings: dict[str, float] = {"encode_s": 0.0, "index_s": 0.0}
        self.last_gate: GateDecision | None = None
        self._lexical: LexicalIndex | None = None
        self._lexical_key: tuple[tuple[int, int], ...] = ()

    # ------------------------------------------------------------------ basics

    def __len__(self) -> int:
        return sum(len(t) for t in self.levels.values())

    def __contains__(self, item_id: object) -> bool:
        return any(item_id in t for t in self.levels.values())

    def level_of(self, item_id: int) -> str | None:
        """Name of the level holding ``item_id``, or ``None`` if it was pruned/deleted/never existed."""
        for name, level in self.levels.items():
            if item_id in level:
                return name
        return None

    # --------------------------------------------------------------- ingestion

    def ingest(
        self,
        texts: Sequence[str],
        importance: Sequence[float] | np.ndarray | None = None,
        metadata: Sequence[dict[str, Any]] | None = None,
        embeddings: np.ndarray | None = None,
    ) -> list[int]:
        """Add items in order (oldest first) and return their new ids.

        Args:
            texts: Non-empty strings.
            importance: One value in [0, 1] per text (default 0.5 each).
            metadata: One JSON-serialisable dict per text (kept with the item, saved, returned).
            embeddings: Precomputed ``(n, dim)`` vectors from *this* memory's encoder; rows are
                L2-normalised here. Skips encoding (benchmarks reuse vectors across modes).

        Returns:
            Item ids, aligned with ``texts``.

        Raises:
            ValueError: On empty texts, importance outside [0, 1] or not finite, misaligned
                lengths, non-JSON metadata, or embeddings of the wrong shape / with NaNs / zero rows.
            TypeError: If ``texts`` is a single string or holds non-strings.
        """
        texts = check_texts(texts, "ingest")
        n = len(texts)
        if n == 0:
            return []
        imp = check_importance(importance, n)
        metas = check_metadata(metadata, n)
        t0 = time.perf_counter()
        if embeddings is None:
            vecs = self.encoder.encode(texts, batch_size=self.config.encode_batch_size)
            vecs = check_embeddings(vecs, n, self.dim, f"encoder {self.encoder.name!r} output")
        else:
            vecs = check_embeddings(embeddings, n, self.dim, "ingest(embeddings=...)")
        t1 = time.perf_counter()
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        clocks = np.arange(self.clock + 1, self.clock + 1 + n, dtype=np.int64)
        self.next_id += n
        self.clock += n
        batch = ItemBatch(
            item_ids=ids,
            embeddings=vecs,
            importance=imp,
            usage=np.zeros(n, dtype=np.int64),
            last_access=clocks,
            texts=texts,
            entities=self.extractor.extract_many(texts),
            metadata=metas,
        )
        self._insert("L1", batch)
        self.stats["ingested"] += n
        self.timings["encode_s"] += t1 - t0
        self.timings["index_s"] += time.perf_counter() - t1
        return ids.tolist()

    def _insert(self, name: str, batch: ItemBatch) -> None:
        """Insert into level ``name``, evicting a batch whenever the level is full."""
        level = self.levels[name]
        pos = 0
        while pos < len(batch):
            free = level.free_slots
            if free is None:  # unbounded store
                level.add(batch.take(slice(pos, None)))
                return
            if free == 0:
                self._evict(name)
                free = level.free_slots or 0
            level.add(batch.take(slice(pos, pos + free)))
            pos += free

    def _evict(self, name: str) -> None:
        level = self.levels[name]
        assert level.capacity is not None
        rows = level.live_rows()
        view = LevelView(level.ids[rows], level.importance[rows], level.usage[rows], level.last_access[rows])
        protect = (
            self.config.essential_threshold if name == "L2" and self.config.protect_essential_in_l2 else None
        )
        victims = level.remove(
            self.policy.select(
                view, batch_size(level.capacity, self.config.eviction_fraction), protect_threshold=protect
            )
        )
        if name == "L1":
            self.stats["l1_evicted"] += len(victims)
            self._insert("L2", victims)
        else:
            self.stats["pruned_total"] += len(victims)
            self.stats["essential_lost"] += int(
                np.count_nonzero(victims.importance >= self.config.essential_threshold)
            )

    def delete(self, item_ids: Sequence[int]) -> int:
        """Delete items by id (not counted as pruned); unknown ids are ignored.

        Returns:
            How many items were deleted.
        """
        done = 0
        for level in self.levels.values():
            present = np.array([i for i in item_ids if i in level], dtype=np.int64)
            if len(present):
                level.remove(present)
                done += len(present)
        self.stats["deleted"] += done
        return done

    # --------------------------------------------------------------- retrieval

    def encode_query(self, query: str) -> np.ndarray:
        """Encode one query with the memory's encoder (validated)."""
        check_texts([query], "retrieve")
        return check_embeddings(self.encoder.encode([query]), 1, self.dim, "query embedding")[0]

    def retrieve(
        self, query: str, k: int = 5, *, query_embedding: np.ndarray | None = None
    ) -> list[RetrievedItem]:
        """Return the top-``k`` items for ``query`` and record their use.

        Args:
            query: Non-empty query text (entities are extracted from it).
            k: Number of results.
            query_embedding: Precomputed ``(dim,)`` query vector (skips encoding).

        Returns:
            Results, best first (fewer than ``k`` if the memory holds fewer items).

        Raises:
            ValueError: On an empty query, ``k <= 0``, or a bad query embedding.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"retrieve: query must be a non-empty string, got {query!r}")
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"retrieve: k must be a positive int, got {k!r}")
        cfg = self.config
        if query_embedding is None:
            q = self.encode_query(query)
        else:
            q = check_embeddings(np.asarray(query_embedding).reshape(1, -1), 1, self.dim, "query_embedding")[
                0
            ]
        q_ents = self.extractor.extract(query)
        self.stats["queries"] += 1

        l1 = self.levels["L1"]
        k1 = max(cfg.l1_k, cfg.l2_k) if cfg.mode == "oracle_unbounded" else cfg.l1_k
        rows1, sims1 = l1.search(q, k1)
        parts = [("L1", rows1, sims1)]
        self.last_gate = GateDecision(False, "off", float(sims1[0]) if len(sims1) else None)
        if self.gate_threshold is not None and "L2" in self.levels:
            reason = self._gate(rows1, sims1, q_ents)
            self.last_gate = GateDecision(reason != "pass", reason, self.last_gate.top1_similarity)
            if reason != "pass":
                self.stats["gate_fallbacks"] += 1
                rows2, sims2 = self.levels["L2"].search(q, cfg.l2_k)
                parts = [*parts, ("L2", rows2, sims2)] if cfg.fallback == "merge" else [("L2", rows2, sims2)]
        if cfg.lexical_weight > 0:
            return self._rank_hybrid(query, q, q_ents, parts, k)
        return self._rank(query, q, q_ents, parts, k)

    def lexical_index(self) -> LexicalIndex:
        """BM25 over all live items, rebuilt when any level changed since the last query."""
        key = tuple((id(t), t.version) for t in self.levels.values())
        if self._lexical is None or key != self._lexical_key:
            ids: list[int] = []
            texts: list[str] = []
            for level in self.levels.values():
                for r in level.live_rows().tolist():
                    ids.append(int(level.ids[r]))
                    texts.append(lexical_text(level.texts[r], level.meta[r], self.config.lexical_fields))
            self._lexical, self._lexical_key = LexicalIndex(ids, texts), key
        return self._lexical

    def _rank_hybrid(
        self,
        query: str,
        q: np.ndarray,
        q_ents: frozenset[str],
        parts: list[tuple[str, np.ndarray, np.ndarray]],
        k: int,
    ) -> list[RetrievedItem]:
        """Dense candidates plus each searched level's top BM25 items, ranked by the fused score."""
        cfg = self.config
        index = self.lexical_index()
        bm25 = dict(zip(index.item_ids.tolist(), index.scores(query).tolist(), strict=True))
        seen = {int(self.levels[name].ids[r]) for name, rows, _ in parts for r in rows}
        extra: list[tuple[str, np.ndarray, np.ndarray]] = []
        for name in dict.fromkeys(name for name, _, _ in parts):
            level = self.levels[name]
            live = [(s, i) for i, s in bm25.items() if s > 0 and i in level and i not in seen]
            top = sorted(live, key=lambda p: (-p[0], p[1]))[: cfg.lexical_k]
            rows = np.array([level.row_of(i) for _, i in top], dtype=np.int64)
            sims = level.emb[rows] @ q if len(rows) else np.zeros(0, dtype=np.float32)
            extra.append((name, rows, sims))
        return self._rank(query, q, q_ents, [*parts, *extra], k, lexical=bm25)

    def _gate(self, rows: np.ndarray, sims: np.ndarray, q_ents: frozenset[str]) -> str:
        """Return ``"pass"`` if L1's answer is trusted, else the reason to consult L2."""
        if len(rows) == 0:
            return "empty"
        assert self.gate_threshold is not None
        if sims[0] < self.gate_threshold:
            return "similarity"
        if not q_ents <= self.levels["L1"].entities[int(rows[0])]:
            return "entities"
        return "pass"

    def _rank(
        self,
        query: str,
        q: np.ndarray,
        q_ents: frozenset[str],
        parts: list[tuple[str, np.ndarray, np.ndarray]],
        k: int,
        lexical: dict[int, float] | None = None,
    ) -> list[RetrievedItem]:
        cfg = self.config
        cand = [
            (name, int(r), float(s)) for name, rows, sims in parts for r, s in zip(rows, sims, strict=True)
        ]
        if not cand:
            return []
        levels = [self.levels[name] for name, _, _ in cand]
        sims = np.array([s for _, _, s in cand], dtype=np.float64)
        ids = np.array([t.ids[r] for t, (_, r, _) in zip(levels, cand, strict=True)], dtype=np.int64)
        imp = np.array([t.importance[r] for t, (_, r, _) in zip(levels, cand, strict=True)], dtype=np.float64)
        if q_ents:
            overlap = np.array(
                [len(q_ents & t.entities[r]) for t, (_, r, _) in zip(levels, cand, strict=True)],
                dtype=np.float64,
            )
        else:
            overlap = np.zeros(len(cand))
        score = (
            np.sign(sims) * np.abs(sims) ** cfg.sim_power
            + cfg.entity_weight * overlap
            + cfg.importance_weight * imp
        )
        if lexical is not None:
            score = self._fuse(query, q, cand, levels, score, ids, lexical)
        # Sort by score desc, then id asc: deterministic under ties.
        order = np.lexsort((ids, -score))
        if lexical is None and cfg.uses_reranker and self.reranker is not None:
            top = order[: cfg.rerank_top]
            final = self._reranked(query, q, cand, levels, score, top)
            score = score.copy()
            score[top] = final
            order = top[np.lexsort((ids[top], -final))]
        self.clock += 1
        out: list[RetrievedItem] = []
        for i in order[:k]:
            name, row, sim = cand[i]
            level = levels[i]
            level.touch(np.array([row]), self.clock)
            out.append(
                RetrievedItem(
                    item_id=int(ids[i]),
                    text=level.texts[row],
                    score=float(score[i]),
                    similarity=sim,
                    level=name,
                    importance=float(imp[i]),
                    metadata=dict(level.meta[row]),
                )
            )
        return out

    def _reranked(
        self,
        query: str,
        q: np.ndarray,
        cand: list[tuple[str, int, float]],
        levels: list[MemoryLevel],
        hybrid: np.ndarray,
        idx: np.ndarray,
    ) -> np.ndarray:
        """``rerank_weight * rerank + (1 - rerank_weight) * hybrid`` of the candidates ``idx``."""
        assert self.reranker is not None
        cfg = self.config
        texts = [levels[i].texts[cand[i][1]] for i in idx]
        embs = np.stack([levels[i].emb[cand[i][1]] for i in idx])
        rr = self.reranker.score(
            query, texts, query_embedding=q, item_embeddings=embs, encoder_name=self.encoder.name
        )
        return cfg.rerank_weight * np.asarray(rr, dtype=np.float64) + (1.0 - cfg.rerank_weight) * hybrid[idx]

    def _fuse(
        self,
        query: str,
        q: np.ndarray,
        cand: list[tuple[str, int, float]],
        levels: list[MemoryLevel],
        hybrid: np.ndarray,
        ids: np.ndarray,
        lexical: dict[int, float],
    ) -> np.ndarray:
        """``(1 - w) * z(dense) + w * z(BM25)``; dense = reranked hybrid over *all* candidates."""
        cfg = self.config
        dense = hybrid
        if cfg.uses_reranker and self.reranker is not None:
            dense = self._reranked(query, q, cand, levels, hybrid, np.arange(len(cand)))
        lex = np.array([lexical.get(int(i), 0.0) for i in ids], dtype=np.float64)
        return (1.0 - cfg.lexical_weight) * zscore(dense) + cfg.lexical_weight * zscore(lex)

    # ------------------------------------------------------------- persistence

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Save both levels, all metadata and counters atomically (see :mod:`memory.persistence`)."""
        from memory.persistence import save_memory

        save_memory(self, directory)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], encoder: Encoder, *, reranker: Reranker | None = None
    ) -> HierarchicalMemory:
        """Load a memory saved by :meth:`save`.

        Raises:
            memory.persistence.MemoryLoadError: If files are missing, corrupted, or were written
                with a different encoder name or dimension.
        """
        from memory.persistence import load_memory

        return load_memory(directory, encoder, reranker=reranker)


__all__ = ["DEFAULT_IMPORTANCE", "GateDecision", "HierarchicalMemory", "RetrievedItem"]
