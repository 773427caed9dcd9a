"""The pipeline runner: filter -> {entity, temporal, topic} -> summary, one tier per module."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from memory.encoder import Encoder
from modules.base import (
    RELATION_MODULES,
    Module,
    ModuleInput,
    ModuleOutput,
    kept_evidence,
    relation_strings,
    render_evidence,
    render_relations,
)
from modules.cache import CachedLLM, CallCache
from modules.cost import Cost
from modules.pricing import CostModel
from modules.strategies import build_modules
from modules.tier import MODULE_ORDER, Tier
from modules.types import Evidence


@dataclass(frozen=True)
class PipelineResult:
    """The outcome of one query.

    Attributes:
        memory_text: The summary module's text: what the answer generator reads.
        outputs: Per-module outputs (each with its own cost), by module name.
        total_cost: Sum of the module costs.
        tiers: The tier chosen for each module, in :data:`MODULE_ORDER`.
    """

    memory_text: str
    outputs: Mapping[str, ModuleOutput]
    total_cost: Cost
    tiers: tuple[Tier, ...]

    @property
    def parse_failures(self) -> int:
        """Parse failures over all modules."""
        return sum(o.parse_failures for o in self.outputs.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly summary (texts, tiers, costs, failures)."""
        return {
            "memory_text": self.memory_text,
            "tiers": [t.name for t in self.tiers],
            "total_cost": self.total_cost.to_dict(),
            "modules": {
                m: {
                    "tier": o.tier.name,
                    "text": o.text,
                    "cost": o.cost.to_dict(),
                    "parse_failures": o.parse_failures,
                    "degraded": o.degraded,
                    "error": o.error,
                    "notes": list(o.notes),
                }
                for m, o in self.outputs.items()
            },
        }


class PipelineRun:
    """One query going through the pipeline, one module at a time (see docs/design/modules.md)."""

    def __init__(
        self, pipeline: Pipeline, query: str, evidence: Sequence[Evidence], question_date: str | None = None
    ) -> None:
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        evidence = tuple(evidence)
        for i, ev in enumerate(evidence):
            if not isinstance(ev, Evidence):
                raise TypeError(f"evidence[{i}] is a {type(ev).__name__}, expected modules.types.Evidence")
        self.pipeline = pipeline
        self.query = query
        self.question_date = question_date
        self.retrieved: tuple[Evidence, ...] = evidence
        self.filtered: tuple[Evidence, ...] = ()
        self.relations: dict[str, tuple[str, ...]] = {}
        self.outputs: dict[str, ModuleOutput] = {}
        self._pos = 0

    @property
    def done(self) -> bool:
        """True once all five modules have run."""
        return self._pos >= len(MODULE_ORDER)

    @property
    def next_module(self) -> str:
        """Name of the module about to run.

        Raises:
            RuntimeError: The run is done.
        """
        if self.done:
            raise RuntimeError("pipeline run is done; no next module")
        return MODULE_ORDER[self._pos]

    def current_input(self) -> ModuleInput:
        """The exact input the next module will get."""
        module = self.next_module
        evidence = self.retrieved if module == "filter" else self.filtered
        relations = MappingProxyType(dict(self.relations)) if module == "summary" else MappingProxyType({})
        return ModuleInput(module, self.query, evidence, relations, self.question_date)

    def current_input_text(self) -> str:
        """Text of what the next module reads (the router embeds it as that decision's state).

        Filter: the retrieved evidence; entity/temporal/topic: the filtered evidence;
        summary: the relations extracted so far, or the filtered evidence if there are none.
        """
        inp = self.current_input()
        if inp.module == "summary":
            rel = render_relations(inp.relations)
            return rel if rel else render_evidence(inp.evidence)
        return render_evidence(inp.evidence)

    def step(self, tier: Tier) -> ModuleOutput:
        """Run the next module at ``tier`` (parsed by the caller: ``Tier.parse`` for user input).

        Raises:
            RuntimeError: The run is done.
        """
        inp = self.current_input()
        out = self.pipeline.modules[inp.module].run(inp, tier)
        if inp.module == "filter":
            self.filtered = kept_evidence(out.value)
        elif inp.module in RELATION_MODULES:
            self.relations[inp.module] = relation_strings(inp.module, out.value)
        self.outputs[inp.module] = out
        self._pos += 1
        return out

    def result(self) -> PipelineResult:
        """The finished run's result.

        Raises:
            RuntimeError: Some module has not run yet.
        """
        if not self.done:
            raise RuntimeError(f"pipeline run not finished: next module is {self.next_module!r}")
        total = Cost()
        for m in MODULE_ORDER:
            total = total + self.outputs[m].cost
        return PipelineResult(
            memory_text=str(self.outputs["summary"].value),
            outputs=MappingProxyType(dict(self.outputs)),
            total_cost=total,
            tiers=tuple(self.outputs[m].tier for m in MODULE_ORDER),
        )


@dataclass
class Pipeline:
    """The five modules of one strategy.

    Attributes:
        strategy: Strategy name.
        modules: Module by name (all of :data:`MODULE_ORDER`).
        options: The options the modules were built with (for provenance).
    """

    strategy: str
    modules: Mapping[str, Module]
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [m for m in MODULE_ORDER if m not in self.modules]
        if missing:
            raise ValueError(f"pipeline for strategy {self.strategy!r} lacks modules {missing}")

    def begin(
        self, query: str, evidence: Sequence[Evidence], question_date: str | None = None
    ) -> PipelineRun:
        """Start a step-by-step run for one query."""
        return PipelineRun(self, query, evidence, question_date)

    def run(
        self,
        query: str,
        evidence: Sequence[Evidence],
        tiers: Sequence[Tier],
        question_date: str | None = None,
    ) -> PipelineResult:
        """Run all five modules with ``tiers`` (one per module, in :data:`MODULE_ORDER`).

        Raises:
            ValueError: ``tiers`` does not have one entry per module.
        """
        if len(tiers) != len(MODULE_ORDER):
            raise ValueError(
                f"need {len(MODULE_ORDER)} tiers (one per module {MODULE_ORDER}), got {len(tiers)}"
            )
        run = self.begin(query, evidence, question_date)
        for tier in tiers:
            run.step(tier)
        return run.result()


def build_pipeline(
    strategy: str,
    llms: Mapping[str, CachedLLM],
    cost_model: CostModel,
    encoder: Encoder,
    cache: CallCache | None = None,
    **opts: Any,
) -> Pipeline:
    """Build the pipeline of a tiering strategy.

    Args:
        strategy: ``"implementation"``, ``"reasoning"`` or ``"capacity"``.
        llms: LLMs by role: ``{"high": ...}`` (implementation), ``{"default": ...}``
            (reasoning), ``{"low": ..., "mid": ..., "high": ...}`` (capacity). A single LLM
            under any key also works for the first two.
        cost_model: Prices LLM calls and non-LLM compute.
        encoder: Sentence encoder (MiniLM) used by the implementation strategy's MID tiers.
        cache: Persistent cache for non-LLM tier results (LLM calls are cached by CachedLLM).
        **opts: ``module_topk`` (chunks the filter keeps, default 5), ``max_tokens``
            (generation caps by module), ``max_prompt_tokens`` (prompt budget, default 1024).

    Returns:
        The pipeline.
    """
    modules = build_modules(strategy, llms, cost_model, encoder, cache, **opts)
    return Pipeline(strategy, modules, dict(opts))
