"""``results/`` stays lean: a size budget, and full PPO checkpoints only where a documented resume
needs them."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The budget of the files committed under results/ (tables, figures, per-question records, call packs,
#: exported routers). Raising it is a decision: a clone carries every byte of it.
BUDGET_MIB = 120
#: The one full PPO checkpoint kept in the tree: docs/results/locomo.md shows how to continue run 6 from it.
KEPT_CHECKPOINTS = {"results/routers/locomo-cpu_quality-lamcond-wide-qb-lamscale-maxmid-s0/checkpoints"}


def _tracked(under: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z", under], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:  # not a git checkout (an sdist): every file on disk counts
        return [p for p in (ROOT / under).rglob("*") if p.is_file()]
    return [ROOT / name for name in out.stdout.split("\0") if name and (ROOT / name).is_file()]


def test_results_fit_the_size_budget() -> None:
    files = _tracked("results")
    total = sum(p.stat().st_size for p in files if p.is_file())
    largest = sorted(files, key=lambda p: p.stat().st_size if p.is_file() else 0)[-5:]
    assert total <= BUDGET_MIB * 2**20, (
        f"results/ holds {total / 2**20:.1f} MiB, over its {BUDGET_MIB} MiB budget; largest: "
        + ", ".join(f"{p.relative_to(ROOT)} ({p.stat().st_size / 2**20:.1f} MiB)" for p in largest)
    )


def test_full_checkpoints_only_where_a_documented_resume_needs_them() -> None:
    dirs = {
        str(p.relative_to(ROOT)).split("/checkpoints/")[0] + "/checkpoints"
        for p in _tracked("results")
        if "/checkpoints/" in str(p.relative_to(ROOT))
    }
    assert dirs <= KEPT_CHECKPOINTS, (
        f"full PPO checkpoints committed outside the documented resume: {sorted(dirs - KEPT_CHECKPOINTS)}"
    )
    for kept in KEPT_CHECKPOINTS:
        assert kept in (ROOT / "docs/results/locomo.md").read_text(), (
            f"{kept} is kept but no page documents its resume"
        )
