"""Atomic file writes: write to a temporary sibling, fsync, then ``os.replace``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_with(path: str | os.PathLike[str], writer: Callable[[Path], object]) -> Path:
    """Let ``writer`` fill a temporary file next to ``path``, then move it into place.

    Useful for libraries that insist on writing to a path themselves (hnswlib,
    ``torch.save``): they write the temporary path and the rename stays atomic.

    Args:
        path: Final destination.
        writer: Callable receiving the temporary path to write (its return value is ignored).

    Returns:
        The final path.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer(tmp)
        # mkstemp creates 0600 files; give the result the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``data`` to ``path``.

    Args:
        path: Destination file.
        data: Bytes to write.

    Returns:
        The final path.
    """
    return atomic_write_with(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write UTF-8 ``text`` to ``path``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> Path:
    """Atomically write ``obj`` as JSON (keys sorted, so files diff cleanly)."""
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=True, default=str) + "\n")
