"""The judge protocols people compare against: LoCoMo's binary judge and LongMemEval's yes/no judge."""

from __future__ import annotations

from typing import Any, ClassVar

from benchmarks.judge_protocol import JudgeProtocol, json_object, one_label
from benchmarks.types import Question

LOCOMO_PROMPT = """You grade an answer to a question about a long conversation between two people.
You get the question, the GOLD answer (the ground truth) and a GENERATED answer. Label the generated
answer CORRECT or WRONG.
Be generous: it is CORRECT when it refers to the same thing as the gold answer, even if it is longer,
worded differently or adds detail. For questions about time the gold answer is a date, month or
year; a generated answer naming the same date or period is CORRECT in any format, also as a relative
expression ("last Tuesday", "the week before 9 June") that resolves to it.
It is WRONG when it names something else, contradicts the gold answer, or does not answer.
Reply with JSON only: {{"explanation": "<one short sentence>", "label": "CORRECT" or "WRONG"}}

Question: {question}
GOLD answer: {gold}
GENERATED answer: {prediction}"""

LOCOMO_SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "label": {"type": "string", "enum": ["CORRECT", "WRONG"]},
    },
    "required": ["explanation", "label"],
}

_LME_BASE = """You will see a question, its correct answer and a response from a chat assistant. Answer yes if
the response contains the correct answer, otherwise answer no. A response that is equivalent to the
correct answer, or that gives all the intermediate steps needed to reach it, also counts as yes. A
response that gives only part of the information the answer requires counts as no.{rule}

Question: {{question}}
Correct answer: {{gold}}
Response: {{prediction}}

Is the response correct? Answer yes or no only."""

_TEMPORAL_RULE = """
Do not penalise off-by-one errors in counts of days, weeks, months or years: if the question asks
for such a number and the response is off by one (e.g. 19 days when the answer is 18 days), the
response is still correct."""

_UPDATE_RULE = """
If the response mentions earlier information together with the updated answer, it is correct as
long as the updated answer is the one the question asks for."""

_LME_PREFERENCE = """You will see a question, a rubric describing the personalised response the user wants,
and a response from a chat assistant. Answer yes if the response satisfies the rubric, otherwise answer
no. The response need not cover every point of the rubric; it is correct as long as it recalls and
uses the user's personal information correctly.

Question: {question}
Rubric: {gold}
Response: {prediction}

Is the response correct? Answer yes or no only."""

_LME_ABSTENTION = """You will see a question that cannot be answered from the user's conversation history, an
explanation of why, and a response from a chat assistant. Answer yes if the response correctly
treats the question as unanswerable: for example it says the information is missing or incomplete,
or that related information is known but not what was asked. Otherwise answer no.

Question: {question}
Explanation: {gold}
Response: {prediction}

Does the response correctly identify the question as unanswerable? Answer yes or no only."""

LONGMEMEVAL_TEMPLATES: dict[str, str] = {
    "default": _LME_BASE.format(rule=""),
    "temporal-reasoning": _LME_BASE.format(rule=_TEMPORAL_RULE),
    "knowledge-update": _LME_BASE.format(rule=_UPDATE_RULE),
    "single-session-preference": _LME_PREFERENCE,
    "abstention": _LME_ABSTENTION,
}

#: LoCoMo category labels that the binary judge leaves out.
ADVERSARIAL_CATEGORIES = frozenset({"5", "adversarial"})


class LoCoMoJudge(JudgeProtocol):
    """Binary CORRECT (1) / WRONG (0) judge; adversarial questions are excluded."""

    name: ClassVar[str] = "locomo"
    version: ClassVar[str] = "locomo-binary-v1"
    json_schema: ClassVar[dict[str, Any] | None] = LOCOMO_SCHEMA

    def templates(self) -> dict[str, str]:
        """The one template."""
        return {"default": LOCOMO_PROMPT}

    def excluded(self, question: Question) -> str | None:
        """Adversarial questions are not judged (as in the published LoCoMo J scores)."""
        if str(question.category).lower() in ADVERSARIAL_CATEGORIES:
            return f"category {question.category!r} (adversarial) is excluded by the locomo judge"
        return None

    def parse(self, raw: str) -> tuple[float, str]:
        """A JSON ``label``, else the one bare CORRECT/WRONG word of the output.

        Raises:
            ValueError: For no label, both labels, or another label value.
        """
        obj = json_object(raw)
        if obj is not None and "label" in obj:
            label = str(obj["label"]).strip().upper()
            if label not in ("CORRECT", "WRONG"):
                raise ValueError(f"judge label {obj['label']!r} is not CORRECT or WRONG")
            return (1.0 if label == "CORRECT" else 0.0), str(obj.get("explanation", ""))
        # The prompt family forbids naming both labels: output with both is a failure, whatever comes first.
        return one_label(raw, {"CORRECT": 1.0, "WRONG": 0.0}, "locomo judge", first_word=False), ""


class LongMemEvalJudge(JudgeProtocol):
    """LongMemEval's yes (1) / no (0) judge with one prompt per question type."""

    name: ClassVar[str] = "longmemeval"
    version: ClassVar[str] = "longmemeval-yesno-v1"
    max_tokens: ClassVar[int] = 16  # a yes/no verdict (LongMemEval's own evaluation allows 10 tokens)

    def templates(self) -> dict[str, str]:
        """Base, temporal-reasoning, knowledge-update, preference and abstention templates."""
        return dict(LONGMEMEVAL_TEMPLATES)

    def template_key(self, question: Question) -> str:
        """``abstention`` for ``_abs`` questions, else the question type's template (or the base one)."""
        if question.is_abstention:
            return "abstention"
        return question.category if question.category in LONGMEMEVAL_TEMPLATES else "default"

    def parse(self, raw: str) -> tuple[float, str]:
        """Yes -> 1, no -> 0 (see :func:`benchmarks.judge_protocol.one_label`).

        Raises:
            ValueError: For output with neither or both words (not leading).
        """
        return one_label(raw, {"yes": 1.0, "no": 0.0}, "longmemeval judge"), raw.strip()[:200]
