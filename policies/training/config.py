"""Compose the training config without running Hydra's app (for tests, notebooks and tools)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.cost_weight import CostWeight
from common.datadir import PROJECT_ROOT
from policies.training.settings import Config

CONFIG_DIR = PROJECT_ROOT / "configs"


def lam_tag(cost_lambda: Any, cost_lambdas: Any = None) -> str:
    """The λ part of a run name: ``lam0.3``, or ``lamcond0-0.1-0.5`` for a λ-conditioned run.

    λ is printed in its shortest form (``lam0`` for ``0``, ``0.0`` and ``0.00``), so that Hydra's
    ``-m`` sweep, a single run and the Ray sweep give one λ the same run name.

    Hydra resolves the run directory with this before it creates it, so the λ values are checked
    here: a rejected λ (``-1``, ``nan``, ``abc``, ``[]``) never leaves a ``…lam-1…`` directory.

    Raises:
        common.config_error.ConfigError: A λ that is not a finite number >= 0, or a bad λ list.
    """
    if cost_lambdas is not None:
        lams = list(cost_lambdas) if not isinstance(cost_lambdas, str) else cost_lambdas
        weight = CostWeight.from_config({"lambdas": lams})
        return "lamcond" + "-".join(f"{x:g}" for x in weight.choices)
    CostWeight.from_config({"lambda": cost_lambda})
    return f"lam{float(cost_lambda):g}"


def check_lambda_overrides(overrides: Sequence[str]) -> None:
    """Check the ``cost.lambda``/``cost.lambdas`` values of command-line overrides (sweeps included).

    ``train.py`` calls this before Hydra starts: a bad value inside Hydra's run-directory
    interpolation produces an unreadable traceback, this a one-line error.

    Raises:
        common.config_error.ConfigError: Naming the override and the bad value.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    for arg in overrides:
        key = arg.lstrip("+~").split("=", 1)[0]
        if key not in ("cost.lambda", "cost.lambdas") or "=" not in arg:
            continue
        try:
            override = OverridesParser.create().parse_override(arg)
            values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
        except HydraException:
            continue  # Hydra reports malformed overrides itself, readably
        for value in values:
            if value is None and key == "cost.lambdas":
                continue
            lam_tag(0.0, value) if key == "cost.lambdas" else lam_tag(value)


def register_resolvers() -> None:
    """Register this project's OmegaConf resolvers and the config schema with Hydra (idempotent)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("lam_tag"):
        OmegaConf.register_new_resolver("lam_tag", lam_tag)
    ConfigStore.instance().store(name="config_schema", node=Config)


def load_config(
    overrides: Sequence[str] = (), config_name: str = "config", config_dir: Path = CONFIG_DIR
) -> dict[str, Any]:
    """Compose ``{config_dir}/{config_name}.yaml`` with command-line style ``overrides`` and resolve it.

    Raises:
        hydra.errors.HydraException: On an unknown group option, a bad override, or a key the
            schema lacks or a value of the wrong type (in a YAML file or an override).
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    register_resolvers()
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose(config_name, overrides=list(overrides))
    out = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(out, dict)
    out.pop("hydra", None)
    # A composed config's keys are strings; OmegaConf's return type allows any key type.
    return {str(k): v for k, v in out.items()}
