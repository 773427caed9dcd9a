#!/usr/bin/env python
"""Paired per-question differences between frontier record files, with bootstrap CIs.

    python scripts/paired_diff.py results/frontier/<dir>/records/<fingerprint>/test \\
        fixed-LLLLL router-<sha>-lam0 fixed-MMMMM             # each system minus the first
    python scripts/paired_diff.py <records dir> fixed-LLLLL,fixed-MMMMM fixed-HHHHH fixed-MMMMH \\
        --common --markdown                                  # minus each reference, as a markdown table

``evaluate.py frontier`` reports differences against one reference (``--reference``, all-HIGH by
default); this prints them against any others (all-LOW, say) from the committed records, without
re-running anything: per system, its mean with a bootstrap interval, the paired mean difference (both
resampled on the same questions) and how many questions got better / worse
(``evaluation.paired_table``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluation.bootstrap import DEFAULT_N_BOOT
from evaluation.paired_table import markdown, paired_table, text_lines


def main(argv: list[str] | None = None) -> int:
    """Print the paired differences; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "records_dir", type=Path, help="a frontier records dir (…/records/<fingerprint>/<split>)"
    )
    parser.add_argument(
        "reference", help="run id (file stem) every other system is compared with; a comma list for several"
    )
    parser.add_argument("systems", nargs="+", help="run ids to compare")
    parser.add_argument("--metric", default="f1", help="record field (f1, em, module_cost, ...)")
    parser.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates")
    parser.add_argument(
        "--common",
        action="store_true",
        help="compare on the questions every file covers (default: the files must cover the same ones)",
    )
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)
    references = [r.strip() for r in args.reference.split(",") if r.strip()]
    try:
        table = paired_table(
            args.records_dir, references, args.systems, args.metric, args.n_boot, common=args.common
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown(table) if args.markdown else "\n".join(text_lines(table)))
    left = {name: n for name, n in table.beyond.items() if n}
    if left:
        print(f"({len(table.qids)} questions every file covers; left out: {left})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
