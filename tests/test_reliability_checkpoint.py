"""Fault injection, issue 15 items 5, 6 and 7 (state.json): checkpoints survive crashes and tampering.

Item 5: a ``kill -9`` between the two renames of the directory swap used to leave no
``checkpoints/last`` (resume said "no checkpoint there") and stale temporaries forever.
Item 6: ``resume=`` unpickles ``model.zip``; now it must match the sha256 the run recorded.
Item 7: a truncated or non-UTF-8 ``state.json`` used to give a raw traceback.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from common.atomic_dir import recover_dir
from policies.training.checkpoint import CheckpointError, resolve_checkpoint
from tests.reliability_support import ROOT, RUN_NAME, config, snapshot
from tests.support import needs_locomo

#: A child process that swaps ``argv[1]`` with write_dir_atomically and SIGKILLs itself right
#: after the ``argv[2]``-th rename (0: during ``fill``, before any rename). ``fill`` copies the
#: files of ``argv[3]`` (or writes a two-file "new" version if it is "-").
KILLER = r"""
import os, shutil, signal, sys
from pathlib import Path
import common.atomic_dir as ad

dest, k, source = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
real_replace, n = os.replace, [0]

def replace(a, b):
    real_replace(a, b)
    n[0] += 1
    if n[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)

def fill(tmp):
    if source == "-":
        (tmp / "version.txt").write_text("new")
        (tmp / "payload.bin").write_bytes(b"x" * 4096)
    else:
        for f in Path(source).iterdir():
            shutil.copy2(f, tmp / f.name)
    if k == 0:
        os.kill(os.getpid(), signal.SIGKILL)

ad.os.replace = replace
ad.write_dir_atomically(dest, fill)
"""


def _kill_during_swap(dest: Path, k: int, source: str = "-") -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(dest), str(k), source],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == -9, proc.stderr  # really killed, mid-swap


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_kill_at_every_point_of_a_swap_leaves_a_complete_copy(tmp_path, k):
    dest = tmp_path / "last"
    dest.mkdir()
    (dest / "version.txt").write_text("old")
    _kill_during_swap(dest, k)
    repairs = recover_dir(dest)
    version = (dest / "version.txt").read_text()
    # Before the old copy is moved aside the old one stays; after it, the complete new one wins.
    assert version == ("old" if k < 2 else "new"), repairs
    if version == "new":
        assert (dest / "payload.bin").stat().st_size == 4096
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"], "stale temporaries left"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished in-process fake-stack run (40 timesteps); tests work on copies of it."""
    from policies.training.loop import train

    base = tmp_path_factory.mktemp("ckpt")
    train(config(base))
    return base / "runs" / RUN_NAME


def _copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "runs" / RUN_NAME
    shutil.copytree(finished, run)
    return run


@needs_locomo
def test_resume_after_a_kill_between_the_renames_of_a_checkpoint_save(finished, tmp_path, capsys):
    from policies.training.loop import train

    run = _copy(finished, tmp_path)
    ckpts = run / "checkpoints"
    saved = tmp_path / "saved_checkpoint"
    shutil.copytree(ckpts / "last", saved)
    _kill_during_swap(ckpts / "last", 2, str(saved))  # killed after last -> .last.old-<pid>
    assert not (ckpts / "last").exists()
    # Leftovers of older crashes: a half-written swap, a legacy temp dir, a half-written file.
    (ckpts / ".last.tmp-999999999-x").mkdir()
    (ckpts / ".last.abc123.tmp").mkdir()
    (run / ".validation.json.x1y2.tmp").write_text("{")
    assert resolve_checkpoint(run).name.startswith(".last.")  # found, not "no checkpoint there"

    result = train(config(tmp_path, f"resume={run}", "train.total_timesteps=60"))
    assert result["timesteps"] == 60
    assert "restored" in capsys.readouterr().out
    assert sorted(p.name for p in ckpts.iterdir()) == ["last"]
    assert not list(run.glob(".*.tmp"))
    assert json.loads((ckpts / "last" / "state.json").read_text())["num_timesteps"] == 60
    # Nothing of the first 40 steps was lost: its progress rows and validation history are kept (the
    # end-of-run dump of the last update's values moves to the resumed piece, which records it again).
    before = (finished / "progress.csv").read_text().splitlines()
    after = (run / "progress.csv").read_text().splitlines()
    assert after == before[: len(after)] and len(before) - len(after) == 1
    assert "train/loss" in (run / "progress-from-40.csv").read_text()
    assert [h["step"] for h in json.loads((run / "validation.json").read_text())["history"]] == [20, 40, 60]


