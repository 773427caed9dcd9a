"""Importance of a memory chunk in [0, 1], for importance-aware eviction of dialogue memory.

The hierarchical memory evicts the least important items first (and protects items at or above
the memory's ``essential_threshold``, 0.85 by default). For dialogue we have no labels, so
the score is a transparent heuristic about which utterances carry *facts a later question
can ask about* rather than phatic talk:

=========================================================  ======
signal (per turn)                                          weight
=========================================================  ======
base                                                        0.30
a number, a month or weekday name, or a relative date        0.20
  ("yesterday", "last week"): temporal and numeric facts
a shared image (LoCoMo: the caption describes an object)     0.15
first-person statement ("I", "my", "we", "our"):             0.10
  self-disclosure is what personal-memory questions ask
proper nouns (capitalised words not at a sentence start),   0.05 each, at most 0.15
  i.e. named people, places, brands
length: ``0.10 * min(1, tokens / 40)``                       <= 0.10
short reply (< 6 tokens) or a pure question (ends with ?)   -0.15
=========================================================  ======

A chunk's importance is the *maximum* over its turns (one key fact makes the chunk worth
keeping), clipped to [0, 1]. Document chunks (HotpotQA paragraphs) use the same signals.
"""

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
    """Heuristic importance of one turn (see the module docstring), clipped to [0, 1]."""
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
