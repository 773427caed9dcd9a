import pytest

from common.datadir import DataFileError, data_file
from memory import MemoryConfig, get_encoder
from memory.bench import run_modes
from memory.scenarios import generate_synthetic, load_bgl


def test_synthetic_generator_follows_the_protocol():
    d = generate_synthetic(1000, 42)
    assert d.texts[9].startswith("ENTRY 10: ") and d.texts[9].endswith("Subsystem-10. Hex: 0x000A.")
    assert d.importance[9] == 0.95  # i % 10 == 0
    for text, imp in zip(d.texts, d.importance, strict=True):
        assert (imp == 0.95) == (int(text.split()[1][:-1]) % 10 == 0 or "Kernel Panic" in text)
    assert d.eval_sets["history"] == list(range(100)) and d.eval_sets["active"] == list(range(899, 1000))
    assert generate_synthetic(1000, 42).texts == d.texts != generate_synthetic(1000, 43).texts


def test_small_scenario_full_keeps_essentials_and_lru_loses_them():
    data = generate_synthetic(1200, 42)
    # A smaller ef_construction keeps the test fast; eviction and routing do not depend on it.
    base = MemoryConfig(
        l1_capacity=40,
        l2_capacity=400,
        entity_patterns="synthetic",
        reranker="lexical",
        hnsw_ef_construction=40,
    )
    rows = run_modes(data, get_encoder("hashing"), base, ["full", "lru", "oracle_unbounded"])
    by = {(r["mode"], r["eval_set"]): r for r in rows}
    assert by[("full", "active")]["essential_lost"] == 0
    assert by[("lru", "active")]["essential_lost"] > 100
    # Same stream and capacities: both policies prune the same number of facts, just different ones.
    assert by[("full", "active")]["pruned_total"] == by[("lru", "active")]["pruned_total"] > 600
    assert by[("full", "active")]["mrr"] >= 0.95
    assert by[("full", "history")]["mrr"] > by[("lru", "history")]["mrr"]
    assert by[("oracle_unbounded", "history")]["mrr"] >= 0.95


@pytest.mark.data
def test_bgl_loader_on_real_data():
    try:
        path = data_file("BGL_2k.log")
    except DataFileError:
        pytest.skip("benchmark data directory with BGL_2k.log is absent")
    d = load_bgl(path, seed=42)
    assert len(d.texts) == 2000 and len(d.eval_sets["all"]) == 200
    assert sum(i == 0.95 for i in d.importance) > 50
    assert load_bgl(path, seed=42).queries == d.queries


def test_cli_writes_csv_plot_and_metadata(tmp_path, capsys):
    import csv
    import json

    import evaluate

    out = tmp_path / "run"
    argv = ["memory", "--scenario", "A", "--n", "300", "--l1", "20", "--l2", "100", "--encoder", "hashing"]
    argv += ["--modes", "full,lru", "--seeds", "1,2", "--reranker", "lexical", "--no-cache"]
    argv += ["--out", str(out)]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    assert "active_mrr" in printed and "history_mrr" in printed and "latency_p50_ms" in printed
    summary = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["mode"] for r in summary] == ["full", "lru"] and all(r["n_seeds"] == "2" for r in summary)
    assert float(summary[0]["essential_lost"]) == 0 < float(summary[1]["essential_lost"])
    assert len(list(csv.DictReader((out / "results.csv").open()))) == 2 * 2 * 2  # seeds x modes x eval sets
    assert (out / "mrr.png").stat().st_size > 1000
    meta = json.loads((out / "run_metadata.json").read_text())
    assert meta["config"]["memory_config"]["l1_capacity"] == 20 and "git_commit" in meta


def test_cli_rejects_unknown_mode():
    import evaluate

    with pytest.raises(SystemExit, match="unknown mode"):
        evaluate.main(["memory", "--modes", "full,turbo", "--encoder", "hashing"])
