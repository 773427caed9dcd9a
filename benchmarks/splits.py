"""Split schemes: the published splits, and powered ones with validation and test sets big enough to decide.

``splits="paper"`` (the default) keeps each benchmark's split as the committed tables used it: LoCoMo by
conversation (0–5 / 6–7 / 8–9), LongMemEval by the BudgetMem paper's question ids, HotpotQA 60/20/20 by
the sha256 rank of the question id. Their validation sets (98 LongMemEval, 40 HotpotQA questions) and the
subsets of them the tables used give intervals wider than the effects being measured.

``splits="powered"`` draws validation and test sets of fixed sizes (:data:`POWERED_SIZES`), stratified by
category (the LongMemEval question type, the HotpotQA question type), from every question of the file; the
rest trains routers. The draw is a pure function of the question ids, their categories and ``split_seed``:
each category's ids are ranked by ``sha256(f"{seed}:{id}")``, the first of the ranking go to test and the
next to validation, with each category's quota proportional to its share (largest remainders). No file
beyond the official one is needed, and the same data and seed give the same split on any machine. LoCoMo
needs no new draw: its conversation split already holds 341 validation and 314 test questions
(non-adversarial), so ``powered`` is its paper split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from benchmarks.base import check_one_of

#: The split schemes a loader accepts (``benchmark.options.splits``).
SCHEMES: tuple[str, ...] = ("paper", "powered")

#: Questions in the powered validation and test sets, per benchmark (the rest is training).
POWERED_SIZES: dict[str, dict[str, int]] = {
    "longmemeval_oracle": {"val": 100, "test": 250},
    "longmemeval": {"val": 100, "test": 250},
    "hotpotqa": {"val": 50, "test": 100},
}


def check_scheme(scheme: str) -> str:
    """Return ``scheme`` if known.

    Raises:
        ValueError: Naming the known schemes.
    """
    return check_one_of(scheme, SCHEMES, "benchmark option splits=")


def _quotas(counts: Mapping[str, int], total: int) -> dict[str, int]:
    """``total`` shared over the categories in proportion to ``counts`` (largest remainders, ties by name)."""
    n = sum(counts.values())
    exact = {c: total * k / n for c, k in counts.items()}
    quota = {c: int(v) for c, v in exact.items()}
    left = total - sum(quota.values())
    for c in sorted(exact, key=lambda c: (quota[c] - exact[c], c))[:left]:
        quota[c] += 1
    return quota


def stratified_split(
    ids: Sequence[str], categories: Sequence[str], sizes: Mapping[str, int], seed: int = 0
) -> dict[str, str]:
    """Assign every id to ``train``, ``val`` or ``test``, stratified by category (rule: module docstring).

    ``sizes["test"]`` ids go to test, ``sizes["val"]`` to validation, the rest to training.

    Example:
        >>> split = stratified_split(["a1", "a2", "a3", "a4", "b1", "b2"], ["a"] * 4 + ["b"] * 2, {"test": 3})
        >>> sorted(split.values())
        ['test', 'test', 'test', 'train', 'train', 'train']

    Args:
        ids: Question ids (unique).
        categories: The category of each id, in the same order.
        sizes: ``{"val": n_val, "test": n_test}``.
        seed: The draw's seed.

    Returns:
        ``{id: split}``.

    Raises:
        ValueError: Duplicate ids, lengths that differ, or sizes the ids cannot fill.
    """
    if len(ids) != len(categories):
        raise ValueError(f"{len(ids)} ids but {len(categories)} categories")
    if len(set(ids)) != len(ids):
        raise ValueError("question ids are not unique")
    n_val, n_test = int(sizes.get("val", 0)), int(sizes.get("test", 0))
    if n_val < 0 or n_test < 0 or n_val + n_test > len(ids):
        raise ValueError(f"cannot draw val {n_val} + test {n_test} from {len(ids)} questions")
    by_cat: dict[str, list[str]] = {}
    for qid, cat in zip(ids, categories, strict=True):
        by_cat.setdefault(cat, []).append(qid)
    counts = {c: len(v) for c, v in by_cat.items()}
    test_q = _quotas(counts, n_test)
    # Validation quotas come from what test left, so a small category is never asked for more than it has.
    left = {c: counts[c] - test_q[c] for c in counts}
    val_q = _quotas(left, n_val) if n_val else dict.fromkeys(counts, 0)
    out: dict[str, str] = {}
    for cat, members in by_cat.items():
        ranked = sorted(members, key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
        for r, qid in enumerate(ranked):
            out[qid] = "test" if r < test_q[cat] else "val" if r < test_q[cat] + val_q[cat] else "train"
    return out


def split_digest(ids: Sequence[str]) -> str:
    """A short fingerprint of one split's question ids (order-independent), recorded with a run."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]
