"""Prompts of the LLM tiers, laid out for llama.cpp prefix-cache reuse, and their truncation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from modules.backends.base import GenerationRequest
from modules.base import RELATION_MODULES, ModuleInput
from modules.nlp import short_date
from modules.types import Evidence

Style = Literal["direct", "cot", "react", "fewshot"]
STYLES: tuple[Style, ...] = ("direct", "cot", "react", "fewshot")

#: Tokens reserved for the chat template's special tokens and role headers.
TEMPLATE_MARGIN = 48
#: Default cap on prompt tokens (keeps CPU prompt evaluation to a few seconds).
DEFAULT_MAX_PROMPT_TOKENS = 1024
#: Relations shown to the LLM summary, per relation module.
SUMMARY_FACTS_PER_MODULE = 6
#: Longest relation list a structured answer may hold (bounds generated tokens).
MAX_ITEMS = 8

SYSTEM = (
    "You read excerpts of a person's chat history and pull out what helps answer a question. "
    "Use only the evidence. Never invent facts. Be brief."
)

_JSON_ITEMS = 'Reply with JSON: {"items": ["...", "..."]}.'
ASKS: dict[str, str] = {
    "filter": 'Which evidence items help answer the question? Reply with JSON: {"relevant": [item numbers]}.',
    "entity": 'List facts about the people, places and things, each as "subject | relation | object". '
    + _JSON_ITEMS,
    "temporal": 'List dated events, each as "event | date". Turn relative dates (yesterday, last week) '
    "into calendar dates using the item's date. " + _JSON_ITEMS,
    "topic": "List the main topics of the evidence as short phrases. " + _JSON_ITEMS,
    "summary": "Write at most 4 sentences of notes from the evidence that help answer the question. "
    "Keep names and dates.",
}

#: Asks of the quality ladder (``keep_evidence``): the notes go in front of the evidence, so
#: they should point at the answer rather than restate the evidence.
KEEP_ASKS: dict[str, str] = {
    **ASKS,
    "summary": "Write short notes for answering the question: quote the exact words of the evidence "
    "that answer it, with the item's date; turn relative dates (yesterday, last week, next month) into "
    "calendar dates using the item's date. End with a line 'Answer: <short answer>'.",
}

STYLE_SUFFIX: dict[Style, str] = {
    "direct": "",
    "fewshot": "",
    "cot": "First think step by step in at most 3 short sentences. Then write a last line "
    "starting with 'Answer:' followed by your reply.",
    "react": "Work in three steps, one line each: 'PLAN:' what to look for; 'ACT:' what the evidence "
    "says; 'REFLECT:' check it. Then write <answer> followed by your reply.",
}

#: Generation caps per module for the ``direct``/``fewshot`` styles.
DEFAULT_MAX_TOKENS: dict[str, int] = {"filter": 24, "entity": 96, "temporal": 96, "topic": 48, "summary": 128}
#: Extra tokens the reasoning styles get on top (their reasoning precedes the answer).
STYLE_EXTRA_TOKENS: dict[Style, int] = {"direct": 0, "fewshot": 0, "cot": 96, "react": 160}

_EXAMPLE_EVIDENCE = '[1] (3 June 2022) Alice said, "I moved to Berlin last year and I work at Siemens now."'
_EXAMPLE_QUESTION = "Where does Alice work?"
FEWSHOT_ANSWERS: dict[str, str] = {
    "filter": '{"relevant": [1]}',
    "entity": '{"items": ["Alice | moved to | Berlin", "Alice | works at | Siemens"]}',
    "temporal": '{"items": ["Alice moved to Berlin | 2021"]}',
    "topic": '{"items": ["moving to Berlin", "working at Siemens"]}',
    "summary": "Alice moved to Berlin in 2021 and works at Siemens.",
}


class TokenCounter(Protocol):
    """What prompt building needs from an LLM (``CachedLLM`` satisfies it)."""

    @property
    def n_ctx(self) -> int:
        """Context window in tokens."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes."""
        ...


