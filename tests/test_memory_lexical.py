"""The BM25 lexical channel of the hierarchical memory (hybrid retrieval)."""

import logging

import numpy as np
import pytest

from memory import HierarchicalMemory, MemoryConfig, get_encoder
from memory.lexical import LexicalIndex, lexical_text, lexical_tokens, zscore

DOCS = [
    "Evan said he drives a Prius now.",
    "Sam said he started painting in May.",
    "Evan went on a road trip to Jasper with the family.",
    "Sam said the weather was nice.",
]


def test_tokens_are_stemmed_and_stop_words_dropped():
    assert lexical_tokens("What did Evan paint in the paintings of 2023?") == [
        "evan",
        "paint",
        "paint",
        "2023",
    ]
    assert lexical_tokens("") == []


def test_lexical_text_adds_metadata_fields():
    assert lexical_text("hi", {"timestamp": "8 May, 2023", "x": None}, ("timestamp", "x")) == "8 May, 2023 hi"
    assert lexical_text("hi", {}, ("timestamp",)) == "hi"


def test_bm25_scores_rank_the_matching_item_first():
    idx = LexicalIndex([10, 11, 12, 13], DOCS)
    scores = idx.scores("Where did Evan take a road trip?")
    assert idx.item_ids.tolist() == [10, 11, 12, 13]
    assert int(np.argmax(scores)) == 2 and scores[1] == 0.0 and scores[3] == 0.0
    assert not idx.scores("the of and").any()  # only stop words: nothing matches
    assert len(LexicalIndex([], [])) == 0 and LexicalIndex([], []).scores("Evan").size == 0


def test_zscore():
    assert zscore(np.array([1.0, 1.0])).tolist() == [0.0, 0.0]
    z = zscore(np.array([0.0, 1.0, 2.0]))
    assert z.mean() == pytest.approx(0.0) and z.std() == pytest.approx(1.0)


def _facts(n=40):
    # Hashing vectors make dense retrieval of paraphrases weak; exact rare words are BM25's strength.
    return [f"Note {i}: the weather on day {i} was mild and calm." for i in range(n)] + [
        "Caroline said the pottery class in Zanzibar was fun."
    ]


def _memory(weight, **kw):
    cfg = MemoryConfig(
        l1_capacity=8, l2_capacity=100, mode="no_ce", gate_threshold=0.99, lexical_weight=weight, **kw
    )
    mem = HierarchicalMemory(cfg, get_encoder("hashing"))
    facts = _facts()
    mem.ingest(facts, [0.5] * len(facts), metadata=[{"timestamp": f"day {i}"} for i in range(len(facts))])
    return mem


def test_hybrid_retrieval_finds_a_rare_word_match_dense_misses():
    # the dense (hashing) vectors favour the 40 notes sharing three words; BM25 weighs the rare one
    query = "Was the weather mild and calm in Zanzibar?"

    def rank(weight):
        texts = [it.text for it in _memory(weight).retrieve(query, 41)]
        return next(i for i, t in enumerate(texts) if t.startswith("Caroline said the pottery class"))

    assert rank(0.0) == 40  # dense alone ranks it last
    assert rank(0.5) == 1 and rank(0.7) == 0 and rank(1.0) == 0


def test_lexical_index_follows_inserts_evictions_and_deletes():
    mem = _memory(0.5)
    idx = mem.lexical_index()
    assert len(idx) == len(mem) and mem.lexical_index() is idx  # cached while nothing changes
    zanzibar = next(it.item_id for it in mem.retrieve("Zanzibar pottery", 1))
    mem.delete([zanzibar])
    assert mem.lexical_index() is not idx and zanzibar not in mem.lexical_index().item_ids
    assert all("Zanzibar" not in it.text for it in mem.retrieve("Zanzibar pottery", 3))
    mem.ingest(["Bo said Zanzibar again."])
    assert mem.retrieve("Zanzibar", 1)[0].text == "Bo said Zanzibar again."


def test_dates_in_metadata_are_searchable():
    mem = _memory(0.9)
    assert mem.retrieve("What happened on day 17?", 1)[0].text.startswith("Note 17:")
    plain = _memory(0.9, lexical_fields=())
    assert mem.config.lexical_fields == ("timestamp",) and plain.config.lexical_fields == ()


def test_weight_zero_keeps_the_dense_ranking_exactly():
    a = HierarchicalMemory(
        MemoryConfig(l1_capacity=8, l2_capacity=100, mode="no_ce", gate_threshold=0.99),
        get_encoder("hashing"),
    )
    a.ingest(_facts())
    b = _memory(0.0)
    q = "weather on day 3"
    assert [i.text for i in a.retrieve(q, 5)] == [i.text for i in b.retrieve(q, 5)]


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("lexical_weight", 1.5, "lexical_weight must be in \\[0, 1\\]"),
        ("lexical_k", 0, "lexical_k must be a positive int"),
        ("lexical_fields", "timestamp", "lexical_fields must be a tuple"),
    ],
)
def test_config_validation(field, value, match):
    with pytest.raises(ValueError, match=match):
        MemoryConfig(**{field: value})


def test_saved_memory_keeps_the_lexical_channel(tmp_path):
    mem = _memory(0.5)
    mem.save(tmp_path / "m")
    back = HierarchicalMemory.load(tmp_path / "m", get_encoder("hashing"))
    assert back.config.lexical_weight == 0.5 and back.config.lexical_fields == ("timestamp",)
    q = "Which class did she take in Zanzibar?"
    assert [i.text for i in back.retrieve(q, 3)] == [i.text for i in mem.retrieve(q, 3)]


def test_index_build_logs_nothing_under_a_debug_root_handler(caplog: pytest.LogCaptureFixture) -> None:
    # bm25s sets its logger to DEBUG; under train.py's root handler every build printed a debug line.
    caplog.set_level(logging.DEBUG)
    LexicalIndex([0, 1], DOCS[:2])
    assert [r.getMessage() for r in caplog.records if r.name.startswith("bm25s")] == []
