"""One process per run directory, and no run silently replaced by another."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common.atomic_dir import recover_dir, recoverable_copy
from common.redact import redact_argv

LOCK_FILE = ".lock"
#: Written by the Ray sweep (``sweep_ray.run_trial``) just before ``train()``: not a run's output.
TRIAL_PID_FILE = "trial.pid"


class RunDirError(RuntimeError):
    """A run directory is in use by another process or already holds a run; the message says what to do."""


def check_writable_dir(path: str | os.PathLike[str], key: str) -> None:
    """Make sure ``path`` is, or can be made, a directory this process writes into.

    Hydra creates the run directory before ``train()`` runs any check, so a runs directory on a
    read-only disk, under a file, or nowhere used to end in Hydra's traceback. This probes the nearest
    directory of ``path`` that exists (``path`` itself, or the ancestor the missing part would be created
    in) by making and removing a probe named for this process and thread. Nothing shared is created or
    removed: an earlier probe that created the missing directories and removed them again raced with a
    second launch probing inside them ("No such file or directory" for a path anyone could create).

    Args:
        path: The directory (``runs_dir``, or the parent of ``run_dir``).
        key: The config key that named it, for the message.

    Raises:
        RunDirError: It cannot be created or written (the message names the key, the path and the
            OS error).
    """
    target = Path(path).expanduser().absolute()
    existing = next(p for p in (target, *target.parents) if p.exists())  # "/" always exists
    probe = existing / f".write-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        probe.mkdir()  # fails under a file (ENOTDIR), read-only (EROFS), not ours (EACCES), in /proc
        probe.rmdir()
    except OSError as exc:
        raise RunDirError(_unwritable(key, path, exc.strerror or str(exc))) from None


def _unwritable(key: str, path: str | os.PathLike[str], reason: str) -> str:
    return (
        f"{key}={path}: cannot write there ({reason}); choose a directory this user can "
        "create and write, e.g. runs_dir=$HOME/runs"
    )


def _holder(lock_path: Path) -> str:
    try:
        info = json.loads(lock_path.read_text(encoding="utf-8"))
        return (
            f"pid {info['pid']} on {info['host']} since {info['started']} "
            f"(command: {' '.join(info.get('argv') or [])})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet recorded itself"


def existing_entries(run_dir: Path) -> list[str]:
    """What a run directory holds besides its lock and trial files (empty: a new run may start there)."""
    if not run_dir.is_dir():
        return []
    return sorted(p.name for p in run_dir.iterdir() if p.name not in (LOCK_FILE, TRIAL_PID_FILE))


def _inside(path: Path | None, run_dir: Path) -> bool:
    if path is None:
        return False
    try:
        Path(path).resolve().relative_to(run_dir.resolve())
    except ValueError:
        return False
    return True


def check_run_dir(
    run_dir: Path, resume_ckpt: Path | None, overwrite: bool, *, probe_lock: bool = True
) -> None:
    """Refuse a launch that would overwrite an existing run or share a directory with a live one.

    Read-only: nothing is created or changed.

    Raises:
        RunDirError: The directory is locked by another process, already holds a run and the
            launch neither resumes it nor sets ``overwrite=true``, or asks for both.
    """
    lock_path = run_dir / LOCK_FILE
    if probe_lock and lock_path.is_file():
        with open(lock_path, "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _busy(run_dir) from None
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    resuming_here = _inside(resume_ckpt, run_dir)
    if overwrite and resuming_here:
        raise RunDirError(
            f"overwrite=true would delete the checkpoint resume={resume_ckpt} resumes from; choose one"
        )
    entries = existing_entries(run_dir)
    if entries and not overwrite and not resuming_here:
        last = run_dir / "checkpoints" / "last"
        resumable = (last / "state.json").is_file() or recoverable_copy(last) is not None
        how = (
            f"Continue it with resume={run_dir}"
            if resumable
            else "It has no checkpoint to resume (it stopped before its first save)"
        )
        raise RunDirError(
            f"{run_dir} already holds a run ({', '.join(entries[:6])}); a new run there would overwrite "
            f"it. {how}, write elsewhere (run_dir=..., another seed or λ), or pass overwrite=true to "
            "replace it"
        )


def _busy(run_dir: Path) -> RunDirError:
    return RunDirError(
        f"{run_dir} is in use by another training process: {_holder(run_dir / LOCK_FILE)}. "
        "Wait for it to finish (or stop it), or write this run elsewhere (run_dir=...)"
    )


class RunDirLock:
    """An exclusive, non-blocking lock on ``{run_dir}/.lock`` (context manager).

    Args:
        run_dir: The run directory (created if missing).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunDirLock:
        """Take the lock and record this process as its holder.

        Raises:
            RunDirError: Another process holds it (the message names that process).
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _busy(self.run_dir) from None
        info: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "argv": redact_argv(sys.argv),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (the file stays: deleting it would race with a process opening it)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim_run_dir(run_dir: Path, resume_ckpt: Path | None, overwrite: bool) -> tuple[RunDirLock, list[str]]:
    """Lock ``run_dir`` for this process and make it ready to write.

    Args:
        run_dir: The run directory.
        resume_ckpt: The checkpoint being resumed (None for a fresh run).
        overwrite: Replace an existing run (its files are deleted).

    Returns:
        The held lock (release it when the run ends) and one line per repair made.

    Raises:
        RunDirError: See :func:`check_run_dir` and :meth:`RunDirLock.acquire`.
    """
    lock = RunDirLock(run_dir).acquire()
    try:
        # Again, under the lock: another run may have finished here since the first check.
        check_run_dir(run_dir, resume_ckpt, overwrite, probe_lock=False)
        actions: list[str] = []
        entries = existing_entries(run_dir)
        if overwrite and entries:
            for name in entries:
                p = run_dir / name
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            listed = ", ".join(entries[:6])
            actions.append(f"overwrite=true: deleted the previous run in {run_dir} ({listed})")
        # This process holds the lock, so every leftover in here is from a dead process.
        actions += recover_dir(run_dir / "checkpoints" / "last", all_stale=True)
        actions += recover_dir(run_dir / "router", all_stale=True)
        for p in run_dir.glob(".*.tmp"):
            if p.is_file():
                p.unlink()
                actions.append(f"removed stale temporary {p}")
    except BaseException:
        lock.release()
        raise
    return lock, actions
