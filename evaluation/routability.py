"""Routability: could *any* router that sees the question beat the best fixed path on these records?

A trained router that ends at a fixed tier path (docs/results/locomo.md) has two possible causes: the
per-question best path is not predictable from what the router sees (no signal), or it is and the
training did not find it (an optimisation or exploration shortfall). The frontier's oracle only says
how much a clairvoyant choice would gain. This module measures the middle ground from records that
already exist, with no LLM call: a leave-one-out *k-nearest-neighbour router* over question
embeddings picks, for each question, the path whose F1 its k most similar other questions scored
best (minus a cost price). Two comparisons, both paired on the same questions:

* against a **shuffled control** — the same router with the embeddings permuted across questions,
  which keeps its selection noise and loses any link between question and path. Beating it (a
  permutation p-value) says the embedding carries a signal about which path pays;
* against the **best fixed path in hindsight** (chosen on these same questions, so conservative for
  the router), with a bootstrap interval. Beating it says that signal is worth more than a fixed
  choice: a trained router that stays at a fixed path leaves measurable quality behind.

A second family, *ridge routers*, predicts each path's F1 from the whole embedding with a linear
model (ridge regression, leave-one-out exact), as RouterBench's predictive routers do: where kNN only
averages near neighbours, ridge can use a direction of the embedding space that spans every question.
A third learner, the *category router* (the best path over the other questions of the same category,
its control shuffling the categories), asks the same of the coarsest structure of the questions.
None says what a trained router will learn (it sees module inputs as well, and trains on
other questions); a learner that cannot beat its control here has, on these questions, nothing to
route on.

The candidate paths are the deterministic ``fixed-*`` record files of a frontier records directory
(all-LOW/MID/HIGH, best-fixed, single-module changes ...): every question has an F1 and a cost on
each, so both the router and the baseline choose among the same evaluated paths.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.bootstrap import (
    DEFAULT_ALPHA,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    Resampler,
    bootstrap_mean,
    make_resampler,
    paired_difference,
)
from evaluation.frontier_runner import RecordStore, record_files, record_stem
from evaluation.oracle import path_label
from memory.encoder import unit_rows

#: Record files of deterministic paths (``evaluate.py frontier`` names them ``fixed-<tiers>``).
FIXED_PREFIX = "fixed-"


@dataclass(frozen=True)
class PathScores:
    """Per-question quality and cost of one fixed tier path.

    Attributes:
        name: The record file's run id (``fixed-LLMLL``).
        label: The path as ``L,L,M,L,L``.
        f1: Quality per question, aligned with the question ids it was loaded for.
        cost: Module cost per question (GFLOPs), same alignment.
    """

    name: str
    label: str
    f1: np.ndarray
    cost: np.ndarray


def load_paths(
    records_dir: str | Path, names: Sequence[str] | None = None, metric: str = "f1"
) -> tuple[list[str], list[PathScores]]:
    """Read fixed-path record files and align them on the questions they all cover.

    Args:
        records_dir: A frontier records directory (``<out>/records/<fingerprint>/<split>``).
        names: Run ids to use (``fixed-LLLLL`` ...); all ``fixed-*.jsonl`` files when ``None``.
        metric: The quality field of a record.

    Returns:
        The shared question ids (sorted) and one :class:`PathScores` per path, in ``names`` order
        (file-name order by default).

    Raises:
        FileNotFoundError: If the directory or a named file is missing.
        ValueError: If fewer than two paths are given, a record lacks a numeric ``metric`` or
            ``module_cost`` (file and question named), or the paths share fewer than 3 questions.
    """
    root = Path(records_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: no such records directory (a frontier --out dir's records/<fp>/<split>)"
        )
    if names is None:
        names = sorted({record_stem(p) for p in record_files(root, f"{FIXED_PREFIX}*")})
    if len(names) < 2:
        raise ValueError(
            f"{root}: routability needs two or more fixed-path record files, found {list(names)}"
        )
    stores: dict[str, RecordStore] = {}
    for name in names:
        path = root / f"{name}.jsonl"
        if not record_files(root, name):
            have = ", ".join(sorted(record_stem(p) for p in record_files(root)))
            raise FileNotFoundError(f"{path}: no such record file (this directory has: {have})")
        stores[name] = RecordStore(path)
    qids = sorted(set.intersection(*(set(s.records) for s in stores.values())))
    if len(qids) < 3:
        raise ValueError(f"{root}: the paths {list(names)} share {len(qids)} questions; need at least 3")
    out = []
    for name, store in stores.items():
        recs = store.get(qids)
        out.append(
            PathScores(
                name=name,
                label=path_label(recs[0]),
                f1=_column(recs, metric, store.path),
                cost=_column(recs, "module_cost", store.path),
            )
        )
    return qids, out


def _column(records: Sequence[Mapping[str, Any]], key: str, path: Path) -> np.ndarray:
    values = []
    for rec in records:
        try:
            value = float(rec[key])
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"{path}: question {rec.get('question_id')!r} has no numeric {key!r} (got {rec.get(key)!r})"
            ) from None
        if not math.isfinite(value):
            raise ValueError(f"{path}: question {rec.get('question_id')!r} has a non-finite {key!r}")
        values.append(value)
    return np.asarray(values, dtype=np.float64)


def neighbours(embeddings: np.ndarray, k: int) -> np.ndarray:
    """Indices of each question's ``k`` most similar *other* questions (cosine similarity).

    Ties break towards the lower index, so the result does not depend on the sort's whims.

    Raises:
        ValueError: If ``k`` is not in ``[1, n - 1]`` or the embeddings are not a 2-D array.
    """
    emb = np.asarray(embeddings, dtype=np.float64)
    if emb.ndim != 2:
        raise ValueError(f"embeddings must be (n_questions, dim), got shape {emb.shape}")
    n = emb.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must be between 1 and n_questions - 1 = {n - 1}, got {k}")
    unit = unit_rows(emb)
    sim = unit @ unit.T
    np.fill_diagonal(sim, -np.inf)  # leave-one-out: a question is never its own neighbour
    # stable sort on -sim: equal similarities keep index order
    return np.argsort(-sim, axis=1, kind="stable")[:, :k]


def objective(f1: np.ndarray, cost_share: np.ndarray | float, price: float) -> np.ndarray:
    """``F1 − price · cost share``: the quality a path is worth when all-HIGH's cost costs ``price`` F1."""
    return np.asarray(f1, dtype=np.float64) - price * np.asarray(cost_share, dtype=np.float64)


