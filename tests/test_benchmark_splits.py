"""Powered splits: fixed sizes, stratified by category, a pure function of ids and seed."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.splits import POWERED_SIZES, split_digest, stratified_split
from tests.support import has_locomo


def _ids(counts: dict[str, int]) -> tuple[list[str], list[str]]:
    ids, cats = [], []
    for cat, n in counts.items():
        ids += [f"{cat}-{i}" for i in range(n)]
        cats += [cat] * n
    return ids, cats


def test_sizes_are_exact_and_every_category_keeps_its_share() -> None:
    ids, cats = _ids({"a": 250, "b": 150, "c": 70, "d": 30})
    out = stratified_split(ids, cats, {"val": 100, "test": 250}, seed=0)
    assert Counter(out.values()) == {"test": 250, "val": 100, "train": 150}
    cat_of = dict(zip(ids, cats, strict=True))
    test = Counter(cat_of[q] for q, s in out.items() if s == "test")
    assert test == {"a": 125, "b": 75, "c": 35, "d": 15}  # 50% of each category
    val = Counter(cat_of[q] for q, s in out.items() if s == "val")
    assert sum(val.values()) == 100 and all(abs(val[c] - n / 5) <= 1 for c, n in {"a": 250, "b": 150}.items())


def test_the_draw_depends_on_ids_and_seed_only() -> None:
    ids, cats = _ids({"a": 40, "b": 23})
    one = stratified_split(ids, cats, {"val": 10, "test": 20}, seed=3)
    shuffled = list(zip(ids, cats, strict=True))[::-1]
    again = stratified_split(
        [i for i, _ in shuffled], [c for _, c in shuffled], {"val": 10, "test": 20}, seed=3
    )
    assert one == again  # input order does not matter
    assert stratified_split(ids, cats, {"val": 10, "test": 20}, seed=4) != one
    test_ids = [q for q, s in one.items() if s == "test"]
    assert split_digest(test_ids) == split_digest(test_ids[::-1]) and len(split_digest(test_ids)) == 16


def test_bad_requests_are_named() -> None:
    with pytest.raises(ValueError, match="cannot draw val 5 \\+ test 10 from 12"):
        stratified_split([str(i) for i in range(12)], ["x"] * 12, {"val": 5, "test": 10})
    with pytest.raises(ValueError, match="not unique"):
        stratified_split(["a", "a"], ["x", "x"], {"test": 1})
    from benchmarks.registry import get_benchmark

    with pytest.raises(ValueError, match="splits='big'"):
        get_benchmark("hotpotqa", splits="big")


@pytest.mark.skipif(not has_locomo(), reason="benchmark data directory absent")
def test_powered_splits_of_the_real_files() -> None:
    from benchmarks.registry import get_benchmark

    for name in ("longmemeval_oracle", "hotpotqa"):
        bench = get_benchmark(name, splits="powered")
        got = {
            s: [q.question_id for x in bench.load(s) for q in x.questions] for s in ("train", "val", "test")
        }
        assert {s: len(v) for s, v in got.items() if s != "train"} == POWERED_SIZES[name]
        assert not set(got["val"]) & set(got["test"]) and not set(got["train"]) & set(got["test"])
        assert sum(map(len, got.values())) == len([q for x in bench.load("all") for q in x.questions])
    # The powered LongMemEval split needs only the oracle file.
    assert [p.name for p in get_benchmark("longmemeval_oracle", splits="powered").data_files()] == [
        "longmemeval_oracle.json"
    ]
    locomo = get_benchmark("locomo", splits="powered")
    assert [len([q for x in locomo.load(s) for q in x.questions]) for s in ("val", "test")] == [341, 314]
