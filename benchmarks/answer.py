"""Answer generation: one short prompt per benchmark, built for the llama.cpp prefix cache."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.types import Question
from modules.backends.base import GenerationRequest
from modules.cache import CachedLLM
from modules.cost import Cost
from modules.pricing import CostModel


@dataclass(frozen=True)
class AnswerTemplate:
    """A benchmark's answer prompt.

    Attributes:
        instructions: Fixed text placed first.
        suffix: Format string after the memory; fields ``{question}`` and ``{question_date}``.
    """

    instructions: str
    suffix: str


_SHORT = "Answer with a short phrase, using exact words from the memory whenever possible. No explanation."

ANSWER_TEMPLATES: dict[str, AnswerTemplate] = {
    "locomo": AnswerTemplate(
        "Use the memory of a conversation below to answer the question. " + _SHORT + " "
        # Measured: without this line Qwen2.5-Coder-1.5B-Instruct answered "When ...?" with "Yesterday".
        "For a question about when, give the date, working out words like 'yesterday' or 'last week' "
        "from the date of the memory they were said in.",
        "Question: {question}\nShort answer:",
    ),
    "longmemeval": AnswerTemplate(
        "You are a chat assistant. Use the memory of your past chats with the user below to answer the "
        "user's question; dates matter. If the memory does not contain the answer, say you do not know. "
        + _SHORT,
        "Current date: {question_date}\nQuestion: {question}\nShort answer:",
    ),
    "hotpotqa": AnswerTemplate(
        "Use the passages below to answer the question. Answer with a short phrase (a name, a number, "
        "or yes/no). No explanation.",
        "Question: {question}\nShort answer:",
    ),
}
ANSWER_TEMPLATES["longmemeval_oracle"] = ANSWER_TEMPLATES["longmemeval"]
# Your own data (benchmarks.custom): dialogue or documents, with the question date when the data has one.
ANSWER_TEMPLATES["custom"] = AnswerTemplate(
    "Use the memory below (past conversations or documents) to answer the question. " + _SHORT,
    "Current date: {question_date}\nQuestion: {question}\nShort answer:",
)


def template_for(benchmark: str) -> AnswerTemplate:
    """The answer template of ``benchmark``.

    Raises:
        KeyError: For a benchmark without a template (naming the known ones).
    """
    if benchmark not in ANSWER_TEMPLATES:
        raise KeyError(f"no answer template for benchmark {benchmark!r}; known: {sorted(ANSWER_TEMPLATES)}")
    return ANSWER_TEMPLATES[benchmark]


#: Preambles small models put before the answer ("The answer to the question is: ...",
#: "Short answer: ...", "Based on the memory, ..."); stripped repeatedly from a line's start.
_PREAMBLE_RE = re.compile(
    r"^\s*(?:"
    r"(?:the\s+)?(?:short\s+|final\s+|correct\s+)?answer(?:\s+to\s+(?:the|this|your)\s+question)?"
    r"(?:\s*[:\-]|\s+(?:is|would\s+be|will\s+be)\b\s*:?)"
    r"|(?:based\s+on|according\s+to)\s+the\s+(?:memory|memories|conversation|evidence|passages?|context)\s*,?"
    r")\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’`*"


def _strip_line(line: str) -> str:
    line = line.strip().strip(_QUOTES).strip()
    while True:
        m = _PREAMBLE_RE.match(line)
        if not m or m.end() == 0:
            return line
        line = line[m.end() :].strip().strip(_QUOTES).strip()


def clean_answer(text: str) -> str:
    """The answer phrase of a model output.

    That is the first line that is not empty once preambles (``The answer to the question is:``,
    ``Short answer:``, ``Based on the memory,``) and surrounding quotes are removed. ``""`` means
    the model gave no answer (a counted failure).
    """
    for line in text.strip().splitlines():
        cleaned = _strip_line(line)
        if cleaned:
            return cleaned
    return ""


class AnswerGenerator:
    """Generates short answers from memory text with the benchmark's prompt.

    Args:
        llm: The backbone model wrapped in the call cache.
        benchmark: Benchmark name (selects the template).
        cost_model: Prices the answer calls (default: GFLOPs).
        max_tokens: Generation cap (answers are short phrases).
    """

    def __init__(
        self, llm: CachedLLM, benchmark: str, cost_model: CostModel | None = None, max_tokens: int = 32
    ) -> None:
        self.llm = llm
        self.benchmark = benchmark
        self.template = template_for(benchmark)
        self.cost_model = cost_model or CostModel()
        self.max_tokens = max_tokens

    def prompt(self, question: Question, memory_text: str) -> str:
        """The full prompt; the memory is cut from its end if the prompt would not fit ``n_ctx``."""
        suffix = self.template.suffix.format(
            question=question.question, question_date=question.question_date or "unknown"
        )
        memory = memory_text.strip() or "(empty)"

        def build(mem: str) -> str:
            return f"{self.template.instructions}\n\nMemory:\n{mem}\n\n{suffix}"

        budget = self.llm.n_ctx - self.max_tokens - 16  # a little slack for the chat template
        prompt = build(memory)
        for _ in range(8):  # shrink proportionally; converges in a few steps
            n = self.llm.count_tokens(prompt)
            if n <= budget:
                return prompt
            keep = max(0, int(len(memory) * budget / n * 0.95))
            memory = memory[:keep]
            prompt = build(memory)
        return prompt

    def answer_many(self, items: Sequence[tuple[Question, str]]) -> list[tuple[str, Cost]]:
        """Answer a batch of ``(question, memory_text)`` pairs in one backend batch.

        Returns:
            ``(answer, cost)`` per item; a failed call, or an output with no answer left after
            :func:`clean_answer` (e.g. ``The answer is:``), gives ``""`` and a cost with
            ``failures=1``, so it is counted as a failure, never as a silent wrong answer.
        """
        requests = [
            GenerationRequest(
                messages=({"role": "user", "content": self.prompt(q, m)},), max_tokens=self.max_tokens
            )
            for q, m in items
        ]
        results = self.llm.generate(requests, tags={"module": "answer", "benchmark": self.benchmark})
        out: list[tuple[str, Cost]] = []
        for r in results:
            cost = self.cost_model.llm(r)
            answer = clean_answer(r.text) if r.ok else ""
            if r.ok and not answer:
                cost = dataclasses.replace(cost, failures=cost.failures + 1)
            out.append((answer, cost))
        return out

    def answer(self, question: Question, memory_text: str) -> tuple[str, Cost]:
        """Answer one question from ``memory_text``; returns ``(answer, cost)``."""
        return self.answer_many([(question, memory_text)])[0]
