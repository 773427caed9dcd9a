"""LLM tiers with the fake backend: success, degraded outputs and how failures are counted."""

import pytest

from modules.backends.fake import FakeBackend
from modules.base import EMPTY_MEMORY_TEXT, ModuleInput
from modules.cache import CachedLLM, CallCache
from modules.llm_tier import LLMTier, LLMTierConfig
from modules.pricing import CostModel
from modules.strategies.capacity import build_capacity
from modules.strategies.reasoning import build_reasoning
from modules.tier import Tier
from modules.types import Evidence

EV = tuple(Evidence(f"c{i}", f'Alice said, "I adopted cat number {i}."', "2023-05-08") for i in range(4))


def _tier(module, responder=None, style="direct", backend=None, **cfg):
    backend = backend or FakeBackend(responder=responder)
    return LLMTier(
        module, Tier.HIGH, "test", CachedLLM(backend), CostModel(), LLMTierConfig(style=style, **cfg)
    )


def _inp(module, ev=EV, **kw):
    return ModuleInput(module, "Which cats did Alice adopt?", ev, **kw)


def test_relations_success_is_metered_and_parsed():
    out = _tier("entity", lambda r: '{"items": ["Alice | adopted | cat 1", "Alice | adopted | cat 1"]}')(
        _inp("entity")
    )
    assert out.value == ("Alice | adopted | cat 1",) and not out.degraded and out.parse_failures == 0
    assert out.cost.calls == 1 and out.cost.tokens_in > 0 and out.cost.value > 0 and out.cost.failures == 0


def test_filter_selection_capped_and_empty_selection_keeps_best_ranked():
    out = _tier("filter", lambda r: '{"relevant": [4, 2, 3]}', filter_k=2)(_inp("filter"))
    assert [e.chunk_id for e in out.value] == ["c1", "c2"]  # retrieval order, capped at k
    out = _tier("filter", lambda r: '{"relevant": []}')(_inp("filter"))
    assert [e.chunk_id for e in out.value] == ["c0"] and not out.degraded


def test_malformed_output_degrades_and_counts_a_failure():
    out = _tier("entity", lambda r: "Sorry, I can't do JSON")(_inp("entity"))
    assert out.degraded and out.value == () and out.parse_failures == 1
    assert out.cost.failures == 1 and out.cost.calls == 1 and out.cost.value > 0  # the wasted call is paid
    assert "parse failure" in out.error and any("raw=" in n for n in out.notes)


def test_malformed_filter_output_falls_back_to_first_k_unfiltered():
    out = _tier("filter", lambda r: "chunk two", filter_k=3)(_inp("filter"))
    assert out.degraded and [e.chunk_id for e in out.value] == ["c0", "c1", "c2"]


def test_malformed_summary_falls_back_to_template_with_evidence():
    out = _tier("summary", lambda r: "   ")(_inp("summary"))
    assert out.degraded and "cat number 0" in out.value and out.parse_failures == 1


@pytest.mark.parametrize(
    "backend",
    [
        FakeBackend(fail_when=lambda r: True, error_message="server exploded"),
        FakeBackend(latency_s=5.0, timeout_s=1.0),
    ],
)
def test_backend_error_and_timeout_degrade(backend):
    out = _tier("temporal", backend=backend)(_inp("temporal"))
    assert out.degraded and out.value == () and out.parse_failures == 0
    assert out.cost.failures == 1 and "backend error" in out.error


def test_failed_calls_are_not_cached_and_retry_later():
    backend = FakeBackend(responder=lambda r: '{"items": ["x"]}', fail_first=1)
    tier = LLMTier(
        "topic", Tier.HIGH, "t", CachedLLM(backend, CallCache(":memory:")), CostModel(), LLMTierConfig()
    )
    assert tier(_inp("topic")).degraded
    assert tier(_inp("topic")).value == ("x",)
    again = tier(_inp("topic"))
    assert again.cached and again.cost.cache_hits == 1 and backend.calls == 2


def test_prompt_too_long_degrades_without_calling():
    backend = FakeBackend(n_ctx=100)
    out = _tier("entity", backend=backend)(ModuleInput("entity", "why " * 200, EV))
    assert out.degraded and "prompt too long" in out.error and backend.calls == 0 and out.cost.failures == 1


def test_long_evidence_is_truncated_visibly():
    backend = FakeBackend(n_ctx=200, responder=lambda r: '{"items": []}')
    ev = tuple(Evidence(f"c{i}", "blah " * 40, None) for i in range(6))
    out = _tier("entity", backend=backend)(_inp("entity", ev=ev))
    assert not out.degraded and any(n.startswith("truncated: dropped") for n in out.notes)


