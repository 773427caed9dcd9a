"""The module interface: what a memory-extraction module sees, returns and how tiers plug in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeGuard

from modules.cost import Cost
from modules.tier import MODULE_ORDER, Tier
from modules.types import Evidence

#: Bump when any module's output for a given input changes meaning; it is part of every
#: cache key of non-LLM tiers (LLM calls are keyed by their full prompt, see modules.cache).
MODULES_CODE_VERSION = "modules-v1"

#: The modules that extract relation lists from the filtered evidence.
RELATION_MODULES: tuple[str, ...] = ("entity", "temporal", "topic")

#: A module's structured output: the kept chunks (filter), relation strings (entity, temporal,
#: topic) or the memory text (summary).
ModuleValue = tuple[Evidence, ...] | tuple[str, ...] | str

#: Memory text the summary returns when there was no evidence at all.
EMPTY_MEMORY_TEXT = "(no relevant memories found)"


@dataclass(frozen=True)
class ModuleInput:
    """Everything one module call may read.

    Attributes:
        module: The module about to run.
        query: The user's question.
        evidence: For ``filter`` the retrieved chunks; for every other module the filtered ones.
        relations: For ``summary``: the relation lists extracted so far, by module name.
        question_date: When the question is asked (free text), if the benchmark has one.
    """

    module: str
    query: str
    evidence: tuple[Evidence, ...]
    relations: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    question_date: str | None = None

    def all_relations(self) -> list[str]:
        """The relation strings of all modules, in module order."""
        return [r for m in RELATION_MODULES for r in self.relations.get(m, ())]

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to extract from."""
        if self.module == "summary":
            return not self.evidence and not self.all_relations()
        return not self.evidence


@dataclass(frozen=True)
class ModuleOutput:
    """What one module call produced.

    Attributes:
        module: Module name.
        tier: The tier that ran.
        text: The output rendered as text (what the next stage / the answerer reads).
        value: Structured output: ``tuple[Evidence, ...]`` for ``filter``, ``tuple[str, ...]``
            of relations for ``entity``/``temporal``/``topic``, ``str`` for ``summary``.
        cost: Metered cost (LLM calls via the CostModel, non-LLM tiers via the compute table).
        parse_failures: Model outputs that could not be parsed (also counted in ``cost.failures``).
        degraded: True when ``value`` is the defined fallback rather than the tier's own result
            (parse failure, backend error, prompt that cannot fit the context window).
        error: Why the output is degraded, if it is.
        cached: True if the result was replayed from a cache.
        notes: Other visible events (e.g. evidence truncated to fit the context window).
    """

    module: str
    tier: Tier
    text: str
    value: ModuleValue
    cost: Cost
    parse_failures: int = 0
    degraded: bool = False
    error: str | None = None
    cached: bool = False
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, module: str, tier: Tier, value: ModuleValue, cost: Cost, **extra: Any) -> ModuleOutput:
        """An output with ``text`` rendered from ``value``; ``extra``: the other fields."""
        return cls(module, tier, output_text(module, value), value, cost, **extra)


def render_evidence(evidence: tuple[Evidence, ...] | list[Evidence]) -> str:
    """Plain rendering of chunks, one per line (for inputs and pass-through outputs)."""
    return "\n".join(e.text for e in evidence)


def render_relations(relations: Mapping[str, tuple[str, ...]]) -> str:
    """Render relation lists as ``module: relation`` lines in module order."""
    return "\n".join(f"{m}: {r}" for m in RELATION_MODULES for r in relations.get(m, ()))


def _all_evidence(value: ModuleValue) -> TypeGuard[tuple[Evidence, ...]]:
    return isinstance(value, tuple) and all(isinstance(e, Evidence) for e in value)


def _all_str(value: ModuleValue) -> TypeGuard[tuple[str, ...]]:
    return isinstance(value, tuple) and all(isinstance(r, str) for r in value)


