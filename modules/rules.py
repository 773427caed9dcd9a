"""LOW-tier rule implementations: keyword filter, regex relations, word-frequency topics, template."""

from __future__ import annotations

import re
from collections import Counter

from modules.base import ModuleInput, render_relations
from modules.compute_costs import gflops
from modules.nlp import (
    STOPWORDS,
    content_words,
    resolve_first_person,
    short_date,
    split_sentences,
    split_utterances,
)

# ----------------------------------------------------------------------------- filter


def keyword_filter(inp: ModuleInput, k: int) -> tuple[list[int], float]:
    """Keep chunks sharing content words with the query (BudgetMem LOW, ``rule_llm.py:301``).

    Score = |query words ∩ chunk words| / |query words|; chunks with score > 0 are kept,
    best first (ties by retrieval order), at most ``k``. If no chunk overlaps, the first
    ``k`` retrieved chunks are kept (no filtering rather than an empty memory).
    """
    q = set(content_words(inp.query))
    scored: list[tuple[float, int]] = []
    for i, ev in enumerate(inp.evidence):
        overlap = len(q & set(content_words(ev.text))) / max(len(q), 1)
        if overlap > 0:
            scored.append((-overlap, i))
    keep = [i for _, i in sorted(scored)[:k]] or list(range(min(k, len(inp.evidence))))
    text = inp.query + " " + " ".join(e.text for e in inp.evidence)
    return sorted(keep), gflops("keyword", text)


# ----------------------------------------------------------------------------- entity

_KIN = r"(?:mom|mother|dad|father|sister|brother|husband|wife|son|daughter|kids|friend|partner)"
_NAME = rf"[A-Z][a-z]+(?:'s {_KIN})?"
_VERB = (
    r"is|was|are|were|has|have|had|likes?|loves?|enjoys?|hates?|works? (?:at|as|for|on)|lives? in|"
    r"moved (?:to|from)|went to|goes to|visited|bought|joined|started|plays?|played|paints?|painted|wants?|"
    r"adopted|met|made|got|took|runs?|ran|reads?|wrote|writes|became|volunteers?(?: at)?|studies|studied"
)
_RELATION_RE = re.compile(rf"\b(?P<s>{_NAME}) (?P<r>{_VERB}) (?P<o>[^.,!?;:\"()]{{2,80}})")
_KIN_RE = re.compile(
    r"\b(?P<s>[A-Z][a-z]+)'s (?P<o>(?:mom|mother|dad|father|sister|brother|husband|wife|son|daughter|kids|"
    r"children|friend|partner|dog|cat|pet)s?)\b"
)
_MAX_OBJ_WORDS = 6


_CLAUSE_BREAK = re.compile(r"\s(?:and|but|because|which|who|when|while|if)\s", re.IGNORECASE)


def _clip(text: str, n: int) -> str:
    """First ``n`` words of ``text``, stopping at a clause break ("and", "because", ...)."""
    text = _CLAUSE_BREAK.split(f" {text} ", maxsplit=1)[0]
    return " ".join(text.split()[:n]).strip()


def regex_entity_relations(inp: ModuleInput) -> tuple[list[str], float]:
    """``subject | verb | object`` triplets from a dozen surface patterns over each utterance.

    First-person pronouns are replaced by the speaker's name first, so "I went to X" said
    by Caroline gives ``Caroline | went to | X``. Order of first appearance, de-duplicated.
    """
    out: list[str] = []
    seen: set[str] = set()
    text_all = []
    for ev in inp.evidence:
        for speaker, utt in split_utterances(ev.text):
            resolved = resolve_first_person(speaker, utt)
            text_all.append(resolved)
            found = [
                f"{m.group('s')} | {m.group('r')} | {_clip(m.group('o'), _MAX_OBJ_WORDS)}"
                for m in _RELATION_RE.finditer(resolved)
                # Sentence-initial function words ("How have you been") are capitalised too.
                if m.group("s").split("'")[0].lower() not in STOPWORDS and _clip(m.group("o"), _MAX_OBJ_WORDS)
            ]
            found += [f"{m.group('s')} | has | {m.group('o')}" for m in _KIN_RE.finditer(resolved)]
            for rel in found:
                if rel.lower() not in seen:
                    seen.add(rel.lower())
                    out.append(rel)
    return out, gflops("regex", " ".join(text_all))


# ----------------------------------------------------------------------------- temporal

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_NUMWORD = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|several|couple of)"
_UNIT = r"(?:day|week|month|year|weekend)s?"
_TEMPORAL_RE = re.compile(
    rf"\b(?:{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}(?:,? \d{{4}})?"
    rf"|{_MONTH} \d{{4}}|(?:19|20)\d{{2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?"
    rf"|yesterday|today|tonight|tomorrow"
    rf"|(?:last|next|this|past) (?:{_UNIT}|{_WEEKDAY}|night|summer|winter|spring|fall)"
    rf"|{_NUMWORD} {_UNIT} ago|in {_NUMWORD} {_UNIT}|on {_WEEKDAY}|recently|lately)\b",
    re.IGNORECASE,
)
_EVENT_WORDS = 12


def regex_temporal_relations(inp: ModuleInput) -> tuple[list[str], float]:
    """``event @ time expression (said <session date>)`` for each date/time phrase a regex finds.

    The expression is *not* normalised (that is the MID tier's job); the session date is
    attached so a reader can resolve it.
    """
    out: list[str] = []
    seen: set[str] = set()
    text_all = []
    for ev in inp.evidence:
        said = short_date(ev.timestamp)
        for speaker, utt in split_utterances(ev.text):
            for sent in split_sentences(resolve_first_person(speaker, utt)):
                text_all.append(sent)
                for m in _TEMPORAL_RE.finditer(sent):
                    event = _clip(sent, _EVENT_WORDS)
                    rel = f"{event} @ {m.group(0)}" + (f" (said {said})" if said else "")
                    if rel.lower() not in seen:
                        seen.add(rel.lower())
                        out.append(rel)
    return out, gflops("regex", " ".join(text_all))


# ----------------------------------------------------------------------------- topic


def frequency_topics(inp: ModuleInput, n: int = 6) -> tuple[list[str], float]:
    """The ``n`` most frequent content words of the evidence (ties by first appearance).

    Speaker names are excluded (they are who, not what, the chunks are about).
    """
    speakers = {s.lower() for ev in inp.evidence for s, _ in split_utterances(ev.text) if s}
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    text_all = " ".join(utt for ev in inp.evidence for _, utt in split_utterances(ev.text))
    for pos, w in enumerate(content_words(text_all)):
        if w in speakers or w.isdigit():
            continue
        counts[w] += 1
        first.setdefault(w, pos)
    ranked = sorted(counts, key=lambda w: (-counts[w], first[w]))[:n]
    return ranked, gflops("keyword", text_all)


# ----------------------------------------------------------------------------- summary


def template_summary(inp: ModuleInput) -> str:
    """The template memory (BudgetMem LOW summary): question, numbered dated chunks, relations."""
    lines = [f"Question: {inp.query}", "Evidence:"]
    for i, ev in enumerate(inp.evidence, 1):
        date = short_date(ev.timestamp)
        lines.append(f"{i}. " + (f"({date}) " if date else "") + ev.text)
    rel = render_relations(inp.relations)
    if rel:
        lines += ["Extracted facts:", rel]
    return "\n".join(lines)


def template_summary_tier(inp: ModuleInput) -> tuple[str, float]:
    """:func:`template_summary` with its compute estimate."""
    text = template_summary(inp)
    return text, gflops("template", text)
