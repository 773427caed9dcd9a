import numpy as np
import pytest

from memory.encoder import ENCODERS, HashingEncoder, get_encoder, register_encoder
from memory.entities import EntityExtractor


def test_hashing_encoder_shape_norm_and_determinism():
    enc = get_encoder("hashing")
    texts = [
        "ENTRY 5: Auth-Svc in Region-3",
        "ENTRY 5: Auth-Svc in Region-3",
        "a totally different sentence",
        "",
    ]
    v = enc.encode(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(v[0], v[1])
    # A fresh instance gives the same vectors (no per-process hash salt).
    np.testing.assert_array_equal(HashingEncoder().encode(texts), v)
    assert v[0] @ v[1] > 0.99 and v[0] @ v[2] < 0.5


def test_get_encoder_caches_and_rejects_unknown():
    assert get_encoder("hashing") is get_encoder("hashing")
    with pytest.raises(KeyError, match="unknown encoder 'nope'"):
        get_encoder("nope")


def test_encode_rejects_single_string():
    with pytest.raises(TypeError, match="single str"):
        get_encoder("hashing").encode("just one string")


def test_register_encoder_refuses_duplicates():
    with pytest.raises(ValueError, match="already registered"):
        register_encoder("hashing", HashingEncoder)
    assert "minilm" in ENCODERS


@pytest.mark.slow
def test_minilm_encoder_real_model():
    enc = get_encoder("minilm")
    assert enc.dim == 384
    v = enc.encode(
        [
            "Where does Alice work?",
            "Alice works at Siemens as a data engineer.",
            "The Eiffel Tower is in Paris.",
        ],
        batch_size=2,
    )
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]
    # Batching and length-sorting must not change the vectors.
    np.testing.assert_allclose(enc.encode(["The Eiffel Tower is in Paris."])[0], v[2], atol=1e-5)


def test_entity_pattern_sets():
    syn = EntityExtractor("synthetic").extract(
        "ENTRY 5: x at Subsystem-5 on Node-3 ERR_DISK_FULL. Hex: 0x0005."
    )
    assert syn == {"Subsystem-5", "Node-3", "ERR_DISK_FULL", "0x0005"}
    line = (
        "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 RAS KERNEL FATAL data TLB error interrupt "
        "core.2275 0x00544eb8"
    )
    bgl = EntityExtractor("bgl").extract(line)
    assert {"R02-M1", "FATAL", "core.2275", "0x00544eb8"} <= bgl
    dia = EntityExtractor("dialogue").extract(
        "When Caroline went to New York on 8 May, 2023 she met 3 friends."
    )
    assert {"caroline", "new york", "8 may, 2023", "3"} <= dia and "when" not in dia
    with pytest.raises(KeyError, match="unknown entity pattern set"):
        EntityExtractor("klingon")
