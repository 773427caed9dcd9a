#!/usr/bin/env python
"""Does one λ-conditioned router match separately trained routers? Measured on the synthetic task.

    python scripts/bench_conditioned_synthetic.py                       # λ 0,0.5,1,2,4; seeds 0,1,2
    python scripts/bench_conditioned_synthetic.py --timesteps 12000 --lambdas 0,1,4 --seeds 0

The synthetic task (``envs.fakes``) is where tiers matter for sure: each question type needs one
module at MID or HIGH, and every tier costs more than the one below. For each seed it trains
(1) one router per λ, ``--timesteps`` each, and (2) one λ-conditioned router over all λ with the
same ``--timesteps`` in total (the budget of ONE separate run), then evaluates every router at
its λ on the bank. It prints, per λ, the median over seeds of F1, module cost and the share of
decisions equal to the cheapest correct tiers (``OPTIMAL_TIERS``; the best policy at λ > 0, while
at λ = 0 any correct tiers are equally good and at a large λ all-LOW wins) for both designs, and
writes the rows to ``--out``. The real-pipeline numbers (LLM calls and per-λ quality on LoCoMo)
come from ``scripts/bench_sweep_calls.py --conditioned``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _train(lams: tuple[float, ...], seed: int, timesteps: int, n_items: int) -> tuple[Any, Any, Any]:
    """PPO on the synthetic env (the settings of tests/test_env_learning.py)."""
    import torch
    from stable_baselines3 import PPO

    from common.cost_weight import CostWeight
    from envs.config_schema import AlphaConfig, CostConfig
    from envs.fakes import make_fake_bank, make_fake_components
    from envs.reward import RewardShaper
    from envs.router_env import MemoryRouterEnv

    torch.manual_seed(seed)
    items = make_fake_bank(n_items)
    comps = make_fake_components(cost_weight=CostWeight(lams[0], lams if len(lams) > 1 else ()))
    env = MemoryRouterEnv(items, comps, RewardShaper(CostConfig(alpha=AlphaConfig(warmup=200))), seed=seed)
    model = PPO("MlpPolicy", env, n_steps=250, batch_size=50, n_epochs=8, learning_rate=3e-3, gamma=1.0,
                gae_lambda=1.0, ent_coef=0.0, seed=seed, device="cpu", policy_kwargs={"net_arch": [64, 64]})
    model.learn(total_timesteps=timesteps)
    return model, items, comps


def _evaluate(model: Any, items: Any, comps: Any, lam: float) -> dict[str, float]:
    from envs.fakes import OPTIMAL_TIERS, question_type
    from envs.rollout import evaluate_policy, summarize_records
    from modules.tier import Tier

    def decide(obs: np.ndarray, module: str) -> Tier:
        return Tier(int(model.predict(obs, deterministic=True)[0]))

    records = evaluate_policy(decide, items, comps, progress=False, cost_lambda=lam)
    overall = summarize_records(records)["overall"]
    cheapest = [
        chosen == best
        for rec, item in zip(records, items, strict=True)
        for chosen, best in zip(rec.tiers, OPTIMAL_TIERS[question_type(item.question.question)], strict=True)
    ]
    return {"f1": overall["f1"], "module_cost": overall["module_cost"], "cheapest": float(np.mean(cheapest))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lambdas", default="0,0.5,1,2,4")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--timesteps", type=int, default=12000, help="per run, both designs")
    parser.add_argument("--n-items", type=int, default=6, help="questions per type in the synthetic bank")
    parser.add_argument("--out", default="runs/bench/conditioned_synthetic.json")
    args = parser.parse_args(argv)

    import torch
    from tqdm.auto import tqdm

    from common.atomic import atomic_write_json

    torch.set_num_threads(1)
    lams = tuple(sorted(float(x) for x in args.lambdas.split(",")))
    seeds = [int(s) for s in args.seeds.split(",")]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    jobs = [(seed, (lam,)) for seed in seeds for lam in lams] + [(seed, lams) for seed in seeds]
    for seed, train_lams in tqdm(jobs, desc="training", unit="run"):
        model, items, comps = _train(train_lams, seed, args.timesteps, args.n_items)
        design = "separate" if len(train_lams) == 1 else "conditioned"
        for lam in train_lams:
            scores = _evaluate(model, items, comps, lam)
            rows.append({"design": design, "seed": seed, "lambda": lam, **scores})

    print(f"\nsynthetic task, {args.timesteps} timesteps per separate run and for the one conditioned run, "
          f"seeds {seeds} (medians; {time.perf_counter() - t0:.0f} s)")
    print(f"{'λ':>5} | {'separate: F1  cost  cheapest':>28} | {'conditioned: F1  cost  cheapest':>31}")
    for lam in lams:
        cells = []
        for design in ("separate", "conditioned"):
            sel = [r for r in rows if r["design"] == design and r["lambda"] == lam]
            med = {k: float(np.median([r[k] for r in sel])) for k in ("f1", "module_cost", "cheapest")}
            cells.append(f"{med['f1']:.3f} {med['module_cost']:6.2f} {med['cheapest']:7.3f}")
        print(f"{lam:>5g} | {cells[0]:>28} | {cells[1]:>31}")
    atomic_write_json(Path(args.out), {"args": vars(args), "rows": rows})
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
