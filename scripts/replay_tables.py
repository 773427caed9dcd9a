#!/usr/bin/env python
"""Replay every committed frontier table from the committed packs alone, and say which cells differ.

The reproducibility check of the results tree: a fresh call cache gets only the packs, then each table's
recorded ``argv`` (its ``metadata.json``) runs again into an empty ``--out`` with ``--expect`` on the
committed dir and ``--replay`` (stand-in engines: a call no pack holds stops that table, naming the call,
instead of being computed). The local outputs the packs leave out (the rules, the extractive summaries) are
recomputed, so a table also checks that they still give what they gave when it was made. Run it after any
change to the packs or to what the pipeline computes, and on each CPU class.

    python scripts/replay_tables.py                          # every table under results/frontier, outcomes
    python scripts/replay_tables.py --tables 'results/frontier/hotpotqa-*' --packs /tmp/new/*.pack.gz

By default each table replays from its own set of packs (:data:`DEFAULT_PACK_SETS`), each set in a fresh
cache of its own: the frontier tables from ``results/packs/*.pack.gz``, the powered study's outcome tables
from ``results/packs/powered/``. ``--packs`` puts every table on the packs it names.

Exit code 0 only if every table replayed with 0 cells differing; one line per table and a JSON report
(``--report``) give its wall time and what the run said about lookups and cells.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: ``evaluate.py frontier`` options that name where a table goes or how it is shown, not what it holds:
#: the replay sets its own.
_OWN_OPTIONS = {"--out": 1, "--expect": 1, "--no-progress": 0, "--replay": 0}


#: (table glob, pack glob), relative to the repository; a table replays from the first set whose glob matches
#: it. The sets stay apart, each in its own cache, because a local output computed in floating point (TextRank
#: ranks tied words by LAPACK's eigenvector, the extractive summary by MiniLM's cosines) can come out
#: differently on the CPU another set was made on, and a cache holds one value per key: the powered study's
#: tables, made on AMD, do not come back with the TextRank keyphrases of the earlier tables, made on Intel,
#: for the same evidence.
DEFAULT_PACK_SETS: tuple[tuple[str, str], ...] = (
    ("results/outcomes/*", "results/packs/powered/*.pack.gz"),
    ("results/frontier/*", "results/packs/*.pack.gz"),
)


@dataclass
class Outcome:
    """One table's replay."""

    table: str
    ok: bool
    wall_s: float
    summary: str  # the lines of the run that say what was replayed and compared


def replay_argv(metadata: dict, table: Path, out: Path, cache: Path) -> list[str]:
    """The table's recorded ``evaluate.py`` arguments, pointed at an empty ``out`` and the replay cache.

    Raises:
        ValueError: The metadata records no ``evaluate.py frontier`` argv.
    """
    argv = [str(a) for a in metadata.get("argv") or []]
    if len(argv) < 2 or Path(argv[0]).name != "evaluate.py" or argv[1] != "frontier":
        raise ValueError(
            f"{table / 'metadata.json'}: argv is not an `evaluate.py frontier` command: {argv[:2]}"
        )
    kept: list[str] = []
    rest = iter(argv[2:])
    for arg in rest:
        name = arg.split("=", 1)[0]
        if name in _OWN_OPTIONS:
            if "=" not in arg:
                for _ in range(_OWN_OPTIONS[name]):
                    next(rest, None)
            continue
        kept.append(arg)
    return [
        "frontier",
        *kept,
        "--out",
        str(out),
        "--expect",
        str(table),
        "--replay",
        "--no-progress",
        "--set",
        f"cache.path={cache}",
    ]


def _summary(text: str) -> str:
    """The lines a reader needs: the lookups replayed and computed, the cells compared, any error."""
    heads = ("call cache ", "frontier.csv:", "router_metrics.csv:", "error:", "Error")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(heads)]
    if not lines:  # an unexpected failure: its last line
        lines = text.strip().splitlines()[-1:]
    return " | ".join(lines[-6:])


