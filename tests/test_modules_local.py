"""LOW (rules) and MID (offline learned) tiers of the implementation strategy on small inputs."""

import pytest

from memory.encoder import get_encoder
from modules import learned, rules
from modules.base import ModuleInput
from modules.compute_costs import RATES, gflops
from modules.tier import Tier
from modules.types import Evidence

TS = "1:56 pm on 8 May, 2023"
EV = (
    Evidence("a", 'Caroline said, "I went to a LGBTQ support group yesterday and it was so powerful."', TS),
    Evidence("b", 'Melanie said, "I painted that lake sunrise last year! My kids loved it."', TS),
    Evidence("c", 'Melanie said, "We are going camping next month with the whole family."', TS),
)


def _inp(module, query="When did Caroline go to the LGBTQ support group?", ev=EV, **kw):
    return ModuleInput(module, query, ev, **kw)


def test_keyword_filter_keeps_overlapping_chunks_and_falls_back_to_first_k():
    keep, cost = rules.keyword_filter(_inp("filter"), k=5)
    assert keep == [0] and cost > 0
    keep, _ = rules.keyword_filter(_inp("filter", query="zzz qqq"), k=2)
    assert keep == [0, 1]


def test_embedding_filter_ranks_by_similarity_and_keeps_at_least_one():
    enc = get_encoder("hashing")
    keep, cost = learned.embedding_filter(_inp("filter"), k=1, encoder=enc)
    assert keep == [0]
    keep, _ = learned.embedding_filter(_inp("filter", query="zzz qqq"), k=3, encoder=enc)
    assert len(keep) == 1  # nothing clears the threshold: the best one is kept
    assert cost == pytest.approx(gflops("minilm", _inp("filter").query + " " + " ".join(e.text for e in EV)))


def test_regex_entity_relations_resolve_speaker():
    rels, _ = rules.regex_entity_relations(_inp("entity"))
    assert "Caroline | went to | a LGBTQ support group yesterday" in rels
    assert "Melanie | painted | that lake sunrise last year" in rels
    assert "Melanie | has | kids" in rels


def test_spacy_entity_relations_differ_from_regex():
    mid, cost = learned.spacy_entity_relations(_inp("entity"))
    low, _ = rules.regex_entity_relations(_inp("entity"))
    assert "Caroline | go to | a LGBTQ support group" in mid  # lemma + preposition from the parse
    assert any(r.endswith("| is a | PERSON") for r in mid)
    assert mid != low and cost > 0


def test_regex_temporal_is_raw_and_tagger_is_normalised_to_session_date():
    low, _ = rules.regex_temporal_relations(_inp("temporal"))
    mid, _ = learned.tagger_temporal_relations(_inp("temporal"))
    assert any("@ yesterday (said 8 May 2023)" in r for r in low)
    assert any("| 2023-05-07 (yesterday;" in r for r in mid)  # the LoCoMo gold answer: 7 May 2023
    assert any("| 2022 (last year;" in r for r in mid)
    assert any("| 2023-06 (next month;" in r for r in mid)


def test_tagger_natural_dates_match_the_gold_answer_format():
    mid, _ = learned.tagger_temporal_relations(_inp("temporal"), date_format="natural")
    assert any("| 7 May 2023 (yesterday;" in r for r in mid)  # gold: 7 May 2023
    assert any("| 2022 (last year;" in r for r in mid)
    assert any("| June 2023 (next month;" in r for r in mid)
    assert not any("2023-0" in r for r in mid)


def test_implementation_date_format_option_is_checked_and_keys_the_cache():
    from modules.backends.fake import FakeBackend
    from modules.cache import CachedLLM, CallCache
    from modules.pricing import CostModel
    from modules.strategies.implementation import build_implementation
    from modules.tier import Tier

    llms, enc = {"high": CachedLLM(FakeBackend())}, get_encoder("hashing")
    with pytest.raises(ValueError, match="date_format must be one of"):
        build_implementation(llms, CostModel(), enc, date_format="isoo")
    cache = CallCache(":memory:")  # one shared cache: the option must be part of the key
    iso = build_implementation(llms, CostModel(), enc, cache)
    nat = build_implementation(llms, CostModel(), enc, cache, date_format="natural")
    assert "2023-05-07" in iso["temporal"].run(_inp("temporal"), Tier.MID).text
    assert "7 May 2023" in nat["temporal"].run(_inp("temporal"), Tier.MID).text


