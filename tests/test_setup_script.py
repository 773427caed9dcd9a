"""scripts/setup.sh: its levels nest (core < dev < all models), so `make train`'s core set-up never redoes or
undoes a fuller one, and a fuller one always runs after a core one."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "setup.sh"


def _stamp_hash() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + SCRIPT.read_bytes()).hexdigest()[:16]


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # PYTHON=false: were the script to create a venv (i.e. to install anything), that step fails at once.
    env = {**os.environ, "VENV": str(venv), "PYTHON": "false"}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("stamp_level", "args", "installs"),
    [
        (2, ("--core",), False),  # everything installed covers the core
        (1, ("--core",), False),
        (1, (), False),
        (0, ("--core",), False),
        (0, (), True),  # after make train's core set-up, make test still installs the dev tools
        (1, ("--all-models",), True),
    ],
)
def test_a_setup_of_a_level_covers_every_lower_one(tmp_path, stamp_level, args, installs) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / f".setup-{_stamp_hash()}-{stamp_level}").touch()
    res = _run(venv, *args)
    assert (res.returncode != 0) is installs, res.stderr


def test_a_stamp_of_an_older_pyproject_does_not_count(tmp_path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".setup-0000000000000000-2").touch()
    assert _run(venv, "--core").returncode != 0


def test_an_unknown_option_is_named(tmp_path) -> None:
    res = _run(tmp_path / "venv", "--fast")
    assert res.returncode == 2 and "unknown option '--fast'" in res.stderr
