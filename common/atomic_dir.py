"""Crash-safe replacement of a whole directory (checkpoints, exported routers)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from common.atomic import pid_alive


def _siblings(dest: Path) -> list[tuple[Path, str, int | None]]:
    """``(path, kind, pid)`` of every leftover of a swap of ``dest`` (kind: tmp, new, old)."""
    pattern = re.compile(rf"^\.{re.escape(dest.name)}\.(?:(tmp|new|old)-(\d+)(?:-.*)?|.*\.(tmp))$")
    out: list[tuple[Path, str, int | None]] = []
    if not dest.parent.is_dir():
        return out
    for p in dest.parent.iterdir():
        m = pattern.match(p.name)
        if m and p.is_dir():
            kind = m.group(1) or m.group(3)
            out.append((p, kind, int(m.group(2)) if m.group(2) else None))
    return out


def recoverable_copy(dest: Path) -> Path | None:
    """The complete copy :func:`recover_dir` would restore when ``dest`` is missing (None if none)."""
    found = [(p, kind) for p, kind, _ in _siblings(dest) if kind in ("new", "old")]
    # Prefer the newer, complete 'new' copy; among equals the most recently written one.
    found.sort(key=lambda pk: (pk[1] == "new", pk[0].stat().st_mtime_ns), reverse=True)
    return found[0][0] if found else None


def recover_dir(dest: Path, *, all_stale: bool = False) -> list[str]:
    """Repair what a crash during :func:`write_dir_atomically` left behind.

    If ``dest`` is missing and a complete copy exists, that copy is renamed back to ``dest``.
    Leftovers of swaps whose process is gone are deleted (all of them with ``all_stale``, for a
    caller that holds the lock of the directory they live in).

    Args:
        dest: The directory that is replaced atomically (e.g. ``run/checkpoints/last``).
        all_stale: Treat every leftover as stale, whichever process wrote it.

    Returns:
        One line per action taken, for the caller to print.
    """
    actions: list[str] = []
    if not dest.exists():
        copy = recoverable_copy(dest)
        if copy is not None:
            os.replace(copy, dest)
            actions.append(f"restored {dest} from the complete copy {copy.name} (a save was interrupted)")
    for path, _, pid in _siblings(dest):
        if all_stale or (pid is not None and not pid_alive(pid)):
            shutil.rmtree(path, ignore_errors=True)
            actions.append(f"removed stale temporary {path}")
    return actions


def write_dir_atomically(dest: Path, fill: Callable[[Path], None]) -> None:
    """Fill a temporary sibling directory with ``fill(tmp)`` and swap it into ``dest``.

    If anything fails before the swap, ``dest`` is left untouched; a crash during the swap
    leaves a complete copy that :func:`recover_dir` restores. Leftovers of earlier crashed
    swaps (dead writers) are deleted first.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    recover_dir(dest)
    pid = os.getpid()
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-{pid}-", dir=dest.parent))
    new = dest.with_name(f".{dest.name}.new-{pid}")
    old: Path | None = None
    try:
        fill(tmp)
        if new.exists():
            shutil.rmtree(new)
        os.replace(tmp, new)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{pid}")
            if old.exists():
                shutil.rmtree(old)
            os.replace(dest, old)
        os.replace(new, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not dest.exists():
            os.replace(old, dest)
        with contextlib.suppress(OSError):
            shutil.rmtree(new)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def free_space(path: Path) -> str:
    """``"N MiB free there"`` for the disk holding ``path`` (what a failed write's message should say)."""
    try:
        return f"{shutil.disk_usage(path).free / 2**20:,.0f} MiB free there"
    except OSError:
        return "free space unknown"
