"""``python evaluate.py retrieval``: evidence recall@k of the hierarchical memory on a benchmark split."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from benchmarks.chunking import GRANULARITIES, Chunk, ChunkingConfig, chunk_history
from benchmarks.embedding_cache import EmbeddingCache
from benchmarks.memory_builder import MemoryBuildConfig, build_memory, retrieve_evidence
from benchmarks.recall import evidence_hit, evidence_recall
from benchmarks.registry import benchmark_names, get_benchmark
from common.atomic import atomic_write_csv, atomic_write_json
from common.provenance import run_metadata
from evaluation.cli_options import add_option_argument, comma_list, parse_options
from memory.encoder import get_encoder
from modules.types import Evidence

log = logging.getLogger(__name__)


def _k_values(text: str) -> list[int]:
    values = sorted(set(comma_list(text, "k", int)))
    if values[0] <= 0:
        raise argparse.ArgumentTypeError(f"k values must be positive integers, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("--benchmark", required=True, choices=benchmark_names())
    parser.add_argument("--split", default="test", choices=("train", "val", "test", "all"))
    parser.add_argument(
        "--k", type=_k_values, default=[5, 10], help="comma-separated k values (default 5,10)"
    )
    parser.add_argument(
        "--modes",
        default="full,oracle_unbounded,dense",
        help="comma-separated memory modes (full, no_ce, no_gate, lru, oracle_unbounded) and/or 'dense' "
        "(exact cosine top-k over the chunk vectors, no hierarchical memory)",
    )
    parser.add_argument("--encoder", default="minilm", help="encoder registry name (default minilm)")
    parser.add_argument("--max-tokens", type=int, default=ChunkingConfig.max_tokens, help="chunk size bound")
    parser.add_argument("--granularity", default=ChunkingConfig.granularity, choices=GRANULARITIES)
    parser.add_argument("--l1-fraction", type=float, default=MemoryBuildConfig.l1_fraction)
    parser.add_argument("--l2-fraction", type=float, default=MemoryBuildConfig.l2_fraction)
    parser.add_argument(
        "--reranker", default="bi_encoder", help="reranker of mode full (bi_encoder, lexical, or none)"
    )
    parser.add_argument(
        "--lexical-weight",
        type=float,
        default=MemoryBuildConfig.lexical_weight,
        help="weight of the BM25 channel fused with the dense ranking (0: dense only)",
    )
    parser.add_argument(
        "--no-lexical-dates",
        dest="lexical_dates",
        action="store_false",
        help="do not index session dates in the BM25 channel",
    )
    parser.add_argument("--gate-threshold", type=float, default=None, help="override the calibrated gate")
    parser.add_argument("--batch-size", type=int, default=64, help="encoder batch size")
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples of the split")
    parser.add_argument("--data-dir", default=None, help="benchmark data directory")
    parser.add_argument("--out", default="runs/retrieval", help="output directory")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    add_option_argument(parser)


#: Pseudo-mode: exact cosine top-k over the chunk vectors, no HierarchicalMemory (plain dense retrieval).
DENSE = "dense"


def dense_top_k(chunks: list[Chunk], emb: np.ndarray, query: np.ndarray, k: int) -> list[Evidence]:
    """Plain dense retrieval: the ``k`` chunks of highest cosine (ties by position)."""
    sims = emb @ query
    order = np.argsort(-sims, kind="stable")[:k]
    return [
        Evidence(chunks[i].chunk_id, chunks[i].text, chunks[i].timestamp, float(sims[i]), chunks[i].turn_ids)
        for i in order
    ]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean recall/hit per (mode, k), overall and per category, over questions with gold evidence."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["recall"] is not None:
            groups[(r["mode"], r["k"])].append(r)
    out: dict[str, Any] = {}
    for (mode, k), rs in sorted(groups.items()):
        cats: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rs:
            cats[r["category"]].append(r)
        out.setdefault(mode, {})[f"k={k}"] = {
            "recall": _mean([r["recall"] for r in rs]),
            "hit": _mean([r["hit"] for r in rs]),
            "n": len(rs),
            "per_category": {
                c: {
                    "recall": _mean([r["recall"] for r in v]),
                    "hit": _mean([r["hit"] for r in v]),
                    "n": len(v),
                }
                for c, v in sorted(cats.items())
            },
        }
    return out


def run(args: argparse.Namespace) -> int:
    """Run the evaluation; returns 0 on success."""
    t_start = time.perf_counter()
    modes = comma_list(args.modes, "modes", str)
    build = MemoryBuildConfig(
        chunking=ChunkingConfig(max_tokens=args.max_tokens, granularity=args.granularity),
        l1_fraction=args.l1_fraction,
        l2_fraction=args.l2_fraction,
        gate_threshold=args.gate_threshold,
        lexical_weight=args.lexical_weight,
        lexical_dates=args.lexical_dates,
        reranker=None if args.reranker in ("none", "") else args.reranker,
        encode_batch_size=args.batch_size,
    )
    bench = get_benchmark(args.benchmark, data_dir=args.data_dir, **parse_options(args.option))
    samples = bench.load(args.split)
    if args.limit is not None:
        samples = samples[: args.limit]
    encoder = get_encoder(args.encoder)
    cache = None if args.no_cache else EmbeddingCache()

    rows: list[dict[str, Any]] = []
    n_chunks: list[int] = []
    stats: dict[str, dict[str, int]] = {m: defaultdict(int) for m in modes}
    # Per mode: memory build (ingest + indexes; vectors given) and retrieval wall time.
    timing: dict[str, dict[str, float]] = {m: defaultdict(float) for m in modes}
    t_encode = 0.0
    for sample in tqdm(samples, desc=f"recall {args.benchmark}/{args.split}", unit="history"):
        chunks = chunk_history(sample.history, build.chunking)
        n_chunks.append(len(chunks))
        t0 = time.perf_counter()
        texts = [c.text for c in chunks]
        if cache is not None:
            emb = cache.encode(encoder, texts, args.batch_size)
        else:
            emb = encoder.encode(texts, batch_size=args.batch_size)
        q_emb = encoder.encode([q.question for q in sample.questions], batch_size=args.batch_size)
        t_encode += time.perf_counter() - t0
        for mode in modes:
            memory = None
            t_build = time.perf_counter()
            if mode != DENSE:
                memory = build_memory(
                    sample, encoder, build=dataclasses.replace(build, mode=mode), embeddings=emb
                )
            timing[mode]["build_s"] += time.perf_counter() - t_build
            for qi, question in enumerate(sample.questions):
                for k in args.k:
                    t_query = time.perf_counter()
                    if memory is None:
                        evidence = dense_top_k(chunks, emb, q_emb[qi], k)
                    else:
                        evidence = retrieve_evidence(memory, question, k, query_embedding=q_emb[qi])
                    timing[mode]["retrieve_s"] += time.perf_counter() - t_query
                    timing[mode]["retrievals"] += 1
                    rows.append(
                        {
                            "sample_id": sample.sample_id,
                            "question_id": question.question_id,
                            "category": question.category,
                            "mode": mode,
                            "k": k,
                            "n_gold": len(question.evidence_ids),
                            "recall": evidence_recall(question.evidence_ids, evidence),
                            "hit": evidence_hit(question.evidence_ids, evidence),
                            "n_chunks": len(chunks),
                            "retrieved_turns": len({s for e in evidence for s in e.source_ids}),
                        }
                    )
            for key, value in (memory.stats if memory is not None else {}).items():
                stats[mode][key] += int(value)

    summary = summarise(rows)
    out_dir = Path(args.out) / f"{args.benchmark}_{args.split}_{time.strftime('%Y%m%d-%H%M%S')}"
    config = {
        **{k: v for k, v in vars(args).items() if k not in ("k",)},
        "k": list(args.k),
        "modes": modes,
        "build": dataclasses.asdict(build),
        "encoder_dim": encoder.dim,
    }
    atomic_write_csv(out_dir / "rows.csv", rows, ["question_id"])
    result = {
        "benchmark": args.benchmark,
        "split": args.split,
        "samples": len(samples),
        "questions": sum(len(s.questions) for s in samples),
        "questions_with_evidence": sum(1 for s in samples for q in s.questions if q.evidence_ids),
        "chunks": {"total": sum(n_chunks), "mean_per_history": _mean([float(n) for n in n_chunks])},
        "recall": summary,
        "memory_stats": {m: dict(v) for m, v in stats.items()},
        "timings_s": {"total": time.perf_counter() - t_start, "encode": t_encode},
        "mode_timings": {
            m: {
                "build_ms_per_history": 1000 * t["build_s"] / max(1, len(samples)),
                "retrieve_ms_per_query": 1000 * t["retrieve_s"] / max(1, t["retrievals"]),
            }
            for m, t in timing.items()
        },
        "embedding_cache": None if cache is None else {"hits": cache.hits, "misses": cache.misses},
        "metadata": run_metadata(config, bench.data_files()),
    }
    atomic_write_json(out_dir / "summary.json", result)

    ks = list(args.k)
    print(
        f"\n{args.benchmark} / {args.split}: {result['questions_with_evidence']} questions with evidence, "
        f"{len(samples)} histories, {sum(n_chunks)} chunks ({result['timings_s']['total']:.0f} s)"
    )
    print(
        f"{'mode':<18}"
        + "".join(f"{'recall@' + str(k):>12}{'hit@' + str(k):>10}" for k in ks)
        + f"{'build ms':>10}{'query ms':>10}"
    )
    for mode in modes:
        cells = (
            "".join(
                f"{summary[mode][f'k={k}']['recall']:>12.3f}{summary[mode][f'k={k}']['hit']:>10.3f}"
                for k in ks
            )
            if mode in summary
            else "  (no questions with evidence)"
        )
        mt = result["mode_timings"][mode]
        print(f"{mode:<18}{cells}{mt['build_ms_per_history']:>10.0f}{mt['retrieve_ms_per_query']:>10.2f}")
    print(f"wrote {out_dir}/summary.json and rows.csv")
    return 0
