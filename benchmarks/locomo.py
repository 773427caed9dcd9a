"""LoCoMo loader (``locomo10.json``, snap-research/LoCoMo)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.base import Benchmark, check_split
from benchmarks.records import RecordRef, answer_text, expect_list, field, load_json
from benchmarks.registry import register
from benchmarks.splits import check_scheme
from benchmarks.types import History, Question, Sample, Session, Turn

FILE = "locomo10.json"

#: Conversation indices of each split (by position in the file).
SPLIT_INDICES: dict[str, tuple[int, ...]] = {
    "train": (0, 1, 2, 3, 4, 5),
    "val": (6, 7),
    "test": (8, 9),
    "all": tuple(range(10)),
}

#: Community mapping of LoCoMo categories (not in the official README).
CATEGORY_NAMES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}

ADVERSARIAL_CATEGORY = "5"
ADVERSARIAL_GOLD = "Not mentioned in the conversation"

_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


def parse_evidence(raw: list[str], known_ids: set[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Normalise LoCoMo evidence strings into dialogue ids that exist in the conversation.

    Args:
        raw: The ``evidence`` list as stored.
        known_ids: All ``dia_id`` values of the conversation.

    Returns:
        ``(kept ids in order without duplicates, dropped pieces)``.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for item in raw:
        for piece in re.split(r"[;\s]+", item.strip()):
            if not piece:
                continue
            m = _EVIDENCE_ID.fullmatch(piece)
            # int() strips leading zeros: "D30:05" means turn D30:5.
            canon = f"D{int(m.group(1))}:{int(m.group(2))}" if m else piece
            if canon in known_ids:
                if canon not in kept:
                    kept.append(canon)
            else:
                dropped.append(piece)
    return tuple(kept), tuple(dropped)


def _parse_sessions(conv: dict[str, Any], ref: RecordRef) -> tuple[Session, ...]:
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    sessions: list[Session] = []
    for n in numbers:
        key = f"session_{n}"
        raw_turns = field(conv, key, list, ref, path=f"conversation.{key}")
        date = field(conv, f"{key}_date_time", str, ref, path=f"conversation.{key}_date_time", default=None)
        turns: list[Turn] = []
        for j, rt in enumerate(raw_turns):
            where = f"conversation.{key}[{j}]"
            caption = field(
                rt, "blip_caption", (str, type(None)), ref, path=f"{where}.blip_caption", default=None
            )
            turns.append(
                Turn(
                    turn_id=field(rt, "dia_id", str, ref, path=f"{where}.dia_id"),
                    speaker=field(rt, "speaker", str, ref, path=f"{where}.speaker"),
                    text=field(rt, "text", str, ref, path=f"{where}.text"),
                    timestamp=date,
                    image_caption=caption or None,
                )
            )
        sessions.append(Session(session_id=key, turns=tuple(turns), timestamp=date))
    return tuple(sessions)


def _parse_question(raw: Any, idx: int, sample_id: str, known_ids: set[str], ref: RecordRef) -> Question:
    where = f"qa[{idx}]"
    category = str(field(raw, "category", int, ref, path=f"{where}.category"))
    evidence_raw = field(raw, "evidence", list, ref, path=f"{where}.evidence")
    for e_idx, e in enumerate(evidence_raw):
        if not isinstance(e, str):
            raise ref.error(f"{where}.evidence[{e_idx}]", f"expected str, got {type(e).__name__} {e!r}")
    evidence, dropped = parse_evidence(evidence_raw, known_ids)
    extra: dict[str, str] = {"category_name": CATEGORY_NAMES.get(category, "unknown")}
    if dropped:
        extra["dropped_evidence"] = ";".join(dropped)
    if category == ADVERSARIAL_CATEGORY:
        adv = field(
            raw, "adversarial_answer", (str, int), ref, path=f"{where}.adversarial_answer", default=None
        )
        if adv is not None:
            extra["adversarial_answer"] = answer_text(adv, ref, f"{where}.adversarial_answer")
        gold_raw = raw.get("answer", ADVERSARIAL_GOLD)
    else:
        gold_raw = field(raw, "answer", (str, int, float), ref, path=f"{where}.answer")
    return Question(
        question_id=f"{sample_id}:q{idx}",
        question=field(raw, "question", str, ref, path=f"{where}.question"),
        answer=answer_text(gold_raw, ref, f"{where}.answer"),
        category=category,
        evidence_ids=evidence,
        extra=extra,
    )


def parse_conversation(raw: Any, index: int, path: Path, include_adversarial: bool) -> Sample:
    """Turn one raw LoCoMo record into a :class:`Sample`.

    Args:
        raw: The record (an element of the top-level list).
        index: Its position in the file (for error messages).
        path: The data file (for error messages).
        include_adversarial: Keep category-5 questions.

    Raises:
        DataFileError: Naming the file, record and field of any schema violation.
    """
    ref = RecordRef(path, f"index {index}")
    sample_id = field(raw, "sample_id", str, ref)
    ref = RecordRef(path, f"{sample_id} (index {index})")
    conv = field(raw, "conversation", dict, ref)
    sessions = _parse_sessions(conv, ref)
    if not sessions:
        # Its questions would be trained on with no evidence at all.
        raise ref.error("conversation", "no session_<n> lists of turns (the conversation is empty)")
    known_ids = {t.turn_id for s in sessions for t in s.turns}
    questions = []
    for q_idx, q in enumerate(field(raw, "qa", list, ref)):
        question = _parse_question(q, q_idx, sample_id, known_ids, ref)
        if include_adversarial or question.category != ADVERSARIAL_CATEGORY:
            questions.append(question)
    return Sample(
        sample_id=sample_id,
        history=History(history_id=sample_id, sessions=sessions),
        questions=tuple(questions),
    )


@register
class LoCoMo(Benchmark):
    """LoCoMo: 10 long two-person conversations with 1,986 QA items.

    Args:
        data_dir: Data directory (default: resolved by :func:`common.datadir.resolve_data_dir`).
        include_adversarial: Also load category-5 (adversarial) questions.
        splits: ``"paper"`` or ``"powered"``: the same conversation split (its validation and test sets, 341
            and 314 questions, are already big enough; :mod:`benchmarks.splits`).
    """

    name: ClassVar[str] = "locomo"
    files: ClassVar[tuple[str, ...]] = (FILE,)

    def __init__(
        self, data_dir: str | Path | None = None, include_adversarial: bool = False, splits: str = "paper"
    ) -> None:
        super().__init__(data_dir)
        self.include_adversarial = include_adversarial
        self.splits = check_scheme(splits)

    def load(self, split: str) -> list[Sample]:
        """Load the conversations of ``split`` (see :data:`SPLIT_INDICES`)."""
        check_split(split)
        path, doc = self._read(FILE, load_json)
        records = expect_list(doc, RecordRef(path, "<top level>"), "<top level>")
        wanted = SPLIT_INDICES[split]
        if split == "all":
            wanted = tuple(range(len(records)))
        missing = [i for i in wanted if i >= len(records)]
        if missing:
            raise RecordRef(path, "<top level>").error(
                "<list>", f"has {len(records)} conversations; split {split!r} needs indices {missing}"
            )
        return [parse_conversation(records[i], i, path, self.include_adversarial) for i in wanted]
