"""Routers learned from outcome tables, chosen on validation, judged on test, all with no LLM call.

An *outcome table* holds, for every question of a split and every path of a designed set, the F1 and module
cost that path scored (the fixed-path records of ``evaluate.py frontier``; ``scripts/powered_study.py``
computes them once on the powered splits). The field's standard learners run on such tables (RouterBench,
LLMRouter):

* **best fixed**: the one path with the best mean objective on the training questions (the zero router);
* **kNN**: per question, the path that scored best over its ``k`` most similar training questions (cosine
  similarity of the question embeddings), F1 and cost both averaged over those neighbours;
* **plug-in** (CARROT-style): ridge regressions predict each path's F1 and cost from the embedding; the router
  takes the path with the best predicted objective;
* **PPO** (:class:`policies.table_ppo.TablePPO`), several seeds: the project's own learner, trained on the
  table as a one-step environment, one router per price or one λ-conditioned router for all of them.

The objective is ``F1 − price · cost share`` (cost share: module cost over the costliest path's mean on the
training questions), so ``price`` says what F1 a costliest-path-sized cost is worth (0: quality alone).

Learners train on the validation table. The guard asks, per learner, whether its validation objective beats
the best fixed path's with the paired interval's lower bound above 0, from *cross-fitted* choices (each
validation question routed by a learner fitted on the other folds, so it never sees its own outcome); the
fixed path is chosen on all of validation, in its favour. Of the learners that pass, the best on validation
ships; if none passes, the best fixed path ships. On test, what ships is compared, paired, with that fixed
path and with all-HIGH: only the test table is read there, and only the paths it covers can be chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from tqdm import tqdm

from evaluation.bootstrap import DEFAULT_ALPHA, DEFAULT_N_BOOT, DEFAULT_SEED, bootstrap_mean, make_resampler
from evaluation.routability import load_paths
from memory.encoder import unit_rows
from policies.path_selector import KNNScorer, LinearScorer
from policies.training.guard import paired_interval


@dataclass(frozen=True)
class OutcomeTable:
    """Per question and path: F1 and module cost.

    Attributes:
        qids: Question ids (rows).
        labels: Path labels ``L,M,M,M,M`` (columns).
        f1: ``(n_questions, n_paths)`` quality.
        cost: ``(n_questions, n_paths)`` module cost.
    """

    qids: list[str]
    labels: list[str]
    f1: np.ndarray
    cost: np.ndarray

    @classmethod
    def load(cls, records_dir: str | Path, metric: str = "f1") -> OutcomeTable:
        """The fixed-path record files of a frontier records dir, on the questions they all cover.

        Raises:
            FileNotFoundError, ValueError: As :func:`evaluation.routability.load_paths` (names file, field).
        """
        qids, paths = load_paths(records_dir, metric=metric)
        return cls(
            qids,
            [p.label for p in paths],
            np.stack([p.f1 for p in paths], axis=1),
            np.stack([p.cost for p in paths], axis=1),
        )

    def restricted(self, labels: Sequence[str]) -> OutcomeTable:
        """The same questions with only ``labels``' columns, in that order.

        Raises:
            ValueError: A label is not a column of this table (the ones it has are named).
        """
        missing = [lab for lab in labels if lab not in self.labels]
        if missing:
            raise ValueError(f"paths {missing} are not in the outcome table (it has {self.labels})")
        idx = [self.labels.index(lab) for lab in labels]
        return OutcomeTable(self.qids, list(labels), self.f1[:, idx], self.cost[:, idx])


def ref_cost_of(table: OutcomeTable) -> float:
    """The cost a price is quoted against: the costliest path's mean cost on ``table`` (validation).

    Raises:
        ValueError: Every path has zero cost (nothing to price).
    """
    ref = float(table.cost.mean(axis=0).max())
    if ref <= 0:
        raise ValueError("every path has zero cost on validation; nothing to price")
    return ref


def common_paths(a: OutcomeTable, b: OutcomeTable) -> list[str]:
    """The path labels both tables cover, in ``a``'s order (a router can only be judged on those)."""
    return [lab for lab in a.labels if lab in b.labels]


