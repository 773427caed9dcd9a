"""A router that picks one whole tier path per question: a table router in the router format.

Routers learned from outcome tables (:mod:`evaluation.outcome_learners`: kNN, the plug-in predictor, PPO on
the table) choose among the table's paths from the question embedding alone. When one passes the validation
guard it ships as a :class:`PathSelectorActor`: for every module's observation it reads the question
embedding (the observation's query block), scores the paths with the learned scorer, and answers the chosen
path's tier for the module the observation names. ``Router.load``, ``Router.route`` and ``evaluate.py
frontier --routers`` treat it like any exported router; the metadata's ``selector`` entry says what it is, so
``Router.load`` can rebuild it.

Scorers return ``(score, share)`` per path; the choice is the best score (rounded to 1e-12), ties to the
lower cost share, then to the earlier path, as :func:`evaluation.outcome_learners.choose` decides. They
compute in float64 like the learners' numpy code, so the exported router makes the learner's choices.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from modules.tier import parse_tiers
from policies.network import NetworkConfig

#: ``selector.kind`` values :func:`build_selector` can rebuild.
SELECTOR_KINDS: tuple[str, ...] = ("knn", "linear", "policy")


def _unit(x: torch.Tensor) -> torch.Tensor:
    norms = x.norm(dim=1, keepdim=True)
    return x / torch.where(norms > 0, norms, torch.ones_like(norms))


class KNNScorer(nn.Module):
    """Mean outcome of each path over the ``k`` most similar training questions (cosine; ties: earlier row).

    Args:
        train_x: ``(n, dim)`` training embeddings.
        f1: ``(n, paths)`` their F1.
        cost: ``(n, paths)`` their module cost.
        k: Neighbours.
        price: F1 a ``ref_cost``-sized cost is worth.
        ref_cost: The cost a price is quoted against.
    """

    train_x: torch.Tensor
    f1: torch.Tensor
    cost: torch.Tensor

    def __init__(
        self,
        train_x: torch.Tensor,
        f1: torch.Tensor,
        cost: torch.Tensor,
        k: int,
        price: float,
        ref_cost: float,
    ) -> None:
        super().__init__()
        self.register_buffer("train_x", _unit(train_x.double()))
        self.register_buffer("f1", f1.double())
        self.register_buffer("cost", cost.double())
        self.k, self.price, self.ref_cost = int(k), float(price), float(ref_cost)

    def forward(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(score, share)``, each ``(m, paths)``."""
        sim = _unit(q.double()) @ self.train_x.T
        k = min(self.k, self.train_x.shape[0])
        nbrs = torch.argsort(-sim, dim=1, stable=True)[:, :k]
        share = self.cost[nbrs].mean(dim=1) / self.ref_cost
        return self.f1[nbrs].mean(dim=1) - self.price * share, share