def kept_evidence(value: ModuleValue) -> tuple[Evidence, ...]:
    """The filter's value as chunks.

    Raises:
        TypeError: A filter tier returned something other than a tuple of ``Evidence`` (a bug).
    """
    if _all_evidence(value):
        return value
    raise TypeError(f"the filter's value must be a tuple of Evidence, got {type(value).__name__}")


def relation_strings(module: str, value: ModuleValue) -> tuple[str, ...]:
    """A relation module's value as strings.

    Raises:
        TypeError: The tier returned something other than a tuple of strings (a bug).
    """
    if _all_str(value):
        return value
    raise TypeError(f"module {module!r}'s value must be a tuple of str, got {type(value).__name__}")


def output_text(module: str, value: ModuleValue) -> str:
    """The text form of a module's structured value."""
    if module == "filter":
        return render_evidence(kept_evidence(value))
    if module in RELATION_MODULES:
        return "\n".join(relation_strings(module, value))
    return str(value)


def empty_output(inp: ModuleInput, tier: Tier) -> ModuleOutput:
    """The defined output for empty input: no evidence kept, no relations, a fixed summary."""
    value: ModuleValue = () if inp.module != "summary" else EMPTY_MEMORY_TEXT
    return ModuleOutput.of(inp.module, tier, value, Cost())


def fallback_value(inp: ModuleInput, k: int | None = None) -> ModuleValue:
    """The degraded value a module returns when its tier fails (documented contract).

    * ``filter``: the first ``k`` retrieved chunks in retrieval order -- i.e. no filtering;
    * ``entity``/``temporal``/``topic``: no relations (an empty tuple);
    * ``summary``: the template rendering (question, evidence, relations), so the answerer
      still sees the evidence.

    A fallback never pretends to be the tier's result: the output is marked ``degraded``
    and the failure is counted.
    """
    if inp.module == "filter":
        return tuple(inp.evidence[:k])
    if inp.module in RELATION_MODULES:
        return ()
    from modules.rules import template_summary  # local: rules imports this module

    return template_summary(inp)


TierFn = Callable[[ModuleInput], ModuleOutput]


class Module:
    """One pipeline stage with one implementation per tier.

    Args:
        name: Module name (one of :data:`~modules.tier.MODULE_ORDER`).
        strategy: Name of the strategy that built it (for cache tags and reports).
        tiers: ``Tier -> callable(ModuleInput) -> ModuleOutput``; all three tiers required.

    Raises:
        ValueError: Unknown module name or a missing tier.
    """

    def __init__(self, name: str, strategy: str, tiers: Mapping[Tier, TierFn]) -> None:
        if name not in MODULE_ORDER:
            raise ValueError(f"unknown module {name!r}; expected one of {MODULE_ORDER}")
        missing = [t.name for t in Tier if t not in tiers]
        if missing:
            raise ValueError(f"module {name!r} of strategy {strategy!r} lacks tiers {missing}")
        self.name = name
        self.strategy = strategy
        self._tiers = dict(tiers)

    def with_tier(self, tier: Tier, fn: TierFn, strategy: str | None = None) -> Module:
        """A copy of this module with ``tier`` implemented by ``fn`` (how a new strategy swaps one tier).

        Args:
            tier: The tier to replace.
            fn: ``ModuleInput -> ModuleOutput`` (e.g. a :class:`modules.local_tier.LocalTier`).
            strategy: The new module's strategy name (default: this module's).
        """
        return Module(self.name, strategy or self.strategy, {**self._tiers, tier: fn})

    def run(self, inp: ModuleInput, tier: Tier) -> ModuleOutput:
        """Run the tier's implementation on ``inp`` (empty input short-circuits, see module doc)."""
        if inp.module != self.name:
            raise ValueError(f"module {self.name!r} was given the input of module {inp.module!r}")
        if inp.is_empty:
            return empty_output(inp, tier)
        return self._tiers[tier](inp)

    def __repr__(self) -> str:
        return f"Module({self.name!r}, strategy={self.strategy!r})"
