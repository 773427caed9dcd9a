"""Paired differences between the record files of one frontier run, with bootstrap intervals.

``evaluate.py frontier`` reports differences against one reference; this compares any record files (fixed
paths, routers) with one or more references on the same questions, from the committed records alone: each
system's mean with its interval, and per reference the paired mean difference (both resampled on the same
questions) and how many questions got better / worse. ``scripts/paired_diff.py`` prints it; the docs site
renders it into the results pages (``docs/hooks.py``), so a quoted table is always the committed records'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.bootstrap import (
    DEFAULT_ALPHA,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    bootstrap_mean,
    make_resampler,
    paired_difference,
)
from evaluation.frontier_runner import RecordStore, table_metadata_path

_FIXED_ID = re.compile(r"^fixed-([LMH]+)$")


@dataclass(frozen=True)
class PairedRow:
    """One system: its mean and, per reference, the paired difference and better / worse counts."""

    name: str
    estimate: Estimate
    diffs: dict[str, Estimate]
    better_worse: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class PairedTable:
    """Every named system on the same questions.

    Attributes:
        metric: The record field compared (``f1``, ``em``, ``module_cost``, ...).
        qids: The questions compared (sorted).
        references: The systems every row is compared with.
        rows: The references first, then the other systems, in the order named.
        beyond: Per file, how many of its questions were left out (``common``: files may cover more).
    """

    metric: str
    qids: list[str]
    references: list[str]
    rows: list[PairedRow]
    beyond: dict[str, int]


def load_scores(path: Path, metric: str) -> dict[str, float]:
    """``{question_id: metric}`` of one record file (``<run_id>.jsonl`` or its committed ``.gz``).

    Raises:
        FileNotFoundError: If the file is missing.
        ValueError: On a malformed line or a record without a numeric ``metric`` (file and line named).
    """
    store = RecordStore(path)
    if not store.path.is_file():
        raise FileNotFoundError(f"{path}: no such record file")
    out: dict[str, float] = {}
    for qid, rec in store.records.items():
        try:
            out[qid] = float(rec[metric])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{store.path}: question {qid}: no numeric {metric!r} ({exc!r})") from exc
    return out


def paired_table(
    records_dir: Path,
    references: Sequence[str],
    systems: Sequence[str],
    metric: str = "f1",
    n_boot: int = DEFAULT_N_BOOT,
    common: bool = False,
    questions: Sequence[str] | None = None,
) -> PairedTable:
    """Compare ``systems`` (and the references with each other) on the same questions.

    Args:
        records_dir: A frontier records dir (``<out>/records/<fingerprint>/<split>``).
        references: Run ids (file stems) each system is compared with; at least one.
        systems: Run ids to compare.
        metric: The record field.
        n_boot: Bootstrap replicates (one resample of the questions for every system: paired).
        common: Compare on the questions every file covers (a study's files grow one path at a time);
            without it, a file that covers other questions than the first reference is an error.
        questions: Compare on exactly these (a frontier table's, ``metadata.json`` ``question_ids``): records
            beyond them, written by a study block still running, are left out; a file lacking one is an error.

    Raises:
        ValueError: No reference, a file covering other questions (without ``common``), no question in
            common, a file lacking one of ``questions``, or a bad record (file and question named).
        FileNotFoundError: A record file is missing.
    """
    if not references:
        raise ValueError("name at least one reference")
    names = list(dict.fromkeys([*references, *systems]))
    scores = {name: load_scores(records_dir / f"{name}.jsonl", metric) for name in names}
    first = references[0]
    if questions is not None:
        ids = sorted(set(questions))
        for name in names:
            lacking = [q for q in ids if q not in scores[name]]
            if lacking:
                raise ValueError(
                    f"{records_dir}/{name}: no record for {len(lacking)} of the table's {len(ids)} questions "
                    f"(first: {lacking[:3]})"
                )
    elif common:
        ids = sorted(set.intersection(*(set(s) for s in scores.values())))
        if not ids:
            raise ValueError(f"{records_dir}: the files {names} have no question in common")
    else:
        ids = sorted(scores[first])
        for name in names:
            if set(scores[name]) != set(ids):
                missing = len(set(ids) - set(scores[name]))
                extra = len(set(scores[name]) - set(ids))
                raise ValueError(
                    f"{name}: records cover other questions than {first} ({missing} missing, {extra} extra); "
                    "--common compares on the questions all files cover"
                )
    rs = make_resampler(len(ids), n_boot=n_boot, seed=DEFAULT_SEED)
    values = {name: np.array([scores[name][q] for q in ids]) for name in names}
    boot = {name: bootstrap_mean(values[name], rs) for name in names}
    rows = []
    for name in names:
        est, reps = boot[name]
        diffs: dict[str, Estimate] = {}
        counts: dict[str, tuple[int, int]] = {}
        for ref in references:
            if ref == name:
                continue
            r_est, r_reps = boot[ref]
            diffs[ref] = paired_difference(est.mean, reps, r_est.mean, r_reps, DEFAULT_ALPHA)
            base = values[ref]
            counts[ref] = (
                int((values[name] > base + 1e-9).sum()),
                int((values[name] < base - 1e-9).sum()),
            )
        rows.append(PairedRow(name, est, diffs, counts))
    beyond = {name: len(scores[name]) - len(ids) for name in names}
    return PairedTable(metric, ids, list(references), rows, beyond)


def table_questions(records_dir: Path) -> list[str] | None:
    """The question ids of the frontier table whose records ``records_dir`` holds, if its metadata lists them.

    ``records_dir`` is ``<out>/records/<fingerprint>/<split>``; the table's ``metadata.json`` is in ``<out>``.
    Tables written before the metadata listed the ids give None.
    """
    meta = table_metadata_path(records_dir)
    if not meta.is_file():
        return None
    ids = json.loads(meta.read_text()).get("question_ids")
    return [str(q) for q in ids] if ids else None


def text_lines(table: PairedTable) -> list[str]:
    """One line per system: mean [CI], then per reference the paired difference and better / worse."""
    n = len(table.qids)
    lines = []
    for row in table.rows:
        est = row.estimate
        line = f"{row.name}: {table.metric} {est.mean:.3f} [{est.lo:.3f}, {est.hi:.3f}]"
        for ref, diff in row.diffs.items():
            better, worse = row.better_worse[ref]
            interval = f"{diff.mean:+.3f} [{diff.lo:+.3f}, {diff.hi:+.3f}]"
            line += f"  − {ref}: {interval}  better / worse {better} / {worse}"
        if row.name == table.references[0]:
            line += f" ({n} questions)"
        lines.append(line)
    return lines


def label(run_id: str) -> str:
    """``fixed-LMMMM`` -> ``L,M,M,M,M`` in backticks; any other run id as it is."""
    m = _FIXED_ID.match(run_id)
    return f"`{','.join(m.group(1))}`" if m else run_id


def markdown(table: PairedTable) -> str:
    """A markdown table: system, metric [CI], and a column per reference with the paired difference."""

    def signed(e: Estimate) -> str:
        # A typographic minus, as the pages write numbers; bold where the interval excludes 0.
        text = f"{e.mean:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]".replace("-", "−")
        return f"**{text}**" if e.lo > 0 or e.hi < 0 else text

    head = f"| path | {table.metric} [95% CI] | " + " | ".join(f"− {label(r)}" for r in table.references)
    lines = [head + " |", "|---" * (2 + len(table.references)) + "|"]
    for row in table.rows:
        est = row.estimate
        cells = [signed(row.diffs[r]) if r in row.diffs else "—" for r in table.references]
        mean = f"{est.mean:.3f} [{est.lo:.3f}, {est.hi:.3f}]"
        lines.append(f"| {label(row.name)} | {mean} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