@runtime_checkable
class Learner(Protocol):
    """Fits on training embeddings and their outcome table; predicts each path's F1 and cost for new ones."""

    name: str

    def fit(self, x: np.ndarray, table: OutcomeTable) -> Learner:
        """Learn from ``x`` (``(n, dim)``) and ``table`` (same rows); returns self."""
        ...

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(predicted F1, predicted cost)``, each ``(m, n_paths)``."""
        ...


class BestFixed:
    """Every question gets the training questions' mean outcome of each path: the zero router."""

    name = "best fixed"

    def fit(self, x: np.ndarray, table: OutcomeTable) -> BestFixed:
        """Remember each path's mean F1 and cost."""
        self._f1, self._cost = table.f1.mean(axis=0), table.cost.mean(axis=0)
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The same means for every row of ``x``."""
        m = np.asarray(x).shape[0]
        return np.tile(self._f1, (m, 1)), np.tile(self._cost, (m, 1))


class KNN:
    """The mean outcome of each path over the ``k`` most similar training questions (cosine)."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"kNN needs k >= 1, got {k}")
        self.k = k
        self.name = f"kNN k={k}"

    def fit(self, x: np.ndarray, table: OutcomeTable) -> KNN:
        """Keep the unit-normalised training embeddings and their outcomes."""
        self._x, self._f1, self._cost = unit_rows(x), table.f1, table.cost
        return self

    def scorer(self, price: float, ref_cost: float) -> tuple[str, torch.nn.Module]:
        """This fitted router at ``price`` as a router-format scorer (:mod:`policies.path_selector`)."""
        t = torch.from_numpy
        return "knn", KNNScorer(t(self._x), t(self._f1), t(self._cost), self.k, price, ref_cost)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Neighbour means; ties in similarity go to the earlier training question."""
        sim = unit_rows(x) @ self._x.T
        k = min(self.k, self._x.shape[0])
        nbrs = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        return self._f1[nbrs].mean(axis=1), self._cost[nbrs].mean(axis=1)


class PlugIn:
    """CARROT-style plug-in router: ridge regressions of each path's F1 and cost on the embedding."""

    def __init__(self, alpha: float) -> None:
        if not alpha > 0:
            raise ValueError(f"ridge alpha must be positive, got {alpha}")
        self.alpha = alpha
        self.name = f"plug-in ridge alpha={alpha:g}"

    def fit(self, x: np.ndarray, table: OutcomeTable) -> PlugIn:
        """Solve the ridge regressions (centred inputs, free intercept) for every F1 and cost column."""
        u = unit_rows(x)
        self._mean = u.mean(axis=0, keepdims=True)
        c = u - self._mean
        y = np.concatenate([table.f1, table.cost], axis=1)
        self._y_mean = y.mean(axis=0, keepdims=True)
        # Dual form: n is small (hundreds of questions) next to the embedding's dimension.
        gram = c @ c.T
        dual = np.linalg.solve(gram + self.alpha * np.eye(len(gram)), y - self._y_mean)
        self._w = c.T @ dual
        self._n_paths = table.f1.shape[1]
        return self

    def scorer(self, price: float, ref_cost: float) -> tuple[str, torch.nn.Module]:
        """This fitted router at ``price`` as a router-format scorer (:mod:`policies.path_selector`)."""
        t = torch.from_numpy
        return "linear", LinearScorer(t(self._mean), t(self._w), t(self._y_mean), price, ref_cost)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicted F1 and cost columns."""
        y = (unit_rows(x) - self._mean) @ self._w + self._y_mean
        return y[:, : self._n_paths], y[:, self._n_paths :]


def choose(pred_f1: np.ndarray, pred_cost: np.ndarray, price: float, ref_cost: float) -> np.ndarray:
    """Per row, the path with the best predicted objective; ties go to the cheaper, then the earlier path."""
    share = np.asarray(pred_cost, dtype=np.float64) / ref_cost
    score = np.round(np.asarray(pred_f1, dtype=np.float64) - price * share, 12)
    idx = np.arange(score.shape[1])
    return np.array([np.lexsort((idx, share[i], -score[i]))[0] for i in range(score.shape[0])], dtype=int)


class PolicyLearner(Protocol):
    """Learns a path choice directly (a policy, e.g. :class:`policies.table_ppo.TablePPO`), not outcomes."""

    name: str

    def fit(
        self, x: np.ndarray, f1: np.ndarray, cost: np.ndarray, prices: Sequence[float], ref_cost: float
    ) -> PolicyLearner:
        """Learn from ``x`` and the table's F1 and cost columns at ``prices``; returns self."""
        ...

    def choose(self, x: np.ndarray, price: float) -> np.ndarray:
        """Each row's path (column index) at ``price``."""
        ...


