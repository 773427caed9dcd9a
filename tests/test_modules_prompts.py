import pytest

from modules.backends.fake import FakeBackend
from modules.base import ModuleInput
from modules.prompts import SYSTEM, PromptTooLong, build_prompt, schema_for
from modules.types import Evidence

EV = tuple(
    Evidence(f"c{i}", f'Alice said, "Fact number {i} about my cat."', "1:56 pm on 8 May, 2023")
    for i in range(5)
)


def _inp(module="entity", ev=EV, **kw):
    return ModuleInput(module, "What is Alice's cat called?", ev, **kw)


def test_layout_instructions_evidence_ask_question():
    built = build_prompt("entity", "direct", _inp(), FakeBackend(), max_tokens=32)
    system, user = built.request.messages
    assert system["content"] == SYSTEM
    body = user["content"]
    assert (
        body.index("Evidence:")
        < body.index("[5] (8 May 2023)")
        < body.index("Task:")
        < body.index("Question:")
    )
    assert body.rstrip().endswith("What is Alice's cat called?")
    assert built.request.json_schema == schema_for("entity", 5)
    assert built.dropped == 0 and built.cut_chars == 0


def test_relation_modules_share_the_evidence_prefix():
    """entity/temporal/topic prompts share everything up to the ask: llama.cpp reuses that prefix."""
    users = [
        build_prompt(m, "direct", _inp(m), FakeBackend(), max_tokens=32).request.messages[1]["content"]
        for m in ("entity", "temporal", "topic")
    ]
    prefix = users[0].split("Task:")[0]
    assert all(u.startswith(prefix) for u in users) and len(prefix) > 200


def test_summary_prompt_sees_evidence_and_facts():
    inp = _inp("summary", relations={"entity": ("Alice | has | a cat",)})
    body = build_prompt("summary", "direct", inp, FakeBackend(), max_tokens=32).request.messages[1]["content"]
    assert "Fact number 0" in body and "Alice | has | a cat" in body
    assert body.index("Evidence:") < body.index("Extracted facts:") < body.index("Task:")


def test_reasoning_styles_are_unconstrained_and_react_stops_at_tag():
    cot = build_prompt("entity", "cot", _inp(), FakeBackend(), max_tokens=32).request
    react = build_prompt("entity", "react", _inp(), FakeBackend(), max_tokens=32).request
    assert cot.json_schema is None and "Answer:" in cot.messages[1]["content"]
    assert react.json_schema is None and react.stop == ("</answer>",)
    assert "PLAN:" in react.messages[1]["content"]


def test_fewshot_is_a_completion_prompt_with_example():
    req = build_prompt("topic", "fewshot", _inp("topic"), FakeBackend(), max_tokens=32).request
    assert req.messages is None and req.prompt.startswith(SYSTEM)
    assert req.prompt.count("Answer:") == 2 and req.prompt.endswith("Answer:")
    assert "\n\n" in req.stop and req.json_schema is not None


def test_truncation_drops_lowest_ranked_chunks_first():
    llm = FakeBackend(n_ctx=170)  # whitespace tokens; the full prompt needs 114
    built = build_prompt("entity", "direct", _inp(), llm, max_tokens=32, max_prompt_tokens=10_000)
    assert 0 < built.dropped < 5
    assert [e.chunk_id for e in built.evidence] == [f"c{i}" for i in range(5 - built.dropped)]
    assert sum(len(m["content"].split()) for m in built.request.messages) <= 170 - 32 - 48


def test_truncation_cuts_a_single_oversized_chunk():
    big = (Evidence("big", "word " * 2000, None),)
    built = build_prompt("entity", "direct", _inp(ev=big), FakeBackend(n_ctx=400), max_tokens=32)
    assert built.dropped == 0 and built.cut_chars > 0
    assert built.evidence[0].text == ("word " * 2000)[: len(built.evidence[0].text)]


def test_prompt_too_long_even_without_evidence():
    inp = ModuleInput("entity", "why " * 500, EV)
    with pytest.raises(PromptTooLong, match="even without evidence"):
        build_prompt("entity", "direct", inp, FakeBackend(n_ctx=300), max_tokens=32)


def test_unknown_module_or_style():
    with pytest.raises(ValueError, match="no prompt for module"):
        build_prompt("nope", "direct", _inp(), FakeBackend(), max_tokens=8)
    with pytest.raises(ValueError, match="style"):
        build_prompt("entity", "shouty", _inp(), FakeBackend(), max_tokens=8)
