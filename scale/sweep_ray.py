"""λ × seed sweeps on Ray Tune: parallel trials on one machine or a cluster, resumable, cache-sharing.

Each trial is one ordinary training run (:func:`policies.training.loop.train`) with the config
composed from ``configs/`` plus ``cost.lambda=λ seed=s`` and the sweep's overrides, so a trial
writes exactly what ``python train.py cost.lambda=λ seed=s`` writes to ``runs/{run_name}/``.

Fault tolerance comes from the run directories, not from Ray's state:

* a trial whose ``result.json`` exists is finished: it is never run again (rerunning the same
  sweep skips it and just collects its result), so killing the driver or a worker loses no
  finished result;
* a trial killed mid-run is retried by Tune (``max_failures``); if its run directory has a
  checkpoint (``checkpoints/last``), the retry resumes from it (``resume=<run_dir>``);
* the sweep summary (``{sweep_dir}/sweep.csv``, the columns of :mod:`policies.training.sweep`)
  is rewritten atomically after every finished trial.

Call cache: every trial opens the config's ``cache.path``. On one machine the default SQLite
file is shared by all trial processes (WAL); on a cluster, point it at a shared store,
``cache.path=redis://HOST:6379/0`` (see :mod:`modules.cache_stores`), so a λ already run on
another node is a cache hit here.

Command line::

    python -m scale.sweep_ray --lambdas 0,0.05,0.1,0.3,0.5,0.7,0.9 --seeds 0,1,2 \
        --max-concurrent 2 -- backend=llamacpp train.total_timesteps=2000
    python -m scale.sweep_ray --address auto ...      # an existing Ray cluster

Ray is an optional extra (``pip install 'budget-router[ray]'``), imported only when a sweep runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from common.atomic import atomic_write_text
from common.atomic_dir import recoverable_copy
from common.datadir import PROJECT_ROOT
from policies.training.config import load_config
from policies.training.rundir import TRIAL_PID_FILE
from policies.training.sweep import COLUMNS, render_csv, summary_row

#: File in a trial's run dir holding the id of the process running it (for operators and tests).
PID_FILE = TRIAL_PID_FILE

TrainFn = Callable[[Mapping[str, Any]], dict[str, Any]]


def trial_overrides(overrides: Sequence[str], lam: float, seed: int, runs_dir: Path) -> list[str]:
    """Hydra overrides of one trial: the sweep's, then λ, seed and the absolute runs dir."""
    return [*overrides, f"cost.lambda={lam}", f"seed={seed}", f"runs_dir={runs_dir}"]


def trial_config(overrides: Sequence[str], lam: float, seed: int, runs_dir: Path) -> dict[str, Any]:
    """The resolved config of one trial (``resume`` if its run dir has a checkpoint, else ``overwrite``)."""
    cfg = load_config(trial_overrides(overrides, lam, seed, runs_dir))
    run_dir = Path(cfg["run_dir"])
    last = run_dir / "checkpoints" / "last"
    if cfg.get("resume") is None and (last.is_dir() or recoverable_copy(last) is not None):
        cfg["resume"] = str(run_dir)
    elif cfg.get("resume") is None:
        # The sweep's own trial that died before its first checkpoint starts again from scratch
        # (train() refuses to reuse a run directory otherwise; finished trials are skipped).
        cfg["overwrite"] = True
    return cfg


def finished_result(run_dir: Path) -> dict[str, Any] | None:
    """The trial's ``result.json`` if it finished, else None."""
    path = run_dir / "result.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _default_train(cfg: Mapping[str, Any]) -> dict[str, Any]:
    from policies.training.loop import train

    return train(cfg)


def run_trial(
    overrides: Sequence[str], lam: float, seed: int, runs_dir: Path, train_fn: TrainFn | None = None
) -> dict[str, Any]:
    """Run (or, if finished, just read) one trial; returns ``train``'s result dict.

    Also usable without Ray (the sequential fallback and tests).
    """
    cfg = trial_config(overrides, lam, seed, runs_dir)
    run_dir = Path(cfg["run_dir"])
    done = finished_result(run_dir)
    if done is not None:
        return {**done, "skipped": True}
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / PID_FILE, f"{os.getpid()}\n")
    result = (train_fn or _default_train)(cfg)
    return {**result, "skipped": False}


def _tune_trainable(train_fn: TrainFn | None) -> Callable[[dict[str, Any]], None]:
    def trainable(config: dict[str, Any]) -> None:
        # Ray is an optional extra ('budget-router[ray]'): imported only inside a Ray worker, so the
        # module itself stays importable (and testable with a fake train_fn) without it.
        from ray import tune

        os.environ.setdefault("OMP_NUM_THREADS", "1")
        result = run_trial(
            config["overrides"], config["lambda"], config["seed"], Path(config["runs_dir"]), train_fn
        )
        metrics = {k: v for k, v in summary_row(result).items() if isinstance(v, (int, float))}
        tune.report({**metrics, "skipped": int(bool(result.get("skipped"))), "run_dir": result["run_dir"]})

    return trainable


def _write_summary(
    path: Path, grid: Sequence[tuple[float, int]], overrides: Sequence[str], runs_dir: Path
) -> list[dict[str, Any]]:
    rows = []
    for lam, seed in grid:
        run_dir = Path(trial_config(overrides, lam, seed, runs_dir)["run_dir"])
        done = finished_result(run_dir)
        if done is not None:
            rows.append(summary_row(done))
        else:
            rows.append({**dict.fromkeys(COLUMNS), "lambda": lam, "seed": seed, "status": "unfinished"})
    atomic_write_text(path, render_csv(rows))
    return rows


