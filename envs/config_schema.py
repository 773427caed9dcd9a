"""The typed schema of the env's config sections: every key, its type, default and meaning."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from common.config_error import ConfigError
from common.cost_weight import CostWeight
from modules.tier import Tier

T = TypeVar("T")

@dataclass
class BenchmarkConfig:
    """``benchmark``: which data the questions come from."""

    #: locomo | longmemeval | longmemeval_oracle | hotpotqa | custom (the configs/benchmark group).
    name: str = MISSING
    #: Loader options, e.g. ``{include_adversarial: false}`` or ``{file: hotpot_dev_distractor_v1.json}``.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StrategyConfig:
    """``strategy``: how the LOW/MID/HIGH tiers of the five modules are implemented."""

    #: implementation | reasoning | capacity (registered in modules.strategies).
    name: str = MISSING
    #: Extra ``modules.pipeline.build_pipeline`` options (e.g. keep_evidence, module_topk).
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class AnswerConfig:
    """``answer``: the answer generator's LLM."""

    #: Overrides merged onto ``backend`` (default: the same LLM).
    backend: dict[str, Any] = field(default_factory=dict)


@dataclass
class JudgeConfig:
    """``judge``: the optional LLM judge."""

    #: Judge every answer with an LLM (needed by ``reward.task_metric=judge``; the frontier reports it).
    enabled: bool = False
    #: Overrides merged onto ``backend``: a local model, or ``{name: openai, base_url: ..., model: ...}``.
    backend: dict[str, Any] = field(default_factory=dict)
    #: budgetmem (0/0.5/1) | locomo (CORRECT/WRONG) | longmemeval (yes/no per question type).
    protocol: str = "budgetmem"


@dataclass
class RewardConfig:
    """``reward``: what the router is rewarded for."""

    #: f1 | em | judge (judge needs ``judge.enabled``).
    task_metric: str = "f1"
    #: none | question: subtract the running mean task score of the episode's question from
    #: training rewards (envs.task_baseline; validation is unaffected).
    task_baseline: str = "none"
    #: Divide each training reward by ``1 + λ·α`` (envs.reward): one λ-conditioned router's λs
    #: then give rewards of one scale, so PPO's batch-normalised advantages are not all the
    #: largest λ's cost term. Each λ's best policy is unchanged (a positive constant per λ).
    lambda_scale: bool = False


@dataclass
class ActionsConfig:
    """``actions``: which tiers the router may choose."""

    #: The dearest tier the router may choose: HIGH (every tier) | MID (LOW or MID) | LOW. Lowering
    #: it removes the dearer tiers from the action space (``Discrete(max_tier + 1)``); fixed-path
    #: baselines and evaluation still run every tier.
    max_tier: str = "HIGH"

    def __post_init__(self) -> None:
        try:
            Tier.parse(self.max_tier)
        except ValueError:
            raise ConfigError(
                f"config actions.max_tier={self.max_tier!r} is unknown; choose one of LOW, MID, HIGH"
            ) from None


@dataclass
class QuestionBankConfig:
    """``question_bank``: the questions of a split with their retrieved evidence (cached on disk)."""

    #: Evidence chunks retrieved per question.
    k: int = 5
    #: Number of questions (round-robin over histories); null = all.
    limit: int | None = None
    #: Use only the first N histories of a split.
    max_samples: int | None = None
    #: Question selection order (independent of the training seed).
    seed: int = 0
    #: Where banks are cached (null: .cache/question_bank).
    cache_dir: str | None = None
    #: The split an env built by ``envs.factory.make_env`` reads when none is given.
    split: str = "train"

    def __post_init__(self) -> None:
        for name in ("limit", "max_samples"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"config question_bank.{name} must be > 0 or null (all), got {value}")


@dataclass
class AlphaConfig:
    """``cost.alpha``: α, which aligns the cost reward's spread with the task reward's (envs.reward)."""

    #: frozen | window | fixed.
    mode: str = "frozen"
    #: Episodes before α is estimated.
    warmup: int = 256
    #: Episodes in α's estimation window.
    window: int = 2000
    #: α of mode ``fixed``.
    value: float = 1.0
    #: Smallest α an estimate may take.
    min: float = 0.01
    #: Largest α an estimate may take.
    max: float = 100.0
    #: Smallest spread an estimate divides by.
    std_floor: float = 1e-5


