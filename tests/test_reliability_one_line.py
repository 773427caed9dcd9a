"""Bad input and bad luck give one line naming the file, field or value and the fix (reliability round 4).

Each of these used to end in a raw traceback or a line that sent the user the wrong way: resuming a run
that has no checkpoint, a refused resume naming two hashes instead of the changed key, a runs directory
that cannot be written (Hydra's mkdir), a wrong ``--routers`` path or a router directory without
``router.pt``, a misspelled benchmark option, a full disk during the router export or the run record, and
the temporaries of a killed export next to a router.
"""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.config_error import ConfigError
from policies.export import RouterExportError
from policies.router import RouterNotFoundError
from policies.training.checkpoint import CheckpointError
from policies.training.rundir import RunDirError
from tests.reliability_support import ROOT, RUN_NAME, cli_env, config, one_line_error, run_cli
from tests.support import needs_locomo

ALIGNED = ("ppo.n_steps=10", "ppo.batch_size=10", "train.checkpoint_freq=20", "train.eval_freq=20")


def _train(base: Path, *overrides: str):
    from policies.training.loop import train

    return train(config(base, *overrides))


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 20-step fake-stack run (router and checkpoint)."""
    base = tmp_path_factory.mktemp("finished")
    _train(base, *ALIGNED, "train.total_timesteps=20")
    return base / "runs" / RUN_NAME


def test_resume_without_a_checkpoint_says_why_and_what_to_do(tmp_path):
    with pytest.raises(CheckpointError, match=r"resume=.*nowhere: no such directory"):
        _train(tmp_path, f"resume={tmp_path / 'nowhere'}")
    run = tmp_path / "stopped"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 0\n")  # a run that stopped before its first checkpoint
    with pytest.raises(CheckpointError, match=r"stopped before its first one.*overwrite=true"):
        _train(tmp_path, f"resume={run}")


@needs_locomo
def test_a_refused_resume_names_the_changed_keys(finished, tmp_path):
    base = finished.parent.parent
    with pytest.raises(CheckpointError) as info:
        _train(base, *ALIGNED, "train.total_timesteps=40", f"resume={finished}", "ppo.learning_rate=0.01",
               "seed=0")  # fmt: skip
    message = str(info.value)
    assert "ppo.learning_rate: 0.001 when trained, 0.01 now" in message, message  # ppo=tiny's rate
    assert "hash" not in message


@pytest.mark.parametrize("where", ["under-a-file", "in-proc"])
def test_a_runs_dir_that_cannot_be_written_is_one_line_before_hydra(tmp_path, where):
    target = tmp_path / "afile" / "runs" if where == "under-a-file" else Path("/proc/budget-router-runs")
    (tmp_path / "afile").write_text("not a directory")
    proc = run_cli(tmp_path, f"runs_dir={target}")
    line = one_line_error(proc)
    assert proc.returncode == 2
    assert f"runs_dir={target}: cannot write there" in line and "runs_dir=$HOME/runs" in line


def test_wrong_routers_paths_are_named(tmp_path):
    from evaluation.frontier_systems import find_checkpoints

    with pytest.raises(RouterNotFoundError, match=r"--routers '.*missing': no such file or directory"):
        find_checkpoints([str(tmp_path / "missing")])
    half = tmp_path / "half"
    half.mkdir()
    (half / "metadata.json").write_text("{}")
    with pytest.raises(RouterNotFoundError, match=r"has metadata.json but no router.pt"):
        find_checkpoints([str(half)])


@needs_locomo
def test_frontier_with_a_wrong_routers_path_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), "frontier", "--routers", str(tmp_path / "nope"),
         "--set", "backend=fake", "--set", "encoder=hashing"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "no such file or directory" in proc.stderr.splitlines()[-1]


@needs_locomo
def test_leftovers_of_a_killed_export_are_not_routers(finished, tmp_path):
    from evaluation.frontier_systems import find_checkpoints

    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    for leftover in (".router.old-4242", ".router.new-4242"):
        shutil.copytree(copy / "router", copy / leftover)
    assert find_checkpoints([str(copy)], "router") == [(copy / "router").resolve()]


def test_a_misspelled_benchmark_option_names_the_option_and_the_known_ones():
    from benchmarks.registry import get_benchmark

    typo = r"unknown option 'include_adversarail' \(did you mean 'include_adversarial'\?\)"
    with pytest.raises(ConfigError, match=typo):
        get_benchmark("locomo", include_adversarail=True)
    with pytest.raises(ConfigError, match=r"'hotpotqa' takes .*file"):
        get_benchmark("hotpotqa", fille="x.json")


#: What a full disk looks like to each writer: torch's zip writer (the router) and an OS write (the record).
TORCH_FULL = RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 1472 vs 1366")
OS_FULL = OSError(errno.ENOSPC, "No space left on device", "run_metadata.json")


@needs_locomo
@pytest.mark.parametrize(
    ("owner", "name", "path_arg", "file", "fault", "error", "message", "absent"),
    [
        ("torch", "save", 1, "router.pt", TORCH_FULL, RouterExportError,
         r"router could not be written .*unexpected pos.*MiB free there", "router"),
        ("policies.training.loop", "atomic_write_json", 0, "run_metadata.json", OS_FULL, RunDirError,
         r"run record could not be written \(No space left on device: .*run_metadata", "checkpoints"),
    ],
    ids=["router-export", "run-record"],
)  # fmt: skip
def test_a_full_disk_is_one_line(tmp_path, monkeypatch, owner, name, path_arg, file, fault, error, message,
                                 absent):  # fmt: skip
    import importlib

    module = importlib.import_module(owner)
    real = getattr(module, name)

    def full(*args, **kwargs):
        if str(args[path_arg]).endswith(file):
            raise fault
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, full)
    with pytest.raises(error, match=message):
        _train(tmp_path, *ALIGNED, "train.total_timesteps=20")
    assert not (tmp_path / "runs" / RUN_NAME / absent).exists()
