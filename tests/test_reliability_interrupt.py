"""Ctrl-C and ``kill`` during training (issue 49, item 5).

Both used to end in a long ``KeyboardInterrupt`` traceback or a silent death, losing up to
``checkpoint_freq`` steps and printing no way back. Now the first SIGINT/SIGTERM saves a checkpoint at the
next step, prints one line with the ``resume=`` command and exits 130/143; the printed command continues.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys

import pytest

from tests.reliability_support import ROOT, RUN_NAME, cli_env, signal_once_training_runs
from tests.support import needs_locomo

LONG = ("train.total_timesteps=100000", "train.eval_freq=100000", "train.checkpoint_freq=100000")


@needs_locomo
@pytest.mark.parametrize(
    ("sig", "code", "group", "workers"),
    [
        (signal.SIGINT, 130, False, ()),
        (signal.SIGTERM, 143, False, ()),
        # What Slurm and `kill -TERM -PGID` do: the subprocess workers get the signal too, and used to die
        # before the checkpoint could ask them for their state (BrokenPipeError, exit 1, nothing saved).
        (signal.SIGTERM, 143, True, ("train.vec_env=subproc",)),
    ],
    ids=["SIGINT", "SIGTERM", "SIGTERM-to-group-with-subprocess-workers"],
)
def test_a_signal_saves_a_checkpoint_and_prints_how_to_resume(tmp_path, sig, code, group, workers):
    proc = signal_once_training_runs(tmp_path, sig, *LONG, *workers, group=group)
    rc, err = proc.returncode, proc.stderr
    assert rc == code, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    run = tmp_path / "runs" / RUN_NAME
    line = next(x for x in err.splitlines() if x.startswith(f"{sig.name} at step "))
    step = int(line.split(" at step ")[1].split(":")[0])
    assert f"checkpoint saved to {run}/checkpoints/last" in line and f"resume={run}" in line
    state = json.loads((run / "checkpoints" / "last" / "state.json").read_text())
    assert state["num_timesteps"] == step > 0
    assert not (run / "result.json").exists()  # not finished: the same command resumes it
    # the printed command continues the run (with a budget it can finish in a moment)
    command = shlex.split(line.split("continue with: ", 1)[1])
    assert command[:2] == ["python", "train.py"]
    overrides = [a for a in command[2:] if not a.startswith("train.total_timesteps=")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides, f"train.total_timesteps={step + 20}"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((run / "result.json").read_text())["timesteps"] >= step + 20
