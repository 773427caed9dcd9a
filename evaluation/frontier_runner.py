"""Evaluate systems (routers and baselines) question by question, with a resumable record cache."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic import atomic_write_text, atomic_write_with
from common.provenance import git_commit
from envs.components import EnvComponents
from envs.config_schema import without_added_defaults
from envs.episode import EpisodeRecord
from envs.question_bank import QuestionItem
from envs.rollout import DecideFn, map_in_flight, run_episode
from evaluation.aggregate import Run, SystemRuns
from evaluation.export_dataset import flatten
from evaluation.tier_search import TierTuple
from modules.tier import Tier, tiers_label
from policies.baselines import FixedTierPolicy, RandomPolicy

#: Config sections that change an evaluation record (others, e.g. ppo/train/wandb, do not).
RECORD_SECTIONS: tuple[str, ...] = (
    "benchmark",
    "strategy",
    "encoder",
    "backend",
    "llms",
    "answer",
    "judge",
    "memory",
    "question_bank",
    "data_dir",
)
#: Keys of ``question_bank`` that only select questions (records are keyed by question id).
_SELECTION_KEYS = ("limit", "split", "cache_dir", "max_samples")


def _record_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a config that determines a record: :data:`RECORD_SECTIONS` and the cost unit.

    Keys the typed schema added at their defaults are left out (``envs.config_schema.ADDED_BY_SCHEMA``),
    so records written before it keep their fingerprint; so are the question-selection keys.
    """
    cfg = without_added_defaults(cfg)
    ident: dict[str, Any] = {k: cfg.get(k) for k in RECORD_SECTIONS}
    qb = dict(ident.get("question_bank") or {})
    for k in _SELECTION_KEYS:
        qb.pop(k, None)
    ident["question_bank"] = qb
    ident["cost_unit"] = (cfg.get("cost") or {}).get("unit", "gflops")
    params = (cfg.get("cost") or {}).get("params")
    if params:  # declared parameter counts price the calls; absent (the default), old fingerprints hold
        ident["cost_params"] = dict(sorted(params.items()))
    prices = (cfg.get("cost") or {}).get("prices")
    if prices:  # so do declared $ prices
        ident["cost_prices"] = dict(sorted(prices.items()))
    return ident


def record_fingerprint(cfg: Mapping[str, Any], data_checksums: Mapping[str, str]) -> str:
    """Hash of what determines a record: the record-relevant config and the data checksums."""
    ident = _record_config(cfg)
    ident["data"] = dict(sorted(data_checksums.items()))
    ident["code"] = code_versions()
    blob = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def record_config_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Dotted keys of the record-relevant config where ``a`` and ``b`` differ (none: same records)."""
    fa, fb = flatten(_record_config(a)), flatten(_record_config(b))
    return [k for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


#: Version of the record format written by this module; bump when records change meaning.
RECORD_VERSION = "frontier-record-v1"


def code_versions() -> dict[str, str]:
    """Version tags that the owners of the pipeline, call cache and question bank bump on changes."""
    import importlib

    out = {"record": RECORD_VERSION}
    for module, attr in (
        ("modules.cache", "CODE_VERSION"),
        ("modules.base", "MODULES_CODE_VERSION"),
        ("envs.question_bank", "BANK_VERSION"),
    ):
        try:
            out[f"{module}.{attr}"] = str(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            out[f"{module}.{attr}"] = "absent"
    return out


def safe_id(text: str) -> str:
    """File-name-safe version of a run id."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def record_stem(path: Path) -> str:
    """A record file's run id: ``fixed-LLLLL`` for ``fixed-LLLLL.jsonl`` and ``fixed-LLLLL.jsonl.gz``."""
    name = path.name
    return name[: -len(".jsonl.gz")] if name.endswith(".jsonl.gz") else path.stem


def table_metadata_path(records_dir: str | Path) -> Path:
    """The ``metadata.json`` of the frontier table whose records ``records_dir`` holds.

    Records live at ``<out>/records/<fingerprint>/<split>``; the table's metadata at ``<out>/metadata.json``.
    """
    return Path(records_dir).parents[2] / "metadata.json"


def record_files(root: Path, pattern: str = "*") -> list[Path]:
    """Record files (``.jsonl``, or committed ``.jsonl.gz``) in ``root`` whose run id matches ``pattern``."""
    return sorted([*root.glob(f"{pattern}.jsonl"), *root.glob(f"{pattern}.jsonl.gz")])