def _table(paths: Sequence[PathScores], attr: str) -> np.ndarray:
    """``(n_questions, n_paths)``: one column per path of its ``f1`` or ``cost``."""
    return np.stack([getattr(p, attr) for p in paths], axis=1)


def loo_path_costs(paths: Sequence[PathScores], ref_cost: float) -> np.ndarray:
    """``(n_questions, n_paths)`` cost shares a router could know before answering question i.

    Each path's mean cost over the *other* questions, divided by ``ref_cost`` (the costliest
    path's mean), so no question's own cost enters its decision.
    """
    cost = _table(paths, "cost")
    n = cost.shape[0]
    loo = (cost.sum(axis=0, keepdims=True) - cost) / (n - 1)
    return loo / ref_cost


def neighbour_mask(nbrs: np.ndarray) -> np.ndarray:
    """``(n, n)`` boolean mask of :func:`neighbours`' index rows."""
    n = nbrs.shape[0]
    mask = np.zeros((n, n), dtype=bool)
    mask[np.arange(n)[:, None], nbrs] = True
    return mask


def group_mask(groups: Sequence[str] | np.ndarray) -> np.ndarray:
    """``(n, n)`` mask of each question's *other* questions in its group (its category).

    A question alone in its group gets every other question (its router falls back to the
    leave-one-out best fixed path).
    """
    g = np.asarray(groups)
    mask = g[:, None] == g[None, :]
    np.fill_diagonal(mask, False)
    lonely = ~mask.any(axis=1)
    mask[lonely] = True
    mask[lonely, np.flatnonzero(lonely)] = False
    return mask


