"""Speed benchmark of the hierarchical memory on Scenario B (15,000 facts, L1 500, L2 5,000), per encoder.

Compares encoders (``--encoders``) at several thread counts (``--threads``) side by side in one
process; every repeat runs all variants back to back, so load from other jobs on a shared
machine hits them alike, and medians over repeats are reported. Per variant:

  * encode throughput: batched encoding (batch 64) of ``--encode-subset`` facts, per wall
    second and per second of process CPU time (all threads; what idle cores would give);
  * index throughput: ``HierarchicalMemory.ingest`` of all 15,000 facts with precomputed vectors
    (eviction, L1->L2 moves, both levels' hnswlib inserts; no encoding), wall and CPU;
  * ingest throughput implied by both (``1 / (1/encode + 1/index)``), wall and CPU; and,
    for ``--e2e-encoders``, ``HierarchicalMemory.ingest(texts)`` measured end to end (encode + index);
  * retrieval latency in mode ``no_ce`` (no reranker) over the 201 active + history queries:
    ``retrieve(q, query_embedding=v)`` (index only) and encode-the-query-alone + retrieve (what
    a user's ``retrieve(q)`` costs), p50 and mean of per-query medians over repeats. The
    memory retrieved from was ingested (index-only) in the same repeat; retrieval updates usage
    counts, so both timings see the same state up to those counters.

Usage: python scripts/bench_memory_speed.py [--encoders minilm,minilm-int8] [--threads 1,2]
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
from memory import HierarchicalMemory, MemoryConfig, get_encoder
from memory.bench import cached_embeddings
from memory.encoder import Encoder
from memory.scenarios import SCENARIOS, generate_synthetic


class ThreadedEncoder:
    """An encoder pinned to ``threads`` CPU threads, keeping the registry encoder's name.

    torch's thread count is process-global, so the torch encoder gets ``torch.set_num_threads``
    before every call; onnxruntime fixes threads per session, so ``minilm-int8`` gets its own one.
    """

    def __init__(self, name: str, threads: int) -> None:
        self.threads = threads
        if name == "minilm-int8":
            from memory.encoder_onnx import OnnxMiniLMEncoder

            self.enc: Encoder = OnnxMiniLMEncoder(num_threads=threads)
        else:
            self.enc = get_encoder(name)
        self.name, self.dim = self.enc.name, self.enc.dim

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        import torch

        torch.set_num_threads(self.threads)
        return self.enc.encode(texts, batch_size=batch_size)


def _rate(n: int, secs: float) -> float:
    return n / max(secs, 1e-12)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoders", default="minilm,minilm-int8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--e2e-encoders", default="", help="also time ingest(texts) end to end (slow)")
    ap.add_argument(
        "--index-vectors",
        default=None,
        help="encoder whose cached fact vectors every variant indexes (default: each its own); "
        "index cost does not depend on which MiniLM variant made the vectors",
    )
    ap.add_argument("--scenario", default="B")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--encode-subset", type=int, default=1024, help="facts per encode-throughput run")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="runs/memory/speed.json")
    args = ap.parse_args()

    sc = SCENARIOS[args.scenario]
    data = generate_synthetic(sc.n, args.seed)
    names = [e.strip() for e in args.encoders.split(",") if e.strip()]
    threads = [int(t) for t in args.threads.split(",")]
    e2e = {e.strip() for e in args.e2e_encoders.split(",") if e.strip()}
    variants = {f"{n}/t{t}": ThreadedEncoder(n, t) for n in names for t in threads}
    # Fact vectors per encoder (cached on disk by content hash; the benchmark CLI fills the same cache).
    cache = Path("runs/memory/cache")
    fact_emb = {
        n: cached_embeddings(get_encoder(args.index_vectors or n), data.texts, cache, 64) for n in names
    }
    eval_ids = data.eval_sets["active"] + data.eval_sets["history"]
    queries = [data.queries[j] for j in eval_ids]
    base = MemoryConfig(l1_capacity=sc.l1_capacity, l2_capacity=sc.l2_capacity, mode="no_ce", reranker=None)
    subset = data.texts[: args.encode_subset]

    runs: dict[str, dict[str, list]] = {v: {} for v in variants}
    for _ in range(args.repeats):
        # Index-only ingest once per encoder (hnswlib runs one thread; the encoder's threads do
        # not matter here); the filled memory then serves that encoder's retrieval timings.
        mems: dict[str, HierarchicalMemory] = {}
        index_rates: dict[str, tuple[float, float]] = {}
        for n in names:
            mem = HierarchicalMemory(base, get_encoder(n))
            t0, c0 = time.perf_counter(), time.process_time()
            mem.ingest(data.texts, data.importance, embeddings=fact_emb[n])
            index_rates[n] = (_rate(sc.n, time.perf_counter() - t0), _rate(sc.n, time.process_time() - c0))
            mems[n] = mem
        for vname, enc in variants.items():
            r = runs[vname]
            r.setdefault("index", []).append(index_rates[enc.name][0])
            r.setdefault("index_cpu", []).append(index_rates[enc.name][1])
            enc.encode(subset[:8])  # warm-up
            t0, c0 = time.perf_counter(), time.process_time()
            enc.encode(subset, batch_size=args.batch_size)
            r.setdefault("encode", []).append(_rate(len(subset), time.perf_counter() - t0))
            r.setdefault("encode_cpu", []).append(_rate(len(subset), time.process_time() - c0))

            if enc.name in e2e:
                m2 = HierarchicalMemory(base, enc)
                t0, c0 = time.perf_counter(), time.process_time()
                m2.ingest(data.texts, data.importance)
                r.setdefault("e2e", []).append(_rate(sc.n, time.perf_counter() - t0))
                r.setdefault("e2e_cpu", []).append(_rate(sc.n, time.process_time() - c0))
                del m2

            mem = mems[enc.name]
            q_vecs = enc.encode(queries)
            ret, full = [], []
            for q, v in zip(queries, q_vecs, strict=True):
                t0 = time.perf_counter()
                mem.retrieve(q, 5, query_embedding=v)
                t1 = time.perf_counter()
                # What a user's retrieve(q) costs: encode the query alone, then retrieve.
                mem.retrieve(q, 5, query_embedding=enc.encode([q])[0])
                t2 = time.perf_counter()
                ret.append((t1 - t0) * 1e3)
                full.append((t2 - t1) * 1e3)
            r.setdefault("retrieve_ms", []).append(ret)
            r.setdefault("retrieve_with_encode_ms", []).append(full)

    table = []
    for vname, r in runs.items():
        med = {k: statistics.median(v) for k, v in r.items() if not k.endswith("_ms")}
        row = {
            "variant": vname,
            "encode_facts_per_s": med["encode"],
            "encode_facts_per_cpu_s": med["encode_cpu"],
            "index_facts_per_s": med["index"],
            "index_facts_per_cpu_s": med["index_cpu"],
            "ingest_facts_per_s": 1.0 / (1.0 / med["encode"] + 1.0 / med["index"]),
            "ingest_facts_per_cpu_s": 1.0 / (1.0 / med["encode_cpu"] + 1.0 / med["index_cpu"]),
            "e2e_ingest_facts_per_s": med.get("e2e"),
            "e2e_ingest_facts_per_cpu_s": med.get("e2e_cpu"),
        }
        for key in ("retrieve_ms", "retrieve_with_encode_ms"):
            per_query = np.median(np.array(r[key]), axis=0)  # median over repeats per query
            row[f"{key.removesuffix('_ms')}_p50_ms"] = float(np.median(per_query))
            row[f"{key.removesuffix('_ms')}_mean_ms"] = float(np.mean(per_query))
        table.append(row)

    cols = list(table[0])
    print(" | ".join(cols))
    for row in table:
        print(" | ".join(f"{row[c]:.1f}" if isinstance(row[c], float) else str(row[c]) for c in cols))
    result = {
        "scenario": args.scenario,
        "n_facts": sc.n,
        "n_queries": len(queries),
        "table": table,
        "runs": runs,
        "load_average": os.getloadavg(),
    }
    atomic_write_json(args.out, {**result, "metadata": run_metadata(vars(args))})
    print(json.dumps({"wrote": args.out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
