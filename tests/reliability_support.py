"""Helpers of the fault-injection tests (tests/test_reliability_*.py), not a test module itself.

Every run uses the fake stack (``tests.support.TINY_TRAIN_OVERRIDES``) with its run, cache and
question-bank directories under the test's temporary directory.
"""

from __future__ import annotations

import csv
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import TINY_TRAIN_OVERRIDES

ROOT = Path(__file__).resolve().parent.parent
RUN_NAME = "locomo__implementation__lam0__s0"
#: Progress columns of a rollout's episodes (not wall time, not the cache's warmth).
ROLLOUT_GROUPS = ("rollout", "reward", "cost", "tiers")


def paths(base: Path) -> list[str]:
    """Overrides that keep a run's files under ``base`` (runs/, calls.sqlite, banks/)."""
    return [
        f"runs_dir={base / 'runs'}",
        f"cache.path={base / 'calls.sqlite'}",
        f"question_bank.cache_dir={base / 'banks'}",
    ]


def cli_env() -> dict[str, str]:
    """The test environment of a ``train.py`` subprocess (offline, one thread, no wandb)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0",
        WANDB_MODE="disabled",
    )
    return env


def cli_args(base: Path, *extra: str) -> list[str]:
    """The command line of a fake-stack ``train.py`` run under ``base`` (flags such as ``-m`` first)."""
    flags = [a for a in extra if a.startswith("-")]
    overrides = [a for a in extra if not a.startswith("-")]
    return [sys.executable, str(ROOT / "train.py"), *flags, *TINY_TRAIN_OVERRIDES, *paths(base), *overrides]


def run_cli(base: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``train.py`` on the fake stack; the caller checks the exit code."""
    return subprocess.run(
        cli_args(base, *extra), cwd=base, env=cli_env(), capture_output=True, text=True, timeout=timeout
    )


def start_cli(base: Path, *extra: str, new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``train.py`` on the fake stack without waiting for it (``new_session``: as the leader of
    its own process group, which a scheduler signals as a whole)."""
    return subprocess.Popen(
        cli_args(base, *extra), cwd=base, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=new_session,
    )  # fmt: skip


def config(base: Path, *extra: str) -> dict[str, Any]:
    """The resolved config of the same fake-stack run, for in-process ``train()``."""
    from policies.training.config import load_config

    return load_config([*TINY_TRAIN_OVERRIDES, *paths(base), *extra])


def snapshot(directory: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``directory`` (to prove nothing changed)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The ``error: ...`` line of a rejected launch; asserts there is no traceback."""
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def signal_once_training_runs(
    base: Path, sig: int, *extra: str, episodes: int = 2, timeout: float = 240, group: bool = False
) -> subprocess.CompletedProcess[str]:
    """Start the fake-stack ``train.py``, send ``sig`` once ``episodes`` training episodes are logged.

    ``group``: to its whole process group (workers included), as Slurm and ``kill -TERM -PGID`` do.
    """
    proc = start_cli(base, *extra, new_session=group)
    log = base / "runs" / RUN_NAME / "episodes.jsonl"
    deadline = time.monotonic() + timeout
    while not (log.exists() and log.read_text().count("\n") >= episodes):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.1)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def progress_values(run: Path) -> tuple[dict[str, dict[str, str]], list[dict[str, str]]]:
    """What the progress CSVs say: per-rollout statistics by step, and the PPO updates in order.

    SB3 dumps a row before each update, so a row holds its rollout's statistics and the *previous*
    update's ``train/*`` values, and the end of a run dumps its last update alone; a run in two pieces
    therefore spreads the same values over other rows. Compared are the values, not the rows; left out
    are wall times and cache hit rates (the in-process cache is warmer in a second piece).
    """
    rollouts: dict[str, dict[str, str]] = {}
    updates: list[tuple[float, dict[str, str]]] = []
    for path in sorted(run.glob("progress*.csv")):
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                step = row.get("time/total_timesteps")
                if row.get("rollout/episodes") and step:
                    rollouts[step] = {k: v for k, v in row.items() if k.split("/")[0] in ROLLOUT_GROUPS}
                if row.get("train/loss"):
                    train = {k: v for k, v in row.items() if k.startswith("train/")}
                    updates.append((float(train.get("train/n_updates") or 0), train))
    return rollouts, [u for _, u in sorted(updates, key=lambda x: x[0])]
