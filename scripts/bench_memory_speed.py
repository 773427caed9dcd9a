"""Speed benchmark of the tiered memory on Scenario B (15,000 facts, L1 500, L2 5,000).

Measures, with one thread and medians over repeats:
  * encode throughput: the real encoder (MiniLM by default), batched, on a subset of facts;
  * index throughput: ``TieredMemory.ingest`` of all facts with precomputed vectors
    (eviction, L1->L2 moves and hnswlib inserts, no encoding);
  * end-to-end ingest throughput implied by both (1 / (1/encode + 1/index));
  * the same rates per second of process CPU time (what one idle core gives; the machine
    this runs on is often shared, which inflates wall-clock numbers);
  * retrieval latency (mode no_ce, no reranker): retrieval given the query vector, the query
    encode time, and their sum (p50 and mean) over the active + history queries.

Usage: OMP_NUM_THREADS=1 python scripts/bench_memory_speed.py [--encoder minilm] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from common.atomic import atomic_write_json
from common.provenance import run_metadata
from memory import MemoryConfig, TieredMemory, get_encoder
from memory.bench import cached_embeddings, encode_queries_timed
from memory.scenarios import SCENARIOS, generate_synthetic


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--scenario", default="B")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--encode-subset", type=int, default=1024, help="facts encoded per encode-throughput repeat"
    )
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="runs/memory/speed.json")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    sc = SCENARIOS[args.scenario]
    data = generate_synthetic(sc.n, args.seed)
    enc = get_encoder(args.encoder)
    enc.encode(["warm up"])

    # Encode throughput (batched) on a subset, median over repeats.
    subset = data.texts[: args.encode_subset]
    # Wall-clock rates suffer when other jobs share the cores; with one thread, the rate per
    # second of this process's CPU time is what an idle core would give, so we report both.
    enc_tp, enc_cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        enc.encode(subset, batch_size=args.batch_size)
        enc_tp.append(len(subset) / (time.perf_counter() - t0))
        enc_cpu.append(len(subset) / (time.process_time() - c0))
    # All fact vectors (cached on disk by content hash; the benchmark CLI fills the same cache).
    fact_emb = cached_embeddings(enc, data.texts, Path("runs/memory/cache"), args.batch_size)

    base = MemoryConfig(l1_capacity=sc.l1_capacity, l2_capacity=sc.l2_capacity, mode="no_ce", reranker=None)
    idx_tp, idx_cpu, mem = [], [], None
    for _ in range(args.repeats):
        mem = TieredMemory(base, enc)
        t0, c0 = time.perf_counter(), time.process_time()
        mem.ingest(data.texts, data.importance, embeddings=fact_emb)
        idx_tp.append(sc.n / (time.perf_counter() - t0))
        idx_cpu.append(sc.n / (time.process_time() - c0))
    assert mem is not None

    eval_ids = data.eval_sets["active"] + data.eval_sets["history"]
    queries = [data.queries[j] for j in eval_ids]
    q_emb, q_secs = encode_queries_timed(enc, queries)
    ret_ms: list[float] = []
    ret_cpu_ms: list[float] = []
    for _ in range(args.repeats):
        for q, v in zip(queries, q_emb, strict=True):
            t0, c0 = time.perf_counter(), time.process_time()
            mem.retrieve(q, 5, query_embedding=v)
            ret_ms.append((time.perf_counter() - t0) * 1e3)
            ret_cpu_ms.append((time.process_time() - c0) * 1e3)
    ret = np.array(ret_ms).reshape(args.repeats, len(queries))
    ret_med = np.median(ret, axis=0)  # per-query median over repeats
    total = ret_med + q_secs * 1e3
    e, i = statistics.median(enc_tp), statistics.median(idx_tp)
    ec, ic = statistics.median(enc_cpu), statistics.median(idx_cpu)
    ret_cpu = np.median(np.array(ret_cpu_ms).reshape(args.repeats, len(queries)), axis=0)
    result = {
        "encoder": enc.name,
        "scenario": args.scenario,
        "n_facts": sc.n,
        "threads": torch.get_num_threads(),
        "encode_facts_per_s": e,
        "index_facts_per_s": i,
        "ingest_facts_per_s": 1.0 / (1.0 / e + 1.0 / i),
        "encode_facts_per_cpu_s": ec,
        "index_facts_per_cpu_s": ic,
        "ingest_facts_per_cpu_s": 1.0 / (1.0 / ec + 1.0 / ic),
        "retrieve_cpu_p50_ms": float(np.median(ret_cpu)),
        "retrieve_p50_ms": float(np.median(ret_med)),
        "retrieve_mean_ms": float(np.mean(ret_med)),
        "query_encode_p50_ms": float(np.median(q_secs) * 1e3),
        "latency_p50_ms": float(np.median(total)),
        "latency_mean_ms": float(np.mean(total)),
        "repeats": args.repeats,
        "encode_runs": enc_tp,
        "index_runs": idx_tp,
        "encode_cpu_runs": enc_cpu,
        "index_cpu_runs": idx_cpu,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    atomic_write_json(args.out, {**result, "metadata": run_metadata(vars(args))})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
