"""Load an exported router and route queries with it: no stable-baselines3, no training code."""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from common.cost_weight import CostWeight
from modules.llm_roles import tier_meaning_differences
from modules.tier import MODULE_ORDER, Tier
from policies.network import NetworkConfig, RouterActor
from policies.path_selector import PathSelectorActor, build_selector

if TYPE_CHECKING:  # type checkers only: importing them would pull the whole pipeline into a router
    from envs.components import EnvComponents
    from modules.cost import Cost
    from modules.pipeline import PipelineResult
    from modules.types import Evidence

FORMAT = "budget-router/router"
FORMAT_VERSION = 1
WEIGHTS_FILE = "router.pt"
METADATA_FILE = "metadata.json"


class RouterLoadError(ValueError):
    """A router checkpoint is missing, corrupt, or from an incompatible format version."""


class RouterNotFoundError(RouterLoadError, FileNotFoundError):
    """No router checkpoint where one was named (a wrong ``--routers`` path, a dir without router.pt)."""


class RouterMismatchError(ValueError):
    """A router given components it was not trained for; the message names what differs."""


def _read_checkpoint(path: Path) -> tuple[bytes, bytes]:
    """Return ``(metadata bytes, weights bytes)`` from a checkpoint directory or zip."""
    if path.is_dir():
        files = {name: path / name for name in (METADATA_FILE, WEIGHTS_FILE)}
        missing = [str(p) for p in files.values() if not p.is_file()]
        if missing:
            raise RouterLoadError(f"router checkpoint {path} lacks {missing}")
        return files[METADATA_FILE].read_bytes(), files[WEIGHTS_FILE].read_bytes()
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = {Path(n).name: n for n in zf.namelist()}
            missing = [n for n in (METADATA_FILE, WEIGHTS_FILE) if n not in names]
            if missing:
                raise RouterLoadError(f"router checkpoint zip {path} lacks {missing}")
            return zf.read(names[METADATA_FILE]), zf.read(names[WEIGHTS_FILE])
    raise RouterLoadError(f"router checkpoint {path} is neither a directory nor a zip file")


@dataclass(frozen=True)
class RouteResult:
    """What ``Router.route`` returns.

    Attributes:
        tiers: The tier chosen for each module, in ``MODULE_ORDER``.
        pipeline_result: The pipeline's ``PipelineResult`` (memory text, outputs, total cost).
    """

    tiers: tuple[Tier, ...]
    pipeline_result: PipelineResult

    @property
    def memory_text(self) -> str:
        """The pipeline's final memory text (what the answer model reads)."""
        return self.pipeline_result.memory_text

    @property
    def total_cost(self) -> Cost:
        """The pipeline's total ``Cost``."""
        return self.pipeline_result.total_cost


