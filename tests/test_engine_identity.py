"""Engines in the call cache's identity, weight files by content, and the engine configs compose."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend
from modules.backends.weights import file_sha256, hf_dir_from_gguf
from modules.cache import CODE_VERSION, CachedLLM, CallCache, call_key
from modules.cache_pack import read_sqlite_entries

REQ = GenerationRequest(messages=({"role": "user", "content": "hi"},), max_tokens=4)


class _Engine(FakeBackend):
    """A fake answering like another engine: same model id, its own numerics."""

    def __init__(self, numerics: dict[str, str] | None, text: str) -> None:
        super().__init__("qwen2.5-1.5b", responder=lambda r: text)
        self._num = numerics

    def numerics(self):
        return self._num


def test_reference_numerics_keep_the_old_keys() -> None:
    # The key of the reference engine (numerics None) is the one committed packs were made with.
    legacy = call_key({"module": "answer"}, "qwen2.5-1.5b", REQ)
    assert call_key({"module": "answer"}, "qwen2.5-1.5b", REQ, None) == legacy
    # The payload exactly as keys were computed before numerics existed.
    old_payload = json.dumps(
        {
            "tags": {"module": "answer"},
            "model": "qwen2.5-1.5b",
            "request": REQ.fingerprint(),
            "v": CODE_VERSION,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    assert legacy == hashlib.sha256(old_payload.encode()).hexdigest()
    other = call_key({"module": "answer"}, "qwen2.5-1.5b", REQ, {"engine": "vllm", "dtype": "float32"})
    assert other != legacy
    assert other != call_key(
        {"module": "answer"}, "qwen2.5-1.5b", REQ, {"engine": "vllm", "dtype": "bfloat16"}
    )


def test_two_engines_never_replay_each_other(tmp_path) -> None:
    cache = CallCache(tmp_path / "calls.sqlite")
    ref = CachedLLM(_Engine(None, "reference answer"), cache)
    vllm = CachedLLM(_Engine({"engine": "vllm", "dtype": "float32"}, "vllm answer"), cache)
    (a,) = ref.generate([REQ], tags={"m": "x"})
    (b,) = vllm.generate([REQ], tags={"m": "x"})
    assert (a.text, b.text, a.cached, b.cached) == ("reference answer", "vllm answer", False, False)
    (a2,) = ref.generate([REQ], tags={"m": "x"})
    (b2,) = vllm.generate([REQ], tags={"m": "x"})
    assert (a2.text, b2.text, a2.cached, b2.cached) == ("reference answer", "vllm answer", True, True)
    # The stored value says which engine wrote it (for `cache_pack inspect`); the reference's does not.
    cache.close()
    stored = [v.get("numerics") for _, v in read_sqlite_entries(tmp_path / "calls.sqlite")]
    assert sorted(map(str, stored)) == ["None", str({"dtype": "float32", "engine": "vllm"})]


def test_prebuilt_llamacpp_on_a_registry_model_is_the_reference() -> None:
    import xllamacpp

    from modules.backends.llamacpp import REFERENCE_XLLAMACPP, LlamaCppBackend

    assert xllamacpp.__version__ == REFERENCE_XLLAMACPP  # pyproject pins the release the packs came from
    be = LlamaCppBackend("smollm2-135m")
    try:
        assert be.numerics() is None
    finally:
        be.close()


def test_a_gguf_path_is_named_by_its_content(tmp_path) -> None:
    from modules.backends.llamacpp import LlamaCppBackend
    from modules.models import resolve_model_path

    src = resolve_model_path("smollm2-135m")
    copy = tmp_path / "renamed.gguf"
    copy.write_bytes(src.read_bytes())
    be = LlamaCppBackend(str(copy))
    try:
        num = be.numerics()
        assert num is not None and num["weights_sha256"] == file_sha256(src) and num["engine"] == "xllamacpp"
    finally:
        be.close()


def test_file_sha256_is_memoised_and_sees_a_new_version(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "w.bin"
    f.write_bytes(b"one")
    first = file_sha256(f)
    assert len(list((tmp_path / "cache" / "sha256").iterdir())) == 1
    f.write_bytes(b"two")
    os.utime(f, ns=(1, 1))  # another size or mtime is another version
    assert file_sha256(f) != first


def test_hf_dir_refuses_unknown_dtypes_and_missing_files(tmp_path) -> None:
    from modules.backends.base import BackendError

    with pytest.raises(BackendError, match="dtype 'int3'"):
        hf_dir_from_gguf(tmp_path / "x.gguf", "int3")
    with pytest.raises(BackendError, match="not found"):
        hf_dir_from_gguf(tmp_path / "x.gguf", "float32")


def test_engine_configs_compose() -> None:
    from evaluation.frontier_config import compose_default_config
    from modules.pricing import CostModel

    vllm = compose_default_config(["backend=vllm"])["backend"]
    assert vllm["name"] == "vllm" and vllm["dtype"] is None and vllm["enforce_eager"] is None
    native = compose_default_config(["backend=llamacpp_native"])["backend"]
    assert native["name"] == "llamacpp" and native["engine"] == "native"
    gpu = compose_default_config(["+experiment=gpu_quality"])
    assert (
        gpu["backend"]["name"] == "vllm" and gpu["answer"]["backend"]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    )
    costs = CostModel(unit="gflops", params=gpu["cost"]["params"])
    assert costs.call_value("Qwen/Qwen2.5-7B-Instruct", 1000, 0) == pytest.approx(2 * 7615616512 * 1000 / 1e9)