AnyLearner = Learner | PolicyLearner


def fitted_choices(
    learner: AnyLearner,
    x_fit: np.ndarray,
    table: OutcomeTable,
    x_ask: np.ndarray,
    prices: Sequence[float],
    ref_cost: float,
) -> dict[float, np.ndarray]:
    """Fit on ``(x_fit, table)`` once, then each price's choice for the rows ``x_ask``.

    An outcome predictor's fit does not depend on the price (only the choice does); a policy learner gets
    every price at once (one router per price, or one conditioned on it).
    """
    if isinstance(learner, Learner):
        pred = learner.fit(x_fit, table).predict(x_ask)
        return {float(p): choose(*pred, p, ref_cost) for p in prices}
    policy = learner.fit(x_fit, table.f1, table.cost, prices, ref_cost)
    return {float(p): np.asarray(policy.choose(x_ask, p), dtype=int) for p in prices}


def cross_fitted_choices(
    learner: AnyLearner,
    x: np.ndarray,
    table: OutcomeTable,
    prices: Sequence[float],
    ref_cost: float,
    folds: int,
    seed: int,
) -> dict[float, np.ndarray]:
    """Each question's path per price, from the learner fitted on the other folds (never on its own outcome).

    Raises:
        ValueError: Fewer questions than folds, or fewer than 2 folds.
    """
    n = len(table.qids)
    if folds < 2 or n < folds:
        raise ValueError(f"cross-fitting needs 2 <= folds <= questions, got {folds} folds for {n} questions")
    fold = np.random.default_rng(seed).permutation(n) % folds
    out = {float(p): np.empty(n, dtype=int) for p in prices}
    for f in range(folds):
        held, kept = fold == f, fold != f
        part = OutcomeTable(
            [q for q, k in zip(table.qids, kept, strict=True) if k],
            table.labels,
            table.f1[kept],
            table.cost[kept],
        )
        for price, choice in fitted_choices(learner, x[kept], part, x[held], prices, ref_cost).items():
            out[price][held] = choice
    return out


def cross_fitted_choice(
    learner: AnyLearner,
    x: np.ndarray,
    table: OutcomeTable,
    price: float,
    ref_cost: float,
    folds: int,
    seed: int,
) -> np.ndarray:
    """Each question's cross-fitted path at one price (:func:`cross_fitted_choices`)."""
    return cross_fitted_choices(learner, x, table, [price], ref_cost, folds, seed)[float(price)]


@dataclass(frozen=True)
class LearnerRow:
    """One learner at one price: its validation guard and its test result.

    Attributes:
        learner: Its name.
        price: F1 a costliest-path-sized cost is worth.
        val_objective: Mean cross-fitted objective on validation.
        val_diff: ``(mean, lo, hi)`` of its objective minus the validation-chosen fixed path's, paired.
        passed: ``val_diff``'s lower bound is above 0.
        test_f1: ``(mean, lo, hi)`` on test (fitted on all of validation).
        test_cost_share: Its mean module cost over the costliest path's (validation means).
        test_diff: ``(mean, lo, hi)`` of its test objective minus the validation-chosen fixed path's, paired.
        test_paths: How often it chose each path on test.
    """

    learner: str
    price: float
    val_objective: float
    val_diff: tuple[float, float, float]
    passed: bool
    test_f1: tuple[float, float, float]
    test_cost_share: float
    test_diff: tuple[float, float, float]
    test_paths: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Shipped:
    """What ships at one price, and how it does on test.

    Attributes:
        price: The price.
        fixed_path: The best fixed path on validation.
        router: The learner that ships, or None (the fixed path ships).
        test_f1: ``(mean, lo, hi)`` of what ships, on test.
        vs_fixed: Its test objective minus the validation-chosen fixed path's, paired (0: it is that path).
        vs_high: Its test F1 minus all-HIGH's, paired (None when the tables have no all-HIGH).
        test_cost_share: Its mean cost share on test.
    """

    price: float
    fixed_path: str
    router: str | None
    test_f1: tuple[float, float, float]
    vs_fixed: tuple[float, float, float]
    vs_high: tuple[float, float, float] | None
    test_cost_share: float

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _estimate(values: np.ndarray, n_boot: int, seed: int, alpha: float) -> tuple[float, float, float]:
    est, _ = bootstrap_mean(values, make_resampler(len(values), n_boot=n_boot, seed=seed, alpha=alpha))
    return est.mean, est.lo, est.hi


