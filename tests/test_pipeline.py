"""The pipeline runner: step-wise API, inputs per module, costs, caching, determinism, errors."""

import pytest

from memory.encoder import get_encoder
from modules.backends.fake import FakeBackend
from modules.base import EMPTY_MEMORY_TEXT, ModuleInput
from modules.cache import CachedLLM, CallCache
from modules.cost import Cost
from modules.local_tier import LRU
from modules.pipeline import build_pipeline
from modules.pricing import CostModel
from modules.tier import MODULE_ORDER, Tier, one_module_changes, parse_tiers
from modules.types import Evidence

TS = "1:56 pm on 8 May, 2023"
EV = [
    Evidence("a", 'Caroline said, "I went to a LGBTQ support group yesterday and it was so powerful."', TS),
    Evidence("b", 'Melanie said, "I painted that lake sunrise last year! My kids loved it."', TS),
    Evidence("c", 'Melanie said, "We are going camping next month."', TS),
]
Q = "When did Caroline go to the LGBTQ support group?"


def _responder(req):
    body = req.messages[1]["content"] if req.messages else req.prompt
    task = body.split("Task:")[-1]
    if "relevant" in task:
        return '{"relevant": [1, 3]}'
    if "items" in task:
        return '{"items": ["fact from llm"]}'
    return "Caroline went to the group on 7 May 2023."


def _pipe(cache=None, backend=None, **opts):
    backend = backend or FakeBackend(responder=_responder)
    return build_pipeline(
        "implementation",
        {"high": CachedLLM(backend, cache)},
        CostModel(),
        get_encoder("hashing"),
        cache,
        **opts,
    )


def test_stepwise_inputs_follow_the_dag():
    run = _pipe(module_topk=2).begin(Q, EV)
    assert run.next_module == "filter" and "camping" in run.current_input_text()  # retrieved evidence
    run.step(Tier.LOW)
    assert run.next_module == "entity"
    filtered_text = run.current_input_text()
    assert "support group" in filtered_text and "camping" not in filtered_text  # filtered evidence
    run.step(Tier.MID)
    assert run.current_input_text() == filtered_text  # temporal reads the same filtered evidence
    run.step(Tier.MID)
    run.step(Tier.HIGH)
    assert run.next_module == "summary"
    summary_input = run.current_input_text()  # the relations extracted so far
    assert "entity: Caroline | go to | a LGBTQ support group" in summary_input
    assert "topic: fact from llm" in summary_input and "2023-05-07" in summary_input
    run.step(Tier.HIGH)
    assert run.done
    with pytest.raises(RuntimeError, match="done"):
        run.step(Tier.LOW)
    res = run.result()
    assert res.memory_text == "Caroline went to the group on 7 May 2023."
    assert res.tiers == (Tier.LOW, Tier.MID, Tier.MID, Tier.HIGH, Tier.HIGH)


def test_summary_input_falls_back_to_evidence_without_relations():
    backend = FakeBackend(responder=lambda r: '{"items": []}')
    run = _pipe(backend=backend).begin(Q, EV[:1])
    for t in (Tier.LOW, Tier.HIGH, Tier.HIGH, Tier.HIGH):
        run.step(t)
    assert run.current_input_text() == EV[0].text


def test_run_matches_stepwise_and_costs_add_up():
    pipe = _pipe()
    tiers = (Tier.MID, Tier.LOW, Tier.MID, Tier.LOW, Tier.HIGH)
    res = pipe.run(Q, EV, tiers)
    run = pipe.begin(Q, EV)
    for t in tiers:
        run.step(t)
    assert run.result().memory_text == res.memory_text
    total = Cost()
    for c in (o.cost for o in res.outputs.values()):
        total = total + c
    assert total == res.total_cost and list(res.outputs) == list(MODULE_ORDER)
    assert res.total_cost.calls == 1  # only the HIGH summary called the LLM
    assert res.to_dict()["tiers"] == ["MID", "LOW", "MID", "LOW", "HIGH"]


def test_tiers_give_different_outputs_and_costs_order():
    pipe = _pipe()
    results = {t: pipe.run(Q, EV, [t] * 5) for t in Tier}
    for m in MODULE_ORDER[1:]:
        texts = {results[t].outputs[m].text for t in Tier}
        assert len(texts) == 3, m
    assert (
        results[Tier.LOW].total_cost.value
        < results[Tier.MID].total_cost.value
        < results[Tier.HIGH].total_cost.value
    )


