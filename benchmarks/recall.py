"""Evidence recall: retrieval quality measured without any LLM."""

from __future__ import annotations

from collections.abc import Sequence

from modules.types import Evidence


def evidence_recall(gold_ids: Sequence[str], evidence: Sequence[Evidence]) -> float | None:
    """Fraction of ``gold_ids`` covered by the evidence's ``source_ids`` (``None`` if no gold)."""
    gold = set(gold_ids)
    if not gold:
        return None
    found = {sid for e in evidence for sid in e.source_ids}
    return len(gold & found) / len(gold)


def evidence_hit(gold_ids: Sequence[str], evidence: Sequence[Evidence]) -> float | None:
    """1.0 if at least one gold turn was retrieved, else 0.0 (``None`` if no gold)."""
    gold = set(gold_ids)
    if not gold:
        return None
    return float(any(sid in gold for e in evidence for sid in e.source_ids))