class CostConfig:
    """``cost``: the cost unit, the cost weight λ and the cost reward's normalisation.

    ``lambda`` is a Python keyword, so no class body can declare it; the field is added by name
    below and read as ``cost.weight`` (a :class:`common.cost_weight.CostWeight`). ``lambda`` and
    ``lambdas`` keep the values as written (run names print them in their shortest form,
    ``lam0``), so they are untyped here; ``CostWeight`` checks them, and the run-name resolver
    already does at composition.
    """

    #: gflops (local models) | usd (price table).
    unit: str = "gflops"
    #: [λ1, ..., λk]: one λ-conditioned router over these (each episode draws one).
    lambdas: Any = None
    #: Sliding window of the cost normaliser.
    window: int = 2000
    #: Percentiles of the window that map raw costs to [0, 1].
    low_pct: float = 5.0
    #: The window's percentile that maps to 1 (``low_pct`` maps to 0).
    high_pct: float = 95.0
    #: Whether the router's cost includes the answer generation (it is always recorded).
    include_answer_cost: bool = False
    alpha: AlphaConfig = field(default_factory=AlphaConfig)
    #: Parameter counts of models outside the registry, by model id (GFLOPs = 2·params·tokens), e.g.
    #: ``{Qwen/Qwen2.5-7B-Instruct: 7615616512}`` for a model served by vLLM from the Hugging Face hub.
    params: dict[str, int] = field(default_factory=dict)
    #: $ per 1M input and output tokens of models outside the price table, by model id (``cost.unit=usd``),
    #: e.g. ``{gpt-4o-mini: [0.15, 0.6]}`` for an answerer or judge behind an API.
    prices: dict[str, list[float]] = field(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        for f in dataclasses.fields(cast(Any, self)):  # a dataclass only after the decorator below
            if f.name in values:
                setattr(self, f.name, values.pop(f.name))
            else:
                setattr(self, f.name, f.default_factory() if callable(f.default_factory) else f.default)
        if values:
            raise TypeError(f"CostConfig got unknown keys {sorted(values)}")

    @property
    def weight(self) -> CostWeight:
        """λ (``cost.lambda``) or the λ set (``cost.lambdas``), range-checked."""
        return CostWeight.from_config({"lambda": getattr(self, "lambda"), "lambdas": self.lambdas})


#: λ: reward = r_task + λ·α·r_cost.
CostConfig.__annotations__["lambda"] = Any
setattr(CostConfig, "lambda", 0.0)  # a keyword: no `CostConfig.lambda = ...` in source
CostConfig = dataclass(init=False, repr=False, eq=False, match_args=False)(CostConfig)  # type: ignore[misc]


@dataclass
class CacheConfig:
    """``cache``: the LLM call cache shared by every run."""

    #: SQLite file (project-relative), ``:memory:``, or a store URL (redis://...); null disables it.
    path: str | None = ".cache/llm_calls.sqlite"
    #: A call pack (``python -m modules.cache_pack export``) imported before the run, or a list of
    #: them (a full pack and its delta packs, imported in order); none = nothing.
    pack: Any = "none"
    #: Answer every LLM call from the cache and never compute: the engines are replaced by stand-ins
    #: (``modules.backends.replay``), so a table computed on an engine this machine lacks replays here; a
    #: missing call stops the run and is named.
    replay: bool = False
    #: With ``replay``: the numerics each model's calls were computed with (model id -> the engine's
    #: ``numerics()``; a model left out: the reference engine's). ``evaluate.py frontier --replay`` fills
    #: it from the table it checks.
    replay_numerics: dict[str, Any] = field(default_factory=dict)


@dataclass
class EnvConfig:
    """The sections the env's components and question banks are built from."""

    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    #: Sentence encoder: minilm (all-MiniLM-L6-v2) | minilm-int8 | hashing (the fast fake for tests).
    encoder: str = "minilm"
    #: The default LLM of every role: ``name`` (llamacpp | transformers | vllm | openai | fake), the
    #: rest are the backend's constructor options (model, n_threads, ...).
    backend: dict[str, Any] = MISSING
    #: Per-role overrides merged onto ``backend``; roles: implementation {high}, reasoning {default},
    #: capacity {low, mid, high} (modules.llm_roles.STRATEGY_LLM_ROLES).
    llms: dict[str, dict[str, Any]] = field(default_factory=dict)
    answer: AnswerConfig = field(default_factory=AnswerConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    #: ``benchmarks.memory_builder.MemoryBuildConfig`` fields plus a ``chunking`` dict ({}: its defaults).
    memory: dict[str, Any] = field(default_factory=dict)
    question_bank: QuestionBankConfig = field(default_factory=QuestionBankConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    actions: ActionsConfig = field(default_factory=ActionsConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    #: Benchmark data (default: $BUDGET_ROUTER_DATA or ../shared/data).
    data_dir: str | None = None


def parse(schema: type[T], cfg: Mapping[str, Any], where: str = "config") -> T:
    """Validate ``cfg`` against ``schema`` and return it typed, with the schema's defaults filled in.

    Top-level keys that ``schema`` does not have are left out (``make_components`` ignores the
    ``ppo`` section); inside a section an unknown key is an error, as at Hydra composition.
    ``where`` names what ``cfg`` is in error messages (``"config section 'cost'"`` for one section).

    Raises:
        ConfigError: With OmegaConf's message, which names the key and the value, or from a
            dataclass's own range and choice checks (``__post_init__``).
    """
    names = {f.name for f in dataclasses.fields(schema)}  # type: ignore[arg-type]
    known = {k: v for k, v in cfg.items() if k in names}
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), known)
        return OmegaConf.to_object(node)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{where}: {exc}") from None


def check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    """Reject a value that is not one of ``choices`` (a check no type can express).

    Raises:
        ConfigError: Naming the key, the value and the choices.
    """
    if value not in choices:
        raise ConfigError(f"config {key}={value!r} is unknown; choose one of {list(choices)}")


#: Keys the schema fills in that no YAML file set before it existed. Hashes of configs (evaluation
#: record fingerprints, the resume check) leave them out while they hold the schema's default, so
#: records and checkpoints made before the schema keep their keys.
ADDED_BY_SCHEMA = (
    "judge.protocol",
    "question_bank.limit",
    "question_bank.split",
    "cost.low_pct",
    "cost.high_pct",
    "cost.alpha.value",
    "cost.alpha.min",
    "cost.alpha.max",
    "cost.alpha.std_floor",
    "reward.task_baseline",
    "reward.lambda_scale",
    "actions.max_tier",
    "cost.params",
    "cost.prices",
)


def without_added_defaults(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``cfg`` without the :data:`ADDED_BY_SCHEMA` keys that hold their default."""
    out = copy.deepcopy(dict(cfg))
    defaults = OmegaConf.structured(EnvConfig)
    for dotted in ADDED_BY_SCHEMA:
        *parents, leaf = dotted.split(".")
        node: Any = out
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and node[leaf] == OmegaConf.select(defaults, dotted):
            del node[leaf]
            if len(parents) == 1 and not node:  # a section that held only added keys goes too
                del out[parents[0]]
    return out
