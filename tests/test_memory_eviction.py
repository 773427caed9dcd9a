import numpy as np
import pytest

from memory import HierarchicalMemory, MemoryConfig, get_encoder
from memory.eviction import LevelView, get_policy, lowest_k


def _mem(**kw):
    cfg = dict(l1_capacity=20, l2_capacity=20, mode="no_ce", gate_threshold=0.5)
    cfg.update(kw)
    return HierarchicalMemory(MemoryConfig(**cfg), get_encoder("hashing"))


def test_lowest_k_matches_full_sort_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 200))
        primary = rng.integers(0, 5, n).astype(float)  # many ties
        tie = rng.permutation(n)
        ids = np.arange(n) + 1000
        k = int(rng.integers(0, n + 1))
        got = set(lowest_k(primary, tie, ids, k).tolist())
        want = set(np.lexsort((ids, tie, primary))[:k].tolist())
        assert got == want


def test_importance_eviction_moves_lowest_scores_to_l2_in_one_batch():
    mem = _mem()
    imp = [0.9] * 20
    for j in (3, 7, 11, 15):
        imp[j] = 0.1 + j / 100  # four low-importance items: 0.13, 0.17, 0.21, 0.25
    ids = mem.ingest([f"fact number {i}" for i in range(20)], imp)
    assert all(mem.level_of(i) == "L1" for i in ids)
    mem.ingest(["one more fact"], [0.9])
    # batch = int(0.15 * 20) = 3: the three lowest scores leave L1 together, into L2.
    assert [mem.level_of(ids[j]) for j in (3, 7, 11)] == ["L2"] * 3
    assert mem.level_of(ids[15]) == "L1"
    assert mem.stats["l1_evicted"] == 3 and len(mem) == 21


def test_importance_eviction_counts_usage_and_breaks_ties_by_age():
    mem = _mem()
    ids = mem.ingest([f"fact number {i} about topic{i}" for i in range(20)], [0.5] * 20)
    # Use item 0 ten times: 0.75*0.5 + 0.25 = 0.625 > 0.375 of the others.
    for _ in range(10):
        mem.levels["L1"].touch(np.array([mem.levels["L1"].row(ids[0])]), mem.clock)
    mem.ingest(["new"], [0.5])
    # Ties among unused items go to the oldest: 1, 2, 3 (not the used item 0).
    assert [mem.level_of(i) for i in ids[:5]] == ["L1", "L2", "L2", "L2", "L1"]


def test_lru_eviction_evicts_oldest_access_and_ignores_importance():
    mem = _mem(mode="lru")
    ids = mem.ingest([f"fact number {i} about topic{i}" for i in range(20)], [0.95] * 3 + [0.1] * 17)
    res = mem.retrieve("fact number 0 about topic0", k=1)  # refreshes item 0
    assert res[0].item_id == ids[0]
    mem.ingest(["new"], [0.5])
    assert [mem.level_of(i) for i in ids[:5]] == ["L1", "L2", "L2", "L2", "L1"]


def _fill_l2(protect: bool):
    """L1=10, L2=20 (batch 1 and 3). One barely-essential unused item (0.85 -> score 0.6375)
    competes with non-essential items whose usage lifts them to 0.75*0.84 + 0.25 = 0.88."""
    mem = _mem(l1_capacity=10, l2_capacity=20, protect_essential_in_l2=protect)
    first = mem.ingest(["item 0 alpha0"], [0.85])[0]
    for i in range(1, 40):
        mem.ingest([f"item {i} alpha{i}"], [0.84])
        for level in mem.levels.values():
            rows = level.live_rows()
            level.usage[rows[level.importance[rows] < 0.845]] = 10
    assert mem.stats["pruned_total"] > 0
    return mem, [first]


def test_l2_prune_rule_protects_essential_facts():
    mem, ids = _fill_l2(protect=True)
    assert mem.stats["pruned_total"] > 0
    assert mem.level_of(ids[0]) == "L2" and mem.stats["essential_lost"] == 0


def test_l2_prune_rule_reference_variant_prunes_lowest_score():
    mem, ids = _fill_l2(protect=False)
    assert mem.level_of(ids[0]) is None and mem.stats["essential_lost"] == 1


def test_protected_items_are_pruned_only_when_nothing_else_is_left():
    view = LevelView(
        np.arange(5), np.array([0.9, 0.9, 0.9, 0.9, 0.1], np.float32), np.zeros(5, int), np.arange(5)
    )
    got = get_policy("importance").select(view, 3, protect_threshold=0.85)
    assert set(got.tolist()) == {4, 0, 1}


def test_essential_accounting_matches_what_is_missing():
    mem = _mem(l1_capacity=10, l2_capacity=10)
    rng = np.random.default_rng(1)
    imp = rng.choice([0.95, 0.5, 0.86, 0.2], size=200, p=[0.3, 0.4, 0.1, 0.2])
    ids = mem.ingest([f"fact {i} x{i}" for i in range(200)], imp)
    gone = [i for i in ids if i not in mem]
    assert mem.stats["pruned_total"] == len(gone) == 200 - len(mem)
    assert mem.stats["essential_lost"] == sum(imp[i] >= 0.85 for i in gone)
    # 20 slots cannot hold ~80 essential facts, so some must be lost, and only when no
    # non-essential item is left in L2.
    assert mem.stats["essential_lost"] > 0


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="unknown policy 'fifo'"):
        MemoryConfig(eviction_policy="fifo")
    with pytest.raises(ValueError, match="unknown eviction policy"):
        get_policy("fifo")