def test_empty_input_needs_no_llm_call():
    backend = FakeBackend()
    pipe_mods = build_reasoning({"default": CachedLLM(backend)}, CostModel())
    for name, mod in pipe_mods.items():
        out = mod.run(ModuleInput(name, "q", ()), Tier.HIGH)
        assert out.cost.calls == 0 and not out.degraded
        assert out.value == (EMPTY_MEMORY_TEXT if name == "summary" else ())
    assert backend.calls == 0


def test_reasoning_tiers_use_direct_cot_react():
    seen = []

    def responder(req):
        body = req.messages[1]["content"]
        seen.append(body)
        if "PLAN:" in body:
            return 'PLAN: find cats\nACT: cats 0-3\nREFLECT: ok\n<answer>{"items": ["cat 0"]}</answer>'
        if "step by step" in body:
            return 'Alice adopted cats.\nAnswer: {"items": ["cat 1"]}'
        return '{"items": ["cat 2"]}'

    mods = build_reasoning({"default": CachedLLM(FakeBackend(responder=responder))}, CostModel())
    outs = {t: mods["topic"].run(_inp("topic"), t) for t in Tier}
    assert [outs[t].value for t in Tier] == [("cat 2",), ("cat 1",), ("cat 0",)]
    assert outs[Tier.LOW].cost.tokens_in < outs[Tier.HIGH].cost.tokens_in


def test_reasoning_without_answer_tag_is_finalised_by_a_constrained_call():
    def responder(req):
        body = req.messages[1]["content"]
        if "Your notes:" in body:
            assert "PLAN: think forever" in body and req.json_schema is not None
            return '{"items": ["Alice | adopted | cat 2"]}'
        return "PLAN: think forever"

    mods = build_reasoning({"x": CachedLLM(FakeBackend(responder=responder))}, CostModel())
    out = mods["entity"].run(_inp("entity"), Tier.HIGH)
    assert out.value == ("Alice | adopted | cat 2",) and not out.degraded and out.parse_failures == 0
    assert out.cost.calls == 2 and any("finalised" in n for n in out.notes)


def test_reasoning_degrades_when_the_finalise_call_fails_too():
    mods = build_reasoning(
        {"x": CachedLLM(FakeBackend(responder=lambda r: "PLAN: think forever"))}, CostModel()
    )
    out = mods["entity"].run(_inp("entity"), Tier.MID)
    assert out.degraded and out.parse_failures == 1 and out.cost.failures == 1 and out.cost.calls == 2


def test_capacity_uses_each_tiers_model_and_fewshot_for_base_models():
    backends = {
        "low": FakeBackend(model_id="smollm2-135m", responder=lambda r: '{"items": ["a"]}'),
        "mid": FakeBackend(model_id="gemma3-270m", responder=lambda r: '{"items": ["b"]}\n\nEvidence: junk'),
        "high": FakeBackend(model_id="qwen2.5-1.5b", responder=lambda r: '{"items": ["c"]}'),
    }
    mods = build_capacity({k: CachedLLM(b) for k, b in backends.items()}, CostModel())
    outs = {t: mods["entity"].run(_inp("entity"), t) for t in Tier}
    assert [outs[t].value for t in Tier] == [("a",), ("b",), ("c",)]
    assert [outs[t].cost.models for t in Tier] == [("smollm2-135m",), ("gemma3-270m",), ("qwen2.5-1.5b",)]
    assert backends["mid"].seen[0].prompt is not None and backends["low"].seen[0].messages is not None
    # Same case text for every tier: the chat user message is the tail of the few-shot prompt.
    assert (
        backends["mid"].seen[0].prompt.endswith(backends["low"].seen[0].messages[1]["content"] + "\nAnswer:")
    )
    assert outs[Tier.HIGH].cost.value > outs[Tier.LOW].cost.value  # bigger model, same tokens


def test_capacity_requires_all_three_llms():
    with pytest.raises(ValueError, match="missing"):
        build_capacity({"low": CachedLLM(FakeBackend())}, CostModel())


def test_keep_evidence_filter_puts_selection_first_and_pads_to_k():
    out = _tier("filter", lambda r: '{"relevant": [3]}', filter_k=3, keep_evidence=True)(_inp("filter"))
    assert [e.chunk_id for e in out.value] == ["c2", "c0", "c1"] and not out.degraded
    # without the option the same reply keeps only the selection
    out = _tier("filter", lambda r: '{"relevant": [3]}', filter_k=3)(_inp("filter"))
    assert [e.chunk_id for e in out.value] == ["c2"]


