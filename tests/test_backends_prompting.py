import pytest

from modules.backends.base import GenerationRequest
from modules.backends.fake import request_text
from modules.backends.prompting import (
    ContextOverflow,
    completion_prompt,
    cut_middle,
    fit_request,
    flatten_messages,
    request_chars,
)


def words(req: GenerationRequest) -> int:
    return len(request_text(req).split())


def test_flatten_and_completion_prompt() -> None:
    msgs = ({"role": "system", "content": "Be brief. "}, {"role": "user", "content": "Q?"})
    assert flatten_messages(msgs) == "Be brief.\n\nQ?\n"
    assert completion_prompt(GenerationRequest(messages=msgs)) == "Be brief.\n\nQ?\n"
    assert completion_prompt(GenerationRequest(prompt="raw")) == "raw"
    assert request_chars(GenerationRequest(prompt="é")) == 2


def test_fitting_request_is_untouched() -> None:
    req = GenerationRequest(prompt="a b c", max_tokens=5)
    assert fit_request(req, 10, words) == (req, 3, False)


def test_middle_of_longest_user_message_is_cut_and_marked() -> None:
    body = " ".join(f"w{i}" for i in range(200))
    msgs = (
        {"role": "system", "content": "SYSTEM rules here"},
        {"role": "user", "content": f"START {body} END"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "short"},
    )
    req = GenerationRequest(messages=msgs, max_tokens=10)
    out, n, truncated = fit_request(req, 100, words)
    assert truncated and n <= 90 and n == words(out)
    assert out.messages is not None
    cut = out.messages[1]["content"]
    assert cut.startswith("START w0") and cut.endswith("END") and "characters truncated" in cut
    assert out.messages[0] == msgs[0] and out.messages[2:] == msgs[2:]
    assert out.max_tokens == 10


def test_raw_prompt_is_cut_too() -> None:
    req = GenerationRequest(prompt=" ".join(["x"] * 500), max_tokens=20)
    out, n, truncated = fit_request(req, 120, words)
    assert truncated and n <= 100 and out.prompt is not None and "truncated" in out.prompt


def test_unfixable_overflow_raises() -> None:
    msgs = ({"role": "system", "content": " ".join(["s"] * 300)}, {"role": "user", "content": "hi"})
    with pytest.raises(ContextOverflow, match="n_ctx - max_tokens = 100 - 10 = 90"):
        fit_request(GenerationRequest(messages=msgs, max_tokens=10), 100, words)
    with pytest.raises(ContextOverflow, match="leaves no room"):
        fit_request(GenerationRequest(prompt="a", max_tokens=100), 100, words)


def test_cut_middle_keeps_both_ends() -> None:
    text = "A" * 50 + "B" * 50
    out = cut_middle(text, 40)
    assert out.startswith("A" * 30) and out.endswith("B" * 30) and "[... 40 characters truncated ...]" in out
