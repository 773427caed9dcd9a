"""Train the budget router with PPO: ``python train.py [hydra overrides]``.

Examples::

    python train.py                                   # the default main job (LoCoMo, SmolLM2, token F1)
    python train.py cost.lambda=0.3 seed=1            # another λ / seed
    python train.py backend=fake encoder=hashing train=tiny   # seconds-long plumbing check
    python train.py -m cost.lambda=0,0.05,0.1,0.3,0.5,0.7,0.9 seed=0,1,2   # λ × seed sweep
    python train.py 'cost.lambdas=[0,0.05,0.1,0.3,0.5,0.7,0.9]'   # one λ-conditioned router for all 7
    python train.py resume=runs/locomo__implementation__lam0__s0       # continue a run

Configs live in ``configs/`` (see ``configs/config.yaml``); every run writes
``runs/{run_name}/`` (resolved config, provenance, progress.csv, checkpoints, the best router
and a validation report). The work happens in :func:`policies.training.loop.train`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# Offline by design: nothing may download weights or datasets at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import hydra
from omegaconf import DictConfig, OmegaConf

from policies.training.config import check_lambda_overrides, register_resolvers

# Before Hydra composes: configs/config.yaml names runs with ${lam_tag:...}.
register_resolvers()


def reported_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message says everything (file, field, fix): shown without a traceback."""
    # Imported here, not at the top: several of these modules import stable-baselines3, which
    # `python train.py --help`/`--cfg job` and evaluate.py (it imports this function) do not need.
    from common.datadir import DataFileError
    from envs.components import ConfigError
    from memory.persistence import MemoryLoadError
    from modules.cache_stores.base import CacheStoreError
    from policies.export import RouterExportError
    from policies.router import RouterLoadError, RouterMismatchError
    from policies.training.checkpoint import CheckpointError
    from policies.training.failure_budget import FailureBudgetExceeded
    from policies.training.rundir import RunDirError

    return (
        CacheStoreError, CheckpointError, ConfigError, DataFileError, FailureBudgetExceeded,
        MemoryLoadError, RouterExportError, RouterLoadError, RouterMismatchError, RunDirError,
    )


@hydra.main(version_base="1.3", config_path="configs", config_name="config")
def main(cfg: DictConfig) -> dict[str, Any]:
    """Hydra entry point: resolve the config and train one router."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    # Imported when a run starts, for the same reason (torch + stable-baselines3 + the whole pipeline).
    from policies.training.loop import train

    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    hydra_cfg = HydraConfig.get()
    try:
        return train(container, hydra_overrides=list(hydra_cfg.overrides.task))
    except KeyboardInterrupt:
        # A Ctrl-C outside training's graceful stop (model loading, question banks) or a second one.
        print("\ninterrupted: stopped without saving a checkpoint", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:
        from policies.training.interrupt import TrainingInterrupted

        if isinstance(exc, TrainingInterrupted):  # saved a checkpoint; the message says how to resume
            print(str(exc), file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        # Hydra created the run directory before calling us; a rejected launch leaves nothing.
        run_dir = Path(hydra_cfg.runtime.output_dir)
        if run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()
        if not isinstance(exc, reported_errors()) or hydra_cfg.mode == RunMode.MULTIRUN:
            raise  # a bug keeps its traceback; in a sweep the launcher records the failed job
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def check_output_overrides(overrides: list[str]) -> None:
    """Check the directories that ``runs_dir=``/``run_dir=`` name before Hydra creates the run's.

    Raises:
        RunDirError: One of them cannot be created or written (one line: key, path, OS error).
    """
    from policies.training.rundir import check_writable_dir

    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key == "runs_dir" and value:
            check_writable_dir(value, key)
        elif key == "run_dir" and value:
            check_writable_dir(Path(value).parent, key)


if __name__ == "__main__":
    try:
        given = [a for a in sys.argv[1:] if not a.startswith("-")]
        check_lambda_overrides(given)
        check_output_overrides(given)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    main()
