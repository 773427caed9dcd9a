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
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.atomic import atomic_write_text
from common.atomic_dir import recoverable_copy
from common.datadir import PROJECT_ROOT
from common.redact import redact_argv, redact_text
from policies.training.config import load_config
from policies.training.rundir import TRIAL_PID_FILE
from policies.training.sweep import COLUMNS, LAUNCH_ENV, SWEEP_ENV, render_csv, summary_row

#: File in a trial's run dir holding the id of the process running it (for operators and tests).
PID_FILE = TRIAL_PID_FILE

if TYPE_CHECKING:  # the training loop (torch, SB3) is imported in the trials, not by the driver
    from policies.training.loop import Reporter

TrainFn = Callable[[Mapping[str, Any]], dict[str, Any]]

#: Prefix of the placeholder that stands for a secret-bearing override in what Ray Tune stores.
SECRET_REF = "@env:"
_SECRET_VAR = "BUDGET_ROUTER_SWEEP_OVERRIDE_{}"


def hide_secret_overrides(overrides: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Overrides whose text holds a secret (a key, URL credentials) replaced by environment references.

    Ray Tune writes a sweep's ``param_space`` into its state files (the experiment state, every
    trial's ``params.json``); a Redis password in ``cache.path=redis://:PW@host`` would land there
    in clear. The trials read the override back from the environment they inherit from the driver
    (:func:`reveal_secret_overrides`).

    Returns:
        ``(overrides for Tune, {variable: override})``.
    """
    public, env = [], {}
    for i, text in enumerate(overrides):
        if redact_text(text) != text:
            name = _SECRET_VAR.format(i)
            env[name] = text
            public.append(SECRET_REF + name)
        else:
            public.append(text)
    return public, env


def reveal_secret_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides :func:`hide_secret_overrides` replaced, read back from the environment.

    Raises:
        KeyError: A referenced variable is not set (a worker that did not inherit the driver's
            environment: on a cluster, give secrets to the nodes, e.g. ``cache.path='${oc.env:REDIS_URL}'``).
    """
    out = []
    for text in overrides:
        if text.startswith(SECRET_REF):
            name = text[len(SECRET_REF) :]
            if name not in os.environ:
                raise KeyError(
                    f"{name} is not set in this Ray worker: on a cluster, give secrets to every node's "
                    "environment and reference them in the override, e.g. cache.path='${oc.env:REDIS_URL}'"
                )
            out.append(os.environ[name])
        else:
            out.append(text)
    return out


#: One trial's PPO (or other) settings drawn from ``--search``: ``{config key: value}``; empty without one.
Settings = Mapping[str, Any]


def settings_tag(settings: Settings) -> str:
    """The run-name suffix of a trial's searched settings: ``hp`` and a hash of them ("" for none).

    Named by content, so a changed search space never mistakes an old run for one of its trials.
    """
    if not settings:
        return ""
    text = json.dumps({k: settings[k] for k in sorted(settings)}, sort_keys=True, default=str)
    return "hp" + hashlib.sha256(text.encode()).hexdigest()[:8]


def trial_overrides(
    overrides: Sequence[str], lam: float, seed: int, runs_dir: Path, settings: Settings | None = None
) -> list[str]:
    """Hydra overrides of one trial: the sweep's, the searched settings, then λ, seed and the runs dir."""
    searched = [f"{k}={v}" for k, v in sorted((settings or {}).items())]
    return [*overrides, *searched, f"cost.lambda={lam}", f"seed={seed}", f"runs_dir={runs_dir}"]


def trial_config(
    overrides: Sequence[str], lam: float, seed: int, runs_dir: Path, settings: Settings | None = None
) -> dict[str, Any]:
    """The resolved config of one trial (``resume`` if its run dir has a checkpoint, else ``overwrite``).

    A trial of a ``--search`` is named ``<run_name>__hp<hash>``: the trials of one λ and seed differ only
    in their settings, and each needs its own run directory.
    """
    cfg = load_config(trial_overrides(overrides, lam, seed, runs_dir, settings))
    tag = settings_tag(settings or {})
    if tag:
        cfg["run_name"] = f"{cfg['run_name']}__{tag}"
        cfg["run_dir"] = str(Path(cfg["runs_dir"]) / cfg["run_name"])
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


def _default_train(cfg: Mapping[str, Any], report: Reporter | None = None) -> dict[str, Any]:
    from policies.training.loop import train

    return train(cfg, report=report)


def run_trial(
    overrides: Sequence[str],
    lam: float,
    seed: int,
    runs_dir: Path,
    train_fn: TrainFn | None = None,
    report: Reporter | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Run (or, if finished, just read) one trial; returns ``train``'s result dict.

    Also usable without Ray (the sequential fallback and tests). ``report`` receives every
    validation with its checkpoint (the real training only; a ``train_fn`` stand-in gets none).
    """
    cfg = trial_config(overrides, lam, seed, runs_dir, settings)
    run_dir = Path(cfg["run_dir"])
    done = finished_result(run_dir)
    if done is not None:
        return {**done, "skipped": True}
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / PID_FILE, f"{os.getpid()}\n")
    result = train_fn(cfg) if train_fn is not None else _default_train(cfg, report)
    return {**result, "skipped": False}


def _tune_trainable(train_fn: TrainFn | None) -> Callable[[dict[str, Any]], None]:
    def trainable(config: dict[str, Any]) -> None:
        # Ray is an optional extra ('budget-router[ray]'): imported only inside a Ray worker, so the
        # module itself stays importable (and testable with a fake train_fn) without it.
        from ray import tune

        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ[SWEEP_ENV] = str(config.get("sweep") or "ray-sweep")  # the wandb group and tag of its runs
        if config.get("command"):  # what wandb records as the run's command: the sweep's, not the worker's
            os.environ[LAUNCH_ENV] = json.dumps(config["command"])
        overrides = reveal_secret_overrides(config["overrides"])

        def report(metrics: dict[str, float], checkpoint_dir: Path) -> None:
            # Every validation reaches Tune with the checkpoint it followed: schedulers (ASHA) stop
            # hopeless trials on it, and Tune keeps the checkpoint in the sweep's storage.
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(checkpoint_dir)))

        runs_dir = Path(config["runs_dir"])
        settings = config.get("settings") or {}
        result = run_trial(overrides, config["lambda"], config["seed"], runs_dir, train_fn, report, settings)
        metrics = {k: v for k, v in summary_row(result).items() if isinstance(v, (int, float))}
        best = result.get("best_score")
        final = {"score": float(best)} if isinstance(best, int | float) else {}
        tune.report(
            {**metrics, **final, "skipped": int(bool(result.get("skipped"))), "run_dir": result["run_dir"]}
        )

    return trainable


#: One trial of a sweep: λ, seed and the searched settings (``{}`` without a search).
TrialKey = tuple[float, int, str]


def _key(lam: float, seed: int, settings: Settings | None) -> TrialKey:
    return (float(lam), int(seed), settings_tag(settings or {}))


def _write_summary(
    path: Path,
    grid: Sequence[tuple[float, int, Settings]],
    overrides: Sequence[str],
    runs_dir: Path,
    notes: Mapping[TrialKey, str] | None = None,
) -> list[dict[str, Any]]:
    """Rewrite ``sweep.csv``: one row per trial, unfinished ones with what Tune knows (``notes``).

    A sweep with ``--search`` adds a ``settings`` column (the trial's searched values, as JSON).
    """
    rows = []
    searched = any(settings for _, _, settings in grid)
    for lam, seed, settings in grid:
        run_dir = Path(trial_config(overrides, lam, seed, runs_dir, settings)["run_dir"])
        done = finished_result(run_dir)
        if done is not None:
            row = summary_row(done)
        else:
            status = (notes or {}).get(_key(lam, seed, settings), "unfinished")
            row = {**dict.fromkeys(COLUMNS), "lambda": lam, "seed": seed, "status": status}
        if searched:
            row["settings"] = json.dumps(dict(settings), sort_keys=True)
        rows.append(row)
    atomic_write_text(path, render_csv(rows, (*COLUMNS, "settings") if searched else COLUMNS))
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
    scheduler: str | None = None,
    grace_period: int = 1,
    search: Sequence[str] = (),
    samples: int = 4,
    search_seed: int = 0,
) -> dict[str, Any]:
    """Run every (λ, seed[, settings]) trial on Ray Tune; finished trials are skipped, killed ones retried.

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
        scheduler: ``"asha"`` stops trials whose validation score (``score``: the validation objective
            by default) trails that of trials *of the same λ* at the same number of validations (the
            objective's scale grows with λ, so trials of different λ are never compared and every λ
            keeps a completed trial); None runs every trial to the end.
        grace_period: Validations every trial gets before ASHA may stop it.
        search: ``KEY=DIST(args)`` search-space entries (:func:`parse_search`), e.g.
            ``ppo.learning_rate=loguniform(1e-4,3e-3)``: each λ and seed then trains ``samples`` trials,
            one per drawn setting; ASHA (within each λ) stops the settings that trail.
        samples: Settings drawn from ``search`` (the same draws for every λ and seed).
        search_seed: Seed of those draws.

    Returns:
        ``{"rows": [...], "summary": csv_path, "trials": n, "skipped": n_already_finished,
        "failed": [errors], "wall_s": s}``.

    Raises:
        ImportError: If Ray Tune is not installed (with the install command).
    """
    public_overrides, secret_env = hide_secret_overrides(overrides)
    if secret_env and address is not None:
        raise ValueError(
            "overrides holding a secret ("
            + ", ".join(redact_text(overrides[int(k.rsplit("_", 1)[1])]) for k in secret_env)
            + ") cannot be sent to a Ray cluster without writing them into Ray Tune's state: give them "
            "to every node's environment and reference them, e.g. cache.path='${oc.env:REDIS_URL}'"
        )
    if address is not None:
        # `ray start --head` (Ray 2.60) authenticates with a token; a client at Ray's default 'disabled'
        # mode is refused (InvalidAuthToken). Ray reads the mode when it is imported: set it first.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    try:
        import ray
        from ray import tune
    except ImportError as exc:
        raise ImportError("λ sweeps on Ray need Ray Tune: pip install 'budget-router[ray]'") from exc

    t0 = time.perf_counter()
    runs = Path(runs_dir).resolve()
    sweep_dir = runs / "sweeps" / sweep_name
    sweep_dir.mkdir(parents=True, exist_ok=True)
    draws = draw_settings(parse_search(search), samples, search_seed) if search else [{}]
    grid = [(float(lam), int(seed), hp) for lam in lambdas for seed in seeds for hp in draws]
    todo = [
        (lam, seed, hp)
        for lam, seed, hp in grid
        if finished_result(Path(trial_config(overrides, lam, seed, runs, hp)["run_dir"])) is None
    ]
    summary_path = sweep_dir / "sweep.csv"
    failed: list[str] = []
    notes: dict[TrialKey, str] = {}
    if todo:
        # A local Ray instance started here hands this environment to its workers.
        os.environ.update(secret_env)
        # Trials must not chdir into Tune's trial dirs: configs and caches use project paths.
        os.environ["RAY_CHDIR_TO_TRIAL_DIR"] = "0"
        # Local Ray workers inherit this environment: make the project importable in them (a
        # cluster's nodes need the project installed, e.g. ``pip install -e .``).
        paths = [str(PROJECT_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        started_ray = False
        if not ray.is_initialized():
            # Trial output (progress lines, validations, errors) reaches the driver's terminal.
            init = {"include_dashboard": False, "log_to_driver": True, **dict(ray_init_kwargs or {})}
            if address is None:
                init.setdefault("num_cpus", max(int(max_concurrent * cpus_per_trial), 1))
            ray.init(address=address, **init)
            started_ray = True
        try:

            class _Summary(tune.Callback):
                # Tune pickles its callbacks into tuner.pkl: this one holds the public overrides only
                # and reads the secret ones back from the driver's environment when it runs.
                def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **kw: Any) -> None:
                    _write_summary(summary_path, grid, reveal_secret_overrides(public_overrides), runs)

            trainable = tune.with_resources(_tune_trainable(train_fn), {"cpu": cpus_per_trial})
            experiment = sweep_dir / "tune" / sweep_name
            grid_file = sweep_dir / "grid.json"
            planned = {"grid": [list(x) for x in grid], "overrides": public_overrides, "scheduler": scheduler,
                       "search": list(search), "samples": samples, "search_seed": search_seed}  # fmt: skip
            if tune.Tuner.can_restore(str(experiment)) and grid_file.is_file():
                if json.loads(grid_file.read_text()) != planned:
                    raise ValueError(
                        f"sweep {sweep_name!r} at {sweep_dir} was started with other trials or overrides; "
                        "resume it with its own command, or give this sweep another --name"
                    )
                # Tuner.restore: finished and stopped trials stay as they are, unfinished ones resume
                # (from their checkpoints), errored ones are retried.
                tuner = tune.Tuner.restore(
                    str(experiment), trainable=trainable, resume_unfinished=True, resume_errored=True
                )
            else:
                atomic_write_text(grid_file, json.dumps(planned))
                tuner = tune.Tuner(
                    trainable,
                    param_space={
                        # in the order given: with one trial at a time, the first ones set ASHA's bar
                        "lambda": tune.grid_search(list(dict.fromkeys(lam for lam, _, _ in todo))),
                        "seed": tune.grid_search(list(dict.fromkeys(s for _, s, _ in todo))),
                        "settings": tune.grid_search(_unique(hp for _, _, hp in todo)),
                        "overrides": public_overrides,
                        "runs_dir": str(runs),
                        "sweep": sweep_name,
                        "command": redact_argv(sys.argv),
                    },
                    tune_config=tune.TuneConfig(
                        max_concurrent_trials=max_concurrent,
                        scheduler=_scheduler(scheduler, grace_period),
                    ),
                    run_config=tune.RunConfig(
                        name=sweep_name,
                        storage_path=str(sweep_dir / "tune"),
                        failure_config=tune.FailureConfig(max_failures=max_failures),
                        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                        callbacks=[_Summary()],
                        verbose=0,
                    ),
                )
            results = tuner.fit()
            failed = [str(error)[:300] for error in results.errors]
            notes = _trial_notes(results)
        finally:
            if started_ray:
                ray.shutdown()
    rows = _write_summary(summary_path, grid, overrides, runs, notes)
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


def _scheduler(name: str | None, grace_period: int) -> Any:
    """Tune's scheduler for ``--scheduler`` (None: FIFO, every trial runs to its end).

    ``asha`` is ASHA within each λ (:class:`scale.tune_scheduler.PerLambdaASHA`): the validation
    objective is ``F1 + λ·α·r_cost``, whose scale grows with λ, so one ASHA over the whole grid stopped the
    low-λ trials (the quality end of the frontier) for scoring below high-λ ones.
    """
    if name is None or name == "fifo":
        return None
    if name != "asha":
        raise ValueError(f"--scheduler {name!r}: choose asha or fifo")
    from scale.tune_scheduler import PerLambdaASHA

    # time_attr counts reports: one per validation (and one at the end).
    return PerLambdaASHA(
        group_key="lambda",
        metric="score",
        mode="max",
        time_attr="training_iteration",
        grace_period=grace_period,
        reduction_factor=2,
    )


def _unique(items: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        if dict(item) not in out:
            out.append(dict(item))
    return out


#: ``--search`` distributions: Tune's search-space functions a sweep may draw settings from.
SEARCH_FUNCTIONS = ("choice", "uniform", "loguniform", "randint", "quniform", "qloguniform")


def parse_search(specs: Sequence[str]) -> dict[str, Any]:
    """``["ppo.learning_rate=loguniform(1e-4,3e-3)", "ppo.n_steps=choice(64,128)"]`` -> Tune domains.

    Raises:
        ValueError: A malformed entry, an unknown function or bad arguments (the message names the
            entry and the forms accepted).
    """
    import ast

    from ray import tune

    space: dict[str, Any] = {}
    forms = ", ".join(f"{f}(...)" for f in SEARCH_FUNCTIONS)
    for spec in specs:
        key, sep, expr = spec.partition("=")
        fn, paren, rest = expr.strip().partition("(")
        if not sep or not key.strip() or not paren or not rest.endswith(")") or fn not in SEARCH_FUNCTIONS:
            raise ValueError(f"--search {spec!r}: expected KEY=FUNCTION(args) with one of {forms}")
        try:
            args = ast.literal_eval(f"({rest[:-1]},)")
        except (SyntaxError, ValueError) as exc:
            raise ValueError(f"--search {spec!r}: arguments must be numbers or strings ({exc})") from None
        try:
            space[key.strip()] = getattr(tune, fn)(list(args)) if fn == "choice" else getattr(tune, fn)(*args)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ValueError(f"--search {spec!r}: {exc or 'bad arguments'}") from None
    return space


def draw_settings(space: Mapping[str, Any], samples: int, seed: int) -> list[dict[str, Any]]:
    """``samples`` settings drawn from Tune's ``space`` with a seeded generator.

    The same draws every run, so a restarted sweep finds its trials; repeated draws are kept once.
    """
    import numpy as np

    if samples < 1:
        raise ValueError(f"--samples must be >= 1, got {samples}")
    rng = np.random.RandomState(seed)
    draws = []
    for _ in range(samples):
        draw = {}
        for key in sorted(space):
            value = space[key].sample(random_state=rng)
            draw[key] = value.item() if hasattr(value, "item") else value
        draws.append(draw)
    return _unique(draws)


def _trial_notes(results: Any) -> dict[TrialKey, str]:
    """What ``sweep.csv`` says of trials without a ``result.json``: an error, or an early stop."""
    notes: dict[TrialKey, str] = {}
    for i in range(len(results)):
        result = results[i]
        config = result.config or {}
        if "lambda" not in config:
            continue
        key = _key(config["lambda"], config["seed"], config.get("settings"))
        if result.error is not None:
            first = str(result.error).strip().splitlines()[-1] if str(result.error).strip() else "error"
            notes[key] = f"error: {first[:200]}"
        elif (result.metrics or {}).get("run_dir") is None:  # no final report: the scheduler stopped it
            step = (result.metrics or {}).get("step")
            at = f" at step {int(step)}" if step is not None else ""
            notes[key] = f"stopped early by the scheduler{at}"
    return notes


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
    parser.add_argument(
        "--scheduler",
        choices=("fifo", "asha"),
        default="fifo",
        help="asha: stop trials whose validation score trails (every validation is reported to Tune)",
    )
    parser.add_argument(
        "--grace-period", type=int, default=1, help="validations before ASHA may stop a trial"
    )
    parser.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="KEY=DIST(args)",
        help="a setting to search within each λ, e.g. 'ppo.learning_rate=loguniform(1e-4,3e-3)', "
        "'ppo.ent_coef=choice(0,0.01)' (choice, uniform, loguniform, randint, quniform, qloguniform); repeat",
    )
    parser.add_argument("--samples", type=int, default=4, help="settings drawn from --search")
    parser.add_argument("--search-seed", type=int, default=0, help="seed of the --search draws")
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
        scheduler=args.scheduler,
        grace_period=args.grace_period,
        address=args.address,
        search=args.search,
        samples=args.samples,
        search_seed=args.search_seed,
    )
    return 1 if out["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
