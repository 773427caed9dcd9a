"""Resolve the benchmark data directory, fetch a missing official file, and give clear errors."""

from __future__ import annotations

import os
from pathlib import Path

from common.datafiles import CATALOGUE

ENV_VAR = "BUDGET_ROUTER_DATA"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class DataFileError(FileNotFoundError, ValueError):
    """A data file is missing or malformed; the message names the file, record and field."""


def _candidates(explicit: str | os.PathLike[str] | None) -> list[tuple[str, Path]]:
    if explicit:
        return [("config/CLI", Path(explicit).expanduser())]
    if os.environ.get(ENV_VAR):
        return [(f"${ENV_VAR}", Path(os.environ[ENV_VAR]).expanduser())]
    return [("default", PROJECT_ROOT.parent / "shared" / "data"), ("default", PROJECT_ROOT / "data")]


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None, *, create: bool = False) -> Path:
    """Return the data directory to use.

    Args:
        explicit: A directory from config or the command line; wins over ``$BUDGET_ROUTER_DATA``, which
            wins over the defaults (``../shared/data``, then ``./data``).
        create: When no candidate exists, create the last one (the one a download fills) instead of failing.

    Returns:
        An existing directory.

    Raises:
        DataFileError: If no candidate directory exists and ``create`` is false.
    """
    candidates = _candidates(explicit)
    for _, cand in candidates:
        if cand.is_dir():
            return cand.resolve()
    if create:
        target = candidates[-1][1]
        target.mkdir(parents=True, exist_ok=True)
        return target.resolve()
    tried = ", ".join(f"{src}: {p}" for src, p in candidates)
    raise DataFileError(
        f"benchmark data directory not found (tried {tried}). Set {ENV_VAR}=/path/to/data or pass "
        "data_dir=... ; the directory must hold the official files (e.g. locomo10.json), which "
        "`python -m benchmarks.fetch all` downloads."
    )


def data_file(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the path of a named data file, downloading a missing official one (see :mod:`common.fetch`).

    Args:
        name: File name inside the data directory, e.g. ``"locomo10.json"``.
        data_dir: Optional explicit data directory.

    Returns:
        Path to the existing file.

    Raises:
        DataFileError: If the file does not exist and cannot be fetched (downloads off, no URL, offline,
            wrong checksum); the message names its source, checksum and destination.
    """
    from common.fetch import fetch, fetchable, manual_hint  # fetch imports this module

    entry = CATALOGUE.get(name)
    can_fetch = fetchable(name)
    root = resolve_data_dir(data_dir, create=can_fetch)
    path = root / name
    if path.is_file():
        return path
    if entry is None:
        raise DataFileError(f"missing data file {path}: see the data README for {name!r}")
    if can_fetch:
        return fetch(entry, root)
    why = "downloads are off (BUDGET_ROUTER_DOWNLOAD=0)" if entry.url else entry.how
    raise DataFileError(f"missing data file {path} ({why}): {manual_hint(entry, path)}")
