import numpy as np
import pytest

from memory.encoder import ENCODERS, get_encoder

# Real texts of the kinds the memory stores: LoCoMo-style dialogue turns, synthetic facts/queries,
# a BGL log line, and a long one that exceeds the shipped tokenizer.json's fixed 128-token limit.
TEXTS = [
    'Caroline said, "I went to a LGBTQ support group yesterday and it was so powerful."',
    "Melanie said, \"That's great! I painted a lake sunrise last year, it's special to me.\"",
    "ENTRY 14901: Auth-Svc in Region-7 logged Kernel Panic at Subsystem-901. Hex: 0x3A35.",
    "Retrieve the Hex Code for the Kernel Panic event in Region-7 involving Auth-Svc at Subsystem-901.",
    "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 RAS KERNEL FATAL data TLB error interrupt",
    "Where does Alice work?",
    " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 16),
]


def test_minilm_int8_is_registered_under_its_own_name():
    assert {"minilm", "minilm-int8"} <= set(ENCODERS)
    assert ENCODERS["minilm"] is not ENCODERS["minilm-int8"]


def test_onnx_encoder_rejects_missing_files(tmp_path):
    pytest.importorskip("onnxruntime")
    from memory.encoder_onnx import OnnxMiniLMEncoder

    with pytest.raises(RuntimeError, match="does not exist"):
        OnnxMiniLMEncoder(tokenizer_path=tmp_path / "nope.json")


@pytest.mark.slow
def test_minilm_int8_matches_fp32_within_the_quality_gate():
    fast = get_encoder("minilm-int8")
    assert fast.name == "minilm-int8" and fast.dim == 384
    v = fast.encode(TEXTS, batch_size=3)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    ref = get_encoder("minilm").encode(TEXTS)
    cos = np.sum(v * ref, axis=1)
    # The gate for replacing the fp32 encoder: every text >= 0.99 (measured: > 0.999).
    assert cos.min() >= 0.99, cos


@pytest.mark.slow
def test_minilm_int8_is_deterministic_and_batch_independent():
    fast = get_encoder("minilm-int8")
    a = fast.encode(TEXTS, batch_size=4)
    np.testing.assert_array_equal(a, fast.encode(TEXTS, batch_size=4))
    # Weights-only int8: a text's vector does not depend on its batch or padding.
    for i in (0, 2, len(TEXTS) - 1):
        np.testing.assert_allclose(fast.encode([TEXTS[i]])[0], a[i], atol=1e-5)
    # Semantics survive: the fact is closer to its query than to an unrelated dialogue turn.
    assert a[3] @ a[2] > a[3] @ a[0]


def test_reranker_for_reuses_a_minilm_variant_memory_s_own_vectors():
    from types import SimpleNamespace

    from memory import MemoryConfig
    from memory.bench import reranker_for
    from memory.rerank import BiEncoderReranker

    cfg = MemoryConfig(l1_capacity=10, l2_capacity=10, gate_threshold=0.5, reranker="bi_encoder")
    rr = reranker_for(cfg, SimpleNamespace(name="minilm-int8", dim=384))
    assert isinstance(rr, BiEncoderReranker) and rr.encoder_name == "minilm-int8"
    # Other encoders keep the config's default reranker (built by HierarchicalMemory).
    assert reranker_for(cfg, SimpleNamespace(name="hashing", dim=384)) is None
    assert reranker_for(cfg.replace(reranker="lexical"), SimpleNamespace(name="minilm-int8", dim=384)) is None