def mask_weights(mask: np.ndarray) -> np.ndarray:
    """Row-normalised weights of a leave-one-out mask: each row averages the questions it selects.

    Raises:
        ValueError: If a row selects no question or the question itself (that would not be
            leave-one-out).
    """
    if not mask.any(axis=1).all() or mask.diagonal().any():
        raise ValueError("every question needs at least one other question to learn from, and not itself")
    w = mask.astype(np.float64)
    return w / w.sum(axis=1, keepdims=True)


def ridge_weights(embeddings: np.ndarray, alpha: float) -> np.ndarray:
    """``(n, n)`` weights ``W``: ``W @ y`` is each question's leave-one-out ridge prediction of ``y``.

    Ridge regression of ``y`` on the (unit-normalised, centred) embeddings with an unpenalised
    intercept is a linear smoother ``ŷ = H y`` with ``H = 11ᵀ/n + K (K + αI)⁻¹``, ``K`` the centred
    Gram matrix. Its leave-one-out prediction is exact without refitting:
    ``ŷ₋ᵢ = Σ_{j≠i} H_ij y_j / (1 − H_ii)``, so ``W_ij = H_ij / (1 − H_ii)`` with a zero diagonal. The
    same ``W`` serves every path (one regression per path column), and question i's own score never
    enters its prediction. The embedding rows are centred with every question's rows: only the
    *labels* are held out, as a router sees inputs of questions it has not been scored on.

    Args:
        embeddings: ``(n_questions, dim)``.
        alpha: Ridge penalty (on unit-norm rows, the Gram matrix has a unit diagonal; larger
            shrinks every prediction towards the other questions' mean).

    Raises:
        ValueError: If ``alpha`` is not positive, the embeddings are not 2-D with at least 3
            rows, or a question's leverage is 1 (its prediction would be undefined).
    """
    emb = np.asarray(embeddings, dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] < 3:
        raise ValueError(f"embeddings must be (n_questions >= 3, dim), got shape {emb.shape}")
    if not alpha > 0:
        raise ValueError(f"ridge alpha must be positive, got {alpha}")
    n = emb.shape[0]
    x = unit_rows(emb)
    x = x - x.mean(axis=0, keepdims=True)
    gram = x @ x.T
    hat = np.full((n, n), 1.0 / n) + np.linalg.solve(gram + alpha * np.eye(n), gram).T
    lev = hat.diagonal().copy()
    if (1.0 - lev <= 1e-9).any():
        raise ValueError(f"a question has leverage 1 at alpha={alpha}; use a larger alpha")
    w = hat / (1.0 - lev)[:, None]
    np.fill_diagonal(w, 0.0)
    return w


def smoother_choice(
    paths: Sequence[PathScores], weights: np.ndarray, price: float, ref_cost: float
) -> np.ndarray:
    """Per question, the path with the best predicted objective, predictions ``weights @ F1``.

    Ties go to the cheaper path (by leave-one-out mean cost), then to the earlier one.

    Raises:
        ValueError: If ``weights`` has a non-zero diagonal (a question would see its own score).
    """
    if np.any(np.asarray(weights).diagonal() != 0):
        raise ValueError("a question's own score must not enter its prediction (non-zero diagonal)")
    share = loo_path_costs(paths, ref_cost)
    pred = np.asarray(weights, dtype=np.float64) @ _table(paths, "f1")  # (n, P)
    return _predicted_choice(pred, share, price)


