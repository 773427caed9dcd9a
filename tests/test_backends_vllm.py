"""vLLM cannot run here (no GPU): test the request/result translation against a mocked engine."""

import sys
import types
from dataclasses import dataclass, field

import pytest

from modules.backends import get_backend
from modules.backends.base import BackendError, GenerationRequest

# The vLLM engine is an optional extra (scale path): `-m "not vllm"` skips these tests.
pytestmark = pytest.mark.vllm


class FakeTokenizer:
    """Word-level tokenizer: each whitespace word is one id; the chat template adds 3 ids per message."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [len(w) for w in text.split()]
        return ([1] if add_special_tokens else []) + ids

    def apply_chat_template(self, messages, add_generation_prompt: bool, tokenize: bool):
        ids: list[int] = []
        for m in messages:
            ids += [7, 7, *self.encode(m["content"], add_special_tokens=False), 8]
        return ids + ([9] if add_generation_prompt else [])


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[Completion] = field(default_factory=list)


class FakeEngine:
    def __init__(self) -> None:
        self.calls: list[tuple[list, list]] = []

    def get_tokenizer(self) -> FakeTokenizer:
        return FakeTokenizer()

    def generate(self, prompts, params, use_tqdm=True):
        assert use_tqdm is False
        self.calls.append((prompts, params))
        outs = []
        for p, sp in zip(prompts, params, strict=True):
            if sp.kwargs.get("max_tokens") == 13:
                raise RuntimeError("bad request")
            n = sp.kwargs["max_tokens"]
            reason = "length" if n <= 3 else "stop"
            outs.append(RequestOutput(p["prompt_token_ids"], [Completion(f"out{len(p['prompt_token_ids'])}",
                                                                         list(range(min(n, 3))), reason)]))
        return outs


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    sp = types.ModuleType("vllm.sampling_params")

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class StructuredOutputsParams:
        def __init__(self, json=None):
            self.json = json

    sp.StructuredOutputsParams = StructuredOutputsParams
    vllm.SamplingParams = SamplingParams
    vllm.LLM = lambda **kw: pytest.fail("engine must not be built when one is injected")
    vllm.sampling_params = sp
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    return vllm


def test_missing_vllm_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(BackendError, match="pip install"):
        get_backend("vllm", model="smollm2-135m")


def test_batch_translation(fake_vllm) -> None:
    engine = FakeEngine()
    be = get_backend("vllm", model="gemma3-270m", engine=engine, n_ctx=64)
    assert be.model_id == "gemma3-270m" and not be.chat  # base model: completion mode
    schema = {"type": "object"}
    reqs = [
        GenerationRequest(prompt="a bb ccc", max_tokens=3, stop=("X",)),
        GenerationRequest(messages=({"role": "user", "content": "hi there"},), max_tokens=5,
                          json_schema=schema),
    ]
    r1, r2 = be.generate(reqs)
    assert len(engine.calls) == 1  # one batched engine call
    prompts, params = engine.calls[0]
    assert prompts[0] == {"prompt_token_ids": [1, 1, 2, 3]}
    # Base model: messages are flattened into a completion prompt ("hi there\n").
    assert prompts[1] == {"prompt_token_ids": [1, 2, 5]}
    assert params[0].kwargs["stop"] == ["X", "\n\n"]  # request stop + gemma's default stop
    assert params[0].kwargs["temperature"] == 0.0 and params[0].kwargs["seed"] == 0
    assert params[1].kwargs["structured_outputs"].json == schema
    assert (r1.text, r1.tokens_in, r1.tokens_out, r1.finish_reason) == ("out4", 4, 3, "length")
    assert (r2.text, r2.tokens_in, r2.finish_reason, r2.model_id) == ("out3", 3, "stop", "gemma3-270m")


def test_chat_template_truncation_and_errors(fake_vllm) -> None:
    engine = FakeEngine()
    be = get_backend("vllm", model="smollm2-135m", engine=engine, n_ctx=40)
    long = " ".join(["w"] * 100)
    good = GenerationRequest(messages=({"role": "user", "content": "hi"},), max_tokens=5)
    trunc = GenerationRequest(messages=({"role": "user", "content": f"start {long} end"},), max_tokens=5)
    msgs = ({"role": "system", "content": long}, {"role": "user", "content": "q"})
    hopeless = GenerationRequest(messages=msgs, max_tokens=5)
    bad = GenerationRequest(prompt="x", max_tokens=13)
    a, b, c, d = be.generate([good, trunc, hopeless, bad])
    assert a.ok and a.tokens_in == len([7, 7, 2, 8, 9])
    assert b.ok and b.truncated and b.tokens_in <= 35
    assert c.finish_reason == "error" and "n_ctx" in (c.error or "")
    assert d.finish_reason == "error" and "bad request" in (d.error or "")
    # The failing request was isolated: the batch was retried one by one.
    assert [len(p) for p, _ in engine.calls] == [3, 1, 1, 1]
    assert be.count_tokens("a b") == 2


def test_old_vllm_guided_decoding(fake_vllm) -> None:
    del fake_vllm.sampling_params.StructuredOutputsParams

    class GuidedDecodingParams:
        def __init__(self, json=None):
            self.json = json

    fake_vllm.sampling_params.GuidedDecodingParams = GuidedDecodingParams
    be = get_backend("vllm", model="smollm2-135m", engine=FakeEngine())
    sp = be.sampling_params(GenerationRequest(prompt="x", json_schema={"type": "string"}))
    assert sp.kwargs["guided_decoding"].json == {"type": "string"}


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the scan touches deprecated torch objects
def test_an_engine_starts_when_a_module_holds_an_object_with_a_fake_dict(fake_vllm, monkeypatch) -> None:
    """Round 4: "two engines in one process" failed because vLLM's CPU build scans every module at engine
    start and calls ``vars(value).get(...)``; llvmlite's ``binding.ffi.lib`` (numba's, and imported by a first
    engine) answers ``__dict__`` with a C-function wrapper. Such attributes are hidden during the start."""

    class LibWrapper:  # what llvmlite.binding.ffi.lib does: any attribute is a function wrapper
        __slots__ = ()

        def __getattr__(self, name):
            return lambda *a: None

    lib = LibWrapper()
    module = types.ModuleType("fake_llvmlite_ffi")
    module.lib = lib
    monkeypatch.setitem(sys.modules, "fake_llvmlite_ffi", module)

    def scan_like_vllm(**kw):  # vllm/triton_utils/dispatcher.py::_rebind_kernels, in short
        for mod in list(sys.modules.values()):
            for value in list((getattr(mod, "__dict__", None) or {}).values()):
                if hasattr(value, "__dict__"):
                    vars(value).get("kernel")
        return FakeEngine()

    with pytest.raises(AttributeError, match="has no attribute 'get'"):
        scan_like_vllm()  # the failure, without the guard
    fake_vllm.LLM = scan_like_vllm
    for _ in range(2):  # and a second engine in the same process
        get_backend("vllm", model="a-local-hf-dir").close()
    assert module.lib is lib  # put back after the start


def test_cpu_numerics_name_the_kernel_set_except_the_reference_one(fake_vllm, monkeypatch) -> None:
    import scale.vllm_offline as vo

    be = get_backend("vllm", model="smollm2-135m", engine=FakeEngine())
    assert be.device == "cpu"
    monkeypatch.setattr(vo, "vllm_cpu_kernels", lambda: "avx512")
    other = be.numerics()
    monkeypatch.setattr(vo, "vllm_cpu_kernels", lambda: vo.REFERENCE_KERNELS)
    reference = be.numerics()
    # Another CPU class keys its calls apart; the reference class keeps the keys its calls always had.
    assert other == {**reference, "kernels": "avx512"} and "kernels" not in reference
