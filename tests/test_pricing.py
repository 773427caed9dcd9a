import pytest

from modules.backends.base import GenerationResult
from modules.cost import Cost
from modules.models import MODELS
from modules.pricing import USD_PER_GFLOP, CostModel, canonical_model_name


def res(model: str, tin: int, tout: int, **kw) -> GenerationResult:
    return GenerationResult(text="x", tokens_in=tin, tokens_out=tout, latency_s=0.5, model_id=model, **kw)


def test_gflops_formula() -> None:
    cm = CostModel("gflops")
    c = cm.llm(res("smollm2-135m", 100, 20))
    assert c.value == pytest.approx(2 * MODELS["smollm2-135m"].n_params * 120 / 1e9)
    assert (c.tokens_in, c.tokens_out, c.calls, c.cache_hits, c.failures) == (100, 20, 1, 0, 0)
    assert c.models == ("smollm2-135m",) and c.latency_s == 0.5
    big = cm.llm(res("qwen2.5-1.5b", 100, 20)).value
    assert big > 10 * c.value


def test_usd_table_budgetmem_and_aliases() -> None:
    cm = CostModel("usd")
    assert cm.llm(res("openai/gpt-oss-120b", 1_000_000, 1_000_000)).value == pytest.approx(0.75)
    assert cm.llm(res("LLAMA-3.1-8B", 500_000, 0)).value == pytest.approx(0.09)
    # Local models are pro rata by parameter count against llama-3.2-3b.
    small = cm.llm(res("smollm2-135m", 1_000_000, 0)).value
    assert 0.002 < small < 0.003


def test_unknown_model_is_an_error_in_both_units() -> None:
    for unit in ("gflops", "usd"):
        with pytest.raises(KeyError, match="mystery-model"):
            CostModel(unit).llm(res("mystery-model", 1, 1))
    assert CostModel("usd", prices={}).call_value("fake-llm", 1, 1) > 0
    with pytest.raises(ValueError, match="unit"):
        CostModel("joules")


def test_cached_and_failed_calls_are_counted_and_cost_the_same() -> None:
    cm = CostModel("gflops")
    a = cm.llm(res("fake-llm", 10, 5))
    b = cm.llm(res("fake-llm", 10, 5, cached=True))
    f = cm.llm(res("fake-llm", 10, 0, finish_reason="error", error="boom"))
    assert a.value == b.value and b.cache_hits == 1 and f.failures == 1
    total = a + b + f
    assert isinstance(total, Cost) and total.calls == 3


def test_non_llm() -> None:
    assert CostModel("gflops").non_llm(3.0, 0.1) == Cost(value=3.0, latency_s=0.1)
    assert CostModel("usd").non_llm(2.0).value == pytest.approx(2 * USD_PER_GFLOP)
    with pytest.raises(ValueError):
        CostModel().non_llm(-1.0)
    assert canonical_model_name(" Org/Model-X ") == "model-x"


def test_usd_and_gflops_agree_for_local_models() -> None:
    # The pro-rata price rule and the non-LLM conversion rate are the same exchange rate.
    for key in MODELS:
        r = res(key, 300, 40)
        gflops = CostModel("gflops").llm(r).value
        assert CostModel("usd").llm(r).value == pytest.approx(gflops * USD_PER_GFLOP)
