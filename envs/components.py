"""Build everything an episode needs from one plain nested-dict config."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.answer import AnswerGenerator
from benchmarks.judge import Judge, get_protocol
from benchmarks.registry import benchmark_names
from common.config_error import ConfigError
from common.cost_weight import CostWeight
from common.datadir import PROJECT_ROOT
from envs.config_schema import EnvConfig, check_choice, parse
from envs.observation import ObservationBuilder, ObservationSpec
from envs.protocols import Answerer, AnswerJudge, RoutablePipeline, Scorer
from memory.encoder import Encoder, get_encoder
from modules.backends import BACKENDS, LLMBackend, get_backend
from modules.backends.replay import ReplayBackend
from modules.cache import CachedLLM, CallCache
from modules.cache_pack import ImportReport, PackError, import_pack
from modules.cache_stores import store_scheme
from modules.llm_roles import STRATEGY_LLM_ROLES, merge_backend
from modules.pipeline import build_pipeline
from modules.pricing import CostModel, Price
from modules.strategies import STRATEGIES


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
        cache_pack: What importing ``cache.pack`` did (one ``modules.cache_pack.ImportReport`` per
            pack), or None.
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
    cache_pack: list[ImportReport] | None = None

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


class _BackendPool:
    """Build each distinct backend config once and wrap it in a CachedLLM."""

    def __init__(self, cache: Any | None, replay_numerics: Mapping[str, Any] | None = None) -> None:
        self.cache = cache
        #: Not None: replay (every backend is a stand-in that never computes, keyed with these numerics).
        self.replay_numerics = replay_numerics
        self._built: dict[str, Any] = {}

    def get(self, spec: Mapping[str, Any], where: str) -> Any:
        spec = dict(spec)
        name = spec.pop("name", None)
        if name is None:
            raise ConfigError(f"config {where}: missing backend 'name' (one of {sorted(BACKENDS)})")
        check_choice(f"{where}.name", name, tuple(sorted(BACKENDS)))
        key = json.dumps({"name": name, **spec}, sort_keys=True, default=str)
        if key not in self._built:
            try:
                backend: LLMBackend
                if self.replay_numerics is not None:
                    backend = ReplayBackend.stand_in(name, spec, self.replay_numerics)
                else:
                    backend = get_backend(name, **spec)
            except TypeError as exc:
                raise ConfigError(f"config {where}: bad options for backend {name!r}: {exc}") from exc
            self._built[key] = CachedLLM(backend, self.cache)
        return self._built[key]


def make_components(cfg: Mapping[str, Any]) -> EnvComponents:
    """Build the env components from a nested dict config (keys: :class:`envs.config_schema.EnvConfig`).

    Args:
        cfg: The config (e.g. ``OmegaConf.to_container(hydra_cfg, resolve=True)``); sections it
            leaves out take the schema's defaults, top-level keys the env does not read are ignored.

    Returns:
        The components; call ``.close()`` when done to release model servers.

    Raises:
        ConfigError: On an unknown key, a value of the wrong type, a missing section or an unknown
            benchmark, strategy, backend, unit or metric.

    Example:
        The fake stack in seconds (the environment card and the extension guide run this, tested)::

            config = load_config(["backend=fake", "encoder=hashing", "memory=no_ce"])
            components = make_components(config)
            item = question_bank_from(config, "test", components.encoder)[0]
            record = run_episode(item, FixedTierPolicy(["LOW"] * 5).decide, components)
    """
    env = parse(EnvConfig, cfg)
    bench, strategy = env.benchmark.name, env.strategy.name
    check_choice("benchmark.name", bench, tuple(benchmark_names()))
    check_choice("strategy.name", strategy, tuple(sorted(STRATEGIES)))
    task_metric = env.reward.task_metric
    from envs.episode import TASK_METRICS

    check_choice("reward.task_metric", task_metric, TASK_METRICS)
    if task_metric == "judge" and not env.judge.enabled:
        raise ConfigError("config reward.task_metric='judge' needs judge.enabled: true")
    try:
        prices = {name: Price(*map(float, pair)) for name, pair in env.cost.prices.items()}
        cost_model = CostModel(unit=env.cost.unit, params=env.cost.params, prices=prices)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config cost.unit/cost.prices: {exc}") from exc
    cost_weight = env.cost.weight

    try:
        encoder = get_encoder(env.encoder)
    except KeyError as exc:
        raise ConfigError(f"config encoder: {exc.args[0]}") from exc

    cache = None
    if env.cache.path is not None:
        text = env.cache.path
        if "://" in text or store_scheme(text) != "sqlite":
            # A store URL (redis://..., sqlite:///abs/path) is passed through unchanged.
            cache = CallCache(text)
        else:
            p = Path(text).expanduser()
            cache = CallCache(p if p.is_absolute() or text == ":memory:" else PROJECT_ROOT / p)
    pack_report = _import_pack(env.cache.pack, cache)

    if env.cache.replay and cache is None:
        raise ConfigError("config cache.replay=true needs a call cache (cache.path is null)")
    pool = _BackendPool(cache, dict(env.cache.replay_numerics) if env.cache.replay else None)
    llms: dict[str, Any] = {}
    for role in STRATEGY_LLM_ROLES.get(strategy, ("default",)):
        llms[role] = pool.get(merge_backend(env.backend, env.llms.get(role)), f"llms.{role}")
    answer_llm = pool.get(merge_backend(env.backend, env.answer.backend), "answer.backend")
    judge = None

    answerer = AnswerGenerator(answer_llm, bench, cost_model)
    if env.judge.enabled:
        try:
            protocol = get_protocol(env.judge.protocol)
        except KeyError as exc:
            raise ConfigError(f"config judge.protocol: {exc.args[0]}") from None
        judge_llm = pool.get(merge_backend(env.backend, env.judge.backend), "judge.backend")
        judge = Judge(judge_llm, protocol=protocol, cost_model=cost_model)
        llms_all = {**llms, "answer": answer_llm, "judge": judge_llm}
    else:
        llms_all = {**llms, "answer": answer_llm}

    # Every LLM is priced by the configured cost model: an unpriceable one fails here, not at its first call.
    for role, llm in llms_all.items():
        try:
            cost_model.check_model(llm.model_id)
        except KeyError as exc:
            where = {"answer": "answer.backend", "judge": "judge.backend"}.get(role, f"llms.{role}")
            raise ConfigError(f"config {where}: {exc.args[0]}") from None
    try:
        pipeline = build_pipeline(strategy, llms, cost_model, encoder, cache=cache, **env.strategy.options)
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
        include_answer_cost=env.cost.include_answer_cost,
        task_metric=task_metric,
        llms=llms_all,
        config=copy.deepcopy(dict(cfg)),
        cache_pack=pack_report,
    )


def _import_pack(pack: Any, cache: Any | None) -> list[ImportReport] | None:
    """Import ``cache.pack`` (a pack file or a list of them; ``none``/null = nothing), printing what it did.

    Returns:
        One report per pack, in order, or None when no pack was named.

    Raises:
        ConfigError: If a pack is named without a call cache, or a pack is missing, corrupt or of
            other code versions (a run must not silently start cold when it was told to replay).
    """
    if pack is None or (isinstance(pack, str) and pack.strip().lower() in ("", "none", "null")):
        return None
    paths = [pack] if isinstance(pack, str) else list(pack)
    if not paths or not all(isinstance(p, str) and p.strip() for p in paths):
        raise ConfigError(f"config cache.pack={pack!r}: expected a pack file, a list of them, or none")
    if cache is None:
        raise ConfigError(f"config cache.pack={pack!r} needs a call cache, but cache.path is null")

    reports = []
    for text in paths:
        p = Path(text).expanduser()
        try:
            reports.append(import_pack(p if p.is_absolute() else PROJECT_ROOT / p, cache))
        except PackError as exc:
            cache.close()  # do not leave the connection open behind the error
            raise ConfigError(f"config cache.pack={text!r}: {exc}") from exc
        print(reports[-1].line(imported_with={Path(t).name for t in paths}))
    return reports
