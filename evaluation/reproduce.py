"""Check that a frontier run reproduces a committed one, cell by cell.

A warm replay from a call pack should give the committed tables *exactly*: the same answers give the
same F1, the same token counts give the same cost, and the bootstrap is seeded. Only wall time
(``latency_s*``) legitimately changes: replayed LLM calls keep their recorded latency, but the
steps around them (retrieval, the local MID models) are timed anew. On another CPU class the bootstrap's
intervals can also change in their last digits: its replicates are matrix products, and numpy's BLAS picks
kernels per CPU that sum in another order (a LoCoMo table committed on an Intel Sapphire Rapids machine
replayed on an AMD EPYC with 120 of 1,980 cells off by ~1e-15 relative, every point estimate exact). Such
cells count as reproduced and are reported apart (:data:`ROUNDING_REL_TOL`); anything further is a
difference. This module
compares the two tables so the claim "reproduces the committed numbers" is checked by the program,
not by eye (``evaluate.py frontier ... --expect results/frontier/<run>``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The frontier's output tables, with the columns naming a row.
TABLES: dict[str, tuple[str, ...]] = {
    "frontier.csv": ("system",),
    "router_metrics.csv": ("cost_axis", "family"),
}

#: Rows of one table by key (see :func:`read_table`).
Rows = dict[str, dict[str, str]]

#: Relative tolerance within which two numbers are the same result summed in another order. Float64 rounding
#: differences are ~1e-15 relative; one answer changed among 1,000 questions moves a mean by ~1e-3.
ROUNDING_REL_TOL = 1e-9

#: Columns that measure the replay itself rather than its result.
VOLATILE_PREFIXES: tuple[str, ...] = ("latency_s",)


@dataclass
class TableDiff:
    """How one replayed table differs from the expected one.

    Attributes:
        table: File name of the table.
        rows: Rows present in both tables.
        cells: Cells compared (volatile columns excluded).
        mismatches: ``(row key, column, expected, actual)`` for every differing cell.
        rounding: The same for cells equal only within :data:`ROUNDING_REL_TOL` (reproduced).
        missing: Row keys the expected table has and the replay lacks.
        extra: Row keys only the replay has (reported, not a failure).
        skipped: Volatile columns left out of the comparison.
    """

    table: str
    rows: int = 0
    cells: int = 0
    mismatches: list[tuple[str, str, str, str]] = field(default_factory=list)
    rounding: list[tuple[str, str, str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every expected row is present with every compared cell identical (up to rounding)."""
        return not self.mismatches and not self.missing


def read_table(path: Path, key: Sequence[str]) -> Rows:
    """Rows of a CSV keyed by the ``key`` columns joined with ``' | '``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: A key column is absent or two rows share a key.
    """
    if not path.is_file():
        raise FileNotFoundError(f"table {path} does not exist")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        absent = [k for k in key if k not in (reader.fieldnames or [])]
        if absent:
            raise ValueError(f"{path}: no column {absent[0]!r} (columns: {reader.fieldnames})")
        rows: Rows = {}
        for row in reader:
            name = " | ".join(row[k] for k in key)
            if name in rows:
                raise ValueError(f"{path}: two rows named {name!r}")
            rows[name] = row
    return rows


def _same(expected: str, actual: str) -> bool:
    # Equal as written, or the same float spelled differently ("1.0" vs "1", "nan" vs "NaN").
    if expected == actual:
        return True
    try:
        a, b = float(expected), float(actual)
    except ValueError:
        return False
    return a == b or (math.isnan(a) and math.isnan(b))


def _rounding(expected: str, actual: str) -> bool:
    """Two numbers that differ only as sums in another order do (:data:`ROUNDING_REL_TOL`)."""
    try:
        a, b = float(expected), float(actual)
    except ValueError:
        return False
    finite = math.isfinite(a) and math.isfinite(b)
    return finite and math.isclose(a, b, rel_tol=ROUNDING_REL_TOL, abs_tol=1e-12)


def compare_tables(
    expected: Mapping[str, Mapping[str, str]], actual: Mapping[str, Mapping[str, str]], table: str
) -> TableDiff:
    """Compare two keyed tables cell by cell, ignoring :data:`VOLATILE_PREFIXES` columns."""
    diff = TableDiff(table)
    diff.missing = [k for k in expected if k not in actual]
    diff.extra = [k for k in actual if k not in expected]
    skipped: set[str] = set()
    for name, row in expected.items():
        if name not in actual:
            continue
        diff.rows += 1
        other = actual[name]
        for col, want in row.items():
            if col.startswith(VOLATILE_PREFIXES):
                skipped.add(col)
                continue
            got = other.get(col)
            diff.cells += 1
            if got is None:
                diff.mismatches.append((name, col, want, "<no column>"))
            elif not _same(want, got):
                (diff.rounding if _rounding(want, got) else diff.mismatches).append((name, col, want, got))
    diff.skipped = sorted(skipped)
    return diff


def load_expected(expected: str | Path) -> dict[str, Rows]:
    """The committed tables of a frontier output dir (``expected`` may name ``frontier.csv`` itself).

    Read before the run writes anything, so ``--expect`` may name the ``--out`` dir itself. A table
    the dir lacks is not compared (older runs have no ``router_metrics.csv``); ``frontier.csv``
    must exist.
    """
    exp = Path(expected)
    exp_dir = exp.parent if exp.is_file() else exp
    return {
        table: read_table(exp_dir / table, key)
        for table, key in TABLES.items()
        if table == "frontier.csv" or (exp_dir / table).is_file()
    }


def compare_run(expected: Mapping[str, Rows], actual: str | Path) -> list[TableDiff]:
    """Compare :func:`load_expected` tables with the same tables in the output dir ``actual``."""
    act = Path(actual)
    return [
        compare_tables(rows, read_table(act / name, TABLES[name]), name) for name, rows in expected.items()
    ]


def format_diffs(diffs: Sequence[TableDiff], expected: str | Path, max_lines: int = 20) -> list[str]:
    """Human-readable verdict lines, one block per table."""
    lines = []
    for d in diffs:
        verdict = "reproduced" if d.ok else "DIFFERS from"
        lines.append(
            f"{d.table}: {verdict} {expected} ({d.rows} rows, {d.cells} cells compared, "
            f"{len(d.mismatches)} differ; not compared: {', '.join(d.skipped) or 'none'})"
        )
        if d.rounding:
            lines.append(
                f"  {len(d.rounding)} cells equal only within float rounding (relative {ROUNDING_REL_TOL:g}; "
                "the bootstrap's matrix products sum in another order on another CPU's BLAS kernels), "
                f"e.g. {d.rounding[0][0]} / {d.rounding[0][1]}: {d.rounding[0][2]} vs {d.rounding[0][3]}"
            )
        lines += [f"  missing row: {k}" for k in d.missing]
        lines += [f"  extra row (not in the expected table): {k}" for k in d.extra]
        for name, col, want, got in d.mismatches[:max_lines]:
            lines.append(f"  {name} / {col}: expected {want!r}, got {got!r}")
        if len(d.mismatches) > max_lines:
            lines.append(f"  ... and {len(d.mismatches) - max_lines} more differing cells")
    return lines