def test_high_summary_prompt_contains_the_evidence():
    backend = FakeBackend(responder=_responder)
    _pipe(backend=backend).run(Q, EV, [Tier.LOW] * 4 + [Tier.HIGH])
    summary_req = backend.seen[-1]
    assert "support group yesterday" in summary_req.messages[1]["content"]


def test_empty_evidence_gives_defined_output_without_llm_calls():
    backend = FakeBackend()
    res = _pipe(backend=backend).run(Q, [], [Tier.HIGH] * 5)
    assert res.memory_text == EMPTY_MEMORY_TEXT and backend.calls == 0 and res.total_cost == Cost()


def test_degraded_modules_are_visible_in_the_result():
    backend = FakeBackend(responder=lambda r: "not json at all")
    res = _pipe(backend=backend).run(Q, EV, [Tier.HIGH] * 5)
    # the summary's free text parses fine
    assert tuple(m for m, o in res.outputs.items() if o.degraded) == MODULE_ORDER[:4]
    assert res.parse_failures == 4 and res.total_cost.failures == 4


def test_local_tiers_are_cached_in_process_and_persistently(tmp_path):
    LRU.clear()
    cache = CallCache(tmp_path / "calls.sqlite")
    pipe = _pipe(cache=cache)
    first = pipe.run(Q, EV, [Tier.MID] * 5)
    assert not any(o.cached for o in first.outputs.values())
    second = pipe.run(Q, EV, [Tier.MID] * 5)
    assert all(o.cached for o in second.outputs.values())
    assert second.total_cost == first.total_cost  # replays keep the original latency and cost
    LRU.clear()  # a new process: the persistent cache still serves them
    third = pipe.run(Q, EV, [Tier.MID] * 5)
    assert all(o.cached for o in third.outputs.values()) and third.memory_text == first.memory_text
    # Each stored output names its tier and method (a pack export picks outputs by method).
    from modules.cache_pack import read_sqlite_entries

    stored = read_sqlite_entries(tmp_path / "calls.sqlite")
    methods = {(v["tags"]["module"], v["tags"]["method"]) for _, v in stored}
    assert methods == {
        ("filter", "minilm"), ("entity", "spacy_sm"), ("temporal", "tagger"), ("topic", "textrank"),
        ("summary", "extractive"), ("summary", "minilm-rank"),  # the summary's ranking, a step of its own
    }
    # An output cached before methods were recorded gets its tags when it is next read (same output).
    key = pipe.modules["topic"]._tiers[Tier.MID].key(ModuleInput("topic", Q, first.outputs["filter"].value))
    legacy = {k: v for k, v in cache.get(key).items() if k != "tags"}
    cache.put(key, legacy)
    LRU.clear()
    again = pipe.run(Q, EV, [Tier.MID] * 5)
    assert again.memory_text == first.memory_text and cache.get(key) == {**legacy, "tags": {
        "module": "topic", "tier": "MID", "strategy": "implementation", "method": "textrank"}}
    # Relation extractors ignore the question: another question over the same evidence hits.
    filtered = first.outputs["filter"].value
    entity = pipe.modules["entity"]
    assert entity.run(ModuleInput("entity", "What did Melanie paint?", filtered), Tier.MID).cached
    assert (
        not pipe.modules["filter"]
        .run(ModuleInput("filter", "What did Melanie paint?", tuple(EV)), Tier.MID)
        .cached
    )


def test_deterministic_across_pipelines():
    a = _pipe().run(Q, EV, [Tier.MID] * 5)
    LRU.clear()
    b = _pipe().run(Q, EV, [Tier.MID] * 5)
    assert a.memory_text == b.memory_text
    assert [a.outputs[m].value for m in MODULE_ORDER] == [b.outputs[m].value for m in MODULE_ORDER]


