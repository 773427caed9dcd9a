"""Run the HTM-EAR benchmark protocol: ingest a fact stream per mode, query, and measure."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic import atomic_write_with
from memory.config import MemoryConfig
from memory.encoder import MINILM_FAMILY, Encoder
from memory.hierarchical import HierarchicalMemory
from memory.rerank import BiEncoderReranker, Reranker
from memory.scenarios import BenchmarkData


def cached_embeddings(
    encoder: Encoder, texts: Sequence[str], cache_dir: Path | None, batch_size: int = 64
) -> np.ndarray:
    """Encode ``texts`` in batches, reusing ``cache_dir/<encoder>-<sha>.npy`` when present."""
    if cache_dir is None:
        return encoder.encode(list(texts), batch_size=batch_size)
    key = "\n".join([encoder.name, str(encoder.dim), *texts])
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
    path = cache_dir / f"{encoder.name}-{digest}.npy"
    if path.is_file():
        arr = np.load(path)
        if arr.shape == (len(texts), encoder.dim):
            return arr
    arr = encode_with_progress(encoder, texts, batch_size)

    def write(tmp: Path) -> None:
        # A file handle, because np.save(path) would append ".npy" to the temporary name.
        with open(tmp, "wb") as fh:
            np.save(fh, arr)

    atomic_write_with(path, write)
    return arr


def encode_with_progress(encoder: Encoder, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Batched encoding with a tqdm bar (chunks of 16 batches, so the bar moves on slow CPUs)."""
    from tqdm import tqdm

    chunk = 16 * batch_size
    parts = [
        encoder.encode(list(texts[i : i + chunk]), batch_size=batch_size)
        for i in tqdm(range(0, len(texts), chunk), desc=f"encode ({encoder.name})", unit="chunk", leave=False)
    ]
    return np.concatenate(parts) if parts else np.empty((0, encoder.dim), dtype=np.float32)


def encode_queries_timed(encoder: Encoder, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode each query alone (as an online agent would); returns vectors and seconds per query."""
    vecs = np.empty((len(queries), encoder.dim), dtype=np.float32)
    secs = np.empty(len(queries), dtype=np.float64)
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        vecs[i] = encoder.encode([q])[0]
        secs[i] = time.perf_counter() - t0
    return vecs, secs


def reranker_for(config: MemoryConfig, encoder: Encoder) -> Reranker | None:
    """The reranker a benchmark memory should use, or ``None`` for the config's default.

    ``bi_encoder`` scores with ``"minilm"`` by default; a memory built with another MiniLM
    variant (``"minilm-int8"``) would then re-encode every candidate with the slow fp32 model.
    Scoring with the memory's own encoder reuses its stored vectors instead (same model).
    """
    if config.reranker == "bi_encoder" and encoder.name in MINILM_FAMILY:
        return BiEncoderReranker(encoder.name)
    return None


def reciprocal_rank(result_ids: Sequence[int], gold: int) -> float:
    """1/rank of ``gold`` among ``result_ids`` (0 if absent)."""
    for rank, iid in enumerate(result_ids, start=1):
        if iid == gold:
            return 1.0 / rank
    return 0.0


def run_modes(
    data: BenchmarkData,
    encoder: Encoder,
    base: MemoryConfig,
    modes: Sequence[str],
    *,
    k: int = 5,
    cache_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every mode on one data set; returns one row per (mode, eval set).

    Fact ``j`` of ``data`` gets item id ``j`` (memories assign ids in ingestion order from 0).
    """
    fact_emb = cached_embeddings(encoder, data.texts, cache_dir, base.encode_batch_size)
    eval_ids = sorted({j for ids in data.eval_sets.values() for j in ids})
    q_vecs, q_secs = encode_queries_timed(encoder, [data.queries[j] for j in eval_ids])
    q_index = {j: i for i, j in enumerate(eval_ids)}
    rows: list[dict[str, Any]] = []
    for mode in modes:
        if progress:
            progress(mode)
        cfg = base.replace(mode=mode)
        mem = HierarchicalMemory(cfg, encoder, reranker=reranker_for(cfg, encoder))
        t0 = time.perf_counter()
        ids = mem.ingest(data.texts, data.importance, embeddings=fact_emb)
        ingest_s = time.perf_counter() - t0
        if ids[0] != 0:
            raise RuntimeError("benchmark memories must assign ids from 0")
        for set_name, set_ids in data.eval_sets.items():
            rr, ret_ms, lat_ms = [], [], []
            before = mem.stats["gate_fallbacks"]
            for j in set_ids:
                qi = q_index[j]
                t1 = time.perf_counter()
                res = mem.retrieve(data.queries[j], k, query_embedding=q_vecs[qi])
                dt = time.perf_counter() - t1
                rr.append(reciprocal_rank([r.item_id for r in res], j))
                ret_ms.append(dt * 1e3)
                lat_ms.append((dt + q_secs[qi]) * 1e3)
            rows.append(
                {
                    "data": data.name,
                    "mode": mode,
                    "eval_set": set_name,
                    "n_queries": len(set_ids),
                    "mrr": float(np.mean(rr)),
                    "latency_ms": float(np.mean(lat_ms)),
                    "latency_p50_ms": float(np.median(lat_ms)),
                    "retrieve_ms": float(np.mean(ret_ms)),
                    "retrieve_p50_ms": float(np.median(ret_ms)),
                    "query_encode_ms": float(np.mean(q_secs[[q_index[j] for j in set_ids]]) * 1e3),
                    "gate_fallback_rate": (mem.stats["gate_fallbacks"] - before) / max(1, len(set_ids)),
                    "essential_lost": mem.stats["essential_lost"],
                    "pruned_total": mem.stats["pruned_total"],
                    "ingest_index_s": ingest_s,
                    "gate_threshold": mem.gate_threshold,
                }
            )
    return rows
