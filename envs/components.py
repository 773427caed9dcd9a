"""Build everything an episode needs from one plain nested-dict config.

``make_components(cfg)`` returns :class:`EnvComponents`: the sentence encoder, the LLMs (each
a ``modules.cache.CachedLLM`` over ``modules.backends.get_backend``, all sharing one
``CallCache`` file), the tiered pipeline (``modules.pipeline.build_pipeline``), the answer
generator, an optional LLM judge, the cost model and the observation builder. Training
(``train.py``, via Hydra, which passes its config as a dict) and ``evaluate.py`` build their
environments through this one function, so both see the same components. The question bank
the same config describes is built by :func:`envs.bank_config.question_bank_from`.

Config schema (every section optional unless marked; unknown keys inside the ``cost``,
``reward``, ``question_bank``, ``judge``, ``answer`` and ``cache`` sections are errors, other
top-level sections such as ``ppo`` are ignored here)::

    benchmark:
      name: locomo              # required: locomo | longmemeval | longmemeval_oracle | hotpotqa
      options: {}               # loader options, e.g. {include_adversarial: false}
    strategy:
      name: implementation      # required: the tiering strategy registered in modules.pipeline
      options: {}               # extra build_pipeline(**options)
    encoder: minilm             # or {name: minilm}; "hashing" for unit tests
    backend:                    # required: the default LLM (all roles use it unless overridden)
      name: llamacpp            # llamacpp | transformers | vllm | openai | fake
      model: smollm2-135m       # every other key is passed to the backend's constructor
      n_threads: 2
    llms:                       # optional per-role overrides merged onto `backend`; roles per
      high: {model: qwen2.5-1.5b}   # strategy: implementation {high}, reasoning {default},
                                    # capacity {low, mid, high} (STRATEGY_LLM_ROLES)
    answer:
      backend: {}               # overrides merged onto `backend` for the answer LLM
    judge:
      enabled: false
      backend: {}               # overrides merged onto `backend` for the judge LLM (a local model or
                                # {name: openai, base_url: ..., model: ...} for any OpenAI-compatible server)
      protocol: budgetmem       # budgetmem (0/0.5/1) | locomo (CORRECT/WRONG) | longmemeval (yes/no per type)
    memory:                     # benchmarks.memory_builder.MemoryBuildConfig fields ({} = defaults)
      mode: full                # full | no_ce | no_gate | lru | oracle_unbounded
      l1_fraction: 0.1          # capacities as fractions of each history's chunk count
      chunking: {max_tokens: 128, granularity: packed}
    question_bank: {k: 5, limit: null, max_samples: null, seed: 0, cache_dir: null}
    cost:
      unit: gflops              # gflops | usd (modules.pricing.CostModel)
      lambda: 0.0               # λ, the cost weight of the reward (common.cost_weight.CostWeight)
      lambdas: null             # [λ1, λ2, ...]: train ONE λ-conditioned router over these values
                                # (each episode draws one; `lambda` is then only the default λ)
      window: 2000              # cost normaliser window
      include_answer_cost: false
      alpha: {mode: frozen, warmup: 256, window: 2000}   # see envs.reward
    reward: {task_metric: f1}   # f1 | em | judge
    cache: {path: .cache/llm_calls.sqlite, pack: none}   # path: null disables the call cache;
                                # pack: a call pack (modules.cache_pack) imported before the run
    data_dir: null              # benchmark data dir (default $BUDGET_ROUTER_DATA or ../shared/data)

Identical backend settings are built once: if the answer LLM and the HIGH-tier LLM are the
same model, one llama.cpp instance (and its prompt cache) serves both.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.answer import AnswerGenerator
from benchmarks.judge import Judge, get_protocol
from common.config_error import ConfigError
from common.cost_weight import CostWeight
from common.datadir import PROJECT_ROOT
from envs.observation import ObservationBuilder, ObservationSpec
from envs.protocols import Answerer, AnswerJudge, RoutablePipeline, Scorer
from memory.encoder import Encoder, get_encoder
from modules.backends import BACKENDS, get_backend
from modules.cache import CachedLLM, CallCache
from modules.cache_pack import ImportReport, PackError, import_pack
from modules.cache_stores import store_scheme
from modules.pipeline import build_pipeline
from modules.pricing import CostModel
from modules.strategies import STRATEGIES

#: Benchmarks the env can run (the registry in benchmarks.registry may know more loaders).
BENCHMARK_NAMES = ("locomo", "longmemeval", "longmemeval_oracle", "hotpotqa", "custom")

#: Keys allowed in the strictly checked sections.
_SECTION_KEYS: dict[str, set[str]] = {
    "cost": {"unit", "lambda", "lambdas", "window", "low_pct", "high_pct", "include_answer_cost", "alpha"},
    "reward": {"task_metric"},
    "question_bank": {"k", "limit", "max_samples", "seed", "cache_dir", "split"},
    "judge": {"enabled", "backend", "protocol"},
    "answer": {"backend"},
    "cache": {"path", "pack"},
}

#: Default call-cache location (project-relative, git-ignored).
DEFAULT_CACHE_PATH = ".cache/llm_calls.sqlite"

#: The LLM roles each tiering strategy reads from ``llms`` (see modules/strategies/*): the
#: implementation strategy's HIGH tiers, the reasoning strategy's one model, one model per
#: tier for the capacity strategy. A strategy not listed gets one LLM under ``"default"``.
STRATEGY_LLM_ROLES: dict[str, tuple[str, ...]] = {
    "implementation": ("high",),
    "reasoning": ("default",),
    "capacity": ("low", "mid", "high"),
}


@dataclass
class EnvComponents:
    """Everything an :class:`envs.episode.Episode` uses.

    Attributes:
        encoder: Sentence encoder (queries, module inputs, memory).
        pipeline: The tiered module pipeline (``begin(query, evidence, question_date)``).
        answerer: Answer generator (``answer(question, memory_text) -> (text, Cost)``).
        judge: LLM judge (``judge(question, prediction)``), or None.
        cost_model: Prices calls in the configured unit.
        cache: The shared call cache, or None.
        obs_builder: Builds observations.
        benchmark: Benchmark name.
        cost_weight: The cost weight λ (or λ set) of the ``cost`` section: the one object the
            env, validation and export read it from.
        include_answer_cost: Whether the reward's cost includes the answer generation.
        task_metric: Reward's task metric.
        scorer: ``(question, prediction, benchmark) -> {"f1", "em"}``; None = benchmarks.metrics.score_answer.
        llms: The CachedLLMs by role (``answer``, ``judge`` and the strategy's roles).
        config: The config these were built from (for provenance).
        cache_pack: What importing ``cache.pack`` did (``modules.cache_pack.ImportReport``), or None.
    """

    encoder: Encoder
    pipeline: RoutablePipeline
    answerer: Answerer
    judge: AnswerJudge | None
    cost_model: CostModel
    cache: CallCache | None
    obs_builder: ObservationBuilder
    benchmark: str
    cost_weight: CostWeight = field(default_factory=CostWeight)
    include_answer_cost: bool = False
    task_metric: str = "f1"
    scorer: Scorer | None = None
    llms: dict[str, CachedLLM] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    cache_pack: ImportReport | None = None

    def close(self) -> None:
        """Release backends and the cache connection."""
        seen: set[int] = set()
        for llm in self.llms.values():
            backend = getattr(llm, "backend", None)
            if backend is not None and id(backend) not in seen:
                seen.add(id(backend))
                backend.close()
        if self.cache is not None:
            self.cache.close()


def section(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Return config section ``name`` as a dict ({} if absent), checking its keys where strict.

    Raises:
        ConfigError: If the section is not a mapping or has unknown keys.
    """
    raw = cfg.get(name)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config section {name!r} must be a mapping, got {type(raw).__name__}: {raw!r}")
    out = dict(raw)
    allowed = _SECTION_KEYS.get(name)
    if allowed is not None:
        unknown = sorted(set(out) - allowed)
        if unknown:
            raise ConfigError(f"config section {name!r}: unknown keys {unknown}; allowed: {sorted(allowed)}")
    return out


def named_section(
    cfg: Mapping[str, Any], name: str, choices: tuple[str, ...] | None = None
) -> tuple[str, dict[str, Any]]:
    """``(name, other keys)`` of a section given as ``"name"`` or ``{name: ..., ...}``.

    Raises:
        ConfigError: If the section is missing, malformed, or its name is not in ``choices``.
    """
    raw = cfg.get(name)
    if raw is None:
        raise ConfigError(f"config is missing the required section {name!r} (with a 'name' key)")
    if isinstance(raw, str):
        return raw, {}
    if not isinstance(raw, Mapping) or "name" not in raw:
        raise ConfigError(f"config section {name!r} must be a string or a mapping with 'name', got {raw!r}")
    value = str(raw["name"])
    if choices is not None and value not in choices:
        raise ConfigError(f"config {name}.name={value!r} is unknown; choose one of {list(choices)}")
    return value, {k: v for k, v in raw.items() if k != "name"}


def encoder_name(cfg: Mapping[str, Any]) -> str:
    """The encoder name of a config (default ``"minilm"``)."""
    raw = cfg.get("encoder", "minilm")
    if isinstance(raw, Mapping):
        raw = raw.get("name", "minilm")
    return str(raw)


def _merge(base: Mapping[str, Any], override: Mapping[str, Any] | None) -> dict[str, Any]:
    if override and "name" in override and override["name"] != base.get("name"):
        # Another backend shares no constructor options with the base one (a llama.cpp n_threads
        # means nothing to an OpenAI-compatible endpoint): the override stands alone.
        return copy.deepcopy(dict(override))
    out = copy.deepcopy(dict(base))
    out.update(copy.deepcopy(dict(override or {})))
    return out


class _BackendPool:
    """Build each distinct backend config once and wrap it in a CachedLLM."""

    def __init__(self, cache: Any | None) -> None:
        self.cache = cache
        self._built: dict[str, Any] = {}

    def get(self, spec: Mapping[str, Any], where: str) -> Any:
        spec = dict(spec)
        name = spec.pop("name", None)
        if name is None:
            raise ConfigError(f"config {where}: missing backend 'name' (one of {sorted(BACKENDS)})")
        if name not in BACKENDS:
            raise ConfigError(f"config {where}.name={name!r} is unknown; choose one of {sorted(BACKENDS)}")
        key = json.dumps({"name": name, **spec}, sort_keys=True, default=str)
        if key not in self._built:
            try:
                backend = get_backend(name, **spec)
            except TypeError as exc:
                raise ConfigError(f"config {where}: bad options for backend {name!r}: {exc}") from exc
            self._built[key] = CachedLLM(backend, self.cache)
        return self._built[key]


def _strategy_names() -> tuple[str, ...]:
    return tuple(sorted(STRATEGIES))


def make_components(cfg: Mapping[str, Any]) -> EnvComponents:
    """Build the env components from a nested dict config (schema in the module docstring).

    Args:
        cfg: The config (e.g. ``OmegaConf.to_container(hydra_cfg, resolve=True)``).

    Returns:
        The components; call ``.close()`` when done to release model servers.

    Raises:
        ConfigError: On a missing section or an unknown benchmark, strategy, backend, unit or metric.
    """
    bench, _ = named_section(cfg, "benchmark", BENCHMARK_NAMES)
    strategy, strategy_extra = named_section(cfg, "strategy")
    known_strategies = _strategy_names()
    if strategy not in known_strategies:
        raise ConfigError(
            f"config strategy.name={strategy!r} is unknown; choose one of {list(known_strategies)}"
        )
    strategy_opts = dict(strategy_extra.get("options") or {})
    backend_base = section(cfg, "backend")
    if not backend_base:
        raise ConfigError(
            "config is missing the required section 'backend' (e.g. {name: llamacpp, model: ...})"
        )
    cost_cfg = section(cfg, "cost")
    reward_cfg = section(cfg, "reward")
    judge_cfg = section(cfg, "judge")
    answer_cfg = section(cfg, "answer")
    cache_cfg = section(cfg, "cache")
    llm_overrides = section(cfg, "llms")
    task_metric = str(reward_cfg.get("task_metric", "f1"))
    from envs.episode import TASK_METRICS

    if task_metric not in TASK_METRICS:
        raise ConfigError(
            f"config reward.task_metric={task_metric!r} is unknown; choose one of {list(TASK_METRICS)}"
        )
    judge_on = bool(judge_cfg.get("enabled", False))
    if task_metric == "judge" and not judge_on:
        raise ConfigError("config reward.task_metric='judge' needs judge.enabled: true")
    unit = str(cost_cfg.get("unit", "gflops"))
    try:
        cost_model = CostModel(unit=unit)
    except ValueError as exc:
        raise ConfigError(f"config cost.unit: {exc}") from exc
    cost_weight = CostWeight.from_config(cost_cfg)

    try:
        encoder = get_encoder(encoder_name(cfg))
    except KeyError as exc:
        raise ConfigError(f"config encoder: {exc.args[0]}") from exc

    cache = None
    cache_path = cache_cfg.get("path", DEFAULT_CACHE_PATH)
    if cache_path is not None:
        text = str(cache_path)
        if "://" in text or store_scheme(text) != "sqlite":
            # A store URL (redis://..., sqlite:///abs/path) is passed through unchanged.
            cache = CallCache(text)
        else:
            p = Path(text).expanduser()
            cache = CallCache(p if p.is_absolute() or text == ":memory:" else PROJECT_ROOT / p)
    pack_report = _import_pack(cache_cfg.get("pack"), cache)

    pool = _BackendPool(cache)
    llms: dict[str, Any] = {}
    for role in STRATEGY_LLM_ROLES.get(strategy, ("default",)):
        llms[role] = pool.get(_merge(backend_base, llm_overrides.get(role)), f"llms.{role}")
    answer_llm = pool.get(_merge(backend_base, answer_cfg.get("backend")), "answer.backend")
    judge = None

    answerer = AnswerGenerator(answer_llm, bench)
    if judge_on:
        try:
            protocol = get_protocol(judge_cfg.get("protocol"))
        except KeyError as exc:
            raise ConfigError(f"config judge.protocol: {exc.args[0]}") from None
        judge_llm = pool.get(_merge(backend_base, judge_cfg.get("backend")), "judge.backend")
        judge = Judge(judge_llm, protocol=protocol)
        llms_all = {**llms, "answer": answer_llm, "judge": judge_llm}
    else:
        llms_all = {**llms, "answer": answer_llm}

    try:
        pipeline = build_pipeline(strategy, llms, cost_model, encoder, cache=cache, **strategy_opts)
    except KeyError as exc:
        raise ConfigError(f"config strategy.name={strategy!r}: {exc.args[0] if exc.args else exc}") from exc

    spec = ObservationSpec(embed_dim=int(encoder.dim))
    return EnvComponents(
        encoder=encoder,
        pipeline=pipeline,
        answerer=answerer,
        judge=judge,
        cost_model=cost_model,
        cache=cache,
        obs_builder=ObservationBuilder(spec, encoder),
        benchmark=bench,
        cost_weight=cost_weight,
        include_answer_cost=bool(cost_cfg.get("include_answer_cost", False)),
        task_metric=task_metric,
        llms=llms_all,
        config=copy.deepcopy(dict(cfg)),
        cache_pack=pack_report,
    )


def _import_pack(pack: Any, cache: Any | None) -> Any | None:
    """Import ``cache.pack`` (a pack file; ``none``/null = nothing) into the cache, printing what it did.

    Raises:
        ConfigError: If a pack is named without a call cache, or the pack is missing, corrupt or of
            other code versions (a run must not silently start cold when it was told to replay).
    """
    if pack is None or str(pack).strip().lower() in ("", "none", "null"):
        return None
    if cache is None:
        raise ConfigError(f"config cache.pack={pack!r} needs a call cache, but cache.path is null")

    p = Path(str(pack)).expanduser()
    try:
        report = import_pack(p if p.is_absolute() else PROJECT_ROOT / p, cache)
    except PackError as exc:
        cache.close()  # nothing was written; do not leave the connection open behind the error
        raise ConfigError(f"config cache.pack={pack!r}: {exc}") from exc
    print(report.line())
    return report