class PromptTooLong(ValueError):
    """The prompt does not fit the context window even without evidence."""


def schema_for(module: str, n_evidence: int) -> dict[str, Any] | None:
    """JSON schema of a structured answer (``None`` for the free-text summary)."""
    if module == "filter":
        item = {"type": "integer", "minimum": 1, "maximum": max(n_evidence, 1)}
        return {
            "type": "object",
            # minItems=1: an empty pick is useless downstream (it would fall back to chunk 1).
            "properties": {
                "relevant": {"type": "array", "items": item, "minItems": 1, "maxItems": max(n_evidence, 1)}
            },
            "required": ["relevant"],
        }
    if module in RELATION_MODULES:
        return {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_ITEMS}},
            "required": ["items"],
        }
    return None


def evidence_lines(evidence: list[Evidence] | tuple[Evidence, ...]) -> str:
    """Numbered evidence, ``[i] (date) text``, one chunk per line."""
    out = []
    for i, ev in enumerate(evidence, 1):
        date = short_date(ev.timestamp)
        out.append(f"[{i}] " + (f"({date}) " if date else "") + " ".join(ev.text.split()))
    return "\n".join(out)


def _case(
    module: str,
    inp: ModuleInput,
    evidence: list[Evidence],
    style: Style,
    keep_evidence: bool = False,
) -> str:
    """Evidence, facts, ask and question: the part of the prompt that follows :data:`SYSTEM`."""
    parts = ["Evidence:\n" + (evidence_lines(evidence) or "(none)")]
    if module == "summary":
        facts = [
            f"- {r}"
            for m in RELATION_MODULES
            for r in list(inp.relations.get(m, ()))[:SUMMARY_FACTS_PER_MODULE]
        ]
        if facts:
            parts.append("Extracted facts:\n" + "\n".join(facts))
    asks = KEEP_ASKS if keep_evidence else ASKS
    ask = asks[module] + (" " + STYLE_SUFFIX[style] if STYLE_SUFFIX[style] else "")
    parts.append("Task: " + ask)
    question = f"Question: {inp.query}"
    if inp.question_date:
        question += f"\nQuestion date: {inp.question_date}"
    parts.append(question)
    return "\n\n".join(parts)


def _request(
    module: str,
    inp: ModuleInput,
    evidence: list[Evidence],
    style: Style,
    max_tokens: int,
    keep_evidence: bool = False,
) -> GenerationRequest:
    schema = schema_for(module, len(evidence)) if style in ("direct", "fewshot") else None
    stop: tuple[str, ...] = ("</answer>",) if style == "react" else ()
    if style == "fewshot":
        example_inp = ModuleInput(module, _EXAMPLE_QUESTION, (), question_date=None)
        example = _case(module, example_inp, [], "fewshot").replace("(none)", _EXAMPLE_EVIDENCE)
        prompt = (
            f"{SYSTEM}\n\n{example}\nAnswer: {FEWSHOT_ANSWERS[module]}\n\n"
            f"{_case(module, inp, evidence, style, keep_evidence)}\nAnswer:"
        )
        return GenerationRequest(
            prompt=prompt, max_tokens=max_tokens, stop=("\n\n", *stop), json_schema=schema
        )
    messages = (
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _case(module, inp, evidence, style, keep_evidence)},
    )
    return GenerationRequest(messages=messages, max_tokens=max_tokens, stop=stop, json_schema=schema)


#: Longest reasoning (characters) carried into the finalising call.
MAX_REASONING_CHARS = 1200
FINALISE_ASK = "Using your notes above, now give only the final reply, in the format the task asks for."


