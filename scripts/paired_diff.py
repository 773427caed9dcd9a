#!/usr/bin/env python
"""Paired per-question differences between frontier record files, with bootstrap CIs.

    python scripts/paired_diff.py results/frontier/<dir>/records/<fingerprint>/test \\
        fixed-LLLLL router-<sha>-lam0 fixed-MMMMM             # each system minus the first

``evaluate.py frontier`` reports differences against one reference (``--reference``, all-HIGH by
default); this prints them against any other system (all-LOW, say) from the committed records,
without re-running anything: per system, its mean with a bootstrap interval, the paired mean
difference (both resampled on the same questions) and how many questions got better / worse.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluation.bootstrap import (
    DEFAULT_ALPHA,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    bootstrap_mean,
    make_resampler,
    paired_difference,
)
from evaluation.frontier_runner import RecordStore


def load_scores(path: Path, metric: str) -> dict[str, float]:
    """``{question_id: metric}`` of one record file (``<run_id>.jsonl``).

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: On a malformed line or a record without a numeric ``metric`` (file and line named).
    """
    store = RecordStore(path)  # reads <path> or its committed <path>.gz
    if not store.path.is_file():
        raise FileNotFoundError(f"{path}: no such record file")
    out: dict[str, float] = {}
    for qid, rec in store.records.items():
        try:
            out[qid] = float(rec[metric])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{store.path}: question {qid}: no numeric {metric!r} ({exc!r})") from exc
    return out


def paired_rows(
    records_dir: Path, reference: str, systems: list[str], metric: str = "f1", n_boot: int = DEFAULT_N_BOOT
) -> list[str]:
    """One printed line per system: mean [CI], paired difference to ``reference`` [CI], better / worse.

    Raises:
        ValueError: If a system's records cover other questions than the reference's.
    """
    ref = load_scores(records_dir / f"{reference}.jsonl", metric)
    ids = sorted(ref)
    rs = make_resampler(len(ids), n_boot=n_boot, seed=DEFAULT_SEED)
    base = np.array([ref[q] for q in ids])
    b_est, b_reps = bootstrap_mean(base, rs)
    lines = [
        f"{reference}: {metric} {b_est.mean:.3f} [{b_est.lo:.3f}, {b_est.hi:.3f}] ({len(ids)} questions)"
    ]
    for name in systems:
        scores = load_scores(records_dir / f"{name}.jsonl", metric)
        if set(scores) != set(ref):
            missing = len(set(ref) - set(scores))
            extra = len(set(scores) - set(ref))
            raise ValueError(
                f"{name}: records cover other questions than {reference} ({missing} missing, {extra} extra)"
            )
        vals = np.array([scores[q] for q in ids])
        est, reps = bootstrap_mean(vals, rs)
        diff = paired_difference(est.mean, reps, b_est.mean, b_reps, DEFAULT_ALPHA)
        better, worse = int((vals > base + 1e-9).sum()), int((vals < base - 1e-9).sum())
        lines.append(
            f"{name}: {metric} {est.mean:.3f} [{est.lo:.3f}, {est.hi:.3f}]  − {reference}: "
            f"{diff.mean:+.3f} [{diff.lo:+.3f}, {diff.hi:+.3f}]  better / worse {better} / {worse}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the paired differences; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "records_dir", type=Path, help="a frontier records dir (…/records/<fingerprint>/<split>)"
    )
    parser.add_argument("reference", help="run id (file stem) every other system is compared with")
    parser.add_argument("systems", nargs="+", help="run ids to compare")
    parser.add_argument("--metric", default="f1", help="record field (f1, em, module_cost, ...)")
    parser.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates")
    args = parser.parse_args(argv)
    try:
        print(
            "\n".join(paired_rows(args.records_dir, args.reference, args.systems, args.metric, args.n_boot))
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
