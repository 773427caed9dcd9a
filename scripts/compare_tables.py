#!/usr/bin/env python
"""Whether a table computed on one machine comes out the same on another: two record dirs, per question.

    python scripts/compare_tables.py results/outcomes/locomo-val/records/<fp>/val /tmp/rerun/records/<fp>/val
    python scripts/compare_tables.py A B --calls /tmp/rerun/cache.sqlite --packs 'results/packs/powered/*.gz'

Per run (record file) both dirs hold: the questions both have, how many got the same answer, each side's mean
of ``--metric`` and B minus A, paired over those questions with a bootstrap interval. With ``--calls`` and
``--packs``, the LLM calls that B's cache and A's packs both hold under one key (the same prompt, keyed with
the same numerics) are compared too: how many have the same text. That is how a second CPU class is checked
against the study's: a run computed there with a fresh cache, its calls keyed as the study's were.
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "scripts"))

from engine_bench_common import paired_ci  # noqa: E402

from evaluation.frontier_runner import RecordStore, record_files, record_stem  # noqa: E402


def _store(path: Path) -> RecordStore:
    """A record file's store (a committed ``.jsonl.gz`` is read in the place of its ``.jsonl``)."""
    return RecordStore(path.with_suffix("") if path.suffix == ".gz" else path)


def compare_runs(a_dir: Path, b_dir: Path, metric: str = "f1") -> list[dict[str, Any]]:
    """One row per run id in both dirs: common questions, same answers, means and the paired difference.

    Raises:
        SystemExit: A dir holds no record files, or the two share no run id (both named).
    """
    runs = {}
    for side, root in (("A", a_dir), ("B", b_dir)):
        files = {record_stem(p): p for p in record_files(root)}
        if not files:
            raise SystemExit(f"error: {side} {root}: no record files (*.jsonl, *.jsonl.gz)")
        runs[side] = files
    common = sorted(set(runs["A"]) & set(runs["B"]))
    if not common:
        raise SystemExit(f"error: {a_dir} and {b_dir} have no run id in common")
    rows = []
    for run in common:
        a, b = _store(runs["A"][run]), _store(runs["B"][run])
        qids = sorted(set(a.records) & set(b.records))
        if not qids:
            continue
        va = [float(a.records[q].get(metric) or 0.0) for q in qids]
        vb = [float(b.records[q].get(metric) or 0.0) for q in qids]
        same = sum(a.records[q].get("prediction") == b.records[q].get("prediction") for q in qids)
        diff, lo, hi = paired_ci([y - x for x, y in zip(va, vb, strict=True)])
        rows.append(
            {
                "run": run,
                "n": len(qids),
                "same_answer": same,
                "a": sum(va) / len(va),
                "b": sum(vb) / len(vb),
                "diff": diff,
                "lo": lo,
                "hi": hi,
            }
        )
    return rows


def compare_calls(cache: Path, packs: list[Path]) -> dict[str, int]:
    """LLM calls under one key in ``cache`` and in ``packs``: how many, and how many have the same text."""
    from modules.cache_pack import read_pack, read_sqlite_entries

    ours = {k: v for k, v in read_sqlite_entries(cache) if "model_id" in v}
    theirs: dict[str, Any] = {}
    for pack in packs:
        theirs.update((k, v) for k, v in read_pack(pack).entries if "model_id" in v)
    shared = sorted(set(ours) & set(theirs))
    same = sum(ours[k].get("text") == theirs[k].get("text") for k in shared)
    return {"calls": len(ours), "shared": len(shared), "same_text": same}


def format_rows(rows: list[dict[str, Any]], metric: str) -> str:
    """The per-run comparison as a text table."""
    head = f"{'run':<16} {'n':>4} {'same answer':>12} {metric + ' A':>8} {metric + ' B':>8}  B - A [95% CI]"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['run']:<16} {r['n']:>4} {r['same_answer']:>5} ({r['same_answer'] / r['n']:>4.0%})"
            f" {r['a']:>8.3f} {r['b']:>8.3f}  {r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"
        )
    n, same = sum(r["n"] for r in rows), sum(r["same_answer"] for r in rows)
    lines.append(f"all runs: {same} of {n} answers the same ({same / max(n, 1):.0%})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the comparison; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("a", type=Path, help="records dir A (…/records/<fingerprint>/<split>)")
    parser.add_argument("b", type=Path, help="records dir B, compared with A")
    parser.add_argument("--metric", default="f1", help="record field to compare (f1, em, module_cost…)")
    parser.add_argument("--calls", type=Path, default=None, help="B's SQLite call cache")
    parser.add_argument("--packs", default=None, help="A's call packs (a glob)")
    args = parser.parse_args(argv)
    print(format_rows(compare_runs(args.a, args.b, args.metric), args.metric))
    if args.calls is not None or args.packs is not None:
        if args.calls is None or not args.packs:
            raise SystemExit("error: --calls and --packs go together (B's cache, A's packs)")
        packs = [Path(p) for p in sorted(glob.glob(args.packs))]
        if not packs:
            raise SystemExit(f"error: --packs {args.packs}: no file matches")
        c = compare_calls(args.calls, packs)
        share = c["same_text"] / max(c["shared"], 1)
        print(
            f"LLM calls: {c['calls']:,} in B's cache, {c['shared']:,} of them under a key A's packs hold; "
            f"{c['same_text']:,} of those with the same text ({share:.0%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
