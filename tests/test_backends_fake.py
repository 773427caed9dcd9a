import json

import pytest

from modules.backends import BACKENDS, backend_class, get_backend
from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend, minimal_instance


def chat(text: str, **kw) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), **kw)


def test_registry_names_and_unknown() -> None:
    assert set(BACKENDS) == {"llamacpp", "transformers", "vllm", "openai", "fake", "resilient"}
    assert isinstance(get_backend("fake", model_id="m"), FakeBackend)
    with pytest.raises(KeyError, match="unknown LLM backend 'nope'"):
        backend_class("nope")


def test_registry_import_is_lazy() -> None:
    import subprocess
    import sys

    heavy = "('xllamacpp', 'torch', 'vllm')"
    code = f"import sys, modules.backends; print(any(m in sys.modules for m in {heavy}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_fake_is_deterministic_and_counts_whitespace_tokens() -> None:
    be = FakeBackend()
    r1, r2, r3 = be.generate([chat("a b c"), chat("a b c"), chat("a b d")])
    assert r1 == r2 and r1.text != r3.text
    assert r1.tokens_in == 3 and r1.tokens_out == 2 and r1.text.startswith("fake ")
    assert r1.finish_reason == "stop" and r1.ok and r1.model_id == "fake-llm"


def test_fake_responder_stop_and_max_tokens() -> None:
    be = FakeBackend(responder=lambda r: "one two three STOP four")
    (r,) = be.generate([chat("x", stop=("STOP",))])
    assert r.text == "one two three " and r.tokens_out == 3
    (r,) = be.generate([chat("x", max_tokens=2)])
    assert r.text == "one two" and r.finish_reason == "length"


def test_fake_json_schema_default_output_parses() -> None:
    schema = {
        "type": "object",
        "properties": {"names": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}},
        "required": ["names", "n"],
    }
    (r,) = FakeBackend().generate([chat("x", json_schema=schema)])
    assert json.loads(r.text) == {"names": [], "n": 0}
    assert minimal_instance({"enum": ["a", "b"]}) == "a"


def test_fake_failures_timeouts_and_context() -> None:
    be = FakeBackend(fail_when=lambda r: "bad" in (r.prompt or ""))
    good, bad = be.generate([GenerationRequest(prompt="ok"), GenerationRequest(prompt="bad")])
    assert good.ok and not bad.ok and bad.error == "injected failure" and bad.text == ""
    be = FakeBackend(fail_first=1)
    assert [r.ok for r in be.generate([chat("a"), chat("a")])] == [False, True]
    (r,) = FakeBackend(latency_s=2.0, timeout_s=1.0).generate([chat("a")])
    assert r.finish_reason == "error" and "timed out" in (r.error or "")
    (r,) = FakeBackend(n_ctx=10).generate([chat(" ".join(["w"] * 9), max_tokens=2)])
    assert not r.ok and "n_ctx=10" in (r.error or "")
    with pytest.raises(ValueError):
        FakeBackend(latency_s=-1)
