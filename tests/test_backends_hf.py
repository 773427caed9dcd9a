"""transformers backend: a tiny random-weight Llama saved as an HF directory (real transformers code
path, fast), plus an opt-in test on the real SmolLM2 GGUF (dequantising it takes minutes on 2 busy cores)."""

import os
from pathlib import Path

import pytest

from modules.backends.base import GenerationRequest

pytestmark = pytest.mark.slow

WORDS = ["<unk>", "<pad>", "</s>", "<|user|>", "<|bot|>", *(f"w{i}" for i in range(60)), "hello", "why", "?"]
TEMPLATE = (
    "{% for m in messages %}<|user|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|bot|>{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("tiny_llama")
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", eos_token="</s>")
    tok.chat_template = TEMPLATE
    tok.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                      eos_token_id=2, pad_token_id=1, bos_token_id=None)
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from modules.backends import get_backend

    return get_backend("transformers", model=str(tiny_model_dir), n_ctx=40, n_threads=1)


def test_hf_dir_generation_is_deterministic_and_metered(tiny) -> None:
    assert tiny.chat and tiny.model_id.startswith("tiny_llama") and tiny.n_ctx == 40
    req = GenerationRequest(messages=({"role": "user", "content": "hello why ?"},), max_tokens=6)
    a, b = tiny.generate([req, req])
    assert a.ok and a.text == b.text and a.text.strip()
    assert a.tokens_in == 5 and 1 <= a.tokens_out <= 6  # <|user|> hello why ? <|bot|>
    (p,) = tiny.generate([GenerationRequest(prompt="w1 w2 w3", max_tokens=4)])
    assert p.ok and p.tokens_in == 3


def test_hf_stop_strings_cut_the_output(tiny) -> None:
    req = GenerationRequest(prompt="w5 w6", max_tokens=8)
    (free,) = tiny.generate([req])
    words = free.text.split()
    assert len(words) >= 2
    (stopped,) = tiny.generate([GenerationRequest(prompt="w5 w6", max_tokens=8, stop=(words[1],))])
    assert words[1] not in stopped.text and stopped.finish_reason == "stop"


def test_hf_truncation_and_overflow(tiny) -> None:
    long = " ".join(f"w{i % 60}" for i in range(80))
    (r,) = tiny.generate([GenerationRequest(messages=({"role": "user", "content": long},), max_tokens=4)])
    assert r.ok and r.truncated and r.tokens_in <= 36
    (e,) = tiny.generate([GenerationRequest(prompt="w1", max_tokens=40)])
    assert e.finish_reason == "error" and "no room" in (e.error or "")
    assert tiny.count_tokens("w1 w2 hello") == 3


@pytest.mark.skipif(
    os.environ.get("BUDGET_ROUTER_HEAVY_TESTS") != "1",
    reason="dequantising SmolLM2 takes 30-140 s on 2 busy cores; set BUDGET_ROUTER_HEAVY_TESTS=1",
)
def test_real_smollm2_gguf_through_transformers() -> None:
    from modules.backends import get_backend

    be = get_backend("transformers", model="smollm2-135m", n_threads=1)
    msgs = ({"role": "user", "content": "What is the capital of France?"},)
    (r,) = be.generate([GenerationRequest(messages=msgs, max_tokens=8)])
    assert r.ok and "paris" in r.text.lower()
