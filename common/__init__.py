"""Shared utilities: atomic file writes, data-directory resolution and run provenance."""

from common.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from common.datadir import DataFileError, data_file, resolve_data_dir
from common.provenance import data_checksums, git_commit, package_versions, run_metadata

__all__ = [
    "DataFileError",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "data_checksums",
    "data_file",
    "git_commit",
    "package_versions",
    "resolve_data_dir",
    "run_metadata",
]
