#!/usr/bin/env python
"""Compress the committed per-question records so the repository stays within its size budget.

Every ``results/**/records/**/*.jsonl`` (the record files of ``evaluate.py frontier`` and ``headroom``)
becomes ``*.jsonl.gz``: gzip level 9 with no timestamp, so the same records always give the same bytes. The
readers (``evaluation.frontier_runner.RecordStore``, ``evaluate.py routability``, ``evaluate.py export``,
``scripts/paired_diff.py``) read either form, and a run that extends a compressed file keeps it compressed.

    python scripts/compact_results.py            # compress, print the sizes
    python scripts/compact_results.py --check    # exit 1 if an uncompressed record file is left
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def record_files(root: Path) -> list[Path]:
    """The uncompressed record files under ``root``'s ``records`` directories."""
    return sorted(p for p in root.rglob("*.jsonl") if "records" in p.relative_to(root).parts)


def compress(path: Path) -> tuple[int, int]:
    """Write ``path.gz`` (deterministically) and remove ``path``; returns (bytes before, bytes after)."""
    raw = path.read_bytes()
    data = gzip.compress(raw, compresslevel=9, mtime=0)
    out = path.with_name(path.name + ".gz")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    path.unlink()
    return len(raw), len(data)


def main(argv: list[str] | None = None) -> int:
    """Compress (or with ``--check`` only list) the uncompressed record files under ``results/``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT / "results"))
    parser.add_argument("--check", action="store_true", help="list uncompressed record files; exit 1 if any")
    args = parser.parse_args(argv)
    files = record_files(Path(args.root))
    if args.check:
        for p in files:
            print(p)
        return 1 if files else 0
    before = after = 0
    for p in files:
        b, a = compress(p)
        before, after = before + b, after + a
    print(f"compressed {len(files)} record files: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
