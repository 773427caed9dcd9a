"""What ``evaluate.py learners`` ships at one price, exported in the router format ``Router.load`` reads.

If no learner passed the validation guard, the validation-chosen fixed path ships
(:func:`policies.fixed_router.export_fixed_router`). If one did, it ships as a path selector
(:mod:`policies.path_selector`): the learner's own scorer over the table's paths, refitted on all of
validation, and checked before the files replace ``dest``: reloaded, it must make the learner's choice on
every validation question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.observation import ObservationSpec
from evaluation.outcome_learners import AnyLearner, OutcomeTable, Shipped, fitted_choices
from modules.tier import parse_tiers
from policies.export import write_router
from policies.fixed_router import export_fixed_router
from policies.network import NetworkConfig, ObsLayout
from policies.path_selector import PathSelectorActor, selector_spec
from policies.router import Router


class ExportError(ValueError):
    """What ships cannot be exported (a learner without a router-format scorer, or a choice that differs)."""


def export_shipped(
    shipped: Shipped,
    learners: Sequence[AnyLearner],
    x_val: np.ndarray,
    val: OutcomeTable,
    ref_cost: float,
    embed_dim: int,
    dest: str | Path,
    metadata: Mapping[str, Any],
) -> Path:
    """Write what ships at ``shipped.price`` to ``dest`` as a router.

    Args:
        shipped: The learners' verdict at one price.
        learners: The learners it was chosen among (``shipped.router`` names one).
        x_val: Validation embeddings, rows as ``val.qids``.
        val: The validation table (the router is refitted on all of it).
        ref_cost: The cost the price is quoted against.
        embed_dim: Width of the question embedding (the encoder's ``dim``).
        dest: The router directory (replaced atomically).
        metadata: Provenance to record (``encoder``, ``config`` of the pipeline the table was made with...).

    Raises:
        ExportError: The learner has no router-format scorer, or the exported router chooses differently.
    """
    spec = ObservationSpec(embed_dim=int(embed_dim))
    config = NetworkConfig(layout=ObsLayout.from_spec(spec))
    meta = {**metadata, "observation_spec": spec.to_dict(), "learners_verdict": shipped.as_dict()}
    if shipped.router is None:
        return export_fixed_router({0.0: parse_tiers(shipped.fixed_path)}, dest, config, meta)
    (learner,) = [lr for lr in learners if lr.name == shipped.router]
    price = shipped.price
    expected = fitted_choices(learner, x_val, val, x_val, [price], ref_cost)[float(price)]
    make = getattr(learner, "scorer", None)
    if make is None:
        raise ExportError(f"{learner.name} has no router-format scorer; it cannot be exported")
    kind, scorer = make(price, ref_cost)
    paths = [[int(t) for t in parse_tiers(label)] for label in val.labels]
    actor = PathSelectorActor(config, paths, scorer)

    def chooses_as_the_learner(router: Router) -> None:
        lay = router.layout
        obs = np.zeros((len(val.qids), lay.dim), dtype=np.float32)
        obs[:, lay.query_slice[0] : lay.query_slice[1]] = x_val
        for module in range(lay.n_modules):
            obs[:, lay.module_slice[0] : lay.module_slice[1]] = 0.0
            obs[:, lay.module_slice[0] + module] = 1.0
            got = router.act(obs)
            want = np.array([paths[p][module] for p in expected])
            wrong = np.flatnonzero(got != want)
            if wrong.size:
                raise ExportError(
                    f"the exported {learner.name} chooses another tier than the learner on {wrong.size} of "
                    f"{len(val.qids)} validation questions (module {module}, first {val.qids[wrong[0]]})"
                )

    meta["selector"] = selector_spec(kind, scorer, val.labels)
    meta["selector"]["learner"] = learner.name
    with torch.no_grad():
        return write_router(actor, dest, meta, check=chooses_as_the_learner)
