"""The systems the frontier command evaluates: router checkpoints (grouped by λ) and baselines."""

from __future__ import annotations

import argparse
import glob
import re
from pathlib import Path
from typing import Any

from common.provenance import sha256_file
from evaluation.cli_options import comma_list
from evaluation.frontier_runner import RunSpec, SystemSpec, fixed_run, random_run, same_for_every_item
from modules.tier import Tier, one_module_changes, tiers_label
from policies.baselines import get_baseline
from policies.router import METADATA_FILE, WEIGHTS_FILE, Router, RouterNotFoundError


def _is_checkpoint(p: Path) -> bool:
    if p.is_dir():
        return (p / METADATA_FILE).is_file() and (p / WEIGHTS_FILE).is_file()
    import zipfile

    return p.is_file() and zipfile.is_zipfile(p)


def find_checkpoints(patterns: list[str], name_glob: str = "*") -> list[Path]:
    """Expand globs; a match that is not itself a checkpoint is searched recursively.

    Raises:
        RouterNotFoundError: If a pattern finds no checkpoint (a ``FileNotFoundError``).
    """
    found: list[Path] = []
    for pat in patterns:
        matches = sorted(Path(m) for m in glob.glob(pat)) or ([Path(pat)] if Path(pat).exists() else [])
        hits: list[Path] = []
        for m in matches:
            if _is_checkpoint(m):
                hits.append(m)
            elif m.is_dir():
                hits += [
                    meta.parent
                    for meta in sorted(m.rglob(METADATA_FILE))
                    # not the temporaries of an export killed mid-swap (.router.old-<pid>, .router.new-<pid>),
                    # nor the learned router a run's guard set aside (name router_learned/ to evaluate it)
                    if not any(part.startswith(".") or part == "router_learned"
                               for part in meta.parent.relative_to(m).parts)
                    and _is_checkpoint(meta.parent)
                    and meta.parent.match(name_glob)
                ]
        if not hits:
            raise RouterNotFoundError(f"--routers {pat!r}: {_why_no_router(pat, matches)}")
        found += hits
    return sorted({p.resolve() for p in found})


def _why_no_router(pat: str, matches: list[Path]) -> str:
    """What a ``--routers`` entry that found no checkpoint found instead, and the fix."""
    # A comma list is the one mistake worth naming: --baselines takes commas, --routers spaces.
    hint = "; separate several --routers entries with spaces, not commas" if "," in pat else ""
    if not matches:
        return f"no such file or directory{hint}"
    for m in matches:
        if m.is_dir() and (m / METADATA_FILE).is_file() and not (m / WEIGHTS_FILE).is_file():
            return f"{m} has {METADATA_FILE} but no {WEIGHTS_FILE} (an export that did not finish?){hint}"
    return f"no router checkpoint under it (a dir with {WEIGHTS_FILE} + {METADATA_FILE}){hint}"


#: ``NAME=PATTERN`` in ``--routers``: NAME is a plain word (no ``/``), so a path with ``=`` in a
#: directory name (Hydra's ``cost.lambda=0.3``) is not taken for one when it exists as given.
_LABEL = re.compile(r"^([A-Za-z0-9_.+-]+)=(.+)$")


def labelled_checkpoints(patterns: list[str], name_glob: str = "*") -> dict[Path, str | None]:
    """:func:`find_checkpoints` for ``--routers`` entries that may carry a ``NAME=`` label.

    A label names the system of every checkpoint its pattern finds (``run6=<dir>`` gives
    ``run6 λ=1`` ...), so two training runs whose routers share λ and seed (two λ-conditioned
    runs with different settings) are two systems instead of a clash. Checkpoints that share a
    label and a λ are seeds of one system, as unlabelled ones are.

    Returns:
        ``{checkpoint path: label or None}`` in the order of ``patterns`` (paths sorted within one).

    Raises:
        FileNotFoundError: If a pattern finds no checkpoint.
        ValueError: If one checkpoint is given two different labels.
    """
    out: dict[Path, str | None] = {}
    for entry in patterns:
        m = _LABEL.match(entry)
        label, pat = (m.group(1), m.group(2)) if m and not glob.glob(entry) else (None, entry)
        for path in find_checkpoints([pat], name_glob):
            if out.get(path) is not None and label is not None and out[path] != label:
                raise ValueError(f"--routers: checkpoint {path} is labelled both {out[path]!r} and {label!r}")
            out[path] = label if label is not None else out.get(path)
    return out


