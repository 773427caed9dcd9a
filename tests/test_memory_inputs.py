import numpy as np
import pytest

from memory import HierarchicalMemory, MemoryConfig, get_encoder


@pytest.fixture
def mem():
    return HierarchicalMemory(
        MemoryConfig(l1_capacity=10, l2_capacity=10, gate_threshold=0.5), get_encoder("hashing")
    )


def test_wrong_embedding_dimension(mem):
    with pytest.raises(
        ValueError, match=r"expected shape \(2, 384\), got \(2, 128\); wrong embedding dimension"
    ):
        mem.ingest(["a b", "c d"], embeddings=np.ones((2, 128), np.float32))
    mem.ingest(["a b"])
    with pytest.raises(ValueError, match="wrong embedding dimension"):
        mem.retrieve("a b", query_embedding=np.ones(10))


def test_nan_and_zero_vectors(mem):
    bad = np.ones((2, 384), np.float32)
    bad[1, 5] = np.nan
    with pytest.raises(ValueError, match="row 1 contains NaN"):
        mem.ingest(["a", "b"], embeddings=bad)
    with pytest.raises(ValueError, match="row 0 is all zeros"):
        mem.ingest(["a"], embeddings=np.zeros((1, 384)))
    assert len(mem) == 0


def test_empty_text_and_queries(mem):
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        mem.ingest(["fine", "   "])
    with pytest.raises(TypeError, match="single str"):
        mem.ingest("not a list")
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        mem.retrieve("")
    with pytest.raises(ValueError, match="k must be a positive int"):
        mem.retrieve("x", k=0)


def test_bad_importance_and_metadata(mem):
    with pytest.raises(ValueError, match=r"importance\[0\] = 1.5 is not a number in \[0, 1\]"):
        mem.ingest(["a"], importance=[1.5])
    with pytest.raises(ValueError, match="importance values for 2 texts"):
        mem.ingest(["a", "b"], importance=[0.5])
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        mem.ingest(["a"], metadata=[{"x": object()}])


@pytest.mark.parametrize("field", ["l1_capacity", "l2_capacity"])
@pytest.mark.parametrize("value", [0, -3])
def test_non_positive_capacity(field, value):
    with pytest.raises(ValueError, match=f"MemoryConfig.{field} must be a positive int, got {value}"):
        MemoryConfig(**{field: value})


def test_unknown_mode_reranker_and_patterns():
    with pytest.raises(ValueError, match="unknown mode 'turbo'; known modes"):
        MemoryConfig(mode="turbo")
    with pytest.raises(ValueError, match="unknown reranker 'msmarco'"):
        MemoryConfig(reranker="msmarco")
    with pytest.raises(ValueError, match="unknown pattern set 'x'"):
        MemoryConfig(entity_patterns="x")
    with pytest.raises(ValueError, match="unknown pattern set None"):  # not optional, unlike the reranker
        MemoryConfig(entity_patterns=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown field"):
        MemoryConfig.from_dict({"l1_capacity": 5, "colour": "red"})


def test_empty_memory_returns_nothing(mem):
    assert mem.retrieve("anything") == [] and len(mem) == 0
