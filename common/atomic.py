"""Atomic file writes: write to a temporary sibling, fsync, then ``os.replace``."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
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
    # The writer's pid in the name: a temporary left by a killed process is recognised as stale.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.{os.getpid()}-", suffix=".tmp", dir=dest.parent)
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


_TEMP_NAME = re.compile(r"^\..+\.(\d+)-[^.]+\.tmp$")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this host)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporaries of :func:`atomic_write_with` under ``directory`` whose writer is gone.

    A process killed between creating its temporary and the rename (``kill -9``, a lost machine)
    leaves ``.<name>.<pid>-<random>.tmp`` behind; a live writer's temporaries are kept.

    Returns:
        The files deleted.
    """
    removed: list[Path] = []
    root = Path(directory)
    if not root.is_dir():
        return removed
    for path in root.rglob(".*.tmp"):
        match = _TEMP_NAME.match(path.name)
        if match and path.is_file() and not pid_alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


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


def atomic_write_csv(
    path: str | os.PathLike[str],
    rows: Sequence[Mapping[str, Any]],
    empty_columns: Sequence[str] = (),
    *,
    lineterminator: str = "\r\n",
    blank_nan: bool = False,
) -> Path:
    """Atomically write ``rows`` as CSV, one column per key in first-seen order.

    Args:
        path: Destination file.
        rows: The rows (a missing key is an empty cell).
        empty_columns: The header written when there are no rows.
        lineterminator: Line ending (default the ``csv`` module's, CR LF).
        blank_nan: Write non-finite floats (NaN means "no value", e.g. no judge ran) as empty
            cells, which spreadsheets and pandas read as missing.
    """
    buf = io.StringIO()
    columns = list(dict.fromkeys(k for r in rows for k in r)) or list(empty_columns)
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator=lineterminator)
    writer.writeheader()
    for r in rows:
        blank = [k for k, v in r.items() if blank_nan and isinstance(v, float) and not math.isfinite(v)]
        writer.writerow({**r, **dict.fromkeys(blank, "")})
    return atomic_write_text(path, buf.getvalue())