class _OpensAFile:
    """Unpickling this creates a file: proof that code ran while loading."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _tamper(model_zip: Path, marker: Path) -> None:
    """Replace one cloudpickled value in SB3's ``data`` with a payload that runs on load."""
    import cloudpickle

    with zipfile.ZipFile(model_zip) as zf:
        entries = {n: zf.read(n) for n in zf.namelist()}
    data = json.loads(entries["data"])
    data["policy_class"][":serialized:"] = base64.b64encode(cloudpickle.dumps(_OpensAFile(marker))).decode()
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model_zip, "w") as zf:
        for name, blob in entries.items():
            zf.writestr(name, blob)


@needs_locomo
def test_resume_refuses_a_replaced_model_zip_before_unpickling_it(finished, tmp_path):
    from stable_baselines3 import PPO

    from policies.training.loop import train

    run = _copy(finished, tmp_path)
    model_zip = run / "checkpoints" / "last" / "model.zip"
    marker = tmp_path / "code_ran"
    _tamper(model_zip, marker)
    # The threat is real: loading the tampered zip runs the payload.
    with contextlib.suppress(Exception):
        PPO.load(model_zip, device="cpu")
    assert marker.exists()
    marker.unlink()
    before = snapshot(run)
    with pytest.raises(CheckpointError, match=r"model.zip: sha256 differs from the one recorded in state"):
        train(config(tmp_path, f"resume={run}", "train.total_timesteps=60"))
    assert not marker.exists(), "the tampered checkpoint was unpickled"
    assert snapshot(run) == before


def _damaged_state_refuses_resume(finished, tmp_path, damage, match) -> None:
    """Rewrite the copied run's ``state.json`` with ``damage``: resuming fails with ``match(state)``
    and leaves every file of the run as it was."""
    from policies.training.loop import train

    run = _copy(finished, tmp_path)
    state = run / "checkpoints" / "last" / "state.json"
    state.write_bytes(damage(state.read_bytes()))
    before = snapshot(run)
    with pytest.raises(CheckpointError, match=match(state)):
        train(config(tmp_path, f"resume={run}", "train.total_timesteps=60"))
    assert snapshot(run) == before


@needs_locomo
@pytest.mark.parametrize(
    "damage", [lambda b: b[: len(b) // 2], lambda b: b"\xff\xfe" + b], ids=["truncated", "not-utf8"]
)
def test_damaged_state_json_is_named_with_the_fix(finished, tmp_path, damage):
    _damaged_state_refuses_resume(
        finished, tmp_path, damage, lambda state: rf"{state}.*is damaged.*delete {state.parent}"
    )


@needs_locomo
def test_a_state_version_that_is_not_a_number_is_named(finished, tmp_path):
    """Issue 49, item 9: ``state.json`` with ``version: "x"`` gave a raw ValueError."""
    _damaged_state_refuses_resume(
        finished,
        tmp_path,
        lambda raw: json.dumps({**json.loads(raw), "version": "x"}).encode(),
        lambda state: rf"{state}: unsupported state version 'x'",
    )


@needs_locomo
def test_a_full_disk_while_saving_names_the_checkpoint_that_survived(tmp_path, monkeypatch):
    """Issue 49, item 7: ENOSPC during a save ended in a raw OSError naming neither file nor checkpoint."""
    import errno

    from stable_baselines3 import PPO

    from policies.training.loop import train

    real_save = PPO.save
    calls = {"n": 0}

    def save(self, path, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= 2:  # the first checkpoint is written, the second finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_save(self, path, *args, **kwargs)

    monkeypatch.setattr(PPO, "save", save)
    run = tmp_path / "runs" / RUN_NAME
    with pytest.raises(CheckpointError) as err:
        train(config(tmp_path, "train.total_timesteps=60"))
    message = str(err.value)
    assert "No space left on device" in message and "model.zip" in message
    assert f"the previous checkpoint at step 20 is intact at {run}/checkpoints/last" in message
    assert json.loads((run / "checkpoints" / "last" / "state.json").read_text())["num_timesteps"] == 20
