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

3. with ``--conditioned``: ONE λ-conditioned run over the same λ values (``cost.lambdas``, one
   router for all of them; each training episode draws a λ, validation scores every λ) with a
   third fresh cache, and how its LLM calls compare with the single run. ``--conditioned-timesteps``
   gives it another training budget; ``--no-sweep`` skips step 2 (then step 1 must run).
   Next to the calls it prints each λ's validation F1 / module cost / HIGH share for the
   conditioned router and, when step 2 ran, for that λ's separately trained router.

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


def _without(overrides: list[str], key: str) -> list[str]:
    return [o for o in overrides if not o.lstrip("+~").startswith(f"{key}=")]


def run_conditioned(
    base: list[str], lambdas: list[float], seed: int, runs_dir: Path, timesteps: int | None
) -> dict[str, Any]:
    """Train one λ-conditioned router over ``lambdas`` on a fresh cache.

    Returns its LLM calls (total and by module) and its validation at each λ.
    """
    from scale.sweep_ray import run_trial

    cache = runs_dir / "conditioned.sqlite"
    over = [*base, f"cache.path={cache}", "cost.lambdas=[" + ",".join(f"{x:g}" for x in lambdas) + "]"]
    if timesteps is not None:
        over = [*_without(over, "train.total_timesteps"), f"train.total_timesteps={timesteps}"]
    t = time.perf_counter()
    result = run_trial(over, lambdas[0], seed, runs_dir / "conditioned")
    by_module = llm_entries_by_module(cache)
    val = result.get("validation") or {}
    return {
        "llm_calls": sum(by_module.values()), "by_module": by_module, "seconds": time.perf_counter() - t,
        "timesteps": result.get("timesteps"), "per_lambda": val.get("per_lambda") or {},
        "val_f1": val.get("f1"), "router": result.get("router"),
    }


def print_per_lambda(lambdas: list[float], per_trial: list[dict[str, Any]], cond: dict[str, Any]) -> None:
    """Validation at each λ: the separately trained router (if the sweep ran) vs the conditioned one."""
    trials = {float(t["lambda"]): t for t in per_trial}

    def fmt(f1: Any, cost: Any, high: Any) -> str:
        if f1 is None:
            return "        -                "
        return f"F1 {f1:.3f}  cost {cost:7.1f}  HIGH {high:.2f}"

    print("\nvalidation per λ      separately trained router            λ-conditioned router")
    for lam in lambdas:
        t = trials.get(lam, {})
        c = cond["per_lambda"].get(f"{lam:g}", {})
        p_high = f"  P(HIGH) {c['p_high']:.3f}" if c.get("p_high") is not None else ""
        print(f"  λ={lam:<5g}  {fmt(t.get('val_f1'), t.get('val_module_cost'), t.get('high_share')):>36}   "
              f"{fmt(c.get('f1'), c.get('module_cost'), c.get('high_share'))}{p_high}")


def run_separate_sweep(
    args: argparse.Namespace,
    base: list[str],
    lambdas: list[float],
    tmp: Path,
    per_trial: list[dict[str, Any]],
) -> tuple[int, float, dict[str, int]]:
    """One run per λ sharing one fresh cache; fills ``per_trial``.

    Returns the sweep's LLM calls, its seconds and its calls by module.
    """
    from scale.sweep_ray import run_sweep, run_trial

    sweep_cache = tmp / "sweep.sqlite"
    sweep_over = [*base, f"cache.path={sweep_cache}"]
    t = time.perf_counter()
    if args.ray:
        run_sweep(lambdas, [args.seed], sweep_over, runs_dir=tmp / "sweep", sweep_name="bench",
                  max_concurrent=args.max_concurrent)
    else:
        for lam in lambdas:
            before = llm_entries_by_module(sweep_cache)
            t_trial = time.perf_counter()
            result = run_trial(sweep_over, lam, args.seed, tmp / "sweep")
            after = llm_entries_by_module(sweep_cache)
            by_module = {m: n - before.get(m, 0) for m, n in after.items() if n > before.get(m, 0)}
            added = sum(by_module.values())
            trial_s = time.perf_counter() - t_trial
            val = result.get("validation") or {}
            per_trial.append({"lambda": lam, "new_llm_calls": added, "new_by_module": by_module,
                              "seconds": trial_s,
                              "high_share": val.get("high_share"), "val_f1": val.get("f1"),
                              "val_module_cost": val.get("module_cost"), "router": result.get("router")})
            parts = ", ".join(f"{m} {n}" for m, n in by_module.items())
            print(f"  trial λ={lam}: {added} new LLM calls ({parts}), {trial_s:.0f} s, "
                  f"HIGH share {val.get('high_share')}, val F1 {val.get('f1')}", flush=True)
    by_module_total = llm_entries_by_module(sweep_cache)
    return sum(by_module_total.values()), time.perf_counter() - t, by_module_total


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
    parser.add_argument("--conditioned", action="store_true",
                        help="also train one λ-conditioned router over --lambdas (cost.lambdas)")
    parser.add_argument("--conditioned-timesteps", type=int, default=None,
                        help="training timesteps of the conditioned run (default: the same as the others)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep of separate runs")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run")
    args = parser.parse_args(argv)

    from common.atomic import atomic_write_json
    from scale.sweep_ray import run_trial

    lambdas = [float(x) for x in args.lambdas.split(",")]
    if args.single_from_first and args.ray:
        parser.error("--single-from-first needs the sequential sweep (no --ray)")
    if args.no_sweep and (args.single_from_first or not args.conditioned):
        parser.error("--no-sweep needs --conditioned and the separate single run (no --single-from-first)")
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

    per_trial: list[dict[str, Any]] = []
    sweep, sweep_s, sweep_by_module = 0, 0.0, {}
    ratio = float("nan")
    if not args.no_sweep:
        sweep, sweep_s, sweep_by_module = run_separate_sweep(args, base, lambdas, tmp, per_trial)
        if args.single_from_first:
            # The first trial ran on the sweep's still-empty cache: exactly a separate single run.
            single, single_s = per_trial[0]["new_llm_calls"], per_trial[0]["seconds"]
            print(f"single run = first trial (λ={lambdas[0]}, fresh cache): {single} LLM calls", flush=True)
        ratio = sweep / single if single else float("nan")
        print(
            f"\n{len(lambdas)}-value λ sweep: {sweep} LLM calls computed ({sweep_s:.0f} s); "
            f"single run: {single}; ratio {ratio:.2f} (target <= 1.5); without a shared cache the sweep "
            f"would compute about {len(lambdas)} x {single} = {len(lambdas) * single}"
        )
    cond: dict[str, Any] | None = None
    if args.conditioned:
        cond = run_conditioned(base, lambdas, args.seed, tmp, args.conditioned_timesteps)
        cond["ratio"] = cond["llm_calls"] / single if single else float("nan")
        parts = ", ".join(f"{m} {n}" for m, n in cond["by_module"].items())
        print(
            f"\nλ-conditioned run over {len(lambdas)} λ values ({cond['timesteps']} timesteps): "
            f"{cond['llm_calls']} LLM calls computed ({parts}) in {cond['seconds']:.0f} s; "
            f"ratio to the single run {cond['ratio']:.2f} (target <= 1.5)"
        )
        print_per_lambda(lambdas, per_trial, cond)
    out = Path(args.out)
    atomic_write_json(out, {
        "args": vars(args), "single_llm_calls": single, "sweep_llm_calls": sweep, "ratio": ratio,
        "per_trial": per_trial, "sweep_by_module": sweep_by_module,
        "single_s": single_s, "sweep_s": sweep_s, "conditioned": cond,
    })
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
