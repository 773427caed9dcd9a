"""LongMemEval loaders: the oracle file and the S file (xiaowu0162/LongMemEval, cleaned release)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.base import Benchmark, check_split
from benchmarks.longmemeval_cache import build_question_cache
from benchmarks.records import RecordRef, answer_text, expect_list, field, load_json
from benchmarks.registry import register
from benchmarks.splits import POWERED_SIZES, check_scheme, stratified_split
from benchmarks.types import History, Question, Sample, Session, Turn

S_FILE = "longmemeval_s_cleaned_498.json.xz"
ORACLE_FILE = "longmemeval_oracle.json"
SPLITS_FILE = "longmemeval_s_splits_qids.json"

_WEEKDAY = re.compile(r"\s*\([A-Za-z]{3}\)\s*")


def date_sort_key(date: str | None) -> str:
    """Sortable form of ``"2023/05/30 (Tue) 23:40"`` (drop the weekday); ``""`` when unknown."""
    return _WEEKDAY.sub(" ", date).strip() if date else ""


def parse_question(raw: Any, index: int, path: Path) -> Sample:
    """Turn one raw LongMemEval record into a one-question :class:`Sample`.

    Args:
        raw: The record.
        index: Its position in the file (for error messages).
        path: The data file (for error messages).

    Raises:
        DataFileError: Naming file, record and field of any schema violation.
    """
    ref = RecordRef(path, f"index {index}")
    qid = field(raw, "question_id", str, ref)
    ref = RecordRef(path, f"{qid} (index {index})")
    dates = field(raw, "haystack_dates", list, ref)
    session_ids = field(raw, "haystack_session_ids", list, ref)
    raw_sessions = field(raw, "haystack_sessions", list, ref)
    if not len(dates) == len(session_ids) == len(raw_sessions):
        raise ref.error(
            "haystack_sessions",
            f"lengths differ: {len(raw_sessions)} sessions, {len(dates)} dates, {len(session_ids)} ids",
        )
    sessions: list[Session] = []
    evidence: list[str] = []
    for i, (date, sid, rs) in enumerate(zip(dates, session_ids, raw_sessions, strict=True)):
        if not isinstance(date, str):
            raise ref.error(f"haystack_dates[{i}]", f"expected str, got {type(date).__name__}")
        if not isinstance(sid, str):
            raise ref.error(f"haystack_session_ids[{i}]", f"expected str, got {type(sid).__name__}")
        if not isinstance(rs, list):
            raise ref.error(f"haystack_sessions[{i}]", f"expected list, got {type(rs).__name__}")
        turns = []
        for j, rt in enumerate(rs):
            where = f"haystack_sessions[{i}][{j}]"
            turn_id = f"s{i}:t{j}"
            turns.append(
                Turn(
                    turn_id=turn_id,
                    speaker=field(rt, "role", str, ref, path=f"{where}.role"),
                    text=field(rt, "content", str, ref, path=f"{where}.content"),
                    timestamp=date,
                )
            )
            if field(rt, "has_answer", bool, ref, path=f"{where}.has_answer", default=False):
                evidence.append(turn_id)
        sessions.append(Session(session_id=sid, turns=tuple(turns), timestamp=date))
    sessions.sort(key=lambda s: date_sort_key(s.timestamp))
    answer_sessions = field(raw, "answer_session_ids", list, ref, default=[])
    question = Question(
        question_id=qid,
        question=field(raw, "question", str, ref),
        answer=answer_text(field(raw, "answer", (str, int, float), ref), ref),
        category=field(raw, "question_type", str, ref),
        evidence_ids=tuple(evidence),
        question_date=field(raw, "question_date", str, ref, default=None),
        is_abstention=qid.endswith("_abs"),
        extra={"answer_session_ids": ",".join(str(s) for s in answer_sessions)},
    )
    return Sample(
        sample_id=qid, history=History(history_id=qid, sessions=tuple(sessions)), questions=(question,)
    )


def _validated_id(raw: Any, index: int, path: Path) -> str:
    return parse_question(raw, index, path).sample_id


class _LongMemEvalBase(Benchmark):
    """Shared split handling of the two LongMemEval files."""

    source_file: ClassVar[str]

    def __init__(self, data_dir: str | Path | None = None) -> None:
        super().__init__(data_dir)
        #: Split question ids that the source file lacks (filled by :meth:`load`).
        self.missing: dict[str, list[str]] = {}

    def split_ids(self, split: str) -> list[str] | None:
        """Question ids of ``split`` in the splits file's order (``None`` for ``"all"``).

        Raises:
            DataFileError: If the splits file lacks the split or holds non-string ids.
        """
        check_split(split)
        if split == "all":
            return None
        path, doc = self._read(SPLITS_FILE, load_json)
        ref = RecordRef(path, "<top level>")
        ids = field(doc, split, list, ref)
        for i, qid in enumerate(ids):
            if not isinstance(qid, str):
                raise ref.error(f"{split}[{i}]", f"expected str question id, got {type(qid).__name__}")
        return ids


@register
class LongMemEval(_LongMemEvalBase):
    """LongMemEval_S (cleaned, 498 questions, full haystacks), read through a per-question cache.

    Args:
        data_dir: Data directory.
        cache_root: Root of the derived-cache directory (default ``$BUDGET_ROUTER_CACHE`` or
            ``~/.cache/budget_router``).
    """

    name: ClassVar[str] = "longmemeval"
    files: ClassVar[tuple[str, ...]] = (S_FILE, SPLITS_FILE)
    source_file: ClassVar[str] = S_FILE

    def __init__(self, data_dir: str | Path | None = None, cache_root: str | Path | None = None) -> None:
        super().__init__(data_dir)
        self.cache_root = Path(cache_root) if cache_root else None

    def load(self, split: str) -> list[Sample]:
        """Load the questions of ``split``; split ids missing from the S file are skipped."""
        wanted = self.split_ids(split)
        path = self._path(S_FILE)
        cache = build_question_cache(path, lambda r, i: _validated_id(r, i, path), self.cache_root)
        ids = cache.question_ids if wanted is None else wanted
        self.missing[split] = [q for q in ids if q not in cache]
        return [parse_question(cache.read(q), cache.position[q], path) for q in ids if q in cache]


@register
class LongMemEvalOracle(_LongMemEvalBase):
    """LongMemEval oracle format: 500 questions, haystacks of evidence sessions only.

    Args:
        data_dir: Data directory.
        splits: ``"paper"`` (the BudgetMem question-id split: 297 / 98 / 105) or ``"powered"`` (val 100,
            test 250, stratified by question type, drawn from the oracle file alone: see
            :mod:`benchmarks.splits`).
        split_seed: The powered split's seed.
    """

    name: ClassVar[str] = "longmemeval_oracle"
    files: ClassVar[tuple[str, ...]] = (ORACLE_FILE, SPLITS_FILE)
    source_file: ClassVar[str] = ORACLE_FILE

    def __init__(
        self, data_dir: str | Path | None = None, splits: str = "paper", split_seed: int = 0
    ) -> None:
        self.splits = check_scheme(splits)
        self.split_seed = int(split_seed)
        if self.splits == "powered":  # drawn from the oracle file: the derived split file is not read
            self.files = (ORACLE_FILE,)  # type: ignore[misc]  # a per-instance choice shadows the ClassVar
        super().__init__(data_dir)

    def load(self, split: str) -> list[Sample]:
        """Load the questions of ``split`` from the oracle file."""
        path, doc = self._read(ORACLE_FILE, load_json)
        records = expect_list(doc, RecordRef(path, "<top level>"), "<top level>")
        by_id: dict[str, tuple[int, Any]] = {}
        for i, rec in enumerate(records):
            qid = field(rec, "question_id", str, RecordRef(path, f"index {i}"))
            by_id[qid] = (i, rec)
        if self.splits == "powered":
            check_split(split)
            cats = [
                field(rec, "question_type", str, RecordRef(path, f"index {i}")) for i, rec in by_id.values()
            ]
            assignment = stratified_split(list(by_id), cats, POWERED_SIZES[self.name], self.split_seed)
            wanted = None if split == "all" else [q for q in by_id if assignment[q] == split]
        else:
            wanted = self.split_ids(split)
        ids = list(by_id) if wanted is None else wanted
        self.missing[split] = [q for q in ids if q not in by_id]
        return [parse_question(by_id[q][1], by_id[q][0], path) for q in ids if q in by_id]