class LinearScorer(nn.Module):
    """Ridge predictions of each path's F1 and cost from the unit embedding (the plug-in router).

    Args:
        mean: ``(1, dim)`` mean of the training unit embeddings.
        weights: ``(dim, 2·paths)`` F1 columns, then cost columns.
        y_mean: ``(1, 2·paths)`` the targets' training means.
        price: F1 a ``ref_cost``-sized cost is worth.
        ref_cost: The cost a price is quoted against.
    """

    mean: torch.Tensor
    weights: torch.Tensor
    y_mean: torch.Tensor

    def __init__(
        self, mean: torch.Tensor, weights: torch.Tensor, y_mean: torch.Tensor, price: float, ref_cost: float
    ) -> None:
        super().__init__()
        self.register_buffer("mean", mean.double())
        self.register_buffer("weights", weights.double())
        self.register_buffer("y_mean", y_mean.double())
        self.price, self.ref_cost = float(price), float(ref_cost)

    def forward(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(score, share)``, each ``(m, paths)``."""
        y = (_unit(q.double()) - self.mean) @ self.weights + self.y_mean
        n = y.shape[1] // 2
        share = y[:, n:] / self.ref_cost
        return y[:, :n] - self.price * share, share


class PolicyScorer(nn.Module):
    """A policy's logits over the paths from the embedding's standardised principal components (table PPO).

    Args:
        mean: ``(1, dim)`` mean of the training unit embeddings.
        basis: ``(dim, components)`` principal directions.
        scale: ``(components,)`` the components' training spreads.
        net: The policy network: features (plus the scaled price) to logits, float32 as it was trained.
        price_input: The scaled price appended to the features (None: the router was trained at one price).
    """

    mean: torch.Tensor
    basis: torch.Tensor
    scale: torch.Tensor
    net: nn.Sequential

    def __init__(
        self,
        mean: torch.Tensor,
        basis: torch.Tensor,
        scale: torch.Tensor,
        net: nn.Sequential,
        price_input: float | None,
    ) -> None:
        super().__init__()
        self.register_buffer("mean", mean.double())
        self.register_buffer("basis", basis.double())
        self.register_buffer("scale", scale.double())
        self.net = net
        self.price_input = price_input

    def forward(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits, zeros)``: a policy has no cost estimate; its logits already weigh the price."""
        z = (((_unit(q.double()) - self.mean) @ self.basis) / self.scale).float()
        if self.price_input is not None:
            z = torch.cat([z, torch.full((z.shape[0], 1), self.price_input, dtype=z.dtype)], dim=1)
        logits = self.net(z).double()
        return logits, torch.zeros_like(logits)


def choose_paths(score: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
    """Per row the best score (rounded to 1e-12), ties to the lower share, then to the earlier path."""
    key = torch.round(score * 1e12) / 1e12
    best = key == key.max(dim=1, keepdim=True).values
    low = torch.where(best, share, torch.full_like(share, float("inf")))
    pick = best & (share == low.min(dim=1, keepdim=True).values)
    return torch.argmax(pick.to(torch.int64), dim=1)  # the first True: the earliest path


class PathSelectorActor(nn.Module):
    """The router-format actor of a path selector.

    Args:
        config: The observation layout the router reads (the network fields are unused).
        paths: ``(paths, modules)`` tier index of each path at each module.
        scorer: Maps ``(m, embed_dim)`` question embeddings to ``(score, share)`` per path.
    """

    paths: torch.Tensor

    def __init__(self, config: NetworkConfig, paths: Sequence[Sequence[int]], scorer: nn.Module) -> None:
        super().__init__()
        self.config = config
        table = torch.tensor([list(p) for p in paths], dtype=torch.int64)
        if table.ndim != 2 or table.shape[1] != config.layout.n_modules:
            raise ValueError(f"paths {list(paths)} are not {config.layout.n_modules} tiers each")
        self.register_buffer("paths", table)
        self.scorer = scorer

    def choose(self, q: torch.Tensor) -> torch.Tensor:
        """The path index of each question embedding ``(m, embed_dim)``."""
        return choose_paths(*self.scorer(q))

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """The tier of each observation's module on the path its question embedding picks."""
        lay = self.config.layout
        module = torch.argmax(obs[:, lay.module_slice[0] : lay.module_slice[1]], dim=1)
        path = self.choose(obs[:, lay.query_slice[0] : lay.query_slice[1]])
        return self.paths[path, module]


def selector_spec(kind: str, scorer: nn.Module, labels: Sequence[str]) -> dict[str, Any]:
    """The metadata ``selector`` entry :func:`build_selector` rebuilds the actor from (shapes only)."""
    spec: dict[str, Any] = {"kind": kind, "paths": list(labels)}
    if isinstance(scorer, KNNScorer):
        n, dim = scorer.train_x.shape
        spec |= {"n_train": n, "k": scorer.k, "price": scorer.price, "ref_cost": scorer.ref_cost, "dim": dim}
    elif isinstance(scorer, LinearScorer):
        spec |= {"dim": scorer.weights.shape[0], "price": scorer.price, "ref_cost": scorer.ref_cost}
    elif isinstance(scorer, PolicyScorer):
        linears = [m for m in scorer.net if isinstance(m, nn.Linear)]
        acts = {type(m).__name__ for m in scorer.net if not isinstance(m, nn.Linear)}
        spec |= {
            "dim": scorer.basis.shape[0],
            "components": scorer.basis.shape[1],
            "widths": [linears[0].in_features, *(m.out_features for m in linears)],
            "activation": next(iter(acts), "Tanh"),
            "price_input": scorer.price_input,
        }
    else:
        raise ValueError(f"no selector spec for scorer {type(scorer).__name__}")
    return spec


def build_selector(config: NetworkConfig, spec: Mapping[str, Any]) -> PathSelectorActor:
    """An actor of the shapes ``spec`` names (weights zero), for ``load_state_dict``.

    Raises:
        ValueError: An unknown kind or a spec lacking a field, naming it.
    """
    kind = spec.get("kind")
    try:
        paths = [[int(t) for t in parse_tiers(str(label))] for label in spec["paths"]]
        n = len(paths)
        if kind == "knn":
            rows, dim = int(spec["n_train"]), int(spec["dim"])
            scorer: nn.Module = KNNScorer(
                torch.zeros(rows, dim), torch.zeros(rows, n), torch.zeros(rows, n), int(spec["k"]),
                float(spec["price"]), float(spec["ref_cost"]),
            )  # fmt: skip
        elif kind == "linear":
            dim = int(spec["dim"])
            scorer = LinearScorer(
                torch.zeros(1, dim), torch.zeros(dim, 2 * n), torch.zeros(1, 2 * n),
                float(spec["price"]), float(spec["ref_cost"]),
            )  # fmt: skip
        elif kind == "policy":
            dim, comps, widths = int(spec["dim"]), int(spec["components"]), [int(w) for w in spec["widths"]]
            act = getattr(nn, str(spec["activation"]))
            layers: list[nn.Module] = []
            for i, (a, b) in enumerate(itertools.pairwise(widths)):
                layers.append(nn.Linear(a, b))
                if i < len(widths) - 2:
                    layers.append(act())
            price = spec.get("price_input")
            scorer = PolicyScorer(
                torch.zeros(1, dim), torch.zeros(dim, comps), torch.ones(comps), nn.Sequential(*layers),
                None if price is None else float(price),
            )  # fmt: skip
        else:
            raise ValueError(f"selector kind {kind!r} is not one of {SELECTOR_KINDS}")
    except KeyError as exc:
        raise ValueError(f"selector metadata lacks {exc}") from None
    return PathSelectorActor(config, paths, scorer)