def _checkpoint_sha(path: Path) -> str:
    """sha256 of the checkpoint file (zip) or of its weights file (dir)."""
    return sha256_file(path / WEIGHTS_FILE if path.is_dir() else path)


def router_systems(
    paths: list[Path], labels: dict[Path, str | None] | None = None
) -> tuple[list[SystemSpec], list[dict[str, Any]], list[dict[str, Any]]]:
    """Load routers and group them by (label and) λ; returns (systems, checkpoint records, their configs).

    Args:
        paths: Checkpoints (dirs or zips).
        labels: Optional system label per path (``NAME=`` in ``--routers``).

    Raises:
        ValueError: If two checkpoints share label, λ and seed (label them apart or narrow with
            ``--checkpoint-glob``).
    """
    labels = labels or {}
    groups: dict[str, SystemSpec] = {}
    ckpts: list[dict[str, Any]] = []
    configs: list[dict[str, Any]] = []
    seen: dict[tuple[str, Any], Path] = {}
    for path in paths:
        router = Router.load(path)
        meta = dict(router.metadata)
        cfg = router.config
        seed = meta.get("seed", cfg.get("seed"))
        sha = _checkpoint_sha(path)
        label = labels.get(path)
        for name, lam in _router_points(router, meta, cfg, path, label):
            key = (name, seed)
            if key in seen:
                raise ValueError(
                    f"checkpoints {seen[key]} and {path} both have {name} and seed {seed}; "
                    "name the runs apart (--routers run3=<path> run6=<path>) "
                    "or pick one per run with --checkpoint-glob (e.g. 'best')"
                )
            seen[key] = path
            run = RunSpec(
                # λ is an observation feature: the same weights at another λ route differently.
                run_id=f"router-{sha[:16]}" + (f"-lam{float(lam):g}" if lam is not None else ""),
                decide_for=same_for_every_item(router.decide),
                cost_lambda=float(lam) if lam is not None else None,
                seed=int(seed) if isinstance(seed, int) else None,
                check=router.check_components,
            )
            params = {
                "cost_lambda": lam,
                "checkpoints": [],
                "conditioned": router.cost_weight.conditioned,
                "label": label,
            }
            spec = groups.setdefault(name, SystemSpec(name, "router", [], params))
            spec.runs.append(run)
            spec.params["checkpoints"].append(str(path))
            ckpts.append(
                {
                    "path": str(path),
                    "sha256": sha,
                    "weights_sha256": meta.get("weights_sha256"),
                    "cost_lambda": lam,
                    "seed": seed,
                    "system": name,
                    "run_id": run.run_id,
                }
            )
        configs.append(cfg)
    return list(groups.values()), ckpts, configs


def _router_points(
    router: Any, meta: dict[str, Any], cfg: dict[str, Any], path: Path, label: str | None = None
) -> list[tuple[str, Any]]:
    """``(system name, λ)`` for each point a checkpoint contributes to the frontier.

    A router trained at one λ is one point. A λ-conditioned router is one point per λ it was
    trained on, named apart (``λ-cond router λ=…``) so it never merges with separately trained
    routers of the same λ. A label replaces the name's prefix (``run6 λ=1``).
    """
    conditioned = router.cost_weight.conditioned
    lams = (
        router.cost_weight.choices
        if conditioned
        else [meta.get("cost_lambda", (cfg.get("cost") or {}).get("lambda"))]
    )
    prefix = label if label is not None else ("λ-cond router" if conditioned else "router")
    unnamed = label if label is not None else f"router {path.name}"  # a router that records no λ
    return [(f"{prefix} λ={float(lam):g}" if lam is not None else unnamed, lam) for lam in lams]


