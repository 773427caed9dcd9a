"""``python evaluate.py export KIND INPUT... --out PATH``: results as a Hugging Face ``datasets`` Dataset.

Examples::

    python evaluate.py export records runs/frontier/custom-test --out exports/records        # Arrow dir
    python evaluate.py export records runs/locomo__implementation__lam0__s0 --out v.parquet --format parquet
    python evaluate.py export bank .cache/question_bank --out exports/banks
    python evaluate.py export frontier runs/frontier/custom-test/frontier.json --out exports/frontier
"""

from __future__ import annotations

import argparse
import json

from evaluation.export_dataset import FORMATS, KINDS, export


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the export command's options."""
    parser.add_argument("kind", choices=KINDS, help="records (per-question), bank (question banks), frontier")
    parser.add_argument("inputs", nargs="+", help="files or directories (searched recursively)")
    parser.add_argument("--out", required=True, help="output: a directory (arrow) or a .parquet file")
    parser.add_argument(
        "--format", default=None, choices=FORMATS, help="default: parquet if --out ends in .parquet"
    )


def run(args: argparse.Namespace) -> int:
    """Export and print a one-line summary; returns 0."""
    fmt = args.format or ("parquet" if str(args.out).endswith(".parquet") else "arrow")
    ds = export(args.kind, args.inputs, args.out, fmt)
    print(
        json.dumps({"wrote": str(args.out), "format": fmt, "rows": len(ds), "columns": len(ds.column_names)})
    )
    return 0
