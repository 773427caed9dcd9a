"""BM25 lexical channel of the hierarchical memory (hybrid lexical + dense retrieval)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from common.stemming import porter_stem

_WORD_RE = re.compile(r"[a-z0-9]+")

#: Function words that carry no evidence (questions are full of them).
STOP_WORDS = frozenset(
    """
    a an the is are was were be been being do does did doing done what when where who whom whose which
    how why of in on at to for with and or but from by about as it its this that these those i you he
    she they we his her hers their theirs my your our me him them us has have had having will would can
    could should shall may might must any some into than then there here not no yes so if also just very
    too said says say
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def lexical_tokens(text: str) -> list[str]:
    """Lower-cased, stop-word-free, Porter-stemmed word tokens (digits kept: years, counts)."""
    return [porter_stem(w) for w in _WORD_RE.findall(text.lower()) if w not in STOP_WORDS]


def lexical_text(text: str, metadata: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text indexed for an item: its text plus the string values of ``fields`` in metadata."""
    extra = [str(metadata[f]) for f in fields if metadata.get(f) not in (None, "")]
    return " ".join([*extra, text])


class LexicalIndex:
    """BM25 over a fixed set of items, addressed by item id (rebuilt, never edited, see module doc).

    Args:
        item_ids: Item ids, aligned with ``texts``.
        texts: The indexed text of each item (see :func:`lexical_text`).
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
    """

    def __init__(
        self, item_ids: Sequence[int], texts: Sequence[str], k1: float = 1.2, b: float = 0.75
    ) -> None:
        import bm25s  # imported here: only memories with a lexical channel need it

        # bm25s sets its own logger to DEBUG at import, so under any root handler (Hydra's in train.py)
        # every index build printed "Building index from IDs objects"; its debug lines are not ours to show.
        logging.getLogger("bm25s").setLevel(logging.WARNING)

        self.item_ids = np.asarray(item_ids, dtype=np.int64)
        self.vocab: dict[str, int] = {}
        # bm25s mis-counts an empty document; a placeholder token keeps such a row at score 0.
        docs = [
            [self.vocab.setdefault(t, len(self.vocab)) for t in (lexical_tokens(x) or ["\x00"])]
            for x in texts
        ]
        self._bm25: Any = None
        if docs:
            self._bm25 = bm25s.BM25(k1=k1, b=b)
            self._bm25.index(bm25s.tokenization.Tokenized(ids=docs, vocab=self.vocab), show_progress=False)

    def __len__(self) -> int:
        return len(self.item_ids)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every item for ``query``, aligned with :attr:`item_ids`.

        All zeros when the query shares no indexed word with the items.
        """
        q = [self.vocab[t] for t in dict.fromkeys(lexical_tokens(query)) if t in self.vocab]
        if self._bm25 is None or not q:
            return np.zeros(len(self.item_ids), dtype=np.float64)
        return np.asarray(self._bm25.get_scores(q), dtype=np.float64)


def zscore(values: np.ndarray) -> np.ndarray:
    """Standardise scores so two channels can be mixed (a constant array maps to zeros)."""
    std = float(values.std()) if len(values) else 0.0
    if std <= 1e-12:
        return np.zeros(len(values), dtype=np.float64)
    return (values - values.mean()) / std
