"""Chunking, importance, memory building and evidence recall (hashing encoder: fast, no model)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.chunking import ChunkingConfig, chunk_history, count_tokens, render_turn, split_long
from benchmarks.embedding_cache import EmbeddingCache
from benchmarks.importance import chunk_importance, turn_importance
from benchmarks.memory_builder import MemoryBuildConfig, build_memory, memory_config_for, retrieve_evidence
from benchmarks.recall import evidence_hit, evidence_recall
from benchmarks.types import History, Question, Sample, Session, Turn
from memory.encoder import get_encoder
from modules.types import Evidence


def dialogue_sample() -> Sample:
    s1 = Session(
        "session_1",
        (
            Turn("D1:1", "Ann", "I adopted a beagle named Max in March 2021.", "8 May, 2023"),
            Turn("D1:2", "Bob", "Wow!", "8 May, 2023"),
            Turn(
                "D1:3",
                "Ann",
                "Max loves the beach near Santa Cruz.",
                "8 May, 2023",
                image_caption="a dog on sand",
            ),
        ),
        "8 May, 2023",
    )
    s2 = Session(
        "session_2",
        tuple(
            Turn(f"D2:{i}", "Bob", f"My cousin plays violin in concert number {i}.", "9 May")
            for i in range(1, 9)
        ),
        "9 May",
    )
    q = Question("x:q0", "What is the name of Ann's beagle?", "Max", "4", evidence_ids=("D1:1",))
    q2 = Question("x:q1", "Who plays violin?", "Bob's cousin", "4", evidence_ids=("D2:3", "D2:4"))
    q3 = Question("x:q2", "Unanswerable?", "n/a", "3")
    return Sample("x", History("x", (s1, s2)), (q, q2, q3))


def test_render_and_count() -> None:
    t = Turn("D1:3", "Ann", "Look!", image_caption="a photo of a dog")
    assert render_turn(t) == 'Ann said, "Look!" and shared a photo of a dog'
    assert count_tokens("Hello, world!") == 4
    pieces = split_long(" ".join(f"w{i}" for i in range(25)), 10)
    assert [count_tokens(p) for p in pieces] == [10, 10, 5]
    assert " ".join(pieces) == " ".join(f"w{i}" for i in range(25))


def test_packed_chunks_respect_bound_and_sessions() -> None:
    sample = dialogue_sample()
    chunks = chunk_history(sample.history, ChunkingConfig(max_tokens=40))
    assert all(count_tokens(c.text) <= 40 for c in chunks)
    # chunks never cross sessions and carry the session date
    for c in chunks:
        assert {tid.split(":")[0] for tid in c.turn_ids} == {"D1" if c.session_id == "session_1" else "D2"}
        assert c.timestamp == ("8 May, 2023" if c.session_id == "session_1" else "9 May")
    # every turn lands in exactly one chunk, in order
    assert [t for c in chunks for t in c.turn_ids] == [t.turn_id for t in sample.history.turns()]
    assert chunks[0].chunk_id == "x#c0" and len({c.chunk_id for c in chunks}) == len(chunks)
    per_turn = chunk_history(sample.history, ChunkingConfig(granularity="turn"))
    assert len(per_turn) == 11 and all(len(c.turn_ids) == 1 for c in per_turn)


def test_long_turn_is_split_not_truncated() -> None:
    long_text = " ".join(f"word{i}" for i in range(300))
    h = History("h", (Session("s", (Turn("s0:t0", "assistant", long_text), Turn("s0:t1", "user", "ok"))),))
    chunks = chunk_history(h, ChunkingConfig(max_tokens=64))
    assert all(count_tokens(c.text) <= 64 for c in chunks)
    assert sum("s0:t0" in c.turn_ids for c in chunks) == 5  # 306 tokens -> 5 pieces; the last one shares
    assert chunks[-1].turn_ids == ("s0:t0", "s0:t1")  # its chunk with the short next turn
    joined = " ".join(c.text for c in chunks)
    assert "word0" in joined and "word299" in joined


def test_document_chunks_prefix_title() -> None:
    h = History(
        "h",
        (
            Session(
                "Alpha",
                (Turn("Alpha#0", "Alpha", "Alpha is a town."), Turn("Alpha#1", "Alpha", "It is old.")),
            ),
        ),
        kind="document",
    )
    (chunk,) = chunk_history(h)
    assert chunk.text == "Alpha: Alpha is a town. It is old." and chunk.turn_ids == ("Alpha#0", "Alpha#1")
    with pytest.raises(ValueError, match="unknown kind"):
        chunk_history(History("h", (), kind="video"))
    with pytest.raises(ValueError, match="granularity"):
        ChunkingConfig(granularity="sentence")


def test_importance_heuristic_orders_facts_over_phatic() -> None:
    fact = Turn("a", "Ann", "I adopted a beagle named Max in March 2021.")
    phatic = Turn("b", "Bob", "Wow!")
    question = Turn("c", "Bob", "What did you do then?")
    assert turn_importance(fact) > turn_importance(question) > turn_importance(phatic)
    assert 0.0 <= turn_importance(phatic) <= turn_importance(fact) <= 1.0
    assert chunk_importance([phatic, fact]) == turn_importance(fact)
    assert chunk_importance([]) == 0.0


def test_memory_config_sized_to_history() -> None:
    cfg = memory_config_for(1000, MemoryBuildConfig(l1_fraction=0.1, l2_fraction=0.5))
    assert (cfg.l1_capacity, cfg.l2_capacity, cfg.entity_patterns) == (100, 500, "dialogue")
    assert memory_config_for(20).l1_capacity == 16  # min_l1
    with pytest.raises(ValueError, match="l1_fraction"):
        MemoryBuildConfig(l1_fraction=0.0)


@pytest.mark.parametrize("mode", ["no_ce", "oracle_unbounded", "lru"])
def test_build_and_retrieve(mode: str) -> None:
    sample = dialogue_sample()
    enc = get_encoder("hashing")
    build = MemoryBuildConfig(mode=mode, chunking=ChunkingConfig(max_tokens=40), gate_threshold=0.5, min_l1=2)
    memory = build_memory(sample, enc, build=build)
    n_chunks = len(chunk_history(sample.history, build.chunking))
    assert len(memory) == n_chunks
    ev = retrieve_evidence(memory, sample.questions[0], k=n_chunks)
    assert len(ev) == n_chunks and all(isinstance(e, Evidence) for e in ev)
    assert {s for e in ev for s in e.source_ids} == {t.turn_id for t in sample.history.turns()}
    assert evidence_recall(sample.questions[0].evidence_ids, ev) == 1.0
    top = retrieve_evidence(memory, sample.questions[0], k=1)
    assert len(top) == 1 and top[0].timestamp in ("8 May, 2023", "9 May")


def test_recall_and_hit() -> None:
    ev = [Evidence("c0", "t", source_ids=("a", "b")), Evidence("c1", "t", source_ids=("c",))]
    assert evidence_recall(["a", "x"], ev) == 0.5
    assert evidence_hit(["a", "x"], ev) == 1.0
    assert evidence_recall(["x"], ev) == 0.0 and evidence_hit(["x"], ev) == 0.0
    assert evidence_recall([], ev) is None and evidence_hit([], ev) is None


def test_embedding_cache_roundtrip(tmp_path: Path) -> None:
    enc = get_encoder("hashing")
    cache = EmbeddingCache(tmp_path)
    a = cache.encode(enc, ["one text", "another text"])
    b = cache.encode(enc, ["one text", "another text"])
    assert (cache.hits, cache.misses) == (1, 1)
    np.testing.assert_array_equal(a, b)
    cache.encode(enc, ["one text", "changed"])
    assert cache.misses == 2
    assert len(list((tmp_path / "embeddings" / "hashing").rglob("*.npy"))) == 2


@pytest.mark.slow
def test_retrieval_cli_on_real_locomo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from common.datadir import DataFileError, resolve_data_dir
    from evaluation import cli_retrieval

    try:
        resolve_data_dir()
    except DataFileError as exc:
        pytest.skip(f"benchmark data directory absent ({exc})")
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path / "cache"))
    parser = argparse.ArgumentParser()
    cli_retrieval.add_arguments(parser)
    args = parser.parse_args(
        [
            "--benchmark", "locomo", "--split", "test", "--limit", "1", "--k", "5,50", "--encoder", "hashing",
            "--modes", "no_ce,oracle_unbounded,dense", "--out", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    assert cli_retrieval.run(args) == 0
    (run_dir,) = (tmp_path / "out").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["samples"] == 1 and summary["metadata"]["data_checksums"]["locomo10.json"]
    for mode in ("no_ce", "oracle_unbounded", "dense"):
        r5, r50 = summary["recall"][mode]["k=5"]["recall"], summary["recall"][mode]["k=50"]["recall"]
        assert 0.0 < r5 <= r50 <= 1.0  # more chunks can only cover more evidence
    rows = (run_dir / "rows.csv").read_text().splitlines()
    assert rows[0].startswith("sample_id,question_id,category,mode,k")
    assert len(rows) == 1 + 3 * 2 * summary["questions"]
