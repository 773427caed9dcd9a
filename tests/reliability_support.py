"""Helpers of the fault-injection tests (tests/test_reliability_*.py), not a test module itself.

Every run uses the fake stack (``tests.support.TINY_TRAIN_OVERRIDES``) with its run, cache and
question-bank directories under the test's temporary directory.
"""

from __future__ import annotations

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


def start_cli(base: Path, *extra: str) -> subprocess.Popen[str]:
    """Start ``train.py`` on the fake stack without waiting for it."""
    return subprocess.Popen(
        cli_args(base, *extra), cwd=base, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )


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
    base: Path, sig: int, *extra: str, episodes: int = 2, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Start the fake-stack ``train.py``, send ``sig`` once ``episodes`` training episodes are logged."""
    proc = start_cli(base, *extra)
    log = base / "runs" / RUN_NAME / "episodes.jsonl"
    deadline = time.monotonic() + timeout
    while not (log.exists() and log.read_text().count("\n") >= episodes):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
