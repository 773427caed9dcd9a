"""Fault injection, issue 15 items 1, 2 and 4: run directories are never overwritten or shared.

Item 1: re-running a command used to wipe the earlier run (progress.csv, checkpoint, router).
Item 2: two identical commands at once used to interleave one run directory's files.
Item 4: a rejected launch used to overwrite the finished run's config.yaml / .hydra/ first, and a
rejected λ used to leave a ``…lam-1…`` directory.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import time

import pytest

from policies.router import Router
from tests.reliability_support import (
    ROOT,
    RUN_NAME,
    cli_env,
    one_line_error,
    run_cli,
    snapshot,
    start_cli,
)
from tests.support import needs_locomo

pytestmark = needs_locomo


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished fake-stack run: ``(base dir, run dir, snapshot of its files)``."""
    base = tmp_path_factory.mktemp("finished")
    proc = run_cli(base)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = base / "runs" / RUN_NAME
    return base, run, snapshot(run)


def _progress_rows(run):
    with open(run / "progress.csv", newline="") as fh:
        return list(csv.reader(fh))


def test_rerun_without_resume_is_refused_and_the_run_survives(finished):
    base, run, before = finished
    assert json.loads((run / "checkpoints/last/state.json").read_text())["num_timesteps"] == 40
    line = one_line_error(run_cli(base))
    assert "already holds a run" in line and f"resume={run}" in line and "overwrite=true" in line
    # Nothing was lost: every file (progress, checkpoint, router, config, .hydra) is byte-identical.
    assert snapshot(run) == before


def test_rejected_launch_validates_before_touching_the_run(finished):
    base, run, before = finished
    # Even with overwrite=true the bad value is found before a single file is deleted or written.
    proc = run_cli(base, "question_bank.k=0", "overwrite=true")
    assert proc.returncode != 0 and "question bank k must be > 0" in proc.stderr
    assert snapshot(run) == before
    assert "k: 5" in (run / "config.yaml").read_text()
    # A resume with a changed config is refused before anything is written too.
    line = one_line_error(run_cli(base, f"resume={run}", "cost.lambda=0.5", f"run_dir={run}"))
    assert "different config" in line
    assert snapshot(run) == before
    # A rejected launch into a new directory leaves no directory behind (Hydra creates it first).
    assert run_cli(base, "question_bank.k=0", "seed=7").returncode != 0
    assert not (base / "runs" / RUN_NAME.replace("s0", "s7")).exists()


def test_overwrite_true_replaces_a_run_explicitly(finished, tmp_path):
    _, run, _ = finished
    shutil.copytree(run, tmp_path / "runs" / RUN_NAME)
    marker = tmp_path / "runs" / RUN_NAME / "from_the_old_run.txt"
    marker.write_text("old")
    proc = run_cli(tmp_path, "overwrite=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "overwrite=true: deleted the previous run" in proc.stdout
    assert not marker.exists()
    assert Router.load(tmp_path / "runs" / RUN_NAME / "router").metadata["run_name"] == RUN_NAME


def _well_formed(run):
    """The run's files are whole: progress.csv parses with one width, router and checkpoint load."""
    rows = _progress_rows(run)
    assert len({len(r) for r in rows}) == 1, [len(r) for r in rows]
    Router.load(run / "router")
    assert json.loads((run / "checkpoints/last/state.json").read_text())["num_timesteps"] == 40


def test_two_identical_launches_at_once_one_wins_one_is_refused(tmp_path):
    procs = [start_cli(tmp_path), start_cli(tmp_path)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0 and codes[1] != 0, [o[1][-2000:] for o in outs]
    loser = next(o for p, o in zip(procs, outs, strict=True) if p.returncode != 0)
    assert "Traceback" not in loser[1], loser[1][-3000:]
    # Depending on timing the loser met the lock (its holder recorded or, under load, not yet) or the
    # finished run; either way it wrote nothing.
    assert "in use by another training process: " in loser[1] or "already holds a run" in loser[1]
    _well_formed(tmp_path / "runs" / RUN_NAME)


def test_a_live_holder_is_named_and_a_killed_one_leaves_no_stale_lock(tmp_path):
    run = tmp_path / "runs" / RUN_NAME
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import sys, time; from pathlib import Path; from policies.training.rundir import RunDirLock; "
            "RunDirLock(Path(sys.argv[1])).acquire(); print('locked', flush=True); time.sleep(600)",
            str(run),
        ],
        cwd=tmp_path.parent, env={**cli_env(), "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        line = one_line_error(run_cli(tmp_path))
        assert f"in use by another training process: pid {holder.pid}" in line
        assert sorted(p.name for p in run.iterdir()) == [".lock"]  # nothing else was written
    finally:
        holder.kill()  # SIGKILL: the kernel drops the flock with the process
        holder.wait()
    time.sleep(0.1)
    proc = run_cli(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _well_formed(run)



@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("seed=-1",), "config seed must be an integer >= 0, got -1"),
        (("question_bank.max_samples=0",), "config question_bank.max_samples must be > 0 or null (all)"),
        (("benchmark=custom", "+benchmark.options.path=DATA"), "the 'val' split of benchmark 'custom'"),
    ],
    ids=["negative-seed", "no-histories", "empty-val-split"],
)
def test_checks_of_the_environment_run_before_anything_is_written(tmp_path, overrides, message):
    """Issue 49, item 4: these failed after config.yaml, run_metadata.json and .hydra/ were written."""
    data = tmp_path / "all_train.jsonl"  # every history in train: the validation split is empty
    rows = [{"history_id": f"h{i}", "split": "train", "question": "q?", "answer": "a",
             "sessions": [{"turns": [{"speaker": "A", "text": f"fact {i}"}]}]} for i in range(3)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = tuple(o.replace("DATA", str(data)) for o in overrides)
    proc = run_cli(tmp_path, *overrides)
    line = one_line_error(proc)
    assert message in line, line
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir()), sorted(runs.rglob("*"))
    # ... so the same command with a good value is not blocked by a stub directory
    if overrides[0].startswith(("seed", "question_bank")):
        assert run_cli(tmp_path).returncode == 0


def test_probing_one_missing_runs_dir_from_many_processes_at_once_never_fails(tmp_path):
    # A probe that created the missing directories and removed them again raced with a second launch probing
    # inside them: "cannot write there (No such file or directory)", even after retries (8 at once).
    from concurrent.futures import ThreadPoolExecutor

    from policies.training.rundir import check_writable_dir

    for round_ in range(30):
        target = tmp_path / f"r{round_}" / "runs"
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(check_writable_dir, [target] * 8, ["runs_dir"] * 8))
        assert not target.parent.exists()  # the probe creates nothing a run did not ask for
    assert not list(tmp_path.rglob(".write-probe-*"))  # no probe left behind