def masked_choice(paths: Sequence[PathScores], mask: np.ndarray, price: float, ref_cost: float) -> np.ndarray:
    """Per question, the path with the best mean objective over the questions its mask row selects.

    Raises:
        ValueError: As :func:`mask_weights`.
    """
    return smoother_choice(paths, mask_weights(mask), price, ref_cost)


def knn_choice(paths: Sequence[PathScores], nbrs: np.ndarray, price: float, ref_cost: float) -> np.ndarray:
    """Per question, the index into ``paths`` of the best mean objective over its ``k`` neighbours."""
    return masked_choice(paths, neighbour_mask(nbrs), price, ref_cost)


def hindsight_best_fixed(paths: Sequence[PathScores], price: float, ref_cost: float) -> int:
    """The one path with the best mean objective over *all* questions (chosen with hindsight).

    A conservative baseline for the router: it is the fixed path a best-fixed search on these very
    questions would pick, so a router that beats it has not won by the baseline's selection noise
    (a leave-one-out best-fixed would be pessimistic for small n: leaving out a question that
    decides the ranking flips the choice exactly where it hurts).
    """
    f1 = _table(paths, "f1")
    cost = _table(paths, "cost") / ref_cost
    score = objective(f1, cost, price).mean(axis=0, keepdims=True)
    return int(_argbest(score, cost.mean(axis=0, keepdims=True))[0])


def _argbest(score: np.ndarray, share: np.ndarray) -> np.ndarray:
    # lexsort's last key is primary: highest score, then lowest cost share, then lowest index
    idx = np.arange(score.shape[1])
    return np.array(
        [np.lexsort((idx, share[i], -np.round(score[i], 12)))[0] for i in range(score.shape[0])], dtype=int
    )


def oracle_choice(paths: Sequence[PathScores], price: float, ref_cost: float) -> np.ndarray:
    """Per question, the path with the best objective *on that question* (clairvoyant)."""
    f1 = _table(paths, "f1")
    cost = _table(paths, "cost") / ref_cost
    return _argbest(objective(f1, cost, price), cost)


