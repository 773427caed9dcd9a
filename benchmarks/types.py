"""The one data model every benchmark loader yields."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Turn:
    """One utterance or paragraph.

    Attributes:
        turn_id: Id unique within the history (LoCoMo ``D3:7``; LongMemEval ``s{i}:t{j}``;
            HotpotQA ``{title}#{sent_idx}`` for the sentences of a paragraph).
        speaker: Speaker name or role (``user``/``assistant``); the title for HotpotQA paragraphs.
        text: The utterance / sentence text (see ``image_caption`` for shared images).
        timestamp: The session's free-text date/time, if any.
        image_caption: Caption of an image shared with the turn (LoCoMo ``blip_caption``), kept
            apart from ``text`` so that renderers can write ``{speaker} said, "{text}" and shared
            {image_caption}`` exactly as the LoCoMo/BudgetMem prompts do.
    """

    turn_id: str
    speaker: str
    text: str
    timestamp: str | None = None
    image_caption: str | None = None


@dataclass(frozen=True)
class Session:
    """A contiguous group of turns sharing one date.

    A LoCoMo session, a LongMemEval session, or one HotpotQA paragraph.
    """

    session_id: str
    turns: tuple[Turn, ...]
    timestamp: str | None = None


@dataclass(frozen=True)
class History:
    """Everything a memory is built from, in time order.

    Attributes:
        history_id: Unique id (the sample id).
        sessions: Sessions in time order.
        kind: ``"dialogue"`` (turns rendered ``{speaker} said, "{text}"``) or ``"document"``
            (HotpotQA paragraphs: each session is one titled paragraph whose turns are its
            sentences).
    """

    history_id: str
    sessions: tuple[Session, ...]
    kind: str = "dialogue"

    def turns(self) -> list[Turn]:
        """All turns in order."""
        return [t for s in self.sessions for t in s.turns]


@dataclass(frozen=True)
class Question:
    """One question about a history.

    Attributes:
        question_id: Unique id (``{sample_id}:q{idx}`` when the data has none).
        question: The question text.
        answer: Gold answer as text (ints converted).
        category: Category/type label as a string (LoCoMo ``"1"``..``"5"``, LongMemEval type,
            HotpotQA ``bridge``/``comparison``).
        evidence_ids: Gold evidence turn ids (may be empty).
        question_date: Date the question is asked, where the data has one.
        is_abstention: LongMemEval ``_abs`` questions (the right answer is "not answerable").
        extra: Dataset-specific fields (e.g. HotpotQA level, LoCoMo adversarial answer).
    """

    question_id: str
    question: str
    answer: str
    category: str
    evidence_ids: tuple[str, ...] = ()
    question_date: str | None = None
    is_abstention: bool = False
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Sample:
    """One history and its questions."""

    sample_id: str
    history: History
    questions: tuple[Question, ...]