class RecordStore:
    """Per-question records of one run, persisted as JSONL (atomic rewrite on save).

    A committed records file may be gzip-compressed (``<path>.gz``, written by
    ``scripts/compact_results.py``): it is read in its place, and a save keeps it compressed.

    Args:
        path: The JSONL file (created on first save).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file() and self.path.with_name(self.path.name + ".gz").is_file():
            self.path = self.path.with_name(self.path.name + ".gz")
        self.records: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            raw = self.path.read_bytes()
            text = (gzip.decompress(raw) if self.path.suffix == ".gz" else raw).decode("utf-8")
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    self.records[str(rec["question_id"])] = rec
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ValueError(
                        f"{self.path}:{n}: corrupt record cache line ({exc}); delete the file to re-evaluate"
                    ) from exc

    def missing(self, question_ids: Sequence[str]) -> list[str]:
        """Question ids without a cached record."""
        return [q for q in question_ids if q not in self.records]

    def add(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Add (or replace) records in memory."""
        for rec in records:
            self.records[str(rec["question_id"])] = dict(rec)

    def save(self) -> None:
        """Atomically rewrite the file (sorted by question id, so it diffs cleanly)."""
        lines = [json.dumps(self.records[q], sort_keys=True, default=str) for q in sorted(self.records)]
        text = "\n".join(lines) + "\n"
        if self.path.suffix == ".gz":
            # mtime 0: the same records give the same bytes; a committed file changes only with its content.
            data = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
            atomic_write_with(self.path, lambda tmp: tmp.write_bytes(data))
        else:
            atomic_write_text(self.path, text)

    def get(self, question_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Records for ``question_ids`` in that order (all must be present)."""
        return [self.records[q] for q in question_ids]


@dataclass
class RunSpec:
    """How to evaluate one run of a system.

    Attributes:
        run_id: Cache key (unique per distinct policy; equal ids share records).
        decide_for: ``item -> decide`` (a fresh decision function per question).
        cost_lambda: λ fed to the observation (a router sees the λ it was trained with), or None.
        seed: Seed of the run, if any.
        check: Optional ``components -> None`` compatibility check run once before evaluation.
        observes: Whether the policy reads its observations. Fixed and random paths do not, and building
            one embeds each module's input text (MiniLM): 95% of a replayed fixed-path table's time.
    """

    run_id: str
    decide_for: Callable[[QuestionItem], DecideFn]
    cost_lambda: float | None = None
    seed: int | None = None
    check: Callable[[EnvComponents], None] | None = None
    observes: bool = True


@dataclass
class SystemSpec:
    """A system to evaluate: a name, a kind, its runs and descriptive params."""

    name: str
    kind: str
    runs: list[RunSpec]
    params: dict[str, Any] = field(default_factory=dict)


def fixed_run(tiers: TierTuple) -> RunSpec:
    """Run spec of a fixed tier tuple (the same tuple always shares one record file)."""
    policy = FixedTierPolicy(list(tiers))
    run_id = f"fixed-{tiers_label(tiers).replace(',', '')}"
    return RunSpec(run_id, same_for_every_item(policy.decide), observes=False)


def same_for_every_item(decide: DecideFn) -> Callable[[QuestionItem], DecideFn]:
    """``decide_for`` of a run whose decisions do not depend on the question (fixed tiers, a router)."""

    def decide_for(_item: QuestionItem) -> DecideFn:
        return decide

    return decide_for


def question_seed(seed: int, question_id: str) -> int:
    """Per-question seed of the random baseline (stable across processes and orderings)."""
    digest = hashlib.sha256(f"{seed}:{question_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def random_run(seed: int, max_tier: Tier = Tier.HIGH) -> RunSpec:
    """Run spec of the uniformly random baseline with ``seed``.

    Args:
        seed: Seed of the per-question generators.
        max_tier: Dearest tier drawn. ``Tier.MID`` draws LOW or MID, the action space of a router
            trained with ``actions.max_tier=MID``, so the router meets chance in its own space.
    """
    # The full ladder keeps probs=None and its name: numpy draws differently with explicit probs, and
    # records written before max_tier existed must replay.
    probs: list[float] | None = None
    name = f"random-s{seed}"
    if max_tier != Tier.HIGH:
        n = int(max_tier) + 1
        probs = [1.0 / n if t < n else 0.0 for t in range(len(Tier))]
        name = f"random-{max_tier.name.lower()}-s{seed}"
    return RunSpec(
        name,
        lambda item: RandomPolicy(question_seed(seed, item.question.question_id), probs=probs).decide,
        seed=seed,
        observes=False,
    )


def evaluate_run(
    run: RunSpec,
    items: Sequence[QuestionItem],
    components: EnvComponents,
    store: RecordStore,
    *,
    chunk: int = 1,
    progress: bool = True,
    desc: str = "",
    concurrency: int = 1,
) -> list[dict[str, Any]]:
    """Evaluate the questions ``store`` lacks, saving every ``chunk`` questions; return all records.

    Args:
        run: The run to evaluate.
        items: Question bank items (``.question.question_id``).
        components: Env components (``envs.components.EnvComponents``).
        store: The run's record cache.
        chunk: Questions evaluated between two saves.
        progress: Show a tqdm bar.
        desc: Progress-bar label.
        concurrency: Episodes in flight (:func:`envs.rollout.map_in_flight`); the records are the same.

    Returns:
        Records of every item, in ``items`` order.
    """
    return evaluate_runs(
        [(run, store)], items, components, chunk=chunk, progress=progress, desc=desc, concurrency=concurrency
    )[0]


def evaluate_runs(
    runs: Sequence[tuple[RunSpec, RecordStore]],
    items: Sequence[QuestionItem],
    components: EnvComponents,
    *,
    chunk: int = 1,
    progress: bool = True,
    desc: str = "",
    concurrency: int = 1,
) -> list[list[dict[str, Any]]]:
    """Evaluate the questions each run's store lacks, every run's episodes in one queue; return all records.

    The episodes of all runs go through one :func:`envs.rollout.map_in_flight` queue, run after run and
    question after question: with ``concurrency`` > 1 the next run's first questions start while the
    last ones of the run before are still in flight, so the engine's batch stays full across the runs
    instead of draining at the end of each (13 paths of 40 questions at 16 in flight: 13 drains, now
    one). Each record depends only on its own question and policy, so the records are those of one
    run after the other.

    Args:
        runs: ``(run, its record store)`` pairs.
        items: Question bank items (``.question.question_id``).
        components: Env components (``envs.components.EnvComponents``).
        chunk: Questions of one run evaluated between two saves of its store.
        progress: Show a tqdm bar (one for all runs).
        desc: Progress-bar label (default: the run id, or how many runs share the queue).
        concurrency: Episodes in flight; the records are the same.

    Returns:
        Per run, in ``runs`` order, the records of every item, in ``items`` order.
    """
    ids = [str(it.question.question_id) for it in items]
    tasks: list[tuple[int, QuestionItem]] = []
    queued: dict[str, RecordStore] = {}  # run id -> the store its episodes are saved to
    for r, (run, store) in enumerate(runs):
        # Runs with one id share one record file: evaluate its questions once.
        if run.run_id in queued:
            continue
        todo = [it for it, q in zip(items, ids, strict=True) if q not in store.records]
        if todo:
            if run.check is not None:
                run.check(components)
            tasks += [(r, it) for it in todo]
            queued[run.run_id] = store
    if tasks:
        watched = list(dict.fromkeys(it.question.question for r, it in tasks if runs[r][0].observes))
        if watched:
            # One encoder batch for all queries is much faster than one call per episode (MiniLM on CPU).
            components.obs_builder.embed_many(watched)
        commit = git_commit()
        pending: dict[int, list[dict[str, Any]]] = {r: [] for r, _ in tasks}

        def episode(task: tuple[int, QuestionItem]) -> EpisodeRecord:
            run, item = runs[task[0]][0], task[1]
            return run_episode(item, run.decide_for(item), components, run.cost_lambda, run.observes)

        def keep(index: int, record: EpisodeRecord) -> None:
            # Called as each episode finishes (one at a time): with N in flight, a stop loses at most
            # each run's unsaved chunk, and the calls of every finished episode are in the call cache.
            r = tasks[index][0]
            rec = record.to_dict()
            rec["run_id"] = runs[r][0].run_id
            # Records outlive code changes the version tags miss: keep the commit that made each one.
            rec["git_commit"] = commit
            pending[r].append(rec)
            if len(pending[r]) >= chunk:
                flush(r)

        def flush(r: int) -> None:
            store = runs[r][1]
            store.add(pending[r])
            store.save()
            pending[r].clear()

        label = desc or (runs[tasks[0][0]][0].run_id if len(pending) == 1 else f"{len(pending)} runs")
        try:
            map_in_flight(
                episode, tasks, concurrency=concurrency, on_result=keep, progress=progress, desc=label
            )
        finally:
            for r in pending:
                flush(r)
    # A run that shares another's id reads the records that one wrote.
    return [queued.get(run.run_id, store).get(ids) for run, store in runs]


def evaluate_systems(
    systems: Sequence[SystemSpec],
    items: Sequence[QuestionItem],
    components: EnvComponents,
    store_dir: str | Path,
    *,
    chunk: int = 1,
    progress: bool = True,
    concurrency: int = 1,
) -> list[SystemRuns]:
    """Evaluate every run of every system (using the record cache) and collect :class:`SystemRuns`.

    Every run's missing questions go through one queue (:func:`evaluate_runs`).
    """
    root = Path(store_dir)
    runs = [(run, RecordStore(root / f"{safe_id(run.run_id)}.jsonl")) for s in systems for run in s.runs]
    records = iter(
        evaluate_runs(runs, items, components, chunk=chunk, progress=progress, concurrency=concurrency)
    )
    out = []
    for sys_spec in systems:
        done = [Run(run.run_id, next(records), run.seed) for run in sys_spec.runs]
        out.append(SystemRuns(sys_spec.name, sys_spec.kind, done, dict(sys_spec.params)))
    return out


def mean_of(records: Sequence[Mapping[str, Any]], key: str) -> float:
    """Mean of one numeric field over records (NaN when empty)."""
    vals = [float(r[key]) for r in records if r.get(key) is not None]
    return float(np.mean(vals)) if vals else float("nan")
