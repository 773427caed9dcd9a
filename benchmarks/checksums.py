"""Verify data files against the ``SHA256SUMS`` file of the data directory."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from pathlib import Path

from common.provenance import sha256_file

log = logging.getLogger(__name__)

SUMS_FILE = "SHA256SUMS"


class ChecksumWarning(UserWarning):
    """A data file's sha256 differs from the one pinned in ``SHA256SUMS``."""


def read_sums(path: Path) -> dict[str, str]:
    """Parse a ``sha256sum``-style file into ``{file name: hex digest}``.

    Lines that are empty or start with ``#`` are ignored; a leading ``*`` (binary mode) on the
    name is stripped.
    """
    sums: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) == 2:
            sums[parts[1].strip().lstrip("*")] = parts[0].lower()
    return sums


def verify_checksums(paths: Iterable[Path]) -> dict[str, str]:
    """Hash each file and compare it with its directory's ``SHA256SUMS``, if present.

    Args:
        paths: Data files to check.

    Returns:
        ``{file name: sha256}`` for every path (recorded with results for provenance).

    Warns:
        ChecksumWarning: For each file whose digest differs from the pinned one.
    """
    out: dict[str, str] = {}
    for path in paths:
        digest = sha256_file(path)
        out[path.name] = digest
        sums_path = path.parent / SUMS_FILE
        if not sums_path.is_file():
            log.debug("no %s next to %s; recorded sha256 %s", SUMS_FILE, path, digest)
            continue
        expected = read_sums(sums_path).get(path.name)
        if expected is not None and expected != digest:
            warnings.warn(
                f"{path}: sha256 {digest} differs from {expected} pinned in {sums_path}; "
                "results will not be comparable with runs on the official file",
                ChecksumWarning,
                stacklevel=2,
            )
    return out