@dataclass
class RoutabilityRow:
    """The comparison of one learner at one price.

    Attributes:
        learner: ``"kNN question k=10"`` (kNN over one named input), ``"ridge question alpha=1"``
            or ``"category"``.
        price: F1 one costliest-path cost is worth (0 = quality only).
        router: The learner's F1 with its interval.
        router_cost_share: Its mean module cost over the costliest path's.
        router_paths: How often it chose each path (label -> count).
        fixed: F1 of the best fixed path in hindsight at this price, with its interval.
        fixed_cost_share: Its cost share.
        fixed_path: Its label.
        diff: Router minus best fixed in objective (``F1 − price · cost share``), paired; at price 0
            this is the F1 difference.
        better: Questions where the router's objective is higher than the fixed path's.
        worse: Questions where it is lower.
        control_mean: Mean objective of the learner with its input shuffled across questions
            (selection noise alone).
        control_lo: 2.5th percentile of those permutation objectives.
        control_hi: 97.5th percentile.
        control_p: Share of permutations scoring at least the router's objective (a permutation
            p-value for "the input carries a signal").
        oracle_f1: F1 of the clairvoyant per-question choice at this price.
        oracle_cost_share: Its cost share.
        captured: (router − best fixed) / (oracle − best fixed) in objective; NaN when the oracle
            gains nothing.
    """

    learner: str
    price: float
    router: Estimate
    router_cost_share: float
    router_paths: dict[str, int]
    fixed: Estimate
    fixed_cost_share: float
    fixed_path: str
    diff: Estimate
    better: int
    worse: int
    control_mean: float
    control_lo: float
    control_hi: float
    control_p: float
    oracle_f1: float
    oracle_cost_share: float
    captured: float = field(default=math.nan)

    @property
    def signal(self) -> bool:
        """Whether the learner beats its shuffled control at the 5% level."""
        return self.control_p < 0.05

    @property
    def beats_fixed(self) -> bool:
        """Whether the paired interval of router − best fixed lies above 0."""
        return self.diff.lo > 0

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON/CSV-friendly form."""
        out: dict[str, Any] = {"learner": self.learner, "price": self.price}
        for name in ("router", "fixed", "diff"):
            est: Estimate = getattr(self, name)
            out.update({f"{name}_mean": est.mean, f"{name}_lo": est.lo, f"{name}_hi": est.hi})
        out.update(
            router_cost_share=self.router_cost_share,
            router_paths=dict(self.router_paths),
            fixed_cost_share=self.fixed_cost_share,
            fixed_path=self.fixed_path,
            better=self.better,
            worse=self.worse,
            control_mean=self.control_mean,
            control_lo=self.control_lo,
            control_hi=self.control_hi,
            control_p=self.control_p,
            oracle_f1=self.oracle_f1,
            oracle_cost_share=self.oracle_cost_share,
            captured=self.captured,
            signal=self.signal,
            beats_fixed=self.beats_fixed,
        )
        return out


def routability(
    paths: Sequence[PathScores],
    inputs: Mapping[str, np.ndarray],
    *,
    ks: Sequence[int] = (10,),
    ridge_alphas: Sequence[float] = (),
    categories: Sequence[str] | None = None,
    prices: Sequence[float] = (0.0,),
    n_permutations: int = 200,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
) -> list[RoutabilityRow]:
    """Compare leave-one-out routers with the best fixed path and their shuffled controls.

    Args:
        paths: Candidate paths, aligned on the same questions as the inputs' rows.
        inputs: Named ``(n_questions, dim)`` embeddings a router could see of a question
            (``{"question": ..., "context": ...}``); each gives one kNN learner per ``k``.
        ks: Neighbour counts of the kNN routers (one learner each; choosing k on these same
            questions would be selection on test, so report them all).
        ridge_alphas: Penalties of the ridge routers (one learner per input and alpha; reported
            all, for the same reason).
        categories: Per question, its category: adds the *category router* (the best path over
            the other questions of its category), whose control shuffles the categories. A
            trained router does not see the category; this asks whether the coarsest structure
            of the questions says which path pays.
        prices: F1 a costliest-path-sized cost is worth; 0 compares quality alone.
        n_permutations: Shuffles of each learner's input for its control (0 = no control).
        n_boot: Bootstrap replicates.
        seed: Seed of the bootstrap and the permutations.
        alpha: Interval level.

    Returns:
        One :class:`RoutabilityRow` per (learner, price): kNN learners in input then ``k``
        order, ridge learners in input then alpha order, then the category router.

    Raises:
        ValueError: If an input or ``categories`` has another length than the paths have
            questions, or every path has zero cost.
    """
    n = len(paths[0].f1)
    for name, emb in inputs.items():
        if emb.shape[0] != n:
            raise ValueError(f"{emb.shape[0]} {name} embeddings for {n} questions")
    if categories is not None and len(categories) != n:
        raise ValueError(f"{len(categories)} categories for {n} questions")
    ref_cost = max(float(p.cost.mean()) for p in paths)
    if ref_cost <= 0:
        raise ValueError("every path has zero cost; nothing to price")
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(n) for _ in range(n_permutations)]
    # Each learner maps a question order to its leave-one-out weights: the identity gives the
    # router, a permutation its control. A control gives question i the input of another question
    # (its embedding, its category), so the learner keeps its selection noise but loses any link
    # between a question and its paths.
    learners: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    for name, emb in inputs.items():
        learners += [(f"kNN {name} k={k}", partial(_knn_weights, emb, k)) for k in ks]
    for name, emb in inputs.items():
        learners += [(f"ridge {name} alpha={a:g}", partial(_ridge_weights_in, emb, a)) for a in ridge_alphas]
    if categories is not None:
        learners.append(("category", partial(_group_weights, np.asarray([str(c) for c in categories]))))
    f1_table = _table(paths, "f1")
    resampler = make_resampler(n, n_boot=n_boot, seed=seed, alpha=alpha)
    rows = []
    for name, make in learners:
        # Predictions, not weights, are kept: 200 (n, n) weight matrices per learner would not be.
        pred = make(np.arange(n)) @ f1_table
        controls = [make(perm) @ f1_table for perm in perms]
        rows += [
            _compare(name, paths, pred, controls, float(price), ref_cost, resampler, alpha)
            for price in prices
        ]
    return rows


def _knn_weights(emb: np.ndarray, k: int, order: np.ndarray) -> np.ndarray:
    return mask_weights(neighbour_mask(neighbours(emb[order], k)))


def _ridge_weights_in(emb: np.ndarray, alpha: float, order: np.ndarray) -> np.ndarray:
    return ridge_weights(emb[order], alpha)


def _group_weights(groups: np.ndarray, order: np.ndarray) -> np.ndarray:
    return mask_weights(group_mask(groups[order]))


def _predicted_choice(pred: np.ndarray, share: np.ndarray, price: float) -> np.ndarray:
    return _argbest(objective(pred, share, price), share)


def _compare(
    learner: str,
    paths: Sequence[PathScores],
    pred: np.ndarray,
    controls: Sequence[np.ndarray],
    price: float,
    ref_cost: float,
    resampler: Resampler,
    alpha: float,
) -> RoutabilityRow:
    labels = [p.label for p in paths]
    f1_table = _table(paths, "f1")
    share_table = _table(paths, "cost") / ref_cost
    obj_table = objective(f1_table, share_table, price)
    idx = np.arange(f1_table.shape[0])
    loo_share = loo_path_costs(paths, ref_cost)
    r_choice = _predicted_choice(pred, loo_share, price)
    fixed = hindsight_best_fixed(paths, price, ref_cost)
    o_choice = oracle_choice(paths, price, ref_cost)
    r_obj, f_obj = obj_table[idx, r_choice], obj_table[:, fixed]
    r_est, _ = bootstrap_mean(f1_table[idx, r_choice], resampler)
    f_est, _ = bootstrap_mean(f1_table[:, fixed], resampler)
    r_obj_est, r_reps = bootstrap_mean(r_obj, resampler)
    f_obj_est, f_reps = bootstrap_mean(f_obj, resampler)
    control = np.array([obj_table[idx, _predicted_choice(c, loo_share, price)].mean() for c in controls])
    gain = float(obj_table[idx, o_choice].mean()) - f_obj_est.mean
    return RoutabilityRow(
        learner=learner,
        price=price,
        router=r_est,
        router_cost_share=float(share_table[idx, r_choice].mean()),
        router_paths=_counts(labels, r_choice),
        fixed=f_est,
        fixed_cost_share=float(share_table[:, fixed].mean()),
        fixed_path=labels[fixed],
        diff=paired_difference(r_obj_est.mean, r_reps, f_obj_est.mean, f_reps, alpha),
        better=int((r_obj > f_obj + 1e-12).sum()),
        worse=int((r_obj < f_obj - 1e-12).sum()),
        control_mean=float(control.mean()) if control.size else math.nan,
        control_lo=float(np.percentile(control, 2.5)) if control.size else math.nan,
        control_hi=float(np.percentile(control, 97.5)) if control.size else math.nan,
        control_p=float((control >= r_obj_est.mean - 1e-12).mean()) if control.size else math.nan,
        oracle_f1=float(f1_table[idx, o_choice].mean()),
        oracle_cost_share=float(share_table[idx, o_choice].mean()),
        captured=(r_obj_est.mean - f_obj_est.mean) / gain if gain > 1e-12 else math.nan,
    )


def _counts(labels: Sequence[str], choice: np.ndarray) -> dict[str, int]:
    return dict(Counter(labels[i] for i in choice).most_common())
