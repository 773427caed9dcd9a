"""Answer metrics: token F1 with the LoCoMo normalisation, f1_max, exact match, per-category means."""

from __future__ import annotations

import json
import re
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from benchmarks.types import Question
from common.stemming import porter_stem

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_ABSTAIN_PHRASES = ("no information available", "not mentioned")


def normalize_answer(text: str) -> str:
    """LoCoMo answer normalisation (no stemming): see docs/design/benchmarks.md."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def normalized_tokens(text: str) -> list[str]:
    """Normalised, Porter-stemmed tokens of ``text``."""
    return [porter_stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 between normalised, stemmed prediction and gold (0 if either is empty)."""
    pred = normalized_tokens(prediction)
    ref = normalized_tokens(gold)
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1_max(prediction: str, gold: str) -> float:
    """Multi-answer F1: split both on commas; mean over gold items of the best predicted item's F1."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def scoring_gold(question: Question, benchmark: str) -> str:
    """The gold string actually scored (LoCoMo category 3 is cut at the first ``;``)."""
    if benchmark == "locomo" and question.category == "3":
        return question.answer.split(";", 1)[0]
    return question.answer


def score_answer(question: Question, prediction: str, benchmark: str) -> dict[str, float]:
    """Score one prediction the way the benchmark's reference evaluation does.

    Args:
        question: The question (its category selects the LoCoMo rule).
        prediction: The model's answer.
        benchmark: Benchmark name (``"locomo"``, ``"longmemeval"``, ``"longmemeval_oracle"``, ``"hotpotqa"``).

    Returns:
        ``{"f1": ..., "em": ...}``, both in [0, 1].
    """
    if benchmark == "locomo" and question.category == "5":
        hit = float(any(p in prediction.lower() for p in _ABSTAIN_PHRASES))
        return {"f1": hit, "em": hit}
    gold = scoring_gold(question, benchmark)
    if "answers" in question.extra:
        golds = [str(a) for a in json.loads(question.extra["answers"])] or [gold]
        return {
            "f1": max(token_f1(prediction, g) for g in golds),
            "em": max(exact_match(prediction, g) for g in golds),
        }
    f1 = (
        f1_max(prediction, gold)
        if benchmark == "locomo" and question.category == "1"
        else token_f1(prediction, gold)
    )
    return {"f1": f1, "em": exact_match(prediction, gold)}


def answer_containment(question: Question, context: str, benchmark: str) -> float:
    """Share of the scored gold answer's normalised words that occur in ``context``.

    A retrieval/compression diagnostic ("containment"): a context that lost the
    answer's words cannot be answered from. Questions whose gold answer has no words give 1.0
    only when there is nothing to contain (empty gold).
    """
    gold = normalized_tokens(scoring_gold(question, benchmark))
    if not gold:
        return 1.0
    have = set(normalized_tokens(context))
    return sum(w in have for w in gold) / len(gold)


def per_category(rows: Iterable[tuple[str, Mapping[str, float | None]]]) -> dict[str, dict[str, float]]:
    """Mean of each metric per category, plus an ``"all"`` row.

    Args:
        rows: ``(category, {metric: value})`` pairs; ``None`` values (e.g. failed judge
            calls) are left out of that metric's mean and counted in ``"<metric>_missing"``.

    Returns:
        ``{category: {metric: mean, "n": count, ...}}``, categories sorted, ``"all"`` last.
    """
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    missing: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    n: Counter[str] = Counter()
    for category, metrics in rows:
        for cat in (str(category), "all"):
            n[cat] += 1
            for name, value in metrics.items():
                if value is None:
                    missing[cat][name] += 1
                else:
                    sums[cat][name] += float(value)
                    counts[cat][name] += 1
    out: dict[str, dict[str, float]] = {}
    for cat in [*sorted(c for c in n if c != "all"), "all"] if n else []:
        row: dict[str, float] = {"n": float(n[cat])}
        for name in sorted(set(counts[cat]) | set(missing[cat])):
            row[name] = sums[cat][name] / counts[cat][name] if counts[cat][name] else float("nan")
            if missing[cat][name]:
                row[f"{name}_missing"] = float(missing[cat][name])
        out[cat] = row
    return out