def test_times_of_day_are_dated_from_the_chunk_when_anchored_not_from_the_wall_clock():
    """parsedatetime resolves "last night" against the wall clock: the output depended on the day it ran."""
    from modules.backends.fake import FakeBackend
    from modules.base import ModuleOutput
    from modules.cache import CachedLLM, CallCache
    from modules.pricing import CostModel
    from modules.strategies.implementation import build_implementation
    from modules.tier import Tier

    ev = (Evidence("x", 'Sam said, "I watched a film last night and the next morning I ran."', TS),)
    anchored, _ = learned.tagger_temporal_relations(
        _inp("temporal", ev=ev), "natural", anchor_times_of_day=True
    )
    assert any("| 7 May 2023 (last night;" in r for r in anchored), anchored
    assert any("| 9 May 2023 (next morning;" in r for r in anchored), anchored
    legacy, _ = learned.tagger_temporal_relations(_inp("temporal", ev=ev), "natural")
    assert not any("May 2023 (last night;" in r for r in legacy)  # the old behaviour, kept for its cache keys
    llms, enc, cache = {"high": CachedLLM(FakeBackend())}, get_encoder("hashing"), CallCache(":memory:")
    runs: list[ModuleOutput] = [
        build_implementation(llms, CostModel(), enc, cache, date_format="natural", **opt)["temporal"].run(
            _inp("temporal", ev=ev), Tier.MID
        )
        for opt in ({}, {"anchor_times_of_day": True})
    ]
    assert runs[0].text != runs[1].text and not runs[1].cached  # the option is part of the cache key


def test_tagger_without_any_reference_date_skips_instead_of_using_today():
    ev = (Evidence("x", 'Bob said, "I moved here yesterday."', None),)
    assert learned.tagger_temporal_relations(_inp("temporal", ev=ev))[0] == []
    dated = learned.tagger_temporal_relations(
        _inp("temporal", ev=ev, question_date="2023/05/30 (Tue) 23:40")
    )[0]
    assert any("2023-05-29" in r for r in dated)


def test_topics_low_are_words_mid_are_keyphrases():
    low, _ = rules.frequency_topics(_inp("topic"))
    mid, _ = learned.textrank_topics(_inp("topic"))
    assert low and all(" " not in t for t in low)
    assert "caroline" not in low and "melanie" not in low  # speakers excluded
    assert mid and mid != low


def test_summaries_low_template_mid_extractive():
    inp = _inp("summary", relations={"temporal": ("went to group | 2023-05-07",)})
    low = rules.template_summary(inp)
    mid, _ = learned.extractive_summary(inp, encoder=get_encoder("hashing"))
    assert low.startswith("Question:") and "1. (8 May 2023) Caroline said" in low and "temporal: went" in low
    assert "Relevant evidence:" in mid and "Dates: went to group | 2023-05-07" in mid
    assert "Caroline went to a LGBTQ support group" in mid  # speaker-resolved sentence


def test_non_ascii_text_is_handled():
    ev = (Evidence("u", 'José said, "I moved to Zürich — naïve café life 🎉 yesterday!"', TS),)
    for fn in (
        rules.regex_entity_relations,
        rules.regex_temporal_relations,
        rules.frequency_topics,
        learned.spacy_entity_relations,
        learned.tagger_temporal_relations,
        learned.textrank_topics,
    ):
        module = {"regex_entity_relations": "entity", "spacy_entity_relations": "entity"}.get(
            fn.__name__, "topic"
        )
        value, cost = fn(_inp(module, ev=ev))
        assert isinstance(value, list) and cost >= 0
    assert any("2023-05-07" in r for r in learned.tagger_temporal_relations(_inp("temporal", ev=ev))[0])


