"""Train the budget router with PPO: ``python train.py [hydra overrides]``.

Examples::

    python train.py                                   # the default main job (LoCoMo, SmolLM2, token F1)
    python train.py cost.lambda=0.3 seed=1            # another λ / seed
    python train.py backend=fake encoder=hashing train=tiny   # seconds-long plumbing check
    python train.py -m cost.lambda=0,0.05,0.1,0.3,0.5,0.7,0.9 seed=0,1,2   # λ × seed sweep
    python train.py 'cost.lambdas=[0,0.05,0.1,0.3,0.5,0.7,0.9]'   # one λ-conditioned router for all 7
    python train.py resume=runs/locomo__implementation__lam0.0__s0       # continue a run

Configs live in ``configs/`` (see ``configs/config.yaml``); every run writes
``runs/{run_name}/`` (resolved config, provenance, progress.csv, checkpoints, the best router
and a validation report). The work happens in :func:`policies.training.loop.train`.
"""

from __future__ import annotations

import os
from typing import Any

# Offline by design: nothing may download weights or datasets at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import hydra
from omegaconf import DictConfig, OmegaConf

from policies.training.config import register_resolvers

# Before Hydra composes: configs/config.yaml names runs with ${lam_tag:...}.
register_resolvers()


@hydra.main(version_base="1.3", config_path="configs", config_name="config")
def main(cfg: DictConfig) -> dict[str, Any]:
    """Hydra entry point: resolve the config and train one router."""
    from policies.training.loop import train

    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return train(container)


if __name__ == "__main__":
    main()
