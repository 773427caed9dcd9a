import json

import numpy as np
import pytest

from memory import HierarchicalMemory, MemoryConfig, MemoryLoadError, get_encoder
from memory.encoder import HashingEncoder
from memory.scenarios import generate_synthetic


def _build(mode="full"):
    data = generate_synthetic(400, 3)
    mem = HierarchicalMemory(
        MemoryConfig(l1_capacity=40, l2_capacity=200, mode=mode, reranker="lexical"), get_encoder("hashing")
    )
    mem.ingest(data.texts, data.importance, metadata=[{"pos": i} for i in range(len(data.texts))])
    for j in (399, 398, 5, 100):
        mem.retrieve(data.queries[j])
    return mem, data


@pytest.mark.parametrize("mode", ["full", "lru", "oracle_unbounded"])
def test_round_trip_keeps_every_item_and_gives_identical_results(tmp_path, mode):
    mem, data = _build(mode)
    mem.save(tmp_path)
    loaded = HierarchicalMemory.load(tmp_path, get_encoder("hashing"))
    assert len(loaded) == len(mem) and loaded.stats == mem.stats
    assert (loaded.next_id, loaded.clock, loaded.gate_threshold) == (
        mem.next_id,
        mem.clock,
        mem.gate_threshold,
    )
    for name, level in mem.levels.items():
        a, b = level.all_items(), loaded.levels[name].all_items()
        oa, ob = np.argsort(a.item_ids), np.argsort(b.item_ids)
        for col in ("item_ids", "embeddings", "importance", "usage", "last_access"):
            np.testing.assert_array_equal(getattr(a, col)[oa], getattr(b, col)[ob])
        assert [a.texts[i] for i in oa] == [b.texts[i] for i in ob]
        assert [a.entities[i] for i in oa] == [b.entities[i] for i in ob]
        assert [a.metadata[i] for i in oa] == [b.metadata[i] for i in ob]
    for j in (0, 50, 150, 300, 399):
        ra, rb = mem.retrieve(data.queries[j]), loaded.retrieve(data.queries[j])
        key = [(r.item_id, r.level, r.metadata) for r in ra]
        assert key == [(r.item_id, r.level, r.metadata) for r in rb]
        np.testing.assert_allclose([r.score for r in ra], [r.score for r in rb], rtol=1e-6)
    # Both copies keep evolving identically (eviction state was restored too).
    more = [f"late fact {i} at Subsystem-{i}" for i in range(60)]
    mem.ingest(more)
    loaded.ingest(more)
    assert mem.stats == loaded.stats
    assert sorted(mem.levels["L1"].all_items().item_ids) == sorted(loaded.levels["L1"].all_items().item_ids)


def test_corrupted_index_file_is_detected(tmp_path):
    mem, _ = _build()
    mem.save(tmp_path)
    blob = bytearray((tmp_path / "L1.hnsw").read_bytes())
    blob[100] ^= 0xFF
    (tmp_path / "L1.hnsw").write_bytes(bytes(blob))
    with pytest.raises(MemoryLoadError, match=r"L1.hnsw is corrupted"):
        HierarchicalMemory.load(tmp_path, get_encoder("hashing"))


def test_truncated_manifest_and_missing_dir(tmp_path):
    mem, _ = _build()
    mem.save(tmp_path)
    text = (tmp_path / "manifest.json").read_text()
    (tmp_path / "manifest.json").write_text(text[: len(text) // 2])
    with pytest.raises(MemoryLoadError, match="not valid JSON"):
        HierarchicalMemory.load(tmp_path, get_encoder("hashing"))
    with pytest.raises(MemoryLoadError, match=r"manifest\.json not found"):
        HierarchicalMemory.load(tmp_path / "nowhere", get_encoder("hashing"))


def test_mismatched_encoder_name_or_dim_is_rejected(tmp_path):
    mem, _ = _build()
    mem.save(tmp_path)
    other = HashingEncoder(dim=128)
    with pytest.raises(MemoryLoadError, match="dim 384 but encoder 'hashing' has dim 128"):
        HierarchicalMemory.load(tmp_path, other)
    other.name = "other-encoder"
    with pytest.raises(
        MemoryLoadError, match="saved with encoder 'hashing' but loading with 'other-encoder'"
    ):
        HierarchicalMemory.load(tmp_path, other)


def test_save_is_atomic_no_temporary_files_left(tmp_path):
    mem, _ = _build()
    mem.save(tmp_path)
    mem.save(tmp_path)  # overwrite in place
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["L1.hnsw", "L1.json", "L1.npz", "L2.hnsw", "L2.json", "L2.npz", "manifest.json"]
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert (
        man["encoder"] == "hashing"
        and man["dim"] == 384
        and set(man["files"]) == set(names) - {"manifest.json"}
    )
