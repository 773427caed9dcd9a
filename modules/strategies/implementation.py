"""Implementation tiering: LOW = rules, MID = offline learned models, HIGH = an LLM prompt."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from memory.encoder import Encoder
from modules import learned, rules
from modules.base import Module
from modules.cache import CachedLLM, CallCache
from modules.llm_tier import LLMTier
from modules.local_tier import LocalFn, LocalStep, LocalTier
from modules.pricing import CostModel
from modules.strategies.common import check_options, llm_config, module_topk, pick_llm
from modules.tier import MODULE_ORDER, Tier

NAME = "implementation"


def build_implementation(
    llms: Mapping[str, CachedLLM],
    cost_model: CostModel,
    encoder: Encoder,
    cache: CallCache | None = None,
    **opts: Any,
) -> dict[str, Module]:
    """Build the five modules of the implementation strategy.

    Args:
        llms: The HIGH-tier LLM under ``"high"`` or ``"default"`` (or the only entry).
        cost_model: Prices LLM calls and non-LLM GFLOPs.
        encoder: Sentence encoder for the MID filter and summary (MiniLM in real runs).
        cache: Persistent cache for the non-LLM tiers (LLM calls use the CachedLLM's cache).
        **opts: ``module_topk`` (default 5; or one budget per tier), ``max_tokens`` (by module),
            ``max_prompt_tokens``, ``keep_evidence`` (here also: the MID filter keeps its whole
            budget and the MID summary keeps the LOW template), ``filter_retrieval_weight``
            (weight of the retriever's score in the MID filter, in [0, 1]; default 0),
            ``date_format`` (how the MID tagger writes dates: ``iso``, the default, or ``natural``),
            ``high_adds_to_mid`` (the HIGH entity/temporal/topic/summary add the LLM's output to
            the MID tier's instead of replacing it; default false), ``anchor_times_of_day`` (the MID
            tagger dates "last night" from the chunk's date, not the wall clock; default false, which
            keeps the measured tables' cache keys).
    """
    check_options(
        NAME,
        opts,
        frozenset({"filter_retrieval_weight", "date_format", "high_adds_to_mid", "anchor_times_of_day"}),
    )
    anchor = bool(opts.get("anchor_times_of_day", False))
    adds_to_mid = bool(opts.get("high_adds_to_mid", False))
    keep = bool(opts.get("keep_evidence", False))
    retrieval_weight = float(opts.get("filter_retrieval_weight", 0.0))
    if not 0.0 <= retrieval_weight <= 1.0:
        raise ValueError(
            "strategy.options.filter_retrieval_weight must be in [0, 1], "
            f"got {opts['filter_retrieval_weight']!r}"
        )
    date_format = str(opts.get("date_format", "iso"))
    if date_format not in learned.DATE_FORMATS:
        raise ValueError(
            f"strategy.options.date_format must be one of {list(learned.DATE_FORMATS)}, got {date_format!r}"
        )
    k_low, k_mid = module_topk(opts, Tier.LOW), module_topk(opts, Tier.MID)
    mid_tagger = partial(
        learned.tagger_temporal_relations, date_format=date_format, anchor_times_of_day=anchor
    )
    mid_filter = partial(
        learned.embedding_filter, k=k_mid, encoder=encoder, pad=keep, retrieval_weight=retrieval_weight
    )
    # Options that change a local tier's output are part of its cache key.
    mid_key = f"k={k_mid}" + (",pad" if keep else "")
    if retrieval_weight:
        mid_key += f",rw={retrieval_weight:g}"
    llm = pick_llm(llms, NAME, ("high", "default"))
    # The summary's MiniLM ranking, cached (and packed) on its own: see modules.local_tier.LocalStep.
    rank = LocalStep(
        "summary", Tier.MID, NAME, "minilm-rank", partial(learned.rank_sentences, encoder), cache,
        params=getattr(encoder, "name", type(encoder).__name__),
    )
    # (method name, function, reads the question?) per module and non-LLM tier.
    local: dict[str, dict[Tier, tuple[str, LocalFn, bool]]] = {
        "filter": {
            Tier.LOW: ("keyword", partial(rules.keyword_filter, k=k_low), True),
            Tier.MID: ("minilm", mid_filter, True),
        },
        "entity": {
            Tier.LOW: ("regex", rules.regex_entity_relations, False),
            Tier.MID: ("spacy_sm", learned.spacy_entity_relations, False),
        },
        "temporal": {
            Tier.LOW: ("regex", rules.regex_temporal_relations, False),
            Tier.MID: ("tagger", mid_tagger, False),
        },
        "topic": {
            Tier.LOW: ("keyword", rules.frequency_topics, False),
            Tier.MID: ("textrank", learned.textrank_topics, False),
        },
        "summary": {
            Tier.LOW: ("template", rules.template_summary_tier, True),
            Tier.MID: (
                "extractive",
                partial(learned.extractive_summary, encoder=encoder, keep_evidence=keep, rank=rank),
                True,
            ),
        },
    }
    # The default (ISO, not anchored) keeps its old key "", and natural dates theirs ("natural"): the
    # records measured with them stay valid.
    mid_temporal_key = ",".join(
        part for part, on in (("natural", date_format == "natural"), ("anchored", anchor)) if on
    )
    high = llm_config(opts, "direct", Tier.HIGH)
    modules: dict[str, Module] = {}
    for name in MODULE_ORDER:
        params = {
            "filter": {Tier.LOW: f"k={k_low}", Tier.MID: mid_key},
            "summary": {Tier.MID: "keep"} if keep else {},
            "temporal": {Tier.MID: mid_temporal_key} if mid_temporal_key else {},
        }.get(name, {})
        tiers = {
            tier: LocalTier(
                name, tier, NAME, method, fn, cost_model, cache, reads_query=reads_query,
                params=params.get(tier, ""),
            )
            for tier, (method, fn, reads_query) in local[name].items()
        }
        base = tiers[Tier.MID] if adds_to_mid and name != "filter" else None
        modules[name] = Module(
            name, NAME, {**tiers, Tier.HIGH: LLMTier(name, Tier.HIGH, NAME, llm, cost_model, high, base)}
        )
    return modules