def learn_and_judge(
    learners: Sequence[AnyLearner],
    x_val: np.ndarray,
    val: OutcomeTable,
    x_test: np.ndarray,
    test: OutcomeTable,
    *,
    prices: Sequence[float] = (0.0,),
    folds: int = 5,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[list[LearnerRow], list[Shipped]]:
    """Train every learner on validation, guard it there, judge it and what ships on test.

    Args:
        learners: Outcome predictors and policy learners (``BestFixed`` need not be among them: the fixed
            path is always compared).
        x_val: ``(n_val, dim)`` embeddings of the validation questions, rows as ``val.qids``.
        val: The validation outcome table.
        x_test: Test embeddings, rows as ``test.qids``.
        test: The test outcome table with the same path columns as ``val`` (see :func:`common_paths`).
        prices: F1 a costliest-path-sized cost is worth.
        folds: Cross-fitting folds on validation.
        n_boot: Bootstrap replicates.
        seed: Seed of the folds and the bootstrap.
        alpha: Interval level.

    Raises:
        ValueError: The tables' paths differ, or embeddings and tables disagree in rows.
    """
    if val.labels != test.labels:
        raise ValueError(
            f"validation paths {val.labels} differ from test paths {test.labels}; use common_paths"
        )
    if x_val.shape[0] != len(val.qids) or x_test.shape[0] != len(test.qids):
        raise ValueError(
            f"{x_val.shape[0]} validation / {x_test.shape[0]} test embeddings for "
            f"{len(val.qids)} / {len(test.qids)} questions"
        )
    ref_cost = ref_cost_of(val)
    high = test.labels.index("H,H,H,H,H") if "H,H,H,H,H" in test.labels else None
    rows: list[LearnerRow] = []
    shipped: list[Shipped] = []
    n_val, n_test = np.arange(len(val.qids)), np.arange(len(test.qids))
    val_choice, test_choice = [], []
    # PPO routers take seconds each, (folds + 1) of them per learner: show where the run is.
    for learner in tqdm(learners, desc="learners", unit="learner", leave=False, disable=len(learners) < 8):
        val_choice.append(cross_fitted_choices(learner, x_val, val, prices, ref_cost, folds, seed))
        test_choice.append(fitted_choices(learner, x_val, val, x_test, prices, ref_cost))
    fixed_choice = fitted_choices(BestFixed(), x_val, val, x_val[:1], prices, ref_cost)
    for price in prices:
        val_obj = val.f1 - price * val.cost / ref_cost
        test_obj = test.f1 - price * test.cost / ref_cost
        fixed = int(fixed_choice[float(price)][0])
        best: tuple[float, str, np.ndarray] | None = None
        for learner, cv_choice, t_choice in zip(learners, val_choice, test_choice, strict=True):
            mine = val_obj[n_val, cv_choice[float(price)]]
            diff = paired_interval(mine - val_obj[:, fixed], n_boot, seed)
            choice = t_choice[float(price)]
            t_obj = test_obj[n_test, choice]
            rows.append(
                LearnerRow(
                    learner=learner.name,
                    price=float(price),
                    val_objective=float(mine.mean()),
                    val_diff=diff,
                    passed=diff[1] > 0,
                    test_f1=_estimate(test.f1[n_test, choice], n_boot, seed, alpha),
                    test_cost_share=float((test.cost[n_test, choice] / ref_cost).mean()),
                    test_diff=paired_interval(t_obj - test_obj[:, fixed], n_boot, seed),
                    test_paths=dict(Counter(test.labels[i] for i in choice).most_common()),
                )
            )
            if diff[1] > 0 and (best is None or mine.mean() > best[0]):
                best = (float(mine.mean()), learner.name, choice)
        choice = best[2] if best is not None else np.full(len(test.qids), fixed)
        f1 = test.f1[n_test, choice]
        shipped.append(
            Shipped(
                price=float(price),
                fixed_path=test.labels[fixed],
                router=best[1] if best is not None else None,
                test_f1=_estimate(f1, n_boot, seed, alpha),
                vs_fixed=paired_interval(test_obj[n_test, choice] - test_obj[:, fixed], n_boot, seed),
                vs_high=paired_interval(f1 - test.f1[:, high], n_boot, seed) if high is not None else None,
                test_cost_share=float((test.cost[n_test, choice] / ref_cost).mean()),
            )
        )
    return rows, shipped
