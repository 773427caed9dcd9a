"""``benchmark=custom``: your own memory-QA data, read with Hugging Face ``datasets``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.base import Benchmark, check_split
from benchmarks.cachedir import cache_root
from benchmarks.custom_rows import (
    DEFAULT_CATEGORY,
    SPLIT_ALIASES,
    RowReader,
    answers_of,
    check_unique_turns,
    column_map,
    parse_documents,
    parse_sessions,
    resolve_evidence,
)
from benchmarks.records import RecordRef
from benchmarks.registry import register
from benchmarks.types import History, Question, Sample
from common.datadir import PROJECT_ROOT, DataFileError, resolve_data_dir
from common.provenance import sha256_file

NAME = "custom"
FORMATS: dict[str, str] = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
DEFAULT_SPLIT_RATIO: tuple[float, float, float] = (0.6, 0.2, 0.2)


def resolve_path(path: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None) -> Path:
    """Find the user's file: as given (absolute or from the cwd), in the data dir, in the project root.

    Raises:
        DataFileError: Listing the places tried.
    """
    p = Path(path).expanduser()
    tried = [p]
    if not p.is_absolute():
        # Without a data directory only the cwd and the project root are candidates.
        with contextlib.suppress(DataFileError):
            tried.append(resolve_data_dir(data_dir) / p)
        tried.append(PROJECT_ROOT / p)
    for cand in tried:
        if cand.exists():
            return cand.resolve()
    raise DataFileError(f"custom benchmark data not found: {path!r} (tried {', '.join(map(str, tried))})")


def check_ratio(ratio: Sequence[float]) -> tuple[float, float, float]:
    """Validate ``split_ratio`` (three fractions >= 0 that sum to 1).

    Raises:
        ValueError: Naming the option and the value.
    """
    try:
        values = tuple(float(x) for x in ratio)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"benchmark.options.split_ratio must be 3 numbers, got {ratio!r}") from exc
    if len(values) != 3 or min(values) < 0 or abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(
            "benchmark.options.split_ratio must be [train, val, test] fractions >= 0 summing to 1, "
            f"got {ratio!r}"
        )
    return values[0], values[1], values[2]


def ratio_splits(history_ids: Sequence[str], ratio: Sequence[float], seed: int) -> dict[str, str]:
    """Assign histories to splits by rank in seeded sha256 order (see docs/design/benchmarks.md)."""
    ranked = sorted(history_ids, key=lambda h: hashlib.sha256(f"{seed}:{h}".encode()).hexdigest())
    n_train, n_val = round(ratio[0] * len(ranked)), round(ratio[1] * len(ranked))
    return {
        h: "train" if r < n_train else "val" if r < n_train + n_val else "test" for r, h in enumerate(ranked)
    }


def read_rows(
    path: Path, fmt: str | None = None, sha256: str | None = None
) -> dict[str | None, list[dict[str, Any]]]:
    """Read the user's data with ``datasets``: ``{split key or None: rows}``.

    ``datasets`` caches what it parsed under a fingerprint of the file's path and modification
    time, so a file replaced by one with the same mtime (``cp -p``, ``rsync -a``, ``tar x``) would
    read as the old rows. The cache directory is therefore named by the file's content (``sha256``,
    computed here when not given): other content, another cache.

    Raises:
        DataFileError: Naming the file (and, for invalid JSON Lines, the line) when it cannot be read.
    """
    import datasets

    if path.is_dir():
        try:
            ds = datasets.load_from_disk(str(path))
        except (FileNotFoundError, ValueError) as exc:
            raise DataFileError(f"{path}: not a saved Dataset/DatasetDict directory ({exc})") from exc
        if isinstance(ds, datasets.DatasetDict):
            return {key: ds[key].to_list() for key in ds}
        return {None: ds.to_list()}
    builder = fmt or FORMATS.get(path.suffix.lower())
    if builder not in set(FORMATS.values()):
        raise DataFileError(
            f"{path}: unknown data format {builder or path.suffix!r}; use .jsonl/.json/.parquet/.csv, "
            "a saved dataset directory, or benchmark.options.format=json|parquet|csv"
        )
    if path.stat().st_size == 0:
        raise DataFileError(f"{path}: the file is empty; it must hold at least one question row")
    _check_utf8(path)
    digest = sha256 or sha256_file(path)
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a "Generating train split" bar per load is noise in CLI output
    try:
        ds = datasets.load_dataset(
            builder,
            data_files=str(path),
            split="train",
            cache_dir=str(cache_root() / "datasets" / digest[:16]),
        )
    except Exception as exc:  # datasets wraps parser errors in many types; name the file and line
        if builder == "json":
            _raise_json_line_error(path)
            # Valid JSON that datasets' block reader cannot take (a row larger than its block, ~10 MB):
            # read it here, as datasets would have returned it.
            return {None: _read_json_rows(path)}
        raise DataFileError(f"{path}: record <file>: field <{builder}>: cannot be read ({exc})") from exc
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    return {None: ds.to_list()}


def _check_utf8(path: Path) -> None:
    """Name the line of the first byte that is not UTF-8 (datasets reports none)."""
    if path.suffix.lower() in (".parquet", ".arrow"):
        return  # binary formats
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(
                    f"{path}: record at line {lineno}: field <encoding>: byte {line[exc.start]:#04x} at "
                    f"column {exc.start + 1} is not UTF-8; save the file as UTF-8"
                ) from None


def _read_json_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON list or JSON Lines file (each row an object), read without ``datasets``."""
    text = path.read_text(encoding="utf-8")
    rows = json.loads(text) if text.lstrip().startswith("[") else [
        json.loads(line) for line in text.splitlines() if line.strip()
    ]
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataFileError(f"{path}: record row {i + 1}: is a JSON {type(row).__name__}, not an object")
    return rows