def pack_sets(tables: list[Path], packs: list[Path] | None) -> list[tuple[list[Path], list[Path]]]:
    """``(packs, tables)`` groups: every table on ``packs`` if given, else on its default set.

    Raises:
        SystemExit: A table no default set covers, or a set without packs, naming it.
    """
    if packs is not None:
        return [(packs, tables)]
    groups: dict[str, list[Path]] = {}
    for table in tables:
        rel = table.relative_to(ROOT).as_posix() if table.is_relative_to(ROOT) else table.as_posix()
        pattern = next((pk for tb, pk in DEFAULT_PACK_SETS if fnmatch.fnmatch(rel, tb)), None)
        if pattern is None:
            raise SystemExit(f"error: no default pack set covers {rel}; name its packs with --packs")
        groups.setdefault(pattern, []).append(table)
    out = []
    for pattern, members in groups.items():
        found = sorted(Path(p) for p in glob.glob(str(ROOT / pattern)))
        if not found:
            raise SystemExit(f"error: no pack matches {pattern} (for {len(members)} table(s))")
        out.append((found, members))
    return out


def _replay(table: Path, work: Path, cache_path: Path) -> Outcome:
    """Run one table's recorded command against ``cache_path`` and print its line."""
    name = table.relative_to(ROOT) if table.is_relative_to(ROOT) else table
    cmd = [sys.executable, str(ROOT / "evaluate.py")]
    meta = json.loads((table / "metadata.json").read_text())
    cmd += replay_argv(meta, table, work / table.name, cache_path)
    t1 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    out = Outcome(str(name), proc.returncode == 0, time.monotonic() - t1, _summary(proc.stdout + proc.stderr))
    print(f"{'OK  ' if out.ok else 'FAIL'} {out.table} ({out.wall_s:.0f} s): {out.summary}", flush=True)
    (work / f"{table.name}.log").write_text(proc.stdout + proc.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    """Import the packs into a fresh cache, replay each table; returns 0 only if all match."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tables",
        nargs="+",
        default=["results/frontier/*", "results/outcomes/*"],
        help="table dirs (globs; default: every frontier table and powered-study outcome table)",
    )
    parser.add_argument(
        "--packs",
        nargs="+",
        default=None,
        help="packs for every table (default: each table's set, DEFAULT_PACK_SETS)",
    )
    parser.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temporary one)")
    parser.add_argument("--report", type=Path, default=None, help="write the outcomes as JSON here")
    args = parser.parse_args(argv)

    from modules.cache import CallCache
    from modules.cache_pack import import_pack

    # A pattern is relative to the repository (as the docs name tables) unless absolute.
    found = {Path(p) for g in args.tables for p in glob.glob(str(ROOT / g))}
    tables = sorted(p for p in found if (p / "metadata.json").is_file())
    if not tables:
        raise SystemExit(f"error: no table dir with a metadata.json matches {args.tables}")
    groups = pack_sets(tables, [Path(p) for p in args.packs] if args.packs else None)
    work = args.work or Path(tempfile.mkdtemp(prefix="replay_tables-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    outcomes: list[Outcome] = []
    for n, (packs, members) in enumerate(groups):
        cache_path = work / (f"calls-{n}.sqlite" if len(groups) > 1 else "calls.sqlite")
        if cache_path.exists():
            raise SystemExit(
                f"error: {cache_path} exists; the replay needs a fresh cache (give an empty --work)"
            )
        t1 = time.monotonic()
        cache = CallCache(cache_path)
        try:
            reports = [import_pack(p, cache) for p in packs]
        finally:
            cache.close()
        conflicts = sum(len(r.conflicts) for r in reports)
        print(
            f"{len(packs)} pack(s), {sum(r.imported for r in reports):,} entries imported into {cache_path} "
            f"in {time.monotonic() - t1:.1f} s, for {len(members)} table(s)"
            + (f"; {conflicts:,} entries differ between packs (the first pack's kept)" if conflicts else ""),
            flush=True,
        )
        for table in members:
            outcomes.append(_replay(table, work, cache_path))
    failed = [o for o in outcomes if not o.ok]
    print(
        f"\n{len(outcomes) - len(failed)} of {len(outcomes)} tables replayed with 0 cells differing "
        f"in {(time.monotonic() - t0) / 60:.1f} min; logs in {work}"
    )
    if args.report:
        args.report.write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
