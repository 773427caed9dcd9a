"""Config resolution of the frontier command: ``--config`` YAML, a checkpoint's config, or Hydra defaults."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

from policies.training.config import CONFIG_DIR, load_config


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def apply_overrides(cfg: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` (YAML-parsed value) or ``group=option`` (loads ``configs/group/option.yaml``).

    Raises:
        ValueError: For an override without ``=``.
    """
    import yaml

    out = copy.deepcopy(cfg)
    for ov in overrides:
        key, eq, raw = ov.partition("=")
        if not eq or not key:
            raise ValueError(f"--set {ov!r}: expected KEY=VALUE")
        group_file = CONFIG_DIR / key / f"{raw}.yaml"
        if "." not in key and group_file.is_file():
            out[key] = _load_yaml(group_file)
            continue
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = yaml.safe_load(raw) if raw else None
    return out


def compose_default_config(overrides: list[str] | None = None) -> dict[str, Any]:
    """The project's Hydra config (``configs/config.yaml``), resolved, without the hydra section.

    Args:
        overrides: Hydra overrides applied at composition (e.g. ``["+experiment=cpu_quality"]``).
    """
    return load_config(overrides or [])


def resolve_config(args: argparse.Namespace, router_configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Pick the base config (``--config`` > first checkpoint's > Hydra default) and apply overrides.

    ``args.experiment`` (if the command has it) composes ``configs/experiment/<name>.yaml`` into the
    Hydra default, exactly as ``python train.py +experiment=<name>`` does.

    Raises:
        ValueError: If an experiment is combined with ``--config`` or router checkpoints (their
            recorded config already is the whole configuration).
    """
    experiment = getattr(args, "experiment", None)
    if experiment and (args.config or (router_configs and router_configs[0])):
        raise ValueError(
            f"--experiment {experiment!r} composes the default config; it cannot be combined with --config "
            "or with routers (whose recorded config is used). Use --set overrides instead."
        )
    if experiment:
        cfg = compose_default_config([f"+experiment={experiment}"])
    elif args.config:
        cfg = _load_yaml(Path(args.config))
    elif router_configs and router_configs[0]:
        cfg = copy.deepcopy(router_configs[0])
    else:
        cfg = compose_default_config()
    named = cfg.get("benchmark")
    current = named if isinstance(named, str) else (named or {}).get("name")
    if args.benchmark and current != args.benchmark:
        # Evaluating on another benchmark than the routers were trained on (transfer) is allowed.
        group = CONFIG_DIR / "benchmark" / f"{args.benchmark}.yaml"
        cfg["benchmark"] = _load_yaml(group) if group.is_file() else {"name": args.benchmark, "options": {}}
    # --set after --benchmark: `--benchmark hotpotqa --set benchmark.options.file=X` keeps the file.
    return apply_overrides(cfg, list(args.set))


def script_config(
    experiment: str | None, overrides: list[str], benchmark: str | None = None
) -> dict[str, Any]:
    """:func:`resolve_config` for a script's ``--experiment``/``--set``/``--benchmark`` flags.

    ``experiment`` ``None`` or ``"none"`` composes the plain Hydra default. The question bank is not cut
    (``question_bank.limit`` unset): scripts choose their own questions.
    """
    args = argparse.Namespace(
        experiment=None if experiment in (None, "none") else experiment,
        config=None,
        set=list(overrides),
        benchmark=benchmark,
    )
    cfg = resolve_config(args, [])
    cfg.setdefault("question_bank", {})["limit"] = None
    return cfg
