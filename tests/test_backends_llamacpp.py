"""Real-model tests: SmolLM2-135M through llama.cpp (xllamacpp), 1 thread, short prompts."""

import json

import pytest

from modules.backends import get_backend
from modules.backends.base import BackendError, GenerationRequest
from modules.cache import CachedLLM, CallCache
from modules.models import get_model_spec, resolve_model_path
from modules.pricing import CostModel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol():
    pytest.importorskip("xllamacpp")
    be = get_backend("llamacpp", model="smollm2-135m", n_ctx=512, n_threads=1)
    yield be
    be.close()


def chat(text: str, **kw) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), **kw)


def test_chat_generation_is_real_and_deterministic(smol) -> None:
    req = chat("What is the capital of France? Answer in one word.", max_tokens=8)
    a, b = smol.generate([req, req])
    assert a.ok and a.text.strip() and "paris" in a.text.lower()
    assert a.text == b.text  # temperature 0
    assert a.tokens_in > 10 and 0 < a.tokens_out <= 8 and a.model_id == "smollm2-135m"
    assert CostModel("gflops").llm(a).value == pytest.approx(2 * get_model_spec("smollm2-135m").n_params
                                                              * (a.tokens_in + a.tokens_out) / 1e9)


def test_max_tokens_and_stop_strings(smol) -> None:
    (r,) = smol.generate([chat("Count from 1 to 50, separated by commas.", max_tokens=6)])
    assert r.finish_reason == "length" and r.tokens_out == 6
    (s,) = smol.generate([chat("Count from 1 to 50, separated by commas.", max_tokens=40, stop=("5",))])
    assert s.ok and "5" not in s.text and s.tokens_out < 40


def test_json_schema_constrained_output_parses(smol) -> None:
    schema = {
        "type": "object",
        "properties": {"person": {"type": "string"}, "city": {"type": "string"}},
        "required": ["person", "city"],
    }
    (r,) = smol.generate([chat("Alice lives in Rome. Return the person and the city.", max_tokens=40,
                               json_schema=schema)])
    obj = json.loads(r.text)
    assert set(obj) == {"person", "city"} and all(isinstance(v, str) for v in obj.values())


def test_completion_mode_prompt(smol) -> None:
    (r,) = smol.generate([GenerationRequest(prompt="1, 2, 3, 4,", max_tokens=4)])
    assert r.ok and r.text.strip().startswith("5")


@pytest.fixture(scope="module")
def tiny_ctx():
    be = get_backend("llamacpp", model="smollm2-135m", n_ctx=160, n_threads=1)
    yield be
    be.close()


def test_long_prompt_is_truncated_in_the_middle_not_failed(tiny_ctx) -> None:
    filler = " ".join(f"filler{i}" for i in range(150))
    req = chat(f"INSTRUCTIONS: answer yes. {filler} QUESTION: ok?", max_tokens=8)
    (r,) = tiny_ctx.generate([req])
    assert r.ok and r.truncated and 100 < r.tokens_in <= 160 - 8
    sent = tiny_ctx.prompt_tokens(req)
    assert sent > 160  # the untruncated prompt really did not fit
    assert tiny_ctx.count_tokens("hello world") == 2


def test_context_overflow_that_cannot_be_fixed_is_an_error(tiny_ctx) -> None:
    big_system = " ".join(f"rule{i}" for i in range(150))
    req = GenerationRequest(
        messages=({"role": "system", "content": big_system}, {"role": "user", "content": "hi"}), max_tokens=8
    )
    (r,) = tiny_ctx.generate([req])
    assert r.finish_reason == "error" and "n_ctx" in (r.error or "")


def test_warm_cache_replays_without_calling_the_model(smol, tmp_path) -> None:
    llm = CachedLLM(smol, CallCache(tmp_path / "c.sqlite"))
    req = chat("Name a colour.", max_tokens=4)
    (cold,) = llm.generate([req], tags={"module": "t"})
    smol_calls = len(smol.last_timings)
    (warm,) = llm.generate([req], tags={"module": "t"})
    assert warm.cached and warm.text == cold.text and warm.latency_s == cold.latency_s
    assert len(smol.last_timings) == smol_calls  # generate() was not called again


def test_unknown_model_and_missing_file() -> None:
    with pytest.raises(KeyError, match="unknown model"):
        resolve_model_path("gpt-17")
    with pytest.raises(BackendError, match="neither a registered model"):
        get_backend("llamacpp", model="/nonexistent/model.gguf")


class _Recording:
    """Forwards to the real in-process server and records which calls reached it."""

    def __init__(self, server):
        self.server, self.calls = server, []

    def handle_completions(self, body):
        self.calls.append("completions")
        return self.server.handle_completions(body)

    def handle_chat_completions(self, body):
        self.calls.append("chat")
        return self.server.handle_chat_completions(body)


def test_closing_a_server_that_never_answered_waits_for_its_loop_first() -> None:
    # xllamacpp returns from its constructor before the loop thread runs; a stop sent in that window was
    # lost and close() hung for good in the destructor's join (seen in CI right after construction).
    # close() now has the loop answer one request before the stop; a backend that served one needs none.
    import threading

    from modules.backends.llamacpp import LlamaCppBackend

    pytest.importorskip("xllamacpp")
    fresh, used = (LlamaCppBackend("smollm2-135m", n_ctx=512, n_threads=1) for _ in range(2))
    fresh._server, used._server = _Recording(fresh._server), _Recording(used._server)
    used.generate([GenerationRequest(messages=({"role": "user", "content": "Hi"},), max_tokens=2)])
    recorders = (fresh._server, used._server)
    for backend in (fresh, used):
        closer = threading.Thread(target=backend.close, daemon=True)
        closer.start()
        closer.join(timeout=120)
        assert not closer.is_alive(), "close() hung"
    assert [r.calls for r in recorders] == [["completions"], ["chat"]]