def _raise_json_line_error(path: Path) -> None:
    """Name the first line of a JSON Lines file that is not valid JSON (if any)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if text.lstrip().startswith("["):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataFileError(
                f"{path}: record at line {exc.lineno}: field <json>: invalid or truncated JSON ({exc.msg})"
            ) from exc
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFileError(
                    f"{path}: record at line {lineno}: field <json>: invalid or truncated JSON ({exc.msg})"
                ) from exc


class _HistoryBuilder:
    """Collects the rows of one history into a :class:`Sample`."""

    def __init__(self, history_id: str) -> None:
        self.history_id = history_id
        self.sessions: tuple[Any, ...] | None = None
        self.kind = "dialogue"
        self.first_row = -1
        self.split: str | None = None
        self.questions: list[Question] = []
        self.pending: list[tuple[RowReader, int]] = []

    def add_history(self, reader: RowReader, index: int) -> None:
        """Take the row's sessions/documents (the first row that has them defines the history)."""
        has_s, has_d = reader.raw("sessions") is not None, reader.raw("documents") is not None
        if has_s and has_d:
            raise reader.error("documents", f"give {reader.cols['sessions']!r} or documents, not both")
        if not (has_s or has_d):
            return
        name = "sessions" if has_s else "documents"
        sessions = parse_sessions(reader) if has_s else parse_documents(reader)
        if self.sessions is None:
            check_unique_turns(sessions, reader, name)
            self.sessions, self.kind, self.first_row = sessions, "dialogue" if has_s else "document", index
        elif sessions != self.sessions:
            raise reader.error(
                name, f"differs from row {self.first_row + 1}, which defines history {self.history_id!r}"
            )

    def finish(self, path: Path) -> Sample:
        """Parse the questions now that the history is known."""
        if self.sessions is None:
            ref = self.pending[0][0]
            raise ref.error("sessions", f"no row of history {self.history_id!r} gives sessions or documents")
        for reader, n in self.pending:
            self.questions.append(_question(reader, self.history_id, n, self.sessions))
        history = History(history_id=self.history_id, sessions=self.sessions, kind=self.kind)
        return Sample(sample_id=self.history_id, history=history, questions=tuple(self.questions))


def _question(reader: RowReader, history_id: str, n: int, sessions: tuple[Any, ...]) -> Question:
    gold, answers = answers_of(reader)
    evidence = resolve_evidence(reader.string_list("evidence_ids", sep=";"), sessions, reader)
    extra = {"answers": json.dumps(answers, ensure_ascii=False)} if len(answers) > 1 else {}
    return Question(
        question_id=reader.text("question_id") or f"{history_id}:q{n}",
        question=str(reader.text("question", required=True)),
        answer=gold,
        category=reader.text("category") or DEFAULT_CATEGORY,
        evidence_ids=evidence,
        question_date=reader.text("question_date"),
        is_abstention=reader.flag("abstention"),
        extra=extra,
    )


def build_samples(
    parts: Mapping[str | None, list[dict[str, Any]]],
    path: Path,
    columns: Mapping[str, str],
) -> tuple[list[Sample], dict[str, str | None]]:
    """Group rows into samples (histories in first-appearance order).

    Returns:
        ``(samples, {history id: split from the data or None})``.

    Raises:
        DataFileError: Naming file, row and column of any schema violation.
    """
    builders: dict[str, _HistoryBuilder] = {}
    qids: dict[str, str] = {}
    index = 0
    for key, rows in parts.items():
        for row in rows:
            part = f" of split {key!r}" if key is not None else ""
            # Rows are counted from 1, as lines are: in JSON Lines without blank lines, row N is line N.
            reader = RowReader(row, columns, RecordRef(path, f"row {index + 1}{part}"))
            hid = reader.text("history_id") or f"row{index}"
            reader = RowReader(row, columns, RecordRef(path, f"row {index + 1}{part} (history {hid})"))
            b = builders.setdefault(hid, _HistoryBuilder(hid))
            b.add_history(reader, index)
            split = _row_split(reader, key)
            if b.pending and split != b.split:
                raise reader.error(
                    "split", f"is {split!r} but earlier rows of history {hid!r} say {b.split!r}"
                )
            b.split = split
            b.pending.append((reader, len(b.pending)))
            index += 1
    samples = [b.finish(path) for b in builders.values()]
    _warn_silent_acceptances(parts, samples, path)
    for s in samples:
        for q in s.questions:
            if q.question_id in qids:
                raise RecordRef(path, f"history {s.sample_id}").error(
                    columns["question_id"],
                    f"question id {q.question_id!r} repeats (also in {qids[q.question_id]})",
                )
            qids[q.question_id] = s.sample_id
    return samples, {hid: b.split for hid, b in builders.items()}


