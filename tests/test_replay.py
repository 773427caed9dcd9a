"""Replay without the engine (``cache.replay``, ``evaluate.py frontier --replay``): a table replays from the
call cache with the numerics it recorded, never computes, and names the first call it lacks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import evaluate
from modules.backends.fake import FakeBackend
from modules.backends.gguf_tokenizer import load_gguf_tokenizer
from modules.backends.replay import ReplayBackend, ReplayMiss
from modules.cache import CachedLLM, CallCache
from modules.models import get_model_spec, resolve_model_path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "data" / "custom_example.jsonl"


def _frontier(tmp_path: Path, out: str, *extra: str, cache: str = "calls.sqlite") -> int:
    return evaluate.main(
        [
            "frontier",
            "--benchmark", "custom",
            "--set", f"benchmark.options.path={EXAMPLE}",
            "--set", "backend=fake",
            "--set", "encoder=hashing",
            "--set", "memory=no_ce",
            "--set", f"cache.path={tmp_path / cache}",
            "--set", f"question_bank.cache_dir={tmp_path / 'banks'}",
            "--baselines", "all-low,all-high",
            "--n-boot", "50",
            "--no-progress",
            "--out", str(tmp_path / out),
            *extra,
        ]
    )  # fmt: skip


def test_a_table_replays_without_computing_and_a_missing_call_is_named(tmp_path, monkeypatch, capsys):
    assert _frontier(tmp_path, "made") == 0
    engines = json.loads((tmp_path / "made" / "metadata.json").read_text())["engines"]
    # The fake keys its calls as the reference engine does: no numerics.
    assert set(engines) >= {"answer"} and engines["answer"]["numerics"] is None

    def no_compute(self, requests):
        raise AssertionError("a replay computed a call")

    monkeypatch.setattr(FakeBackend, "generate", no_compute)
    capsys.readouterr()
    assert _frontier(tmp_path, "replayed", "--replay", "--expect", str(tmp_path / "made")) == 0
    assert "frontier.csv: reproduced" in capsys.readouterr().out

    # An empty cache: the first call stops the run, named by its tags and the packs to import.
    made = str(tmp_path / "made")
    assert _frontier(tmp_path, "empty", "--replay", "--expect", made, cache="empty.sqlite") == 1
    err = capsys.readouterr().err
    assert re.search(r"error: replay: .* not in the call cache .*module=.*cache_pack import", err)
    with pytest.raises(SystemExit, match="give --expect DIR"):
        _frontier(tmp_path, "x", "--replay")


def test_a_stand_in_keys_every_call_as_the_engine_that_computed_it(tmp_path):
    """No engine is loaded (vLLM is not even installed here); model id, window, counts and numerics match."""
    numerics = {"engine": "vllm", "version": "0.0-test", "dtype": "bfloat16", "quantization": "w8a8-int8"}
    model = "smollm2-135m"
    stand_in = ReplayBackend.stand_in("vllm", {"model": model, "int8_weights": True}, {model: numerics})
    assert stand_in.model_id == model and stand_in.n_ctx == get_model_spec(model).n_ctx
    assert stand_in.numerics() == numerics
    text = "Caroline went to the LGBTQ support group on 7 May 2023. Café"
    assert stand_in.count_tokens(text) == load_gguf_tokenizer(str(resolve_model_path(model))).count(text)
    # A model computed on the reference engine (no recorded numerics) keys as the reference does.
    assert ReplayBackend.stand_in("llamacpp", {"model": model}, {}).numerics() is None
    # resilient wraps the engine that computed: the stand-in is that engine's.
    wrapped = ReplayBackend.stand_in("resilient", {"inner": {"name": "llamacpp", "model": model}}, {})
    assert wrapped.model_id == model

    # Through the cache: a call stored under the recorded numerics is a hit, under others a named miss.
    from modules.backends.base import GenerationRequest, GenerationResult

    cache = CallCache(tmp_path / "c.sqlite")
    req = GenerationRequest(prompt="Q?", max_tokens=4)

    class Engine(FakeBackend):
        def numerics(self):
            return numerics

        def generate(self, requests):
            one = GenerationResult(text="A", tokens_in=2, tokens_out=1, latency_s=0.1, model_id=model)
            return [one for _ in requests]

    engine = Engine()
    engine.model_id = model
    CachedLLM(engine, cache).generate([req], tags={"module": "answer"})
    (hit,) = CachedLLM(stand_in, cache).generate([req], tags={"module": "answer"})
    assert hit.cached and hit.text == "A"
    other = ReplayBackend.stand_in("vllm", {"model": model}, {model: {**numerics, "quantization": "none"}})
    with pytest.raises(ReplayMiss, match=r"module=answer; model smollm2-135m, numerics .*'quantization'"):
        CachedLLM(other, cache).generate([req], tags={"module": "answer"})


def test_a_model_the_registry_lacks_cannot_be_replayed_without_its_engine():
    with pytest.raises(Exception, match=r"registered model's tokenizer"):
        ReplayBackend.stand_in("vllm", {"model": "some/hub-model"}, {})


def test_gguf_token_counts_do_not_depend_on_the_transformers_that_converted_the_tokenizer(tmp_path):
    """Newer transformers save Qwen2's tokenizer with an NFC normaliser; counts must not change with it."""
    import tokenizers
    from tokenizers import models, normalizers, pre_tokenizers

    from modules.backends.gguf_tokenizer import GGUFTokenizer

    vocab = {"[UNK]": 0, "cafe": 1, "café": 2, "\u0301": 3, " ": 4}
    counts = []
    for name, normalizer in (("plain", None), ("nfc", normalizers.NFC())):
        tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Split("\u0301", behavior="isolated")
        if normalizer is not None:
            tok.normalizer = normalizer
        d = tmp_path / name
        d.mkdir()
        tok.save(str(d / "tokenizer.json"))
        (d / "tokenizer_config.json").write_text("{}")
        counts.append(GGUFTokenizer(d).count("cafe\u0301"))  # decomposed é: NFC would make it one token
    assert counts[0] == counts[1] == 2