def test_compute_table_orders_tiers_and_rejects_unknown_methods():
    assert (
        RATES["regex"].gflops_per_token
        < RATES["spacy_sm"].gflops_per_token
        < RATES["minilm"].gflops_per_token
    )
    assert RATES["minilm"].gflops_per_token < 2 * 134.5e6 / 1e9  # cheaper than the smallest LLM
    assert gflops("minilm", 10) == pytest.approx(10 * 2 * 22.7e6 / 1e9)
    with pytest.raises(KeyError, match="known"):
        gflops("bert", "x")


def test_filter_budget_per_tier_and_in_the_cache_key():
    from memory import get_encoder
    from modules.backends.fake import FakeBackend
    from modules.base import ModuleInput
    from modules.cache import CachedLLM, CallCache
    from modules.pricing import CostModel
    from modules.strategies.implementation import build_implementation
    from modules.tier import Tier
    from modules.types import Evidence

    ev = tuple(Evidence(f"c{i}", f"Ann adopted cat {i} in Paris.", "8 May 2023") for i in range(8))
    inp = ModuleInput("filter", "Which cat did Ann adopt in Paris?", ev)
    cache = CallCache()
    llm = CachedLLM(FakeBackend(responder=lambda r: '{"relevant": [2]}'), cache)
    enc = get_encoder("hashing")
    budgets = {"LOW": 2, "MID": 3, "HIGH": 6}
    mods = build_implementation(
        {"high": llm}, CostModel(), enc, cache, module_topk=budgets, keep_evidence=True
    )
    assert [len(mods["filter"].run(inp, t).value) for t in Tier] == [2, 3, 6]
    # the same persistent cache with another budget must not replay the old selection
    mods5 = build_implementation({"high": llm}, CostModel(), enc, cache, module_topk=5)
    assert [len(mods5["filter"].run(inp, t).value) for t in (Tier.LOW, Tier.MID)] == [5, 5]
    with pytest.raises(ValueError, match="positive int for each of LOW, MID, HIGH"):
        build_implementation({"high": llm}, CostModel(), enc, module_topk={"LOW": 2, "MID": 3})


def test_embedding_filter_pads_to_budget_and_mixes_the_retriever_score():
    enc = get_encoder("hashing")
    keep, _ = learned.embedding_filter(_inp("filter", query="zzz qqq"), k=2, encoder=enc, pad=True)
    assert len(keep) == 2  # padding keeps the budget even when nothing clears the threshold
    # The retriever ranked chunk 2 far above the others: with its full weight it is kept first.
    scores = (0.1, 0.2, 5.0)
    ev = tuple(Evidence(e.chunk_id, e.text, e.timestamp, score=s) for e, s in zip(EV, scores, strict=True))
    inp = _inp("filter", ev=ev)
    only_retriever, _ = learned.embedding_filter(inp, k=1, encoder=enc, retrieval_weight=1.0)
    only_blend, _ = learned.embedding_filter(inp, k=1, encoder=enc, retrieval_weight=0.0)
    assert only_retriever == [2] and only_blend == [0]


def test_extractive_summary_under_keep_evidence_keeps_the_low_template():
    inp = _inp("summary", relations={"temporal": ("went to group | 2023-05-07",)})
    mid, _ = learned.extractive_summary(inp, encoder=get_encoder("hashing"), keep_evidence=True)
    head, template = mid.split("\n\n", 1)
    assert head.startswith("Key sentences:") and "Caroline went to a LGBTQ support group" in head
    assert template == rules.template_summary(inp)  # MID reads everything LOW reads, and more


