"""Fetch the official benchmark files on purpose: ``python -m benchmarks.fetch [BENCHMARK ...]``.

Each file is downloaded from its official (revision-pinned) source, checked against its pinned sha256 and
moved into the data directory; files already there are verified, not downloaded again. Files that are
derived (splits, re-compressed copies) cannot be fetched: the command says where they come from. Commands
that need a missing official file fetch it themselves (:func:`common.datadir.data_file`); this command is
for doing it ahead of time, on a machine with network, or for checking a data directory::

    python -m benchmarks.fetch locomo               # what `make train` needs
    python -m benchmarks.fetch all --optional       # every file that has an official URL
    python -m benchmarks.fetch --list               # the catalogue: size, licence, source
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from common.datadir import DataFileError, resolve_data_dir
from common.datafiles import CATALOGUE, DataFile, files_of
from common.fetch import fetch, manual_hint, source_url
from common.provenance import sha256_file


def _size(entry: DataFile) -> str:
    if entry.size is None:
        return "?"
    return f"{entry.size / 1e6:.1f} MB" if entry.size >= 1e6 else f"{entry.size / 1e3:.0f} kB"


def catalogue_markdown() -> str:
    """The catalogue as a Markdown table (the docs quote it; a test keeps them equal)."""
    rows = [
        "| file | benchmark | size | licence | source | fetched by `benchmarks.fetch` |",
        "|---|---|---|---|---|---|",
    ]
    for f in CATALOGUE.values():
        how = "no: not published as one file" if f.url is None else "yes, on demand"
        if f.url and not f.required:
            how = "yes, with `--optional`"
        rows.append(f"| `{f.name}` | {f.benchmark} | {_size(f)} | {f.licence} | {f.source} | {how} |")
    return "\n".join(rows)


def ensure(entry: DataFile, root: Path, *, force: bool = False) -> tuple[str, str]:
    """Make ``entry`` present and verified in ``root``.

    Returns:
        ``(status, detail)``: status is ``present``, ``fetched``, ``mismatch`` (a file there with another
        checksum, kept unless ``force``), ``manual`` (no URL) or ``failed``.
    """
    path = root / entry.name
    if path.is_file():
        got = sha256_file(path)
        if got == entry.sha256:
            return "present", "sha256 verified"
        if not force:
            return "mismatch", f"sha256 {got} is not the pinned {entry.sha256} (--force replaces it)"
    if source_url(entry) is None:
        return "manual", manual_hint(entry, path)
    try:
        fetch(entry, root)
    except DataFileError as exc:
        return "failed", str(exc)
    return "fetched", "sha256 verified"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; exit 0 when every requested file is present and verified."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmarks", nargs="*", default=["all"],
                        help="locomo, longmemeval, hotpotqa, bgl or all (default: all)")
    parser.add_argument(
        "--data-dir", help="data directory (default: $BUDGET_ROUTER_DATA, ../shared/data, ./data)",
    )
    parser.add_argument("--optional", action="store_true",
                        help="also files no default loader reads (LongMemEval_S, the HotpotQA dev set, ...)")
    parser.add_argument("--force", action="store_true", help="replace a file whose checksum differs")
    parser.add_argument("--list", action="store_true", help="print the catalogue as Markdown and exit")
    args = parser.parse_args(argv)
    if args.list:
        print(catalogue_markdown())
        return 0
    try:
        entries = {e.name: e for b in args.benchmarks for e in files_of(b, required_only=not args.optional)}
    except ValueError as exc:
        parser.error(str(exc))
    root = resolve_data_dir(args.data_dir, create=True)
    bad = 0
    for entry in entries.values():
        status, detail = ensure(entry, root, force=args.force)
        bad += status in {"mismatch", "failed"} or (status == "manual" and entry.required)
        print(f"{status:8s} {entry.name}: {detail}", flush=True)
    print(f"data directory: {root}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
