"""HotpotQA loader (official distractor format, JSON Lines or a JSON list)."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.base import Benchmark, check_split
from benchmarks.records import RecordRef, answer_text, expect_list, field, load_json
from benchmarks.registry import register
from benchmarks.splits import POWERED_SIZES, check_scheme, stratified_split
from benchmarks.types import History, Question, Sample, Session, Turn
from common.datadir import DataFileError

FILE = "hotpotqa_aflow_validate200.jsonl"
#: Fractions of the sha256-sorted questions in train and val (test gets the rest).
TRAIN_FRACTION = 0.6
VAL_FRACTION = 0.2


def turn_id(title: str, sent_idx: int) -> str:
    """The turn id of sentence ``sent_idx`` of paragraph ``title``."""
    return f"{title}#{sent_idx}"


def read_records(path: Path) -> list[Any]:
    """Read a JSON list or JSON Lines file of HotpotQA records.

    Raises:
        DataFileError: Naming the file and line of invalid JSON.
    """
    with open(path, "rb") as fh:
        head = fh.read(1 << 12).lstrip()
    if head.startswith(b"["):
        return expect_list(load_json(path), RecordRef(path, "<top level>"), "<top level>")
    records = []
    # Bytes, decoded per line: a bad byte is reported with its line, not as a bare UnicodeDecodeError.
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(
                    f"{path}: record at line {lineno}: field <encoding>: not UTF-8 (byte {exc.start}: "
                    f"{exc.reason}); re-download or re-create the file"
                ) from exc
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataFileError(
                    f"{path}: record at line {lineno}: field <json>: invalid or truncated JSON ({exc.msg})"
                ) from exc
    return records


def parse_record(raw: Any, index: int, path: Path) -> Sample:
    """Turn one HotpotQA record into a one-question :class:`Sample`.

    Raises:
        DataFileError: Naming file, record and field of any schema violation, including a
            supporting fact that points at no sentence.
    """
    ref = RecordRef(path, f"index {index}")
    qid = field(raw, "_id", str, ref)
    ref = RecordRef(path, f"{qid} (index {index})")
    sessions = []
    known: set[str] = set()
    for p_idx, para in enumerate(field(raw, "context", list, ref)):
        where = f"context[{p_idx}]"
        if not (
            isinstance(para, list)
            and len(para) == 2
            and isinstance(para[0], str)
            and isinstance(para[1], list)
        ):
            raise ref.error(where, f"expected [title, [sentences]], got {str(para)[:60]}")
        title, sentences = para
        turns = []
        for s_idx, sent in enumerate(sentences):
            if not isinstance(sent, str):
                raise ref.error(f"{where}[1][{s_idx}]", f"expected str, got {type(sent).__name__}")
            tid = turn_id(title, s_idx)
            known.add(tid)
            turns.append(Turn(turn_id=tid, speaker=title, text=sent.strip()))
        sessions.append(Session(session_id=title, turns=tuple(turns)))
    evidence = []
    for f_idx, fact in enumerate(field(raw, "supporting_facts", list, ref)):
        ok = (
            isinstance(fact, list)
            and len(fact) == 2
            and isinstance(fact[0], str)
            and isinstance(fact[1], int)
        )
        if not ok:
            raise ref.error(f"supporting_facts[{f_idx}]", f"expected [title, sent_idx], got {fact!r}")
        tid = turn_id(fact[0], fact[1])
        if tid not in known:
            raise ref.error(f"supporting_facts[{f_idx}]", f"{fact!r} names no sentence of the context")
        if tid not in evidence:
            evidence.append(tid)
    question = Question(
        question_id=qid,
        question=field(raw, "question", str, ref),
        answer=answer_text(field(raw, "answer", (str, int), ref), ref),
        category=field(raw, "type", str, ref),
        evidence_ids=tuple(evidence),
        extra={"level": str(field(raw, "level", str, ref, default=""))},
    )
    history = History(history_id=qid, sessions=tuple(sessions), kind="document")
    return Sample(sample_id=qid, history=history, questions=(question,))


def split_of(ids: list[str]) -> dict[str, str]:
    """Assign each question id to a split by its rank in sha256 order (see docs/design/benchmarks.md)."""
    ranked = sorted(ids, key=lambda q: hashlib.sha256(q.encode("utf-8")).hexdigest())
    n_train = round(TRAIN_FRACTION * len(ranked))
    n_val = round(VAL_FRACTION * len(ranked))
    return {
        q: "train" if r < n_train else "val" if r < n_train + n_val else "test" for r, q in enumerate(ranked)
    }


@register
class HotpotQA(Benchmark):
    """HotpotQA distractor-format questions; a sample is one question with its paragraphs."""

    name: ClassVar[str] = "hotpotqa"
    files: ClassVar[tuple[str, ...]] = (FILE,)

    def __init__(
        self, data_dir: str | Path | None = None, file: str = FILE, splits: str = "paper", split_seed: int = 0
    ) -> None:
        self.files = (file,)  # type: ignore[misc]  # a per-instance file choice shadows the ClassVar
        super().__init__(data_dir)
        self.file = file
        #: ``"paper"``: 60/20/20 by sha256 rank; ``"powered"``: val 50, test 100 stratified by question type.
        self.splits = check_scheme(splits)
        self.split_seed = int(split_seed)

    def load(self, split: str) -> list[Sample]:
        """Load the questions of ``split`` in file order."""
        check_split(split)
        path, records = self._read(self.file, read_records)
        if not records:
            warnings.warn(f"{path} holds no questions (an empty file?); every split is empty", stacklevel=2)
        samples = [parse_record(r, i, path) for i, r in enumerate(records)]
        if split == "all":
            return samples
        if self.splits == "powered":
            assignment = stratified_split(
                [s.sample_id for s in samples], [s.questions[0].category for s in samples],
                POWERED_SIZES[self.name], self.split_seed,
            )  # fmt: skip
        else:
            assignment = split_of([s.sample_id for s in samples])
        return [s for s in samples if assignment[s.sample_id] == split]