def test_keep_evidence_mid_tiers_and_retrieval_weight_in_the_cache_key():
    from modules.backends.fake import FakeBackend
    from modules.cache import CachedLLM, CallCache
    from modules.pricing import CostModel
    from modules.strategies.implementation import build_implementation
    from modules.tier import Tier

    cache = CallCache()
    llm = CachedLLM(FakeBackend(responder=lambda r: '{"relevant": [0]}'), cache)
    enc = get_encoder("hashing")
    inp = _inp("filter", query="zzz qqq")

    def mid_kept(**opts):
        mods = build_implementation({"high": llm}, CostModel(), enc, cache, module_topk=2, **opts)
        return len(mods["filter"].run(inp, Tier.MID).value)

    # The same persistent cache: the padded selection must not replay the thresholded one.
    assert (mid_kept(), mid_kept(keep_evidence=True)) == (1, 2)
    summary = build_implementation({"high": llm}, CostModel(), enc, cache, keep_evidence=True)["summary"]
    assert summary.run(_inp("summary"), Tier.MID).value.startswith("Key sentences:")
    with pytest.raises(ValueError, match=r"filter_retrieval_weight must be in \[0, 1\], got 1.5"):
        build_implementation({"high": llm}, CostModel(), enc, filter_retrieval_weight=1.5)


def test_topic_mid_logs_nothing_a_user_cannot_act_on():
    """summa announces at import that the optional `pattern` tagger is missing; a run's log must not."""
    import subprocess
    import sys

    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from modules import learned\nfrom modules.base import ModuleInput\n"
        "from modules.types import Evidence\n"
        "ev = (Evidence('c1', 'Caroline: I went to a support group yesterday.', None),)\n"
        "print(learned.textrank_topics(ModuleInput('topic', 'What did Caroline do?', ev))[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pattern" not in out.stderr, out.stderr


def test_the_summary_ranking_is_a_cached_step_shared_by_paths_and_read_back_on_replay(tmp_path):
    """Tier paths of one question share its filtered evidence, not its relations: the ranking is computed once
    per (query, sentences), stored as a local output of its own (method ``minilm-rank``, so that a pack
    carries it), and a later process reads it back without running the encoder."""
    from functools import partial

    from memory.encoder import HashingEncoder
    from modules import local_tier
    from modules.cache import CallCache
    from modules.cache_pack import Filters, export_pack, read_pack
    from modules.local_tier import LocalStep

    class Counting(HashingEncoder):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def encode(self, texts, batch_size=64):  # type: ignore[no-untyped-def]
            self.calls += 1
            return super().encode(texts)

    enc, cache = Counting(), CallCache(tmp_path / "calls.sqlite")
    def step(encoder: Counting) -> LocalStep:
        fn = partial(learned.rank_sentences, encoder)
        return LocalStep("summary", Tier.MID, "implementation", "minilm-rank", fn, cache, params="hashing")

    rank = step(enc)
    a = _inp("summary", relations={"temporal": ("went to group | 2023-05-07",)})
    b = _inp("summary", relations={"entity": ("Caroline | support group",)})
    first, _ = learned.extractive_summary(a, encoder=enc, rank=rank)
    other, _ = learned.extractive_summary(b, encoder=enc, rank=rank)
    assert enc.calls == 1  # the second path's summary reused the ranking
    assert "Dates: went to group" in first and "People and things: Caroline" in other
    assert first.split("Dates:")[0] == other.split("People and things:")[0]  # the same sentences picked
    assert learned.extractive_summary(a, encoder=Counting())[0] == first  # uncached: the same summary
    # A pack that keeps the minilm-rank outputs carries exactly this ranking.
    keep = Filters(local=["minilm-rank"])
    pack = export_pack(tmp_path / "calls.sqlite", tmp_path / "rank.pack.gz", filters=keep)
    ((_, stored),) = read_pack(pack.path).entries
    assert stored["tags"]["module"] == "summary" and all(isinstance(i, int) for i in stored["raw"])
    # A replay: a new process (empty memo) over the same cache reads the ranking, it does not encode.
    local_tier.LRU.clear()
    replayed = Counting()
    assert learned.extractive_summary(a, encoder=replayed, rank=step(replayed))[0] == first
    assert replayed.calls == 0
    learned.extractive_summary(_inp("summary", query="Who went where?"), encoder=enc, rank=rank)
    assert enc.calls == 2  # another question: a new ranking
