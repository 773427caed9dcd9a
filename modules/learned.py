"""MID-tier implementations: learned or algorithmic models that run offline without an LLM.

Like :mod:`modules.rules`, each function returns ``(raw_value, gflops)``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np

from memory.encoder import Encoder
from memory.lexical import zscore
from modules.base import ModuleInput
from modules.compute_costs import gflops
from modules.nlp import (
    content_words,
    parse_timestamp,
    resolve_first_person,
    short_date,
    spacy_pipeline,
    split_sentences,
    split_utterances,
)
from modules.rules import template_summary

# ----------------------------------------------------------------------------- filter

#: Weights and threshold of the blended filter score (BudgetMem ``rule_llm.py:325-367``).
SIM_WEIGHT, KEYWORD_WEIGHT, FILTER_THRESHOLD = 0.7, 0.3, 0.3


def embedding_filter(
    inp: ModuleInput, k: int, encoder: Encoder, pad: bool = False, retrieval_weight: float = 0.0
) -> tuple[list[int], float]:
    """Keep the chunks whose blended score clears :data:`FILTER_THRESHOLD`, best ``k`` of them.

    score = 0.7 · cos(query, utterances) + 0.3 · (shared content words / query content words).
    If no chunk clears the threshold the single best one is kept, so downstream modules
    always have evidence when retrieval found any.

    The cosine reads the utterance text without the ``Name said, "..."`` wrapper; speaker names
    still count through the keyword term, which reads the full chunk.

    Args:
        inp: The filter's input (retrieved chunks, best first).
        k: Most chunks kept.
        encoder: Sentence encoder (MiniLM in real runs).
        pad: Keep exactly ``min(k, len(evidence))`` chunks, best blended score first, instead of
            only those above the threshold.
        retrieval_weight: Weight ``w`` of the retriever's score in ``(1-w)·z(blend) +
            w·z(retrieval score)``.
    """
    texts = [e.text for e in inp.evidence]
    utterances = [" ".join(u for _, u in split_utterances(t)) or t for t in texts]
    emb = encoder.encode([inp.query, *utterances])
    sims = emb[1:] @ emb[0]
    q = set(content_words(inp.query))
    boost = np.array([len(q & set(content_words(t))) / max(len(q), 1) for t in texts], dtype=np.float32)
    score = SIM_WEIGHT * sims + KEYWORD_WEIGHT * boost
    if retrieval_weight:
        retrieval = np.array([e.score for e in inp.evidence], dtype=np.float64)
        blend = zscore(score.astype(np.float64))
        score = (1 - retrieval_weight) * blend + retrieval_weight * zscore(retrieval)
    order = sorted(range(len(texts)), key=lambda i: (-float(score[i]), i))
    keep = order[:k] if pad else [i for i in order if score[i] >= FILTER_THRESHOLD][:k] or order[:1]
    return sorted(keep), gflops("minilm", inp.query + " " + " ".join(texts))


# ----------------------------------------------------------------------------- entity

_ENTITY_LABELS = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LANGUAGE")
_SUBJ_DEPS = ("nsubj", "nsubjpass")
_OBJ_DEPS = ("dobj", "attr", "acomp", "oprd")


def _span_text(token: object) -> str:
    """The noun phrase headed by ``token``: its left modifiers up to the head (no clauses)."""
    left = [t for t in token.lefts if t.dep_ in ("compound", "amod", "nummod", "poss", "det", "case")]  # type: ignore[attr-defined]
    start = min([token.i, *(t.i for t in left)])  # type: ignore[attr-defined]
    return token.doc[start : token.i + 1].text  # type: ignore[attr-defined]


def spacy_entity_relations(inp: ModuleInput) -> tuple[list[str], float]:
    """Named entities (``name | is a | LABEL``) and parsed ``subject | verb [prep] | object`` triplets.

    Utterances are speaker-resolved first ("I" -> speaker). For each verb with a nominal
    subject, every direct object / attribute and every prepositional object yields a triplet
    with the verb's lemma (``went to`` -> ``go to``).
    """
    nlp = spacy_pipeline()
    texts = [resolve_first_person(spk, utt) for ev in inp.evidence for spk, utt in split_utterances(ev.text)]
    out: list[str] = []
    seen: set[str] = set()

    def add(rel: str) -> None:
        if rel.lower() not in seen:
            seen.add(rel.lower())
            out.append(rel)

    for doc in nlp.pipe(texts):
        for ent in doc.ents:
            if ent.label_ in _ENTITY_LABELS:
                add(f"{ent.text} | is a | {ent.label_}")
        for tok in doc:
            if tok.pos_ not in ("VERB", "AUX"):
                continue
            subjects = [c for c in tok.children if c.dep_ in _SUBJ_DEPS and c.pos_ in ("PROPN", "NOUN")]
            if not subjects:
                continue
            subj = _span_text(subjects[0])
            for c in tok.children:
                if c.dep_ in _OBJ_DEPS:
                    add(f"{subj} | {tok.lemma_} | {_span_text(c)}")
                elif c.dep_ == "prep":
                    for p in c.children:
                        if p.dep_ == "pobj":
                            add(f"{subj} | {tok.lemma_} {c.text.lower()} | {_span_text(p)}")
    return out, gflops("spacy_sm", " ".join(texts))


# ----------------------------------------------------------------------------- temporal

# Matches parsedatetime reports that are almost always false positives in chat text:
# the modal "may", "now", durations like "a second" / "a minute".
_TAGGER_STOP = frozenset(
    {"may", "now", "a second", "second", "a minute", "minute", "sec", "min", "mar", "sun", "sat"}
)
_EVENT_WORDS = 12


#: How the MID tagger renders a resolved date (``strategy.options.date_format``).
DateFormat = Literal["iso", "natural"]
DATE_FORMATS: tuple[DateFormat, ...] = ("iso", "natural")


#: Times of day that parsedatetime resolves against the wall clock instead of ``sourceTime``: "last night"
#: said on 10 January 2024 came out as the night before the run (17 of the 588 expressions it tags in
#: LoCoMo, "last night" and "next morning"), so the output depended on the day it was computed.
_TIME_OF_DAY = re.compile(r"\b(last|this|next)\s+(night|morning|afternoon|evening)\b", re.IGNORECASE)
_DAY_OFFSET = {"last": -1, "this": 0, "next": 1}


def anchor_time_of_day(dt: datetime, expr: str, ref: datetime) -> datetime:
    """``dt`` with its day taken from ``ref`` where ``expr`` is a time of day ("last night": the day before).

    Examples:
        >>> anchor_time_of_day(datetime(2026, 12, 5, 21), "last night", datetime(2024, 1, 10, 14)).date()
        datetime.date(2024, 1, 9)
    """
    m = _TIME_OF_DAY.search(expr)
    if m is None:
        return dt
    return datetime.combine(ref.date() + timedelta(days=_DAY_OFFSET[m.group(1).lower()]), dt.time())


def _normalise(dt: datetime, ctx: Any, date_format: DateFormat = "iso") -> str | None:
    """Render ``dt`` at the granularity the tagger resolved (``ctx`` is a ``pdtContext``).

    ``iso``: day -> ``2023-05-07``; week -> ``week of 2023-04-24``; month -> ``2023-05``; year ->
    ``2022``; a time of day alone -> date and time. ``natural`` writes the same dates the way
    the conversations and LoCoMo's gold answers do (``7 May 2023``, ``week of 24 April 2023``,
    ``May 2023``): an answerer copies the format it reads, and token F1 scores ``2023-07``
    as 0 against ``July 2023`` (all-MID lost 7 of 21 test temporal questions that way).
    Matches resolved only to minutes or seconds ("a second") are dropped as false positives.
    """
    natural = date_format == "natural"
    day = f"{dt.day} {dt.strftime('%B %Y')}" if natural else dt.strftime("%Y-%m-%d")
    a = ctx.accuracy
    if a & (ctx.ACU_DAY | ctx.ACU_HALFDAY):
        return day
    if a & ctx.ACU_WEEK:
        return "week of " + day
    if a & ctx.ACU_MONTH:
        return dt.strftime("%B %Y" if natural else "%Y-%m")
    if a & ctx.ACU_YEAR:
        return dt.strftime("%Y")
    if a & ctx.ACU_HOUR:
        return f"{day}, {dt.strftime('%H:%M')}" if natural else dt.strftime("%Y-%m-%d %H:%M")
    return None


def tagger_temporal_relations(
    inp: ModuleInput, date_format: DateFormat = "iso", anchor_times_of_day: bool = False
) -> tuple[list[str], float]:
    """``event | normalised date (expression)`` from the ``parsedatetime`` tagger.

    Relative expressions are resolved against the chunk's session timestamp; without one
    they are resolved against the question date, and failing that they are skipped (a
    date relative to "now" on the machine running the code would be meaningless).

    Args:
        inp: The module input.
        date_format: One of :data:`DATE_FORMATS` (see :func:`_normalise`).
        anchor_times_of_day: Resolve "last night" / "this morning" / "next evening" against the chunk's
            date (:func:`anchor_time_of_day`). Off by default only so that the tables measured before keep
            their cache keys: off, those expressions get the wall clock's date.
    """
    import parsedatetime as pdt  # lazy: keeps `import modules` light

    cal = pdt.Calendar(version=pdt.VERSION_CONTEXT_STYLE)
    fallback_ref = parse_timestamp(inp.question_date)
    out: list[str] = []
    seen: set[str] = set()
    text_all: list[str] = []
    for ev in inp.evidence:
        ref = parse_timestamp(ev.timestamp) or fallback_ref
        if ref is None:
            continue
        for speaker, utt in split_utterances(ev.text):
            for sent in split_sentences(resolve_first_person(speaker, utt)):
                text_all.append(sent)
                for dt, ctx, _start, _end, expr in cal.nlp(sent, sourceTime=ref.timetuple()) or ():
                    expr = expr.strip()
                    if expr.lower() in _TAGGER_STOP:
                        continue
                    if anchor_times_of_day:
                        dt = anchor_time_of_day(dt, expr, ref)
                    norm = _normalise(dt, ctx, date_format)
                    if norm is None:
                        continue
                    event = " ".join(sent.split()[:_EVENT_WORDS])
                    rel = f"{event} | {norm} ({expr}; said {short_date(ev.timestamp) or 'on question date'})"
                    if rel.lower() not in seen:
                        seen.add(rel.lower())
                        out.append(rel)
    return out, gflops("tagger", " ".join(text_all))


# ----------------------------------------------------------------------------- topic


def textrank_topics(inp: ModuleInput, n: int = 6) -> tuple[list[str], float]:
    """Up to ``n`` TextRank keyphrases (``summa``) of the evidence, best first, speakers excluded."""
    # summa logs at import whether the optional `pattern` tagger is there; nothing here uses its tag
    # filters, so the line (INFO in a Hydra run's log) is noise a user cannot act on.
    logging.getLogger("summa.preprocessing").setLevel(logging.WARNING)
    from summa import keywords as summa_keywords  # lazy import

    speakers = {s.lower() for ev in inp.evidence for s, _ in split_utterances(ev.text) if s}
    text = "\n".join(utt for ev in inp.evidence for _, utt in split_utterances(ev.text))
    try:
        ranked = summa_keywords.keywords(text, ratio=1.0, split=True, scores=True)
    except (IndexError, ValueError, ZeroDivisionError):  # summa fails on texts without content words
        ranked = []
    out: list[str] = []
    for phrase, _score in ranked:
        if phrase.lower() in speakers or not content_words(phrase):
            continue
        out.append(phrase)
        if len(out) >= n:
            break
    return out, gflops("textrank", text)


# ----------------------------------------------------------------------------- summary

#: How many evidence sentences / relations per heading the extractive summary keeps.
SUMMARY_SENTENCES, SUMMARY_RELATIONS_PER_MODULE = 5, 5


#: ``rank(query, sentences) -> indices`` of the sentences the extractive summary keeps.
SentenceRanker = Callable[[str, tuple[str, ...]], Sequence[int]]


def rank_sentences(encoder: Encoder, query: str, sentences: Sequence[str]) -> list[int]:
    """Indices of the :data:`SUMMARY_SENTENCES` sentences most similar to ``query`` (MiniLM), in their order.

    The strategies run it as a cached step of its own (:class:`modules.local_tier.LocalStep`, method
    ``minilm-rank``): most tier paths of one question share the question and the filtered evidence, and a
    replay must get the same indices on any CPU.
    """
    emb = encoder.encode([query, *sentences])
    sims = emb[1:] @ emb[0]
    ranked = sorted(range(len(sentences)), key=lambda i: (-float(sims[i]), i))
    return sorted(ranked[:SUMMARY_SENTENCES])


def extractive_summary(
    inp: ModuleInput, encoder: Encoder, keep_evidence: bool = False, rank: SentenceRanker | None = None
) -> tuple[str, float]:
    """A structured extractive summary (no generation).

    Sections: ``Relevant evidence`` -- the :data:`SUMMARY_SENTENCES` speaker-resolved
    sentences most similar to the question (MiniLM), in their original order, each with
    its session date; then ``People and things``, ``Dates`` and ``Topics`` with the first
    :data:`SUMMARY_RELATIONS_PER_MODULE` relations of each extractor.

    Under ``keep_evidence`` (the quality ladder) the selected sentences are put, as
    ``Key sentences``, in front of the LOW template (every kept chunk, dated, and all relations).

    ``rank`` picks the sentences (default: :func:`rank_sentences` with ``encoder``, uncached).
    """
    sents: list[tuple[str, str]] = []
    for ev in inp.evidence:
        date = short_date(ev.timestamp)
        for speaker, utt in split_utterances(ev.text):
            sents += [(date, s) for s in split_sentences(resolve_first_person(speaker, utt))]
    picked: list[str] = []
    cost = 0.0
    if sents:
        texts = tuple(s for _, s in sents)
        top = rank(inp.query, texts) if rank is not None else rank_sentences(encoder, inp.query, texts)
        picked = [f"- ({sents[i][0]}) {sents[i][1]}" if sents[i][0] else f"- {sents[i][1]}" for i in top]
        cost += gflops("minilm", inp.query + " " + " ".join(s for _, s in sents))
    if keep_evidence:
        head = ["Key sentences:", *picked, ""] if picked else []
        text = "\n".join([*head, template_summary(inp)])
        return text, cost + gflops("template", text)
    lines = [f"Question: {inp.query}"]
    if picked:
        lines += ["Relevant evidence:", *picked]
    for module, heading in (("entity", "People and things"), ("temporal", "Dates"), ("topic", "Topics")):
        rels = list(inp.relations.get(module, ()))[:SUMMARY_RELATIONS_PER_MODULE]
        if rels:
            lines.append(f"{heading}: " + "; ".join(rels))
    text = "\n".join(lines)
    return text, cost + gflops("template", text)
