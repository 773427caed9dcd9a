"""Compose the training config without running Hydra's app (for tests, notebooks and tools).

``load_config(["backend=fake", "cost.lambda=0.3"])`` returns the same resolved dict that
``train.py`` hands to :func:`policies.training.loop.train`, minus Hydra's own ``hydra`` node.

:func:`register_resolvers` adds the OmegaConf resolvers the YAML files use (``lam_tag`` names a
run by its λ, or by its λ list for a λ-conditioned run); both entry points call it before
composing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.datadir import PROJECT_ROOT

CONFIG_DIR = PROJECT_ROOT / "configs"


def lam_tag(cost_lambda: Any, cost_lambdas: Any = None) -> str:
    """The λ part of a run name: ``lam0.3``, or ``lamcond0-0.1-0.5`` for a λ-conditioned run.

    The single-λ form prints λ as the config holds it (``lam0.0`` for ``0.0``), which keeps the
    run names of earlier runs.
    """
    if cost_lambdas:
        return "lamcond" + "-".join(f"{float(x):g}" for x in sorted(float(v) for v in cost_lambdas))
    return f"lam{cost_lambda}"


def register_resolvers() -> None:
    """Register this project's OmegaConf resolvers (idempotent)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("lam_tag"):
        OmegaConf.register_new_resolver("lam_tag", lam_tag)


def load_config(overrides: Sequence[str] = (), config_name: str = "config") -> dict[str, Any]:
    """Compose ``configs/{config_name}.yaml`` with command-line style ``overrides`` and resolve it.

    Raises:
        hydra.errors.HydraException: On an unknown group option or a bad override.
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name, overrides=list(overrides))
    out = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(out, dict)
    out.pop("hydra", None)
    return out