def test_one_module_changes_from_a_uniform_path():
    changes = one_module_changes(Tier.MID, (Tier.LOW, Tier.HIGH))
    assert len(changes) == 2 * len(MODULE_ORDER)
    assert changes[0] == ("filter", Tier.LOW, (Tier.LOW, Tier.MID, Tier.MID, Tier.MID, Tier.MID))
    assert changes[-1] == ("summary", Tier.HIGH, (Tier.MID, Tier.MID, Tier.MID, Tier.MID, Tier.HIGH))
    # every change differs from the base in exactly its own module
    for module, tier, tiers in changes:
        assert [m for m, t in zip(MODULE_ORDER, tiers, strict=True) if t != Tier.MID] == [module]
        assert tiers[MODULE_ORDER.index(module)] == tier


def test_bad_arguments_have_clear_errors():
    pipe = _pipe()
    with pytest.raises(ValueError, match="need 5 tiers"):
        pipe.run(Q, EV, [Tier.LOW])
    # User spellings of tiers are parsed once, by the tier's owner (the pipeline takes Tier values).
    with pytest.raises(ValueError, match="unknown tier 'ULTRA'"):
        parse_tiers("LOW,L,mid,2,ULTRA")
    assert parse_tiers("LOW,l,mid,2,H") == (Tier.LOW, Tier.LOW, Tier.MID, Tier.HIGH, Tier.HIGH)
    with pytest.raises(ValueError, match="has 4 tiers, expected 5"):
        parse_tiers("L,M,H,M")
    with pytest.raises(TypeError, match=r"evidence\[1\]"):
        pipe.begin(Q, [EV[0], "raw text"])
    with pytest.raises(KeyError, match="unknown tiering strategy"):
        build_pipeline("magic", {}, CostModel(), get_encoder("hashing"))
    with pytest.raises(TypeError, match="unknown options"):
        _pipe(modul_topk=3)
    with pytest.raises(ValueError, match="needs an LLM"):
        build_pipeline("implementation", {"a": 1, "b": 2}, CostModel(), get_encoder("hashing"))
    with pytest.raises(RuntimeError, match="not finished"):
        pipe.begin(Q, EV).result()


def test_non_ascii_evidence_runs_through_every_tier():
    ev = [Evidence("u", 'José said, "I moved to Zürich — naïve café life 🎉 yesterday!"', TS)]
    pipe = _pipe()
    for t in Tier:
        res = pipe.run("Where did José move?", ev, [t] * 5)
        assert res.memory_text and not any(o.degraded for o in res.outputs.values())


def test_reasoning_and_capacity_pipelines_build_and_run():
    from modules.strategies.capacity import DEFAULT_MODELS

    fake = CachedLLM(FakeBackend(responder=_responder))
    res = build_pipeline("reasoning", {"default": fake}, CostModel(), get_encoder("hashing")).run(
        Q, EV, [Tier.LOW] * 5
    )
    assert res.total_cost.calls == 5 and res.total_cost.models == ("fake-llm",)
    llms = {
        t.name.lower(): CachedLLM(FakeBackend(model_id=m, responder=_responder))
        for t, m in DEFAULT_MODELS.items()
    }
    res = build_pipeline("capacity", llms, CostModel(), get_encoder("hashing")).run(
        Q, EV, list(Tier) + [Tier.LOW] * 2
    )
    assert res.total_cost.models == tuple(sorted(DEFAULT_MODELS.values()))


def test_a_local_output_computed_for_one_cache_is_written_to_the_next_cache_that_asks(tmp_path):
    """The in-process memo of local outputs is per cache: a second cache (a second study, or a test after
    another) gets the output written, so a pack exported from it holds what a replay needs."""
    from modules.base import ModuleInput
    from modules.local_tier import LocalTier
    from modules.pricing import CostModel
    from modules.tier import Tier

    calls: list[str] = []

    def fn(inp):
        calls.append(inp.query)
        return ["x"], 1.0

    caches = [CallCache(tmp_path / "a.sqlite"), CallCache(tmp_path / "b.sqlite")]
    inp = ModuleInput("topic", "q?", ())
    for cache in caches:
        args = ("topic", Tier.LOW, "implementation", "words", fn, CostModel(), cache)
        tier = LocalTier(*args, reads_query=True)
        assert tier(inp).value == ("x",)
        assert cache.get(tier.key(inp)) is not None  # this cache holds it
    assert calls == ["q?", "q?"]  # once per cache: a memo hit never stands in for the second cache's entry
