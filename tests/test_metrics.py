"""Token F1 / f1_max / exact match against a hand-computed table (LoCoMo normalisation)."""

from __future__ import annotations

import math

import pytest

from benchmarks.metrics import (
    exact_match,
    f1_max,
    normalize_answer,
    normalized_tokens,
    per_category,
    score_answer,
    token_f1,
)
from benchmarks.types import Question

# (prediction, gold, F1 computed by hand)
F1_TABLE = [
    # articles removed -> pred {cat, sat}, gold {cat, sat, down}: P=1, R=2/3, F1=0.8
    ("The cat sat", "a cat sat down", 0.8),
    # Porter: running->run, quickly->quickli, quick->quick: 1 common of 2/2 -> 0.5
    ("running quickly", "run quick", 0.5),
    # commas and punctuation stripped, case folded
    ("Paris, France.", "paris france", 1.0),
    # "and" is removed like an article; bag of tokens ignores order
    ("salt and pepper", "pepper salt", 1.0),
    # bag counts: common dog 1 + cat 1 = 2 of 3 and 3 -> 2/3
    ("dog dog cat", "dog cat cat", 2 / 3),
    ("", "anything", 0.0),
    ("completely different", "nothing shared", 0.0),
    # stemming makes plural and singular match: flies->fli, fly->fli
    ("flies", "fly", 1.0),
    # 7 May 2023 vs May 7: tokens {7, may, 2023} vs {may, 7}: P=2/3 R=1 -> 0.8
    ("7 May 2023", "May 7", 0.8),
]


@pytest.mark.parametrize(("pred", "gold", "expected"), F1_TABLE)
def test_token_f1_hand_table(pred: str, gold: str, expected: float) -> None:
    assert token_f1(pred, gold) == pytest.approx(expected)


def test_normalisation_removes_exactly_the_locomo_words() -> None:
    assert normalize_answer("The Band, and an Apple a day!") == "band apple day"
    # "an" inside a word and "andes" are kept (word boundaries)
    assert normalize_answer("Andes anthem") == "andes anthem"
    assert normalized_tokens("Caresses") == ["caress"]


def test_f1_max_multi_answer() -> None:
    # gold items: bananas -> 1, cherries -> 0, apples -> 1 => mean 2/3
    assert f1_max("apples, bananas", "bananas, cherries, apples") == pytest.approx(2 / 3)
    assert f1_max("x", "x") == 1.0


def test_exact_match() -> None:
    assert exact_match("The Beatles!", "beatles") == 1.0
    assert exact_match("Beatles band", "beatles") == 0.0


def _q(category: str, answer: str) -> Question:
    return Question(question_id="q", question="?", answer=answer, category=category)


def test_score_answer_locomo_rules() -> None:
    # cat 3: gold cut at the first ';'
    assert score_answer(_q("3", "Likely no; she says so"), "likely no", "locomo") == {"f1": 1.0, "em": 1.0}
    # the same gold outside LoCoMo cat 3 is not cut
    assert score_answer(_q("3", "Likely no; she says so"), "likely no", "hotpotqa")["f1"] < 1.0
    # cat 1 uses f1_max
    assert score_answer(_q("1", "dog, big cat"), "big cat, dog", "locomo")["f1"] == 1.0
    assert score_answer(_q("1", "dog, cat"), "dog", "locomo")["f1"] == pytest.approx(0.5)
    assert score_answer(_q("4", "dog, cat"), "dog", "locomo")["f1"] == pytest.approx(2 / 3)
    # cat 5 (adversarial): abstention phrases
    assert score_answer(_q("5", "Not mentioned"), "That is not mentioned in the chat.", "locomo")["f1"] == 1.0
    assert score_answer(_q("5", "Not mentioned"), "Yes", "locomo")["f1"] == 0.0


def test_per_category_skips_none_and_counts_it() -> None:
    rows = [
        ("1", {"f1": 1.0, "judge": None}),
        ("1", {"f1": 0.0, "judge": 1.0}),
        ("2", {"f1": 0.5, "judge": 0.5}),
    ]
    out = per_category(rows)
    assert list(out) == ["1", "2", "all"]
    assert out["1"]["f1"] == 0.5 and out["1"]["n"] == 2
    assert out["1"]["judge"] == 1.0 and out["1"]["judge_missing"] == 1
    assert out["all"]["f1"] == pytest.approx(0.5)
    assert out["all"]["judge"] == pytest.approx(0.75)
    assert per_category([]) == {}
    only_none = per_category([("x", {"judge": None})])
    assert math.isnan(only_none["x"]["judge"])
