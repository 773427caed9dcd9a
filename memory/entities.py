"""Regex entity extraction with named, configurable pattern sets."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)

#: name -> list of regex patterns. Matches are case-sensitive unless the pattern says otherwise.
PATTERN_SETS: dict[str, tuple[str, ...]] = {
    "synthetic": (r"Node-\d+", r"ERR_[A-Z_]+", r"Subsystem-\d+", r"0x[0-9A-F]{4}"),
    "bgl": (
        # Rack-midplane prefix of a node name, as in the paper (R02-M1 of R02-M1-N0-C:J12-U11).
        r"R\d+-M\d+",
        # Severity words; INFO is left out because ~90 % of lines carry it (no signal).
        r"\b(?:FATAL|SEVERE|ERROR|WARNING|FAILURE|panic)\b",
        r"core\.\d+",
        r"0x[0-9a-fA-F]+",
    ),
    "dialogue": (
        # Dates first, so "8 May, 2023" is one entity rather than "May" and "2023".
        rf"\b\d{{1,2}} (?:{_MONTHS}),? \d{{4}}\b",
        rf"\b(?:{_MONTHS}) \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b",
        r"\b\d{4}-\d{2}-\d{2}\b",
        r"\b\d{4}/\d{2}/\d{2}\b",
        # Runs of capitalised words: "Caroline", "New York", "LGBTQ".
        r"\b[A-Z][a-zA-Z'’]+(?:\s+[A-Z][a-zA-Z'’]+)*\b",
        r"\b\d+(?:[.,]\d+)?\b",
    ),
}

#: Capitalised words that carry no entity information in dialogue (sentence starts, pronouns).
_DIALOGUE_STOPWORDS_TEXT = (
    "I I'm I've I'd I'll Im A An The And But Or So If Then When What Who Whom Whose Which "
    "Where Why How Yes No Not Oh Hey Hi Hello Thanks Thank Wow Well Okay OK Sure It It's Its "
    "This That These Those He She We They You Your My Our Their His Her Me Us Them Do Does Did "
    "Is Are Was Were Be Been Have Has Had Can Could Would Should Will Just Also Really Great "
    "Good Nice Sounds Totally Definitely Absolutely Haha Lol Congrats Awesome "
)
_DIALOGUE_STOPWORDS = frozenset(_DIALOGUE_STOPWORDS_TEXT.split())


@dataclass(frozen=True)
class EntityExtractor:
    """Extract a sorted, de-duplicated entity set from text with a named regex pattern set.

    Args:
        pattern_set: Key of :data:`PATTERN_SETS`.
        extra_patterns: Additional regexes appended to the set.
        lowercase: Normalise entities to lower case (the dialogue set does by default, so
            "Paris" in a question matches "paris" in a turn).

    Raises:
        KeyError: For an unknown pattern set.
        ValueError: For a pattern that does not compile.
    """

    pattern_set: str = "synthetic"
    extra_patterns: tuple[str, ...] = ()
    lowercase: bool | None = None
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pattern_set not in PATTERN_SETS:
            raise KeyError(f"unknown entity pattern set {self.pattern_set!r}; known: {sorted(PATTERN_SETS)}")
        compiled = []
        for pat in (*PATTERN_SETS[self.pattern_set], *self.extra_patterns):
            try:
                compiled.append(re.compile(pat))
            except re.error as exc:
                raise ValueError(f"entity pattern {pat!r} does not compile: {exc}") from exc
        object.__setattr__(self, "_compiled", tuple(compiled))
        if self.lowercase is None:
            object.__setattr__(self, "lowercase", self.pattern_set == "dialogue")

    def extract(self, text: str) -> frozenset[str]:
        """Return the entities found in ``text``.

        For the dialogue set, spans already covered by an earlier pattern (a date) are not
        matched again by later ones, and capitalised stop words are dropped.
        """
        found: set[str] = set()
        dialogue = self.pattern_set == "dialogue"
        taken: list[tuple[int, int]] = []
        for pat in self._compiled:
            for m in pat.finditer(text):
                if dialogue:
                    if any(m.start() < e and s < m.end() for s, e in taken):
                        continue
                    ent = _strip_stopwords(m.group(0))
                    if not ent:
                        continue
                    taken.append(m.span())
                else:
                    ent = m.group(0)
                found.add(ent.lower() if self.lowercase else ent)
        return frozenset(found)

    def extract_many(self, texts: Iterable[str]) -> list[frozenset[str]]:
        """Extract entities for each text."""
        return [self.extract(t) for t in texts]


def _strip_stopwords(span: str) -> str:
    """Drop leading capitalised stop words ("When Caroline" -> "Caroline"); "" if nothing is left."""
    words = span.split()
    while words and words[0] in _DIALOGUE_STOPWORDS:
        words.pop(0)
    return " ".join(words)