def _split_baselines(spec: str) -> list[str]:
    """Split the --baselines list; ``fixed:`` tuples contain commas, so they are ';'-separated."""
    out: list[str] = []
    for part in spec.split(";"):
        part = part.strip()
        if part.lower().startswith("fixed:"):
            out.append(part)
        else:
            out += [p.strip() for p in part.split(",") if p.strip()]
    return out


def baseline_systems(args: argparse.Namespace, val_search: Any) -> list[SystemSpec]:
    """Baseline systems from ``--baselines`` (``val_search`` runs the best-fixed search when asked)."""
    systems: list[SystemSpec] = []
    for name in _split_baselines(args.baselines):
        low = name.lower()
        if low == "random" or low.startswith("random:"):
            systems.append(random_system(name, args.random_seeds))
        elif low == "single-module":
            systems += single_module_systems()
        elif low == "best-fixed":
            result = val_search()
            systems.append(
                SystemSpec(
                    f"best-fixed ({tiers_label(result.best)})",
                    "baseline",
                    [fixed_run(result.best)],
                    {"tiers": tiers_label(result.best), "search": result.to_dict()},
                )
            )
        else:
            policy = get_baseline(name)  # validates the name
            tiers = getattr(policy, "tiers", None)
            if tiers is None:
                raise ValueError(f"baseline {name!r} is not a fixed-tier policy")
            label = str(getattr(policy, "name", low))
            systems.append(
                SystemSpec(label, "baseline", [fixed_run(tuple(tiers))], {"tiers": tiers_label(tiers)})
            )
    return systems


def fixed_path_runs(paths: str) -> list[RunSpec]:
    """The runs of a ``--baselines`` list of fixed tier paths, one per distinct path, in order.

    ``all-low``, ``single-module``, ``fixed:...`` and the like; random and best-fixed are refused.

    Raises:
        ValueError: A name that is not a fixed tier path.
    """

    def no_search() -> Any:
        raise ValueError(f"{paths!r}: best-fixed searches on validation; name fixed paths")

    systems = baseline_systems(argparse.Namespace(baselines=paths, random_seeds="0"), no_search)
    runs = [run for sys_spec in systems for run in sys_spec.runs]
    if any(s.kind != "baseline" or len(s.runs) != 1 or s.name.startswith("random") for s in systems):
        raise ValueError(f"{paths!r}: fixed tier paths only")
    return list({run.run_id: run for run in runs}.values())


def random_system(name: str, seeds_spec: str) -> SystemSpec:
    """The random baseline ``random`` (every tier) or ``random:MID`` (LOW or MID), one run per seed.

    Raises:
        ValueError: On a tier after ``random:`` other than LOW, MID or HIGH.
    """
    seeds = comma_list(seeds_spec, "random-seeds", int)
    tier_name = name.partition(":")[2].strip()
    try:
        max_tier = Tier.parse(tier_name) if tier_name else Tier.HIGH
    except ValueError:
        raise ValueError(
            f"--baselines {name!r}: the tier after 'random:' must be LOW, MID or HIGH, got {tier_name!r}"
        ) from None
    runs = [random_run(s, max_tier) for s in seeds]
    if max_tier == Tier.HIGH:
        return SystemSpec("random", "baseline", runs, {"seeds": seeds})
    params = {"seeds": seeds, "max_tier": max_tier.name}
    return SystemSpec(f"random (≤{max_tier.name})", "baseline", runs, params)


def single_module_systems() -> list[SystemSpec]:
    """The 10 fixed paths that differ from all-MID in one module (set to LOW or to HIGH)."""
    return [
        SystemSpec(
            f"all-mid, {module}={tier.name}",
            "baseline",
            [fixed_run(tiers)],
            {"tiers": tiers_label(tiers), "single_module": module},
        )
        for module, tier, tiers in one_module_changes(Tier.MID, (Tier.LOW, Tier.HIGH))
    ]
