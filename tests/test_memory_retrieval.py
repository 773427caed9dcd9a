import numpy as np
import pytest

from memory import HierarchicalMemory, MemoryConfig, get_encoder
from memory.calibration import calibrate_gate_threshold, gate_threshold_for
from memory.rerank import get_reranker

FACTS = [
    f"ENTRY {i}: Data-Lake in Region-{i % 7} logged Disk Saturation at Subsystem-{i}. Hex: 0x{i:04X}."
    for i in range(30)
]


def _query(i):
    return (
        f"Retrieve the Hex Code for the Disk Saturation event in Region-{i % 7} "
        f"involving Data-Lake at Subsystem-{i}."
    )


def _mem(**kw):
    cfg = dict(l1_capacity=20, l2_capacity=100, mode="no_ce", gate_threshold=0.3)
    cfg.update(kw)
    mem = HierarchicalMemory(MemoryConfig(**cfg), get_encoder("hashing"))
    mem.ingest(FACTS, [0.5] * 30)  # 0..29; 20 fit L1, so evictions move the oldest to L2
    return mem


def test_gate_passes_when_l1_top_hit_covers_query_entities():
    mem = _mem()
    assert mem.level_of(29) == "L1"
    res = mem.retrieve(_query(29))
    assert mem.last_gate.reason == "pass" and not mem.last_gate.fell_back
    assert res[0].item_id == 29 and res[0].level == "L1"
    assert all(r.level == "L1" for r in res)


def test_gate_falls_back_on_missing_entity_and_finds_l2_item():
    mem = _mem()
    assert mem.level_of(0) == "L2"
    res = mem.retrieve(_query(0))
    assert mem.last_gate.reason == "entities" and mem.last_gate.fell_back
    assert res[0].item_id == 0 and res[0].level == "L2"


def test_gate_falls_back_on_low_similarity():
    mem = _mem(gate_threshold=0.999)
    mem.retrieve(_query(29))
    assert mem.last_gate.reason == "similarity"
    assert mem.stats["gate_fallbacks"] == 1


def test_no_gate_mode_never_reads_l2():
    mem = _mem(mode="no_gate")
    res = mem.retrieve(_query(0), k=5)
    assert mem.last_gate.reason == "off" and all(r.level == "L1" for r in res)
    assert 0 not in [r.item_id for r in res]


def test_merge_keeps_l1_candidates_and_replace_drops_them():
    merged = _mem(fallback="merge").retrieve(_query(0), k=30)
    replaced = _mem(fallback="replace").retrieve(_query(0), k=30)
    assert {r.level for r in merged} == {"L1", "L2"}
    assert {r.level for r in replaced} == {"L2"}


def test_hybrid_score_and_usage_updates():
    mem = _mem()
    res = mem.retrieve(_query(29), k=3)
    top = res[0]
    # sim^3 + 0.8 * |{Subsystem-29}| + 0.1 * 0.5
    assert top.score == pytest.approx(top.similarity**3 + 0.8 + 0.05, abs=1e-5)
    l1 = mem.levels["L1"]
    for r in res:
        row = l1.row(r.item_id)
        assert l1.usage[row] == 1 and l1.last_access[row] == mem.clock


def test_reranker_stage_in_full_mode():
    mem = _mem(mode="full", reranker="lexical")
    res = mem.retrieve(_query(25), k=3)
    assert res[0].item_id == 25
    # final = 0.85 * coverage + 0.15 * hybrid; the fact covers 9 of the query's 10 content
    # tokens (hex code region 4 data lake disk saturation subsystem 25: all but "code").
    hybrid = res[0].similarity ** 3 + 0.8 + 0.05
    assert res[0].score == pytest.approx(0.85 * 0.9 + 0.15 * hybrid, abs=1e-5)
    lex = get_reranker("lexical").score("disk region-3", ["Disk at Region-3", "nothing"])
    np.testing.assert_allclose(lex, [1.0, 0.0])


def test_oracle_unbounded_keeps_everything():
    mem = _mem(mode="oracle_unbounded", l1_capacity=5)
    assert len(mem) == 30 and mem.stats["pruned_total"] == 0
    assert mem.retrieve(_query(0))[0].item_id == 0


def test_calibration_and_threshold_lookup():
    enc = get_encoder("hashing")
    cal = calibrate_gate_threshold(enc, FACTS, [_query(i) for i in range(30)], list(range(30)))
    assert cal.n_answerable > 20 and -1.0 <= cal.threshold <= 1.0
    assert 0.0 < gate_threshold_for("minilm") < 1.0
    with pytest.raises(ValueError, match="no calibrated gate threshold"):
        gate_threshold_for("never-calibrated")


def test_delete_removes_items_from_either_level():
    mem = _mem()
    assert mem.delete([0, 29, 12345]) == 2
    assert 0 not in mem and 29 not in mem and len(mem) == 28
    assert mem.stats["deleted"] == 2 and mem.stats["pruned_total"] == 0
    assert 29 not in [r.item_id for r in mem.retrieve(_query(29), k=10)]