def run_sweep(
    lambdas: Sequence[float],
    seeds: Sequence[int] = (0,),
    overrides: Sequence[str] = (),
    *,
    runs_dir: str | os.PathLike[str] = "runs",
    sweep_name: str = "ray-sweep",
    max_concurrent: int = 2,
    cpus_per_trial: float = 1.0,
    max_failures: int = 2,
    address: str | None = None,
    train_fn: TrainFn | None = None,
    ray_init_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every (λ, seed) trial on Ray Tune; finished trials are skipped, killed ones retried.

    Args:
        lambdas: Cost weights λ.
        seeds: Training seeds.
        overrides: Hydra overrides applied to every trial (``backend=fake``, ``train=tiny``, ...).
        runs_dir: Where run directories go (made absolute, so Ray workers agree on it).
        sweep_name: Name of the sweep's directory ``{runs_dir}/sweeps/{sweep_name}``.
        max_concurrent: Trials running at once.
        cpus_per_trial: CPUs Ray reserves per trial.
        max_failures: Retries of a trial whose worker died or raised.
        address: Ray cluster address (``"auto"``); None starts a local Ray instance.
        train_fn: Replaces :func:`policies.training.loop.train` (must be picklable).
        ray_init_kwargs: Extra ``ray.init`` arguments for a local instance.

    Returns:
        ``{"rows": [...], "summary": csv_path, "trials": n, "skipped": n_already_finished,
        "failed": [errors], "wall_s": s}``.

    Raises:
        ImportError: If Ray Tune is not installed (with the install command).
    """
    try:
        import ray
        from ray import tune
    except ImportError as exc:
        raise ImportError("λ sweeps on Ray need Ray Tune: pip install 'budget-router[ray]'") from exc

    t0 = time.perf_counter()
    runs = Path(runs_dir).resolve()
    sweep_dir = runs / "sweeps" / sweep_name
    sweep_dir.mkdir(parents=True, exist_ok=True)
    grid = [(float(lam), int(seed)) for lam in lambdas for seed in seeds]
    todo = [
        (lam, seed)
        for lam, seed in grid
        if finished_result(Path(trial_config(overrides, lam, seed, runs)["run_dir"])) is None
    ]
    summary_path = sweep_dir / "sweep.csv"
    failed: list[str] = []
    if todo:
        # Trials must not chdir into Tune's trial dirs: configs and caches use project paths.
        os.environ["RAY_CHDIR_TO_TRIAL_DIR"] = "0"
        # Local Ray workers inherit this environment: make the project importable in them (a
        # cluster's nodes need the project installed, e.g. ``pip install -e .``).
        paths = [str(PROJECT_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        started_ray = False
        if not ray.is_initialized():
            init = {"include_dashboard": False, "log_to_driver": False, **dict(ray_init_kwargs or {})}
            if address is None:
                init.setdefault("num_cpus", max(int(max_concurrent * cpus_per_trial), 1))
            ray.init(address=address, **init)
            started_ray = True
        try:

            class _Summary(tune.Callback):
                def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **kw: Any) -> None:
                    _write_summary(summary_path, grid, overrides, runs)

            tuner = tune.Tuner(
                tune.with_resources(_tune_trainable(train_fn), {"cpu": cpus_per_trial}),
                param_space={
                    "lambda": tune.grid_search(sorted({lam for lam, _ in todo})),
                    "seed": tune.grid_search(sorted({s for _, s in todo})),
                    "overrides": list(overrides),
                    "runs_dir": str(runs),
                },
                tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent),
                run_config=tune.RunConfig(
                    name=sweep_name,
                    storage_path=str(sweep_dir / "tune"),
                    failure_config=tune.FailureConfig(max_failures=max_failures),
                    callbacks=[_Summary()],
                    verbose=0,
                ),
            )
            results = tuner.fit()
            failed = [str(r.error)[:300] for r in results if r.error is not None]
        finally:
            if started_ray:
                ray.shutdown()
    rows = _write_summary(summary_path, grid, overrides, runs)
    out = {
        "rows": rows,
        "summary": str(summary_path),
        "trials": len(grid),
        "skipped": len(grid) - len(todo),
        "failed": failed,
        "wall_s": time.perf_counter() - t0,
    }
    print(f"sweep {sweep_name}: {len(grid)} trials ({out['skipped']} already finished); {summary_path}")
    return out


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m scale.sweep_ray --lambdas ... -- OVERRIDES``."""
    parser = argparse.ArgumentParser(description="Run a λ × seed sweep on Ray Tune.")
    parser.add_argument("--lambdas", default="0,0.05,0.1,0.3,0.5,0.7,0.9")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--name", default="ray-sweep")
    parser.add_argument("--max-concurrent", type=int, default=2)
    parser.add_argument("--cpus-per-trial", type=float, default=1.0)
    parser.add_argument("--max-failures", type=int, default=2)
    parser.add_argument("--address", default=None, help="Ray cluster address (default: a local instance)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every trial")
    args = parser.parse_args(argv)
    out = run_sweep(
        _floats(args.lambdas),
        [int(s) for s in _floats(args.seeds)],
        args.overrides,
        runs_dir=args.runs_dir,
        sweep_name=args.name,
        max_concurrent=args.max_concurrent,
        cpus_per_trial=args.cpus_per_trial,
        max_failures=args.max_failures,
        address=args.address,
    )
    return 1 if out["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
