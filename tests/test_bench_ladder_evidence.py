"""scripts/bench_ladder_evidence.py: the local ladder's evidence proxy (no answerer)."""

from __future__ import annotations

import json

import pytest

from tests.support import load_script, needs_locomo


def _load():
    return load_script("bench_ladder_evidence")


def _fast(tmp_path) -> list[str]:
    """The fake LLM and hashing encoder, and no reranker stage (it would load MiniLM: 20 s a test)."""
    sets = ("backend=fake", "encoder=hashing", "memory=no_ce", f"question_bank.cache_dir={tmp_path}")
    return [a for s in sets for a in ("--set", s)]


def test_variants_parse_and_bad_ones_are_named():
    ladder = _load()
    got = ladder.parse_variants("a:keep_evidence=true,filter_retrieval_weight=0.5; b:")
    assert got == {"a": {"keep_evidence": True, "filter_retrieval_weight": 0.5}, "b": {}}
    with pytest.raises(ValueError, match="'keep_evidence=true' is not 'name:key=value"):
        ladder.parse_variants("keep_evidence=true")


@needs_locomo
def test_keep_evidence_mid_keeps_the_budget_and_the_template(tmp_path, capsys):
    ladder = _load()
    args = ["--split", "val", "--limit", "3", "--experiment", "none", "--out", str(tmp_path)]
    args += _fast(tmp_path)
    args += ["--variants", "thr:keep_evidence=false,module_topk=2;keep:keep_evidence=true,module_topk=2"]
    assert ladder.main(args) == 0
    res = json.loads((tmp_path / "locomo_val.json").read_text())["results"]
    assert res["keep"]["all-MID"]["kept"] == 2.0  # padded to the budget
    assert res["thr"]["all-MID"]["kept"] <= 2.0
    # MID under keep_evidence reads the LOW template plus its key sentences: never less of the answer
    assert res["keep"]["all-MID"]["containment"] >= res["keep"]["all-LOW"]["containment"]
    assert res["keep"]["all-MID"]["chars"] > res["keep"]["all-LOW"]["chars"]
    assert "| keep | all-MID | 3 |" in capsys.readouterr().out
    # the retriever's own ranking is the bar: more of it never recalls less
    top = [res["keep"][f"retriever top-{k}"]["filter_recall"] for k in ("2", "5", "all")]
    assert top == sorted(top)


@needs_locomo
def test_filter_only_measures_the_high_filter_and_nothing_after_it(tmp_path):
    ladder = _load()
    args = ["--split", "val", "--limit", "4", "--stratified", "--experiment", "none", "--out", str(tmp_path)]
    args += _fast(tmp_path)
    args += ["--variants", "sel:keep_evidence=false", "--tiers", "LOW,HIGH", "--filter-only"]
    assert ladder.main(args) == 0
    res = json.loads((tmp_path / "locomo_val.json").read_text())["results"]["sel"]
    assert res["all-HIGH"]["n"] == 4 and 1.0 <= res["all-HIGH"]["kept"] <= 5.0
    assert "containment" not in res["all-HIGH"]  # the summary never ran
    with pytest.raises(SystemExit):
        ladder.main([*args[:-3], "--tiers", "LOW,TOP"])
