"""Compose the training config without running Hydra's app (for tests, notebooks and tools).

``load_config(["backend=fake", "cost.lambda=0.3"])`` returns the same resolved dict that
``train.py`` hands to :func:`policies.training.loop.train`, minus Hydra's own ``hydra`` node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.datadir import PROJECT_ROOT

CONFIG_DIR = PROJECT_ROOT / "configs"


def load_config(overrides: Sequence[str] = (), config_name: str = "config") -> dict[str, Any]:
    """Compose ``configs/{config_name}.yaml`` with command-line style ``overrides`` and resolve it.

    Raises:
        hydra.errors.HydraException: On an unknown group option or a bad override.
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name, overrides=list(overrides))
    out = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(out, dict)
    out.pop("hydra", None)
    return out