def finalise_request(
    module: str, request: GenerationRequest, reasoning: str, n_evidence: int
) -> GenerationRequest:
    """The follow-up call that turns free reasoning into the module's answer format.

    Used by the ``cot``/``react`` styles when the reasoning did not end in a parseable answer
    (small models often ignore the ``Answer:``/``<answer>`` convention or run out of tokens).
    The original case and the model's own reasoning are kept -- so llama.cpp reuses the
    prefix -- and the reply is JSON-schema constrained like the ``direct`` style.
    """
    notes = reasoning.strip()[:MAX_REASONING_CHARS] or "(none)"
    tail = f"\n\nYour notes:\n{notes}\n\n{FINALISE_ASK}"
    schema = schema_for(module, n_evidence)
    max_tokens = DEFAULT_MAX_TOKENS[module]
    if request.prompt is not None:
        return GenerationRequest(
            prompt=request.prompt + tail + "\nAnswer:",
            max_tokens=max_tokens,
            stop=("\n\n",),
            json_schema=schema,
        )
    assert request.messages is not None
    system, user = request.messages
    return GenerationRequest(
        messages=(system, {"role": "user", "content": user["content"] + tail}),
        max_tokens=max_tokens,
        json_schema=schema,
    )


def _prompt_tokens(req: GenerationRequest, llm: TokenCounter) -> int:
    if req.prompt is not None:
        return llm.count_tokens(req.prompt)
    assert req.messages is not None
    return sum(llm.count_tokens(m["content"]) for m in req.messages)


@dataclass(frozen=True)
class BuiltPrompt:
    """A request plus what truncation did.

    Attributes:
        request: The generation request.
        evidence: The chunks actually shown (a prefix of the input evidence, possibly with
            the last one cut).
        dropped: Chunks dropped to fit the context window.
        cut_chars: Characters cut from the last shown chunk (0 if none).
    """

    request: GenerationRequest
    evidence: tuple[Evidence, ...]
    dropped: int
    cut_chars: int


def build_prompt(
    module: str,
    style: Style,
    inp: ModuleInput,
    llm: TokenCounter,
    *,
    max_tokens: int,
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
    keep_evidence: bool = False,
) -> BuiltPrompt:
    """Build the request for ``module`` in ``style``, truncating evidence to fit (docs/design/modules.md).

    Raises:
        PromptTooLong: Even with no evidence the prompt exceeds the budget.
        ValueError: Unknown module or style.
    """
    if module not in ASKS:
        raise ValueError(f"no prompt for module {module!r}; known: {sorted(ASKS)}")
    if style not in STYLES:
        raise ValueError(f"unknown prompting style {style!r}; known: {STYLES}")
    budget = min(llm.n_ctx, max_prompt_tokens) - max_tokens - TEMPLATE_MARGIN
    evidence = list(inp.evidence)

    def fits(ev: list[Evidence]) -> tuple[bool, GenerationRequest]:
        req = _request(module, inp, ev, style, max_tokens, keep_evidence)
        return _prompt_tokens(req, llm) <= budget, req

    ok, req = fits(evidence)
    while not ok and len(evidence) > 1:
        evidence.pop()
        ok, req = fits(evidence)
    cut = 0
    if not ok and evidence:
        first = evidence[0]
        lo, hi = 0, len(first.text)  # binary search on the kept prefix length of chunk 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits([_with_text(first, first.text[:mid])])[0]:
                lo = mid
            else:
                hi = mid - 1
        if lo == 0:
            evidence = []
        else:
            cut = len(first.text) - lo
            evidence = [_with_text(first, first.text[:lo])]
        ok, req = fits(evidence)
    if not ok:
        raise PromptTooLong(
            f"{module} prompt needs more than {budget} tokens even without evidence "
            f"(n_ctx={llm.n_ctx}, max_prompt_tokens={max_prompt_tokens}, max_tokens={max_tokens})"
        )
    return BuiltPrompt(req, tuple(evidence), len(inp.evidence) - len(evidence), cut)


def _with_text(ev: Evidence, text: str) -> Evidence:
    return Evidence(ev.chunk_id, text, ev.timestamp, ev.score, ev.source_ids)


def describe(request: GenerationRequest) -> str:
    """A readable dump of a request (for debugging and reports)."""
    body = (
        request.prompt if request.prompt is not None else json.dumps(list(request.messages or ()), indent=1)
    )
    schema = request.json_schema is not None
    return f"max_tokens={request.max_tokens} stop={request.stop!r} schema={schema}\n{body}"