class Router:
    """An exported router policy for inference.

    Args:
        actor: The actor network (trunk + actor MLP + action head).
        metadata: The checkpoint's metadata (see ``policies.export``).

    Attributes:
        cost_weight: The λ (or λ set) the router was trained with, from the metadata; it checks
            the λ :meth:`route` is asked to route at.
    """

    def __init__(self, actor: RouterActor | PathSelectorActor, metadata: Mapping[str, Any]) -> None:
        self.actor = actor.eval()
        self.metadata: dict[str, Any] = dict(metadata)
        self.module_order: tuple[str, ...] = tuple(self.metadata.get("module_order", MODULE_ORDER))
        self._index = {m: i for i, m in enumerate(self.module_order)}
        self.layout = actor.config.layout
        self.cost_weight = CostWeight.from_metadata(self.metadata)

    @property
    def config(self) -> dict[str, Any]:
        """The resolved config of the run that trained this router (``{}`` for a bare export).

        ``envs.components.make_components(router.config)`` rebuilds the pipeline, encoder and
        observations the router was trained on.
        """
        config = self.metadata.get("config") or (self.metadata.get("provenance") or {}).get("config") or {}
        return dict(config)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Router:
        """Load a checkpoint directory (or a zip of one) written by ``policies.export.export_router``.

        Example:
            Route one question with a trained run's router (the README runs this, tested)::

                router = Router.load("runs/locomo__implementation__lam0__s0/router")
                components = make_components(router.config)
                item = question_bank_from(router.config, "test", components.encoder)[0]
                result = router.route(item.question.question, item.evidence, components)
                print([t.name for t in result.tiers], result.total_cost.value)

        Raises:
            RouterLoadError: If files are missing, the format is unknown, or the weights'
                checksum differs from the one recorded in the metadata.
        """
        p = Path(path)
        meta_bytes, weight_bytes = _read_checkpoint(p)
        try:
            meta = json.loads(meta_bytes.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise RouterLoadError(f"{p}/{METADATA_FILE} is not UTF-8 ({exc}); re-export the router") from exc
        except json.JSONDecodeError as exc:
            raise RouterLoadError(f"{p}/{METADATA_FILE} is not valid JSON: {exc}") from exc
        if not isinstance(meta, dict):
            raise RouterLoadError(
                f"{p}/{METADATA_FILE} holds a JSON {type(meta).__name__}, not the metadata object "
                "policies.export writes; re-export the router"
            )
        try:
            version = int(meta.get("format_version", -1))
        except (TypeError, ValueError):
            raise RouterLoadError(
                f"{p}/{METADATA_FILE} has format_version {meta.get('format_version')!r}, not a number; "
                "re-export the router"
            ) from None
        if meta.get("format") != FORMAT or version > FORMAT_VERSION:
            raise RouterLoadError(
                f"{p}: unsupported checkpoint format {meta.get('format')!r} v{meta.get('format_version')} "
                f"(this code reads {FORMAT!r} up to v{FORMAT_VERSION})"
            )
        digest = hashlib.sha256(weight_bytes).hexdigest()
        if digest != meta.get("weights_sha256"):
            raise RouterLoadError(
                f"{p}/{WEIGHTS_FILE}: sha256 {digest} != recorded {meta.get('weights_sha256')}"
            )
        try:
            config = NetworkConfig.from_dict(meta["network"])
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise RouterLoadError(f"{p}: bad network config in metadata: {exc}") from exc
        actor: RouterActor | PathSelectorActor
        if "selector" in meta:  # a table router shipped by `evaluate.py learners`: one path per question
            try:
                actor = build_selector(config, meta["selector"])
            except ValueError as exc:
                raise RouterLoadError(f"{p}: bad path selector in metadata: {exc}") from exc
        else:
            actor = RouterActor(config)
        state = torch.load(io.BytesIO(weight_bytes), map_location="cpu", weights_only=True)
        try:
            actor.load_state_dict(state)
        except RuntimeError as exc:
            raise RouterLoadError(
                f"{p}/{WEIGHTS_FILE} does not fit the network in the metadata: {exc}"
            ) from exc
        return cls(actor, meta)

    # ---------------------------------------------------------------------------------------
    # Decisions
    # ---------------------------------------------------------------------------------------

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic tier indices for a batch of observations ``(n, dim)`` (or one ``(dim,)``)."""
        x = np.asarray(obs, dtype=np.float32)
        if x.ndim == 1:
            x = x[None]
        if x.ndim != 2 or x.shape[1] != self.layout.dim:
            raise ValueError(
                f"observation shape {np.shape(obs)} does not match the router (dim {self.layout.dim})"
            )
        return self.actor.act(torch.from_numpy(np.ascontiguousarray(x))).numpy()

    def decide(self, obs: np.ndarray, module: str) -> Tier:
        """Pick the tier for ``module``; the observation's one-hot must name the same module.

        Raises:
            ValueError: On an unknown module, a wrong shape, or a one-hot for another module.
        """
        if module not in self._index:
            raise ValueError(f"unknown module {module!r}; this router decides {self.module_order}")
        x = np.asarray(obs, dtype=np.float32).reshape(-1)
        lo, hi = self.layout.module_slice
        if x.shape[0] != self.layout.dim:
            raise ValueError(f"observation has {x.shape[0]} features, the router expects {self.layout.dim}")
        onehot = x[lo:hi]
        if not onehot.any() or int(np.argmax(onehot)) != self._index[module]:
            raise ValueError(
                f"observation's module one-hot {onehot.tolist()} does not name module {module!r}"
            )
        return Tier(int(self.act(x)[0]))

    # ---------------------------------------------------------------------------------------
    # A whole pipeline run
    # ---------------------------------------------------------------------------------------

    def check_components(self, components: EnvComponents) -> None:
        """Refuse components the router was not trained for.

        Checked: the observation layout, the encoder, and what the tiers stand for
        (:func:`envs.components.tier_meaning`: the strategy, its options, the model of each LLM
        role), compared with the config the router recorded; a bare export without one is checked
        on the first two only.

        Raises:
            RouterMismatchError: Naming every key that differs, trained and given values.
        """
        saved = self.metadata.get("observation_spec")
        spec = components.obs_builder.spec
        if saved is not None and dict(spec.to_dict()) != dict(saved):
            raise RouterMismatchError(f"components' observation spec {spec.to_dict()} != router's {saved}")
        enc = self.metadata.get("encoder")
        if enc is not None and getattr(components.encoder, "name", enc) != enc:
            raise RouterMismatchError(
                f"components use encoder {components.encoder.name!r}, the router was trained with {enc!r}"
            )
        given = getattr(components, "config", None)
        if self.config and given:
            diffs = tier_meaning_differences(self.config, given)
            if diffs:
                raise RouterMismatchError(
                    f"router {self.metadata.get('run_name', '?')} was trained on another pipeline: "
                    + "; ".join(diffs)
                    + ". Its tier choices mean other computations here: evaluate it with the config it "
                    "recorded (drop --config/--set for these keys) or train a router for this pipeline"
                )

    def route(
        self,
        query: str,
        evidence: Sequence[Evidence],
        components: EnvComponents,
        question_date: str | None = None,
        cost_lambda: float | None = None,
    ) -> RouteResult:
        """Run the memory pipeline on one query, letting the router pick every module's tier.

        The observation is built exactly as ``envs.router_env.MemoryRouterEnv`` builds it:
        the module one-hot, the query embedding, the embedding of the module's current input
        and the scalars of ``ObservationBuilder.scalar_features`` (position, input length,
        module cost spent so far, λ).

        Args:
            query: The question text.
            evidence: Retrieved ``modules.types.Evidence`` items.
            components: ``envs.components.EnvComponents`` (pipeline, encoder, obs_builder).
            question_date: Optional date of the question (temporal module).
            cost_lambda: λ fed to the observation; defaults to the λ the router was trained
                with (required for a λ-conditioned router, see ``CostWeight.for_routing``).

        Returns:
            The chosen tiers and the pipeline result.

        Raises:
            ValueError: An empty question or no evidence (nothing to route), or a λ the router
                cannot route at (``CostWeight.for_routing``).
        """
        if not str(query or "").strip():
            raise ValueError("Router.route: the question is empty; there is nothing to route")
        if not list(evidence):
            raise ValueError(
                "Router.route: no evidence was given; retrieve the question's evidence first "
                "(the modules would only see an empty input)"
            )
        self.check_components(components)
        lam = self.cost_weight.for_routing(cost_lambda)
        builder = components.obs_builder
        spec = builder.spec
        query_emb = builder.embed(query)
        run = components.pipeline.begin(query, list(evidence), question_date=question_date)
        tiers: list[Tier] = []
        spent = 0.0
        while not run.done:
            module = run.next_module
            index = spec.module_names.index(module)
            text = run.current_input_text()
            scalars = builder.scalar_features(index, spec.n_modules, text, spent, lam)
            obs = builder.build(index, query_emb, text, {k: scalars[k] for k in spec.scalar_names})
            tier = self.decide(obs, module)
            out = run.step(tier)
            spent += out.cost.value
            tiers.append(tier)
        return RouteResult(tiers=tuple(tiers), pipeline_result=run.result())
