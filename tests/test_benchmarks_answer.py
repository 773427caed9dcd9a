"""Answer prompts (instructions -> memory -> question), answer cleaning, cost, and describe CLI."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.answer import ANSWER_TEMPLATES, AnswerGenerator, clean_answer
from benchmarks.types import Question
from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend, request_text
from modules.cache import CachedLLM
from modules.pricing import CostModel

Q = Question("q", "When did Max arrive?", "March 2021", "2", question_date="2023/05/30 (Tue) 23:40")


@pytest.mark.parametrize("bench", sorted(ANSWER_TEMPLATES))
def test_prompt_order_instructions_memory_question(bench: str) -> None:
    gen = AnswerGenerator(CachedLLM(FakeBackend(), None), bench)
    prompt = gen.prompt(Q, "MEMORY-TEXT")
    i_mem, i_q = prompt.index("MEMORY-TEXT"), prompt.index(Q.question)
    assert prompt.startswith(ANSWER_TEMPLATES[bench].instructions) and i_mem < i_q
    if bench.startswith("longmemeval"):
        assert "2023/05/30 (Tue) 23:40" in prompt[i_mem:]
    # the shared prefix does not depend on the question (prefix cache)
    other = Question("q2", "Something else?", "x", "2", question_date="2024/01/01 (Mon) 10:00")
    assert gen.prompt(other, "MEMORY-TEXT").split("MEMORY-TEXT")[0] == prompt.split("MEMORY-TEXT")[0]


def test_answer_returns_clean_text_and_cost() -> None:
    backend = FakeBackend(responder=lambda _r: "Answer: March 2021\nBecause ...")
    gen = AnswerGenerator(CachedLLM(backend, None), "locomo", cost_model=CostModel("gflops"))
    answer, cost = gen.answer(Q, "Ann said, ...")
    assert answer == "March 2021"
    assert cost.calls == 1 and cost.tokens_in > 0 and cost.value > 0 and cost.models == ("fake-llm",)
    assert backend.seen[0].max_tokens == 32 and backend.seen[0].temperature == 0.0


def test_failed_call_gives_empty_answer_and_counted_failure() -> None:
    gen = AnswerGenerator(CachedLLM(FakeBackend(fail_when=lambda _r: True), None), "hotpotqa")
    answer, cost = gen.answer(Q, "mem")
    assert answer == "" and cost.failures == 1


def test_memory_truncated_to_fit_context() -> None:
    backend = FakeBackend(n_ctx=200)
    gen = AnswerGenerator(CachedLLM(backend, None), "locomo")
    memory = " ".join(f"fact{i}" for i in range(1000))
    prompt = gen.prompt(Q, memory)
    assert backend.count_tokens(prompt) <= 200 - 32
    assert prompt.endswith("Short answer:") and "fact0" in prompt and "fact999" not in prompt
    _, cost = gen.answer(Q, memory)
    assert cost.failures == 0


def test_unknown_benchmark_template() -> None:
    with pytest.raises(KeyError, match="no answer template"):
        AnswerGenerator(CachedLLM(FakeBackend(), None), "squad")


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("  Paris\n", "Paris"),
        ('"Paris"', "Paris"),
        ("Short answer: 7 May 2023", "7 May 2023"),
        ("", ""),
        # real SmolLM2-135M outputs on LoCoMo (issue #13): the preamble must not be scored
        ('The answer to the question is: "dave"', "dave"),
        ("The answer is:", ""),
        ("The answer is:\n\n7 May 2023", "7 May 2023"),
        ("Answer: **yes**", "yes"),
        ("The answer is Paris", "Paris"),
        ("Based on the memory, she went to Paris", "she went to Paris"),
        # answers that merely start with the word are kept whole
        ("answer the phone", "answer the phone"),
        ("Answering machines", "Answering machines"),
    ],
)
def test_clean_answer(raw: str, clean: str) -> None:
    assert clean_answer(raw) == clean


@pytest.mark.parametrize("raw", ["The answer is:", "Short answer:", '""', "   "])
def test_empty_answer_after_cleaning_is_a_counted_failure(raw: str) -> None:
    gen = AnswerGenerator(CachedLLM(FakeBackend(responder=lambda _r: raw), None), "locomo")
    answer, cost = gen.answer(Q, "Ann said, ...")
    assert answer == "" and cost.failures == 1 and cost.calls == 1


def test_real_answer_is_not_a_failure() -> None:
    backend = FakeBackend(responder=lambda _r: 'The answer is: "dave"')
    gen = AnswerGenerator(CachedLLM(backend, None), "locomo")
    answer, cost = gen.answer(Q, "Ann said, ...")
    assert answer == "dave" and cost.failures == 0


def test_answer_many_batches_in_order() -> None:
    def responder(req: GenerationRequest) -> str:
        return "A1" if "first?" in request_text(req) else "A2"

    gen = AnswerGenerator(CachedLLM(FakeBackend(responder=responder), None), "hotpotqa")
    q1, q2 = Question("1", "first?", "x", "bridge"), Question("2", "second?", "y", "bridge")
    assert [a for a, _ in gen.answer_many([(q1, "m"), (q2, "m")])] == ["A1", "A2"]


def test_describe_cli_counts(capsys: pytest.CaptureFixture[str]) -> None:
    from common.datadir import DataFileError, resolve_data_dir
    from evaluation import cli_describe

    try:
        resolve_data_dir()
    except DataFileError as exc:
        pytest.skip(f"benchmark data directory absent ({exc})")
    parser = argparse.ArgumentParser()
    cli_describe.add_arguments(parser)
    assert cli_describe.run(parser.parse_args(["--benchmark", "locomo"])) == 0
    out = capsys.readouterr().out
    assert "test                 2            314" in out and "all                 10          1,540" in out
    assert cli_describe.run(parser.parse_args(["--benchmark", "locomo", "--include-adversarial"])) == 0
    assert "1,986" in capsys.readouterr().out
