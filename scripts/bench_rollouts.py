#!/usr/bin/env python
"""Episodes per second: sequential episodes vs N batched episodes, with a cold and a warm call cache.

    python scripts/bench_rollouts.py                       # SmolLM2 (llama.cpp), LoCoMo val, N = 1 4 8 16
    python scripts/bench_rollouts.py --backend fake        # seconds-long plumbing check
    python scripts/bench_rollouts.py --n 1 4 --questions 8 --policy random

For every N the same questions run twice through the *real* pipeline (implementation
strategy, real retrieval evidence, real answer generation and token-F1 scoring):

* **cold**: a fresh call cache, so every LLM call is computed;
* **warm**: the same run again, so every LLM call is a cache hit (what λ sweeps mostly see).

N = 1 is the ordinary sequential loop (``envs.rollout.evaluate_policy``) with one llama.cpp
slot; N > 1 runs N episodes at once (``scale.batched_rollout.evaluate_policy_batched``), with
N llama.cpp slots so each batch is decoded together. The script checks that every N gives
the same records (answers, scores, costs) as N = 1, prints a table and writes it as JSON.
With llama.cpp they may differ: its CPU kernels give slightly different logits for different
batch shapes and prompt-cache reuse, which can flip near-tied greedy tokens of a small model
(the same happens between two *sequential* runs in a different order); the fake backend and a
warm cache give identical records. Timings on a shared machine are noisy: ``--repeats R`` runs
every N R times, interleaved (repeat 1 of every N, then repeat 2, ...), each cold pass on a
fresh cache, and the table reports the median wall time with its range.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _config(args: argparse.Namespace, n: int, cache: Path) -> dict[str, Any]:
    from policies.training.config import load_config

    backend = ["backend=fake"] if args.backend == "fake" else [
        "backend=llamacpp", f"backend.n_parallel={n}", f"backend.n_threads={args.threads}",
    ]
    return load_config(
        [
            *backend,
            f"benchmark={args.benchmark}",
            f"encoder={args.encoder}",
            "memory=no_ce",
            f"question_bank.k={args.k}",
            f"question_bank.max_samples={args.max_samples}",
            f"cache.path={cache}",
            f"question_bank.cache_dir={args.bank_cache}",
        ]
    )


def _records_key(records: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.question_id, r.prediction, r.f1, r.tiers, round(r.total_cost, 6)) for r in records]


def summarise(rows: list[dict[str, Any]], ns: list[int]) -> list[dict[str, Any]]:
    """Median wall time per (N, cache phase) over repeats, and its speed-up over the first N.

    Args:
        rows: One row per (repeat, N, phase) as produced by :func:`main`.
        ns: The N values in the order run; the first is the speed-up baseline.

    Returns:
        One row per (N, phase): ``runs``, median ``wall_s`` with ``wall_min_s``/``wall_max_s``,
        ``episodes_per_s`` (episodes / median wall), ``speedup`` and the other columns' medians.
    """
    out: list[dict[str, Any]] = []
    for n in ns:
        for phase in ("cold", "warm"):
            group = [r for r in rows if r["n"] == n and r["cache"] == phase]
            if not group:
                continue
            walls = [r["wall_s"] for r in group]
            wall = statistics.median(walls)
            out.append({
                "n": n,
                "cache": phase,
                "runs": len(group),
                "wall_s": wall,
                "wall_min_s": min(walls),
                "wall_max_s": max(walls),
                "episodes_per_s": group[0]["episodes"] / wall,
                "mean_batch": statistics.median(r["mean_batch"] for r in group),
                "mean_f1": statistics.median(r["mean_f1"] for r in group),
                "same_records_as_n1": all(r["same_records_as_n1"] for r in group),
            })
    base = {r["cache"]: r["wall_s"] for r in out if r["n"] == ns[0]}
    for r in out:
        r["speedup"] = base[r["cache"]] / r["wall_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("llamacpp", "fake"), default="llamacpp")
    parser.add_argument("--benchmark", default="locomo")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 4, 8, 16], help="episodes in flight")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--k", type=int, default=3, help="evidence chunks per question")
    parser.add_argument("--max-samples", type=int, default=2, help="histories the questions come from")
    parser.add_argument("--policy", default="all-high", help="baseline name (all-high: 6 LLM calls/episode)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp CPU threads")
    parser.add_argument("--bank-cache", default=".cache/question_bank")
    parser.add_argument("--repeats", type=int, default=1, help="runs per N (interleaved); medians reported")
    parser.add_argument("--out", default="runs/bench/rollouts.json")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    from envs.components import make_components
    from envs.question_bank import question_bank_from
    from envs.rollout import evaluate_policy
    from policies.baselines import get_baseline
    from scale.batched_rollout import evaluate_policy_batched
    from scale.batching import BatchStats

    policy = get_baseline(args.policy)
    tmp = Path(tempfile.mkdtemp(prefix="bench_rollouts_"))
    rows: list[dict[str, Any]] = []
    reference: list[tuple[Any, ...]] | None = None
    items = None
    from modules.local_tier import LRU

    runs = [(rep, n) for rep in range(args.repeats) for n in args.n]
    for rep, n in runs:
        cache_path = tmp / f"calls-n{n}-r{rep}.sqlite"  # fresh per run: every cold pass starts cold
        LRU.clear()  # the non-LLM tiers' in-process memo too, or later Ns would start half warm
        comps = make_components(_config(args, n, cache_path))
        try:
            if items is None:
                bank = question_bank_from(_config(args, n, cache_path), "val", comps.encoder)
                items, spare = bank[: args.questions], bank[args.questions :]
                # Warm-up outside the timings: loads spaCy, the encoders and the prompt code.
                evaluate_policy(policy.decide, (spare or items)[:1], comps, progress=False)
                print(f"{len(items)} {args.benchmark} val questions, {args.policy}, backend {args.backend}")
            for phase in ("cold", "warm"):
                stats = BatchStats()
                hits0, miss0 = comps.cache.hits, comps.cache.misses
                t = time.perf_counter()
                if n == 1:
                    records = evaluate_policy(policy.decide, items, comps, progress=False)
                else:
                    records = evaluate_policy_batched(
                        policy.decide, items, comps, n_envs=n, progress=False, stats=stats
                    )
                wall = time.perf_counter() - t
                key = _records_key(records)
                if reference is None:
                    reference = key
                row = {
                    "n": n,
                    "repeat": rep,
                    "cache": phase,
                    "episodes": len(records),
                    "wall_s": wall,
                    "episodes_per_s": len(records) / wall,
                    "llm_calls": sum(r.calls for r in records),
                    # cache misses: computed calls, LLM and (cached) non-LLM tier results alike
                    "computed": comps.cache.misses - miss0,
                    "cache_hits": comps.cache.hits - hits0,
                    "mean_batch": stats.mean_batch if n > 1 else 1.0,
                    "same_records_as_n1": key == reference,
                    "mean_f1": sum(r.f1 for r in records) / len(records),
                }
                rows.append(row)
                print(
                    f"N={n:>2} {phase:4} (repeat {rep}): {row['episodes_per_s']:.3f} episodes/s  "
                    f"({wall:.1f} s, cache misses {row['computed']} / hits {row['cache_hits']}, "
                    f"mean batch {row['mean_batch']:.1f}, same records: {row['same_records_as_n1']})",
                    flush=True,
                )
        finally:
            comps.close()

    summary = summarise(rows, args.n)
    print(
        f"\n| N | cache | runs | episodes/s (median) | wall s median [min, max] | speed-up vs N={args.n[0]} "
        "| mean batch | mean F1 | same records |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in summary:
        print(
            f"| {r['n']} | {r['cache']} | {r['runs']} | {r['episodes_per_s']:.3f} | {r['wall_s']:.1f} "
            f"[{r['wall_min_s']:.1f}, {r['wall_max_s']:.1f}] | {r['speedup']:.2f}x | {r['mean_batch']:.1f} "
            f"| {r['mean_f1']:.4f} | {r['same_records_as_n1']} |"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from common.atomic import atomic_write_json

    atomic_write_json(out, {"args": vars(args), "rows": rows, "summary": summary})
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
