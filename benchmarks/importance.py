"""Importance of a memory chunk in [0, 1], for importance-aware eviction of dialogue memory."""

from __future__ import annotations

import re

from benchmarks.chunking import count_tokens
from benchmarks.types import Turn

_NUMBER_OR_DATE = re.compile(
    r"\d|\b(january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|today|tomorrow|tonight|"
    r"last (?:week|month|year|weekend|night)|next (?:week|month|year|weekend)|ago)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|my|we|our|me)\b")
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")


def turn_importance(turn: Turn) -> float:
    """Heuristic importance of one turn (see docs/design/benchmarks.md), clipped to [0, 1]."""
    text = turn.text
    n_tokens = count_tokens(text)
    score = 0.30
    if _NUMBER_OR_DATE.search(text):
        score += 0.20
    if turn.image_caption:
        score += 0.15
    if _FIRST_PERSON.search(text):
        score += 0.10
    proper = [w for w in _PROPER.findall(text) if w not in ("I", "I'm")]
    score += min(0.15, 0.05 * len(proper))
    score += 0.10 * min(1.0, n_tokens / 40)
    if n_tokens < 6 or text.rstrip().endswith("?"):
        score -= 0.15
    return float(min(1.0, max(0.0, score)))


def chunk_importance(turns: list[Turn]) -> float:
    """Importance of a chunk: the maximum over its turns (0 for no turns)."""
    return max((turn_importance(t) for t in turns), default=0.0)
