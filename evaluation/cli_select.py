r"""``python evaluate.py select``: the router to ship over several training runs, chosen on validation alone.

    python evaluate.py select --runs 'runs/locomo__implementation__lam0.1__s*' --out shipped/locomo-lam0.1

Each run ends with the guard (``train.guard``, :mod:`policies.training.guard`): its learned router against the
best fixed path on the validation questions, paired, with a bootstrap interval. Over several runs (seeds, or
settings) of the same validation questions this command ships the learned router whose lead over the best
fixed path has the highest interval lower bound, among those whose lower bound is above 0 at every λ; when no
run's router passes, it ships the fixed path the runs' guards chose (the most common choice; they agree at
λ = 0, where the objective is the task score). No LLM call: it reads each run's ``result.json`` and
``run_metadata.json``. ``--out`` receives the shipped router, in the format ``Router.load`` reads, and
``selection.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from common.atomic import atomic_write_json
from common.atomic_dir import write_dir_atomically
from common.config_error import ConfigError


def read_json(path: Path) -> dict[str, Any]:
    """A run file's JSON object (a clear error for a missing or broken one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("--runs", nargs="+", required=True, help="run directories or globs (finished runs)")
    parser.add_argument("--out", default=None, help="directory for the shipped router and selection.json")


def _run_dirs(patterns: list[str]) -> list[Path]:
    dirs = sorted({Path(p) for pat in patterns for p in (glob.glob(pat) or [pat])})
    missing = [str(d) for d in dirs if not (d / "result.json").is_file()]
    if missing:
        raise ConfigError(f"--runs: no result.json (not a finished run) in {', '.join(missing)}")
    if not dirs:
        raise ConfigError(f"--runs {' '.join(patterns)}: no run directory matched")
    return dirs


def summarize(run: Path) -> dict[str, Any]:
    """One run's guard as the selection needs it.

    Raises:
        ConfigError: A run without a guard (``train.guard=off``) or without its question sets.
    """
    result = read_json(run / "result.json")
    guard = result.get("guard")
    if not guard:
        raise ConfigError(f"{run}: the run has no guard (trained with train.guard=off); nothing to compare")
    meta = read_json(run / "run_metadata.json")
    val = (meta.get("question_sets") or {}).get("val")
    if not val:
        raise ConfigError(f"{run}/run_metadata.json records no question sets; retrain with this version")
    lows = {lam: v["difference"][1] for lam, v in guard["per_lambda"].items()}
    return {
        "run": str(run), "seed": result.get("seed"), "val_questions": val["questions"],
        "val_ids_sha256": val["ids_sha256"], "lambdas": sorted(lows), "passed": guard["ships"] == "router",
        "lower_bound": min(lows.values()), "fixed_path": _fixed(guard),
    }  # fmt: skip


def _fixed(guard: dict[str, Any]) -> str:
    """The fixed path a run's guard chose: one label, or ``λ=0: …; λ=1: …`` where it differs by λ."""
    paths = {lam: v["best_path"] for lam, v in guard["per_lambda"].items()}
    if len(set(paths.values())) == 1:
        return next(iter(paths.values()))
    return "; ".join(f"λ={lam}: {p}" for lam, p in paths.items())


def select(runs: list[Path]) -> dict[str, Any]:
    """Choose what ships over ``runs`` (see the module docstring).

    Raises:
        ConfigError: The runs were validated on other questions or λ values (naming the first that differs).
    """
    rows = [summarize(r) for r in runs]
    first = rows[0]
    for row in rows[1:]:
        for key, what in (("val_ids_sha256", "questions"), ("lambdas", "λ values")):
            if row[key] != first[key]:
                raise ConfigError(
                    f"{row['run']} was validated on other {what} than {first['run']} ({row[key]} vs "
                    f"{first[key]}): their guards cannot be compared"
                )
    passed = [r for r in rows if r["passed"]]
    if passed:
        best = max(passed, key=lambda r: r["lower_bound"])
        chosen = {"ships": "router", "run": best["run"], "path": None}
    else:
        path = Counter(r["fixed_path"] for r in rows).most_common(1)[0][0]
        best = next(r for r in rows if r["fixed_path"] == path)
        chosen = {"ships": "fixed", "run": best["run"], "path": path}
    return {**chosen, "runs": rows}


def run(args: argparse.Namespace) -> int:
    """Print the runs' guards and what ships; copy the shipped router to ``--out``."""
    selection = select(_run_dirs(args.runs))
    for r in selection["runs"]:
        mark = "*" if r["run"] == selection["run"] else " "
        print(f"{mark} {r['run']}: guard {'passed' if r['passed'] else 'not passed'}, lower bound "
              f"{r['lower_bound']:+.4f} over {r['val_questions']} validation questions; its fixed path "
              f"{r['fixed_path']}")  # fmt: skip
    if selection["ships"] == "router":
        print(f"ships: the learned router of {selection['run']} (the highest lower bound of those passing)")
    else:
        print(f"ships: the fixed path {selection['path']} (no run's learned router passed its guard), "
              f"as exported by {selection['run']}")  # fmt: skip
    if args.out:
        # The run's router/ holds what its own guard shipped: the learned router if it passed, else the
        # fixed path in the router format, which is the path chosen here whenever the runs agree.
        source = Path(selection["run"]) / "router"
        out = Path(args.out)

        def copy(tmp: Path) -> None:
            shutil.copytree(source, tmp / "router", dirs_exist_ok=True)
            atomic_write_json(tmp / "selection.json", selection)

        write_dir_atomically(out, copy)
        print(f"wrote {out}/router (load it with Router.load) and {out}/selection.json")
    return 0
