"""Run an LLM tier: build the prompt, call the cached LLM, parse, meter, degrade on failure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from modules.base import (
    RELATION_MODULES,
    ModuleInput,
    ModuleOutput,
    ModuleValue,
    TierFn,
    fallback_value,
    kept_evidence,
    output_text,
)
from modules.cache import CachedLLM
from modules.cost import Cost, merge_errors
from modules.parsing import ParseError, extract_section, parse_indices, parse_string_list, parse_summary
from modules.pricing import CostModel
from modules.prompts import (
    DEFAULT_MAX_PROMPT_TOKENS,
    DEFAULT_MAX_TOKENS,
    MAX_ITEMS,
    STYLE_EXTRA_TOKENS,
    PromptTooLong,
    Style,
    build_prompt,
    finalise_request,
)
from modules.tier import Tier
from modules.types import Evidence


@dataclass(frozen=True)
class LLMTierConfig:
    """How one LLM tier prompts its model.

    Attributes:
        style: Prompting style (see :mod:`modules.prompts`).
        max_tokens: Generation caps by module (defaults: :data:`DEFAULT_MAX_TOKENS` plus the
            style's :data:`STYLE_EXTRA_TOKENS`).
        max_prompt_tokens: Prompt budget before truncation.
        filter_k: Most chunks the filter keeps (selections are capped in retrieval order).
        keep_evidence: The quality ladder's rule (``strategy.options.keep_evidence``): an LLM tier
            adds to what the cheaper tiers show the answerer instead of cutting it. The filter
            puts the chunks it selects first and pads with the next-ranked ones up to
            ``filter_k``; the summary writes answer-oriented notes (:data:`~modules.prompts.KEEP_ASKS`)
            and puts them *in front of* the template memory (question, dated evidence, facts).
    """

    style: Style = "direct"
    max_tokens: dict[str, int] | None = None
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS
    filter_k: int = 5
    keep_evidence: bool = False

    def tokens_for(self, module: str) -> int:
        """Generation cap for ``module``."""
        if self.max_tokens and module in self.max_tokens:
            return int(self.max_tokens[module])
        return DEFAULT_MAX_TOKENS[module] + STYLE_EXTRA_TOKENS[self.style]


def parse_value(
    module: str, style: Style, text: str, inp_evidence: tuple[Evidence, ...], k: int = 5
) -> ModuleValue:
    """Turn raw model text into the module's value (raises :class:`ParseError`).

    For the filter, at most ``k`` selected chunks are kept, in retrieval order.
    """
    section = extract_section(text, style)
    if module == "filter":
        keep = parse_indices(section, len(inp_evidence))
        # An empty selection keeps the best-ranked chunk: downstream modules need evidence,
        # and every filter tier follows the same rule (see modules.rules.keyword_filter).
        return tuple(inp_evidence[i] for i in (keep or [0])[:k])
    if module == "summary":
        return parse_summary(section)
    return tuple(parse_string_list(section, max_items=MAX_ITEMS))


class LLMTier:
    """A callable ``ModuleInput -> ModuleOutput`` for one LLM tier.

    Args:
        module: Module name.
        tier: Tier implemented.
        strategy: Strategy name (cache tag).
        llm: The cached LLM to call.
        cost_model: Prices the call.
        config: Prompting style and limits.
        base: A cheaper tier of the same module this tier adds to (``strategy.options.high_adds_to_mid``;
            relation modules and the summary): a relation module returns the LLM's items followed by
            the base's items it did not give; the summary puts its notes in front of the base's
            summary instead of the template. The base's cost is added.
    """

    def __init__(
        self,
        module: str,
        tier: Tier,
        strategy: str,
        llm: CachedLLM,
        cost_model: CostModel,
        config: LLMTierConfig,
        base: TierFn | None = None,
    ) -> None:
        if base is not None and module not in (*RELATION_MODULES, "summary"):
            raise ValueError(f"only {RELATION_MODULES} and 'summary' take a base tier, not {module!r}")
        self.module, self.tier, self.strategy = module, tier, strategy
        self.llm, self.cost_model, self.config = llm, cost_model, config
        self.base = base

    @property
    def tags(self) -> dict[str, str]:
        """Cache tags of this tier's calls."""
        return {
            "module": self.module,
            "tier": self.tier.name,
            "strategy": self.strategy,
            "style": self.config.style,
        }

    def _degraded(
        self, inp: ModuleInput, cost: Cost, error: str, *, parse_failures: int = 0, notes: Sequence[str] = ()
    ) -> ModuleOutput:
        # A parse failure is also counted in the cost's failures.
        return ModuleOutput.of(
            self.module,
            self.tier,
            fallback_value(inp, self.config.filter_k),
            replace(
                cost,
                failures=cost.failures + parse_failures,
                # the reason a failure budget prints when it stops a run (only where a call failed)
                errors=merge_errors(cost.errors, (f"{self.module}/{self.tier.name}: {error}",))
                if cost.failures + parse_failures
                else cost.errors,
            ),
            parse_failures=parse_failures,
            degraded=True,
            error=error,
            notes=tuple(notes),
        )

    def _value(self, inp: ModuleInput, style: Style, text: str, shown: tuple[Evidence, ...]) -> ModuleValue:
        """Parse the model's text; under ``keep_evidence`` add what the cheaper tiers keep."""
        keep = self.config.keep_evidence
        if self.module == "filter" and keep:
            # Pad from everything retrieved, not only from what fitted the prompt.
            selected = kept_evidence(parse_value("filter", style, text, shown, self.config.filter_k))
            rest = [e for e in inp.evidence if e not in selected]
            return tuple([*selected, *rest][: self.config.filter_k])
        value = parse_value(self.module, style, text, shown, self.config.filter_k)
        if self.module == "summary" and self.base is not None:
            return f"Notes: {value}"  # __call__ appends the base's summary
        if self.module == "summary" and keep:
            from modules.rules import template_summary  # local: rules imports modules.base

            return f"Notes: {value}\n\n{template_summary(inp)}"
        return value

    def __call__(self, inp: ModuleInput) -> ModuleOutput:
        """Run the tier on ``inp``; with a ``base`` tier, add to the base's output (see ``base``)."""
        out = self._run(inp)
        if self.base is None:
            return out
        below = self.base(inp)
        value: ModuleValue
        if self.module == "summary":
            # A degraded LLM summary is the template fallback, which the base's summary already holds.
            value = below.value if out.degraded else f"{out.value}\n\n{below.value}"
        else:
            items = list(cast(tuple[str, ...], out.value))
            items += [x for x in cast(tuple[str, ...], below.value) if x not in items]
            value = tuple(items)
        return replace(out, value=value, text=output_text(self.module, value), cost=out.cost + below.cost)

    def _run(self, inp: ModuleInput) -> ModuleOutput:
        """The LLM's own output (failure contract: docs/design/modules.md)."""
        style = self.config.style
        try:
            built = build_prompt(
                self.module,
                style,
                inp,
                self.llm,
                max_tokens=self.config.tokens_for(self.module),
                max_prompt_tokens=self.config.max_prompt_tokens,
                keep_evidence=self.config.keep_evidence,
            )
        except PromptTooLong as exc:
            return self._degraded(inp, Cost(failures=1), f"prompt too long: {exc}")
        notes: list[str] = [f"style={style}", f"model={self.llm.model_id}"]
        if built.dropped or built.cut_chars:
            notes.append(f"truncated: dropped {built.dropped} chunks, cut {built.cut_chars} chars")
        result = self.llm.generate([built.request], tags=self.tags)[0]
        cost = self.cost_model.llm(result)
        if not result.ok:
            return self._degraded(inp, cost, f"backend error: {result.error}", notes=notes)
        try:
            value = self._value(inp, style, result.text, built.evidence)
        except ParseError as exc:
            notes.append(f"finish_reason={result.finish_reason}; raw={result.text[:200]!r}")
            if style not in ("cot", "react"):
                return self._degraded(inp, cost, f"parse failure: {exc}", parse_failures=1, notes=notes)
            # The reasoning did not end in a parseable answer: one constrained follow-up call
            # turns it into the answer format (metered; visible in notes and cost.calls).
            follow = finalise_request(self.module, built.request, result.text, len(built.evidence))
            second = self.llm.generate([follow], tags={**self.tags, "stage": "finalise"})[0]
            cost = cost + self.cost_model.llm(second)
            notes.append(f"finalised by a constrained follow-up call ({exc})")
            if not second.ok:
                return self._degraded(
                    inp, cost, f"backend error in finalise call: {second.error}", notes=notes
                )
            try:
                value = self._value(inp, "direct", second.text, built.evidence)
            except ParseError as exc2:
                notes.append(f"finalise raw={second.text[:200]!r}")
                return self._degraded(inp, cost, f"parse failure: {exc2}", parse_failures=1, notes=notes)
            result = second
        return ModuleOutput.of(self.module, self.tier, value, cost, cached=result.cached, notes=tuple(notes))