def _warn_silent_acceptances(
    parts: Mapping[str | None, list[dict[str, Any]]], samples: Sequence[Sample], path: Path
) -> None:
    """Warn about rows that load but are probably not what the user meant."""
    seen: dict[str, int] = {}
    index = 0
    for rows in parts.values():
        for row in rows:
            key = json.dumps(row, sort_keys=True, default=str)
            if key in seen:
                warnings.warn(
                    f"{path}: row {index + 1} repeats row {seen[key] + 1} verbatim; it is loaded as another "
                    "question (remove it, or give it its own question_id)",
                    stacklevel=3,
                )
            seen.setdefault(key, index)
            index += 1
    for s in samples:
        if not s.history.turns():
            warnings.warn(
                f"{path}: history {s.sample_id!r} has no turns or sentences (empty sessions/documents); "
                "its questions have nothing to retrieve",
                stacklevel=3,
            )


def _row_split(reader: RowReader, key: str | None) -> str | None:
    raw = key if key is not None else reader.text("split")
    if raw is None:
        return None
    split = SPLIT_ALIASES.get(raw.strip().lower())
    if split is None:
        raise reader.error("split", f"unknown split {raw!r}; expected one of {', '.join(SPLIT_ALIASES)}")
    return split


@register
class CustomBenchmark(Benchmark):
    """A user's dataset in the documented row schema (see docs/design/benchmarks.md).

    Args:
        data_dir: Data directory (searched for a relative ``path``).
        path: The data file or saved dataset directory (required).
        format: ``json``, ``parquet`` or ``csv`` (default: from the suffix).
        columns: ``{field: column name}`` overrides of the default column names.
        split_ratio: ``[train, val, test]`` fractions when the data has no splits.
        split_seed: Seed of the ratio split.
    """

    name: ClassVar[str] = NAME
    files: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        path: str | None = None,
        format: str | None = None,
        columns: Mapping[str, str] | None = None,
        split_ratio: Sequence[float] = DEFAULT_SPLIT_RATIO,
        split_seed: int = 0,
    ) -> None:
        if not path or path == "???":  # "???" is configs/benchmark/custom.yaml's unset marker
            raise ValueError(
                "benchmark=custom needs benchmark.options.path=<your .jsonl/.parquet/.csv or dir>"
            )
        self.path = resolve_path(path, data_dir)
        super().__init__(self.path if self.path.is_dir() else self.path.parent)
        self.format = format
        self.columns = column_map(columns)
        self.split_ratio = check_ratio(split_ratio)
        self.split_seed = int(split_seed)
        self._samples: tuple[list[Sample], dict[str, str]] | None = None

    def data_files(self) -> list[Path]:
        """The data file, or every file of a saved dataset directory."""
        if self.path.is_dir():
            return sorted(p for p in self.path.rglob("*") if p.is_file())
        return [self.path]

    def _all(self) -> tuple[list[Sample], dict[str, str]]:
        if self._samples is None:
            files = self.data_files()
            self.checksums.update({str(p.relative_to(self.data_dir)): sha256_file(p) for p in files})
            digest = None if self.path.is_dir() else self.checksums[str(self.path.relative_to(self.data_dir))]
            samples, given = build_samples(read_rows(self.path, self.format, digest), self.path, self.columns)
            if any(v is None for v in given.values()):
                missing = [h for h, v in given.items() if v is None]
                if len(missing) != len(given):
                    raise RecordRef(self.path, f"history {missing[0]}").error(
                        self.columns["split"], "is empty, but other histories name a split"
                    )
                assignment = ratio_splits(list(given), self.split_ratio, self.split_seed)
            else:
                assignment = {h: str(v) for h, v in given.items()}
            self._samples = (samples, assignment)
        return self._samples

    def load(self, split: str) -> list[Sample]:
        """Load the histories of ``split`` in first-appearance order."""
        check_split(split)
        samples, assignment = self._all()
        return [s for s in samples if split == "all" or assignment[s.sample_id] == split]
