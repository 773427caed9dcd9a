"""Prompt helpers shared by the local backends: chat flattening and context-window fitting."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from modules.backends.base import GenerationRequest

TRUNCATION_MARKER = "\n[... {n} characters truncated ...]\n"


class ContextOverflow(ValueError):
    """A request cannot be made to fit the context window."""


def flatten_messages(messages: tuple[dict[str, str], ...]) -> str:
    """Render chat messages as a plain completion prompt for base models (no chat template).

    Contents are joined by blank lines, in order, and a final newline is added so that the
    model continues on a fresh line. Roles are dropped: a base model has not learnt them.
    """
    return "\n\n".join(str(m.get("content", "")).strip() for m in messages) + "\n"


def completion_prompt(request: GenerationRequest) -> str:
    """The raw prompt of a request, or its messages flattened for completion mode."""
    return request.prompt if request.prompt is not None else flatten_messages(request.messages or ())


def request_chars(request: GenerationRequest) -> int:
    """UTF-8 byte length of all the request's text (an upper bound on its content tokens).

    Byte-level BPE and byte-fallback SentencePiece vocabularies never spend more than one
    token per byte, so this bound lets backends skip exact tokenisation for short prompts.
    """
    if request.prompt is not None:
        return len(request.prompt.encode())
    assert request.messages is not None
    return sum(len(str(m.get("content", "")).encode()) for m in request.messages)


def _target(request: GenerationRequest) -> tuple[int | None, str]:
    """Which text to cut: the raw prompt (index None) or the longest user message."""
    if request.prompt is not None:
        return None, request.prompt
    assert request.messages is not None
    users = [i for i, m in enumerate(request.messages) if m.get("role") == "user"]
    pool = users or list(range(len(request.messages)))
    idx = max(pool, key=lambda i: len(str(request.messages[i].get("content", ""))))  # type: ignore[index]
    return idx, str(request.messages[idx].get("content", ""))


def _with_text(request: GenerationRequest, idx: int | None, text: str) -> GenerationRequest:
    if idx is None:
        return dataclasses.replace(request, prompt=text)
    assert request.messages is not None
    msgs = list(request.messages)
    msgs[idx] = {**msgs[idx], "content": text}
    return dataclasses.replace(request, messages=tuple(msgs))


def cut_middle(text: str, n_cut: int) -> str:
    """Remove ``n_cut`` characters from the middle of ``text`` and insert the marker."""
    keep = max(0, len(text) - n_cut)
    head = keep // 2
    return text[:head] + TRUNCATION_MARKER.format(n=len(text) - keep) + text[len(text) - (keep - head) :]


def fit_request(
    request: GenerationRequest, n_ctx: int, count: Callable[[GenerationRequest], int], max_rounds: int = 12
) -> tuple[GenerationRequest, int, bool]:
    """Make ``request`` fit ``n_ctx`` by the module's truncation rule.

    Args:
        request: The request.
        n_ctx: Context window in tokens.
        count: Exact prompt token count of a request (after the chat template).
        max_rounds: Re-counting rounds before giving up.

    Returns:
        ``(request, prompt_tokens, truncated)``: the possibly shortened request, its prompt
        token count and whether it was shortened.

    Raises:
        ContextOverflow: The request cannot fit, even with the target message cut away.
    """
    budget = n_ctx - request.max_tokens
    if budget <= 0:
        raise ContextOverflow(f"max_tokens={request.max_tokens} leaves no room for a prompt in n_ctx={n_ctx}")
    n = n_full = count(request)
    if n <= budget:
        return request, n, False
    idx, original = _target(request)
    cut = 0
    current = request
    for _ in range(max_rounds):
        # Convert the token excess to characters at this prompt's own chars/token rate,
        # with 10% slack and room for the marker; re-count and repeat if still too long.
        rate = max(1.0, (request_chars(current) / max(n, 1)))
        cut += math.ceil((n - budget + 16) * rate * 1.1)
        if cut >= len(original):
            break
        current = _with_text(request, idx, cut_middle(original, cut))
        n = count(current)
        if n <= budget:
            return current, n, True
    raise ContextOverflow(
        f"prompt needs {n_full} tokens but only n_ctx - max_tokens = {n_ctx} - {request.max_tokens} "
        f"= {budget} are available, and cutting the longest user message does not make it fit"
    )
