#!/usr/bin/env python
"""LLM calls of a 7-value λ sweep vs one run, with the call cache shared by the sweep's trials.

    python scripts/bench_sweep_calls.py                         # fake backend, tiny training runs
    python scripts/bench_sweep_calls.py --backend llamacpp      # SmolLM2 (slow on a CPU)
    python scripts/bench_sweep_calls.py --ray --max-concurrent 2 -- train.total_timesteps=200
    python scripts/bench_sweep_calls.py --backend llamacpp --profile default --single-from-first \
        --runs-dir runs/sweep-locomo -- train.total_timesteps=400     # the real λ sweep, kept

1. one training run at ``--single`` λ with a fresh cache: the LLM calls it computes;
2. the whole sweep (``--lambdas``, 7 values by default) with another fresh cache that all its
   trials share (in this process one after another, or as parallel Ray Tune trials with
   ``--ray``): the LLM calls the sweep computes, and how many each trial added.

"Computed" LLM calls are the distinct successful calls stored in the cache (a call computed
twice by two concurrent trials is stored once, so with ``--ray`` the count can be slightly
low). The acceptance target is a ratio sweep/single of at most 1.5.

``--single-from-first`` skips step 1 and takes the single run's count from the sweep's first
trial instead: that trial runs on the sweep's still-empty cache with the same config, so it
computes exactly what a separate single run would (this halves the cost of a real-LLM bench).
``--profile default`` trains with the main job's ``train``/``ppo``/``memory`` configs instead of
the tiny ones, and ``--runs-dir`` keeps the sweep's runs (and their routers) instead of a temp dir.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

LAMBDAS = "0,0.05,0.1,0.3,0.5,0.7,0.9"


def llm_entries_by_module(cache: Path) -> dict[str, int]:
    """Distinct LLM call results per ``module`` tag (``answer``, ``filter``, ...; ``?`` if untagged)."""
    if not cache.exists():
        return {}
    with sqlite3.connect(cache) as conn:
        rows = conn.execute(
            "SELECT COALESCE(json_extract(value, '$.tags.module'), '?'), COUNT(*) FROM calls "
            "WHERE json_extract(value, '$.tokens_in') IS NOT NULL GROUP BY 1"
        ).fetchall()
    return {str(m): int(n) for m, n in sorted(rows)}


def llm_entries(cache: Path) -> int:
    """Distinct LLM call results in a SQLite call cache (non-LLM tier results are excluded)."""
    return sum(llm_entries_by_module(cache).values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="fake", help="backend config group (fake, llamacpp)")
    parser.add_argument("--lambdas", default=LAMBDAS)
    parser.add_argument("--single", type=float, default=0.1, help="λ of the single reference run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", action="store_true", help="run the sweep's trials on Ray Tune")
    parser.add_argument("--max-concurrent", type=int, default=2)
    parser.add_argument("--out", default="runs/bench/sweep_calls.json")
    parser.add_argument("--profile", choices=("tiny", "default"), default="tiny",
                        help="tiny: train/ppo tiny + memory no_ce (fast); default: the main job's configs")
    parser.add_argument("--single-from-first", action="store_true",
                        help="count the single run from the sweep's first trial (sequential only)")
    parser.add_argument("--runs-dir", default=None, help="keep the runs here (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run")
    args = parser.parse_args(argv)

    from common.atomic import atomic_write_json
    from policies.training.sweep_ray import run_sweep, run_trial

    lambdas = [float(x) for x in args.lambdas.split(",")]
    if args.single_from_first and args.ray:
        parser.error("--single-from-first needs the sequential sweep (no --ray)")
    tmp = Path(args.runs_dir).resolve() if args.runs_dir else Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    tmp.mkdir(parents=True, exist_ok=True)
    tiny = ["memory=no_ce", "train=tiny", "ppo=tiny"] if args.profile == "tiny" else []
    base = [
        f"backend={args.backend}",
        *tiny,
        f"question_bank.cache_dir={Path('.cache/question_bank').resolve()}",
        "wandb.mode=disabled",
        *args.overrides,
    ]
    if args.backend == "fake":
        base.append("encoder=hashing")

    single, single_s = 0, 0.0
    if not args.single_from_first:
        single_cache = tmp / "single.sqlite"
        t = time.perf_counter()
        run_trial([*base, f"cache.path={single_cache}"], args.single, args.seed, tmp / "single")
        single_s = time.perf_counter() - t
        single = llm_entries(single_cache)
        print(f"single run (λ={args.single}): {single} LLM calls computed in {single_s:.0f} s", flush=True)

    sweep_cache = tmp / "sweep.sqlite"
    sweep_over = [*base, f"cache.path={sweep_cache}"]
    per_trial: list[dict[str, Any]] = []
    t = time.perf_counter()
    if args.ray:
        run_sweep(lambdas, [args.seed], sweep_over, runs_dir=tmp / "sweep", sweep_name="bench",
                  max_concurrent=args.max_concurrent)
    else:
        for i, lam in enumerate(lambdas):
            before = llm_entries_by_module(sweep_cache)
            t_trial = time.perf_counter()
            result = run_trial(sweep_over, lam, args.seed, tmp / "sweep")
            after = llm_entries_by_module(sweep_cache)
            by_module = {m: n - before.get(m, 0) for m, n in after.items() if n > before.get(m, 0)}
            added = sum(by_module.values())
            trial_s = time.perf_counter() - t_trial
            if i == 0 and args.single_from_first:
                single, single_s = added, trial_s
                print(f"single run = first trial (λ={lam}, fresh cache)", flush=True)
            val = result.get("validation") or {}
            per_trial.append({"lambda": lam, "new_llm_calls": added, "new_by_module": by_module,
                              "seconds": trial_s,
                              "high_share": val.get("high_share"), "val_f1": val.get("f1"),
                              "val_module_cost": val.get("module_cost"), "router": result.get("router")})
            parts = ", ".join(f"{m} {n}" for m, n in by_module.items())
            print(f"  trial λ={lam}: {added} new LLM calls ({parts}), {trial_s:.0f} s, "
                  f"HIGH share {val.get('high_share')}, val F1 {val.get('f1')}", flush=True)
    sweep_s = time.perf_counter() - t
    sweep = llm_entries(sweep_cache)
    ratio = sweep / single if single else float("nan")
    print(
        f"\n{len(lambdas)}-value λ sweep: {sweep} LLM calls computed ({sweep_s:.0f} s); "
        f"single run: {single}; ratio {ratio:.2f} (target <= 1.5); without a shared cache the sweep "
        f"would compute about {len(lambdas)} x {single} = {len(lambdas) * single}"
    )
    out = Path(args.out)
    atomic_write_json(out, {
        "args": vars(args), "single_llm_calls": single, "sweep_llm_calls": sweep, "ratio": ratio,
        "per_trial": per_trial, "sweep_by_module": llm_entries_by_module(sweep_cache),
        "single_s": single_s, "sweep_s": sweep_s,
    })
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