def test_keep_evidence_summary_puts_notes_in_front_of_the_template_memory():
    seen = []

    def reply(req):
        seen.append(req.messages[1]["content"])
        return "Alice adopted cat 2 on 8 May 2023.\nAnswer: cat 2"

    out = _tier("summary", reply, keep_evidence=True)(_inp("summary"))
    assert out.value.startswith("Notes: Alice adopted cat 2 on 8 May 2023.\nAnswer: cat 2\n\n")
    # every evidence chunk the template (LOW) shows is still there, with the question
    assert all(f"cat number {i}" in out.value for i in range(4))
    assert "Which cats did Alice adopt?" in out.value
    assert "quote the exact words" in seen[0]  # the answer-oriented ask
    plain = _tier("summary", lambda r: "Alice adopted cats.")(_inp("summary"))
    assert plain.value == "Alice adopted cats."


def test_keep_evidence_is_a_strategy_option():
    from memory import get_encoder
    from modules.strategies.implementation import build_implementation

    llm = CachedLLM(FakeBackend())
    mods = build_implementation({"high": llm}, CostModel(), get_encoder("hashing"), keep_evidence=True)
    assert mods["summary"]._tiers[Tier.HIGH].config.keep_evidence is True
    with pytest.raises(TypeError, match="unknown options"):
        build_implementation({"high": llm}, CostModel(), get_encoder("hashing"), keep_evidenc=True)


def _mid(module, value, cost=1.0, **kw):
    from modules.base import ModuleOutput, output_text
    from modules.cost import Cost

    text = output_text(module, value)
    return lambda inp: ModuleOutput(module, Tier.MID, text, value, Cost(value=cost), **kw)


def test_high_adds_its_items_in_front_of_the_mid_tiers_and_pays_for_both():
    reply = lambda r: '{"items": ["cat 2 | 8 May 2023", "cat 1 | 2023"]}'  # noqa: E731
    tier = LLMTier(
        "temporal", Tier.HIGH, "test", CachedLLM(FakeBackend(responder=reply)), CostModel(), LLMTierConfig(),
        base=_mid("temporal", ("cat 1 | 2023", "cat 3 | 9 May 2023")),
    )
    out = tier(_inp("temporal"))
    assert out.value == ("cat 2 | 8 May 2023", "cat 1 | 2023", "cat 3 | 9 May 2023")
    alone = _tier("temporal", reply)(_inp("temporal"))
    assert out.cost.value == pytest.approx(alone.cost.value + 1.0) and out.cost.calls == 1


def test_high_summary_notes_go_in_front_of_the_mid_summary_and_degrade_to_it():
    mid = _mid("summary", "Key sentences:\n- cat 2\n\nQuestion: ...")
    notes = CachedLLM(FakeBackend(responder=lambda r: "Answer: cat 2"))
    ok = LLMTier(
        "summary", Tier.HIGH, "test", notes, CostModel(), LLMTierConfig(keep_evidence=True), base=mid,
    )(_inp("summary"))
    assert ok.value == "Notes: Answer: cat 2\n\nKey sentences:\n- cat 2\n\nQuestion: ..."
    failing = LLMTier(
        "summary", Tier.HIGH, "test", CachedLLM(FakeBackend(fail_when=lambda r: True)), CostModel(),
        LLMTierConfig(keep_evidence=True), base=mid,
    )(_inp("summary"))
    assert failing.degraded and failing.value == "Key sentences:\n- cat 2\n\nQuestion: ..."
    with pytest.raises(ValueError, match="take a base tier"):
        LLMTier("filter", Tier.HIGH, "t", CachedLLM(FakeBackend()), CostModel(), LLMTierConfig(), base=mid)


def test_high_adds_to_mid_is_a_strategy_option():
    from memory import get_encoder
    from modules.strategies.implementation import build_implementation

    llm = CachedLLM(FakeBackend())
    mods = build_implementation({"high": llm}, CostModel(), get_encoder("hashing"), high_adds_to_mid=True)
    assert mods["filter"]._tiers[Tier.HIGH].base is None
    for name in ("entity", "temporal", "topic", "summary"):
        assert mods[name]._tiers[Tier.HIGH].base is mods[name]._tiers[Tier.MID]
