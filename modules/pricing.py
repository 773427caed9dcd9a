"""Turn generation results into costs: GFLOPs for local models, or USD from a price table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from modules.backends.base import GenerationResult
from modules.cost import Cost, merge_errors
from modules.models import MODELS

REFERENCE_PRICE_PER_M = 0.06
"""$ per 1M tokens (input and output) of llama-3.2-3b in BudgetMem's table."""
REFERENCE_PARAMS = 3_212_749_824
"""Parameter count of Llama-3.2-3B."""
USD_PER_GFLOP = REFERENCE_PRICE_PER_M / 1e6 / (2 * REFERENCE_PARAMS / 1e9)
"""Conversion rate for non-LLM tiers priced in USD (about 9.3e-9 $/GFLOP)."""

FAKE_PARAMS = MODELS["smollm2-135m"].n_params
"""The fake backend is priced like SmolLM2-135M so plumbing tests see realistic magnitudes."""


@dataclass(frozen=True)
class Price:
    """Price of one model in $ per 1M tokens."""

    input_per_m: float
    output_per_m: float


def _pro_rata(n_params: int) -> Price:
    p = REFERENCE_PRICE_PER_M * n_params / REFERENCE_PARAMS
    return Price(p, p)


USD_PRICES: dict[str, Price] = {
    # BudgetMem's table (llm_pricing.py:10-63).
    "llama-3.2-3b": Price(0.06, 0.06),
    "llama-3.1-8b": Price(0.18, 0.18),
    "llama-3.3-70b": Price(0.88, 0.88),
    "gpt-oss-120b": Price(0.15, 0.60),
    "qwen3-next-80b-a3b": Price(0.15, 1.50),
    # Local models, pro rata by parameter count (see docs/design/modules.md).
    **{key: _pro_rata(spec.n_params) for key, spec in MODELS.items()},
    "fake-llm": _pro_rata(FAKE_PARAMS),
}

MODEL_PARAMS: dict[str, int] = {
    **{key: spec.n_params for key, spec in MODELS.items()},
    "fake-llm": FAKE_PARAMS,
}

UNITS = ("gflops", "usd")


def canonical_model_name(model_id: str) -> str:
    """Normalise a model id for table lookup: lower case, without an ``org/`` prefix.

    ``"openai/gpt-oss-120b"`` and ``"GPT-OSS-120B"`` both become ``"gpt-oss-120b"``.
    """
    return model_id.strip().lower().rsplit("/", 1)[-1]


class CostModel:
    """Prices LLM calls and non-LLM work in one configured unit.

    Args:
        unit: ``"gflops"`` or ``"usd"``.
        prices: Extra or overriding USD prices by model id.
        params: Extra or overriding parameter counts by model id (for GFLOPs).
        usd_per_gflop: Conversion rate for ``non_llm`` in USD.

    Raises:
        ValueError: Unknown unit.
    """

    def __init__(
        self,
        unit: str = "gflops",
        *,
        prices: Mapping[str, Price] | None = None,
        params: Mapping[str, int] | None = None,
        usd_per_gflop: float = USD_PER_GFLOP,
    ) -> None:
        if unit not in UNITS:
            raise ValueError(f"CostModel unit must be one of {UNITS}, got {unit!r}")
        self.unit = unit
        self.prices = {canonical_model_name(k): v for k, v in {**USD_PRICES, **(prices or {})}.items()}
        self.params = {canonical_model_name(k): v for k, v in {**MODEL_PARAMS, **(params or {})}.items()}
        self.usd_per_gflop = usd_per_gflop

    def check_model(self, model_id: str) -> None:
        """Fail now, not at the first call, when ``model_id`` cannot be priced in this unit.

        Raises:
            KeyError: Naming the model, the unit and how to declare it.
        """
        self.call_value(model_id, 0, 0)

    def call_value(self, model_id: str, tokens_in: int, tokens_out: int) -> float:
        """Cost of ``tokens_in`` prompt and ``tokens_out`` generated tokens of ``model_id``.

        Raises:
            KeyError: The model is not in the table for this unit.
        """
        name = canonical_model_name(model_id)
        if self.unit == "gflops":
            if name not in self.params:
                raise KeyError(
                    f"no parameter count for model {model_id!r} (cost unit gflops): declare it with "
                    f"cost.params={{{model_id}: N}}, or price calls in $ with cost.unit=usd; "
                    f"known: {sorted(self.params)}"
                )
            return 2.0 * self.params[name] * (tokens_in + tokens_out) / 1e9
        if name not in self.prices:
            raise KeyError(
                f"no USD price for model {model_id!r}: declare it with cost.prices={{{model_id}: "
                f"[input $ per 1M tokens, output $ per 1M tokens]}}; known: {sorted(self.prices)}"
            )
        price = self.prices[name]
        return (tokens_in * price.input_per_m + tokens_out * price.output_per_m) / 1e6

    def llm(self, result: GenerationResult) -> Cost:
        """Cost of one generation call (cache replays cost the same as the original call)."""
        return Cost(
            value=self.call_value(result.model_id, result.tokens_in, result.tokens_out),
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            latency_s=result.latency_s,
            calls=1,
            cache_hits=int(result.cached),
            failures=int(not result.ok),
            models=(result.model_id,),
            errors=() if result.ok else merge_errors((), (str(result.error or "failed without a reason"),)),
        )

    def non_llm(self, gflops: float, latency_s: float = 0.0) -> Cost:
        """Cost of non-LLM work (regex, spaCy, embeddings) given its estimated GFLOPs.

        Raises:
            ValueError: Negative ``gflops``.
        """
        if gflops < 0:
            raise ValueError(f"non_llm gflops must be >= 0, got {gflops}")
        value = gflops if self.unit == "gflops" else gflops * self.usd_per_gflop
        return Cost(value=value, latency_s=latency_s)
