"""scripts/bench_learned_selectors.py: selectors trained on gold-evidence labels vs the retriever's order."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from modules.types import Evidence
from tests.support import load_script, needs_locomo


def _load():
    return load_script("bench_learned_selectors")


def _item(gold, sources):
    ev = tuple(Evidence(f"c{i}", f"A said t{i}", None, 1.0 - i / 10, ids) for i, ids in enumerate(sources))
    return SimpleNamespace(question=SimpleNamespace(evidence_ids=gold, question="?"), evidence=ev)


def test_top_k_recall_pins_the_retriever_and_a_selector():
    sel = _load()
    items = [_item(("a", "b"), [("x",), ("a",), ("b",)]), _item(("c",), [("c",), ("y",), ("z",)])]
    # a selector that reverses the order finds b first, then a; on the second item it finds c last
    got = sel.top_k_recall(items, {"rev": lambda it: list(range(len(it.evidence)))[::-1]})
    assert got["retriever"]["top-1"] == pytest.approx((0.0 + 1.0) / 2)
    assert got["retriever"]["top-2"] == pytest.approx((0.5 + 1.0) / 2)
    assert got["rev"]["top-1"] == pytest.approx((0.5 + 0.0) / 2)
    assert got["rev"]["top-3"] == pytest.approx(1.0)
    assert sel.labels(items[0]) == [0.0, 1.0, 1.0]
    assert sel.labelled([items[0], _item((), [("x",)])]) == [items[0]]


@needs_locomo
def test_lr_selector_trains_and_reports(tmp_path, capsys):
    sel = _load()
    args = ["--experiment", "none", "--selectors", "lr", "--train-limit", "20", "--limit", "6",
            "--eval-splits", "val", "--out", str(tmp_path)]
    overrides = ("backend=fake", "encoder=hashing", "question_bank.max_samples=1", "memory.mode=no_ce")
    for override in (*overrides, f"question_bank.cache_dir={tmp_path}"):
        args += ["--set", override]
    assert sel.main(args) == 0
    res = json.loads((tmp_path / "learned_selectors_locomo.json").read_text())
    rec = res["results"]["val"]["recall"]
    assert set(rec) == {"retriever", "lr"} and res["train"]["n"] == 20
    assert all(0.0 <= v <= 1.0 for r in rec.values() for v in r.values())
    assert rec["retriever"]["top-1"] <= rec["retriever"]["top-5"]
    assert "| val (n=" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        sel.main([*args, "--selectors", "svm"])
