"""SB3 callbacks: episode statistics, held-out validation with best-router export, checkpoints."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

from common.atomic import atomic_write_json, atomic_write_text
from envs.reward import RewardShaper
from modules.tier import Tier, tiers_label
from policies.baselines import FixedTierPolicy
from policies.export import export_router
from policies.training.guard import guard_paths, vouch
from policies.training.summary import (
    flat_metrics,
    markdown_report,
    selection_score,
    summarize_records,
    tier_ratios,
)
from policies.training.vec_env import sync_reward_statistics
from policies.training.verdict import fixed_path, fixed_path_verdict


def ppo_decide(model: Any, probs_out: list[np.ndarray] | None = None) -> Callable[[np.ndarray, str], Tier]:
    """``decide(obs, module) -> Tier`` from a PPO model's deterministic (argmax) action.

    Args:
        model: The PPO model.
        probs_out: If given, each decision's tier probabilities (LOW, MID, HIGH) are appended;
            tiers above the action space's ``actions.max_tier`` get 0. The argmax hides how close
            a tier came to being chosen; the probabilities show a policy moving away from HIGH
            before its argmax flips.
    """

    def decide(obs: np.ndarray, module: str) -> Tier:
        if probs_out is None:
            action, _ = model.predict(obs, deterministic=True)
            return Tier(int(action))
        # One forward pass: PPO's deterministic action is the argmax of these probabilities.
        obs_t, _ = model.policy.obs_to_tensor(obs)
        with torch.no_grad():
            probs = model.policy.get_distribution(obs_t).distribution.probs.reshape(-1)
        p = probs.cpu().numpy().astype(np.float64)
        probs_out.append(np.pad(p, (0, len(Tier) - p.size)))
        return Tier(int(torch.argmax(probs)))

    return decide


def cache_counts(cache: Any | None) -> tuple[int, int]:
    """``(hits, misses)`` of a ``CallCache`` so far (``(0, 0)`` without one)."""
    if cache is None:
        return (0, 0)
    return int(getattr(cache, "hits", 0)), int(getattr(cache, "misses", 0))


class EpisodeStatsCallback(BaseCallback):
    """Log per-rollout means of the training episodes' reward parts, costs and tiers.

    Args:
        cache: The shared ``CallCache`` (its hit/miss counters give the rollout's hit rate), or None.
        episodes_path: Optional JSONL file that gets one line per training episode (step,
            question, category, λ, tiers, F1, costs, reward parts), appended after each rollout,
            so what the router chose for which question can be analysed after the run.
    """

    def __init__(
        self, cache: Any | None = None, verbose: int = 0, episodes_path: str | Path | None = None
    ) -> None:
        super().__init__(verbose)
        self.cache = cache
        self.episodes_path = Path(episodes_path) if episodes_path is not None else None
        self._rows: list[dict[str, Any]] = []
        self._steps: list[int] = []
        self._cache_mark = (0, 0)

    def _on_rollout_start(self) -> None:
        self._rows = []
        self._steps = []
        self._cache_mark = cache_counts(self.cache)

    def _on_step(self) -> bool:
        for info, done in zip(self.locals.get("infos", []), self.locals.get("dones", []), strict=False):
            if done and "reward_terms" in info:
                self._rows.append(info)
                self._steps.append(int(self.num_timesteps))
        return True

    def _append_episodes(self) -> None:
        if self.episodes_path is None:
            return
        lines = []
        for step, info in zip(self._steps, self._rows, strict=True):
            terms = info["reward_terms"]
            lines.append(
                json.dumps(
                    {
                        "step": step,
                        "question_id": info["question_id"],
                        "category": info["category"],
                        "cost_lambda": terms["cost_lambda"],
                        "tiers": tiers_label(list(info["tiers"].values())),
                        "f1": info["f1"],
                        "module_cost": info["cost"]["module"],
                        "answer_cost": info["cost"]["answer"],
                        "reward": terms["reward"],
                        "task_baseline": terms.get("task_baseline", 0.0),
                        "cache_hit_rate": info["cache_hit_rate"],
                    },
                    sort_keys=True,
                )
            )
        # An append-only log: a crash loses at most the rollout in flight, and a resumed run
        # writes its own file (episodes-from-<step>.jsonl), as the progress CSV does.
        with self.episodes_path.open("a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    def _on_rollout_end(self) -> None:
        rows = self._rows
        if not rows:
            return
        self._append_episodes()
        log = self.logger.record
        terms: dict[str, list[float]] = defaultdict(list)
        for info in rows:
            for key, value in info["reward_terms"].items():
                terms[key].append(float(value))
        for key in ("r_task", "r_cost", "alpha", "cost_term", "reward"):
            if terms.get(key):
                log(f"reward/{key}", float(np.mean(terms[key])))
        log("cost/raw", float(np.mean(terms["raw_cost"])))
        log("cost/normalised", float(np.mean(terms["cost_norm"])))
        for key in ("module", "answer", "total"):
            log(f"cost/{key}", float(np.mean([info["cost"][key] for info in rows])))
        log("rollout/f1", float(np.mean([info["f1"] for info in rows])))
        log("rollout/episodes", len(rows))
        ratios = tier_ratios([tuple(Tier[name] for name in info["tiers"].values()) for info in rows])
        for key, share in ratios.items():
            log(f"tiers/{key}", share)
        hits, misses = cache_counts(self.cache)
        d_hits, d_miss = hits - self._cache_mark[0], misses - self._cache_mark[1]
        if d_hits + d_miss:
            log("cache/hit_rate", d_hits / (d_hits + d_miss))
        log("cache/episode_hit_rate", float(np.mean([info["cache_hit_rate"] for info in rows])))


class ValidationCallback(BaseCallback):
    """Validate on held-out questions; export the router when the metric improves.

    Args:
        items: Validation question bank.
        components: Env components (pipeline, answerer, ...; ``cost_weight`` gives the λ values
            to validate at).
        evaluate: ``envs.rollout.evaluate_policy``-compatible function.
        run_dir: Run directory; the best router goes to ``run_dir/router``.
        export_metadata: Returns the metadata dict stored with an exported router.
        eval_freq: Validate every this many timesteps.
        select_metric: ``objective`` (validation reward, see :meth:`_objective`), ``f1``, ``em``
            or ``judge``.
        check_summary: Called with each validation's summary, step and the failure reasons its
            episodes reported before anything is
            exported; raising stops the run (``failure_budget.FailureBudget.check_validation``).
        reward_shaper: The validation's own shaper (built from the run's ``cost`` section); before
            each validation it is synced from the training env (:func:`sync_reward_statistics`)
            and scores the objective. None: the objective is the task metric alone.
    """

    def __init__(
        self,
        items: Sequence[Any],
        components: Any,
        evaluate: Callable[..., list[Any]],
        run_dir: Path,
        export_metadata: Callable[[], dict[str, Any]],
        eval_freq: int,
        select_metric: str = "objective",
        verbose: int = 0,
        check_summary: Callable[[dict[str, Any], int, list[str]], None] | None = None,
        reward_shaper: RewardShaper | None = None,
    ) -> None:
        super().__init__(verbose)
        self.reward_shaper = reward_shaper
        #: Asked at the end of training: True skips the final validation (an interrupted run).
        self.skip_final: Callable[[], bool] = lambda: False
        self.check_summary = check_summary
        self.items = list(items)
        self.components = components
        self.evaluate = evaluate
        self.run_dir = Path(run_dir)
        self.export_metadata = export_metadata
        self.eval_freq = int(eval_freq)
        self.select_metric = select_metric
        self.best_score: float | None = None
        self.best_step: int | None = None
        self.best_summary: dict[str, Any] | None = None
        self.last_eval_step = 0
        self.history: list[dict[str, Any]] = []

    @property
    def router_dir(self) -> Path:
        """Where the best router is exported."""
        return self.run_dir / "router"

    def state_dict(self) -> dict[str, Any]:
        """JSON-friendly state for checkpoints."""
        return {
            "select_metric": self.select_metric,
            "best_score": self.best_score,
            "best_step": self.best_step,
            "best_summary": self.best_summary,
            "last_eval_step": self.last_eval_step,
            "history": self.history,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`.

        If the checkpoint selected on another metric (checkpoints without the field selected on
        ``f1``), its best score is not comparable with this run's: the history is kept, the best
        is forgotten, and the next validation exports the router again.
        """
        self.last_eval_step = int(state.get("last_eval_step", 0))
        self.history = list(state.get("history", []))
        saved_metric = state.get("select_metric", "f1")
        if saved_metric != self.select_metric:
            print(
                f"note: the checkpoint selected on {saved_metric!r}, this run on {self.select_metric!r}; "
                "the best router will be chosen again from the next validation on"
            )
            self.best_score = self.best_step = self.best_summary = None
            return
        self.best_score = state.get("best_score")
        self.best_step = state.get("best_step")
        self.best_summary = state.get("best_summary")

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.num_timesteps - self.last_eval_step >= self.eval_freq:
            self.validate()

    def needs_final(self, step: int) -> bool:
        """Whether the validation at ``step``, the end of training, is still to run."""
        return self.last_eval_step != step or self.best_score is None

    def _on_training_end(self) -> None:
        if self.skip_final():  # an interrupted run: save and go, validation runs when it resumes
            return
        if self.needs_final(self.num_timesteps):
            self.validate()

    def validate(self) -> dict[str, Any]:
        """Run the validation split now; export the router if it is the best so far."""
        start = time.perf_counter()
        probs: list[np.ndarray] = []
        weight = self.components.cost_weight
        if self.verbose:
            # Validation runs without a bar and can take longer than a stretch of training.
            n_lam = len(weight.choices) if weight.conditioned else 1
            lams = f" × {n_lam} λ" if n_lam > 1 else ""
            print(
                f"[validation] step {self.num_timesteps}: {len(self.items)} questions{lams} ...", flush=True
            )
        if self.reward_shaper is not None and getattr(self, "training_env", None) is not None:
            sync_reward_statistics(self.training_env, self.reward_shaper)
        if not weight.conditioned:
            decide = ppo_decide(self.model, probs)
            records = self.evaluate(decide, self.items, self.components, progress=False)
            summary = summarize_records(records)
            summary["objective"] = self._objective(records, weight.default)
        else:
            records, per_lambda = [], {}
            for lam in weight.choices:
                # The same weights route differently at each λ: λ is an observation scalar.
                first = len(probs)
                decide = ppo_decide(self.model, probs)
                recs = self.evaluate(decide, self.items, self.components, progress=False, cost_lambda=lam)
                part = summarize_records(recs)
                per_lambda[f"{lam:g}"] = {
                    "objective": self._objective(recs, lam),
                    **{k: part[k] for k in ("f1", "em", "module_cost", "total_cost", "high_share")},
                    # P(HIGH) moves with λ before the argmax does.
                    "p_high": float(np.mean([p[int(Tier.HIGH)] for p in probs[first:]])),
                }
                records += recs
            summary = summarize_records(records)
            summary["objective"] = float(np.mean([v["objective"] for v in per_lambda.values()]))
            summary["per_lambda"] = per_lambda
        if probs:
            summary["p_high"] = float(np.mean([p[int(Tier.HIGH)] for p in probs]))
        score = selection_score(summary, self.select_metric)
        step = int(self.num_timesteps)
        self.last_eval_step = step
        improved = self.best_score is None or score > self.best_score
        entry = {"step": step, "score": score, "improved": improved, "seconds": time.perf_counter() - start}
        entry.update({k: v for k, v in summary.items() if k != "tiers"})
        self.history.append(entry)
        if self.check_summary is not None:
            self.check_summary(summary, step, [e for r in records for e in r.errors])
        for key, value in flat_metrics(summary, "val").items():
            self.logger.record(key, value)
        self.logger.record("val/seconds", entry["seconds"])
        if improved:
            self.best_score, self.best_step, self.best_summary = score, step, summary
            meta = self.export_metadata()
            meta["validation"] = {
                "step": step,
                "metric": self.select_metric,
                "score": score,
                "summary": summary,
            }
            export_router(self.model, self.router_dir, meta)
            atomic_write_json(self.run_dir / "validation_records_best.json", [r.to_dict() for r in records])
        self.logger.record("val/best_score", float(self.best_score))  # type: ignore[arg-type]
        self.write_report()
        if self.verbose:
            print(
                f"[validation] step {step}: {self.select_metric}={score:.4f} (best {self.best_score:.4f}), "
                f"F1 {summary.get('f1', float('nan')):.3f}, {entry['seconds']:.0f} s",
                flush=True,
            )
        return summary

    def fixed_path_verdict(self) -> dict[str, Any] | None:
        """If the best router always takes one tier path, compare it with the fixed paths.

        Runs the uniform paths (and the router's own) over the validation questions; see
        :func:`policies.training.verdict.fixed_path_verdict`. None when the router routes by
        question or no validation ran.
        """
        tiers = (self.best_summary or {}).get("tiers")
        path = fixed_path(tiers) if tiers else None
        if path is None:
            return None
        if self.reward_shaper is not None and getattr(self, "training_env", None) is not None:
            sync_reward_statistics(self.training_env, self.reward_shaper)

        def run(p: tuple[Tier, ...]) -> list[Any]:
            return self.evaluate(FixedTierPolicy(list(p)).decide, self.items, self.components, progress=False)

        return fixed_path_verdict(
            path,
            run,
            self._objective,
            self.components.cost_weight.values,
            str(self.components.task_metric),
            int(self.num_timesteps),
        )

    def vouch_for_router(self, spec: str, max_tier: Tier = Tier.HIGH) -> dict[str, Any] | None:
        """Compare the selected router with fixed paths on the validation questions (the guard).

        See :mod:`policies.training.guard`; ``spec`` is ``train.guard``, ``max_tier`` the run's
        ``actions.max_tier`` (dearer paths are not compared). None when the guard is off or no validation ran.
        """
        if spec == "off" or self.best_summary is None:
            return None
        if self.reward_shaper is not None and getattr(self, "training_env", None) is not None:
            sync_reward_statistics(self.training_env, self.reward_shaper)
        weight = self.components.cost_weight
        lams = list(weight.choices) if weight.conditioned else [weight.default]
        # The selected router's records, in validation order, λ after λ (read back after a resume).
        saved = self.run_dir / "validation_records_best.json"
        recs: list[Any] = json.loads(saved.read_text(encoding="utf-8"))
        n = len(self.items)
        if len(recs) != n * len(lams):
            raise ValueError(f"{saved}: {len(recs)} records for {n} questions × {len(lams)} λ")
        router_records = {lam: recs[i * n : (i + 1) * n] for i, lam in enumerate(lams)}
        path_records = {
            p: [r.to_dict() for r in self.evaluate(
                FixedTierPolicy(list(p)).decide, self.items, self.components, progress=False)]
            for p in guard_paths(spec, max_tier)
        }  # fmt: skip
        return vouch(router_records, path_records, self._per_question)

    def _per_question(self, record: Mapping[str, Any], cost_lambda: float) -> float:
        """One validation record's objective at ``cost_lambda`` (an ``EpisodeRecord.to_dict`` dict)."""
        metric = str(self.components.task_metric)
        if metric == "judge":
            judged = record.get("judge") is not None and not record.get("judge_failed")
            task = float(record["judge"]) if judged else 0.0
        else:
            task = float(record[metric])
        if self.reward_shaper is None or getattr(self, "training_env", None) is None:
            return task  # no shaper, or not attached to a model (unit use): the task metric alone
        cost = float(record["module_cost"]) + (
            float(record["answer_cost"]) if self.components.include_answer_cost else 0.0
        )
        return float(self.reward_shaper.evaluate(task, cost, cost_lambda))

    def _objective(self, records: Sequence[Any], cost_lambda: float) -> float:
        """Mean validation reward ``r_task + λ·α·r_cost`` at ``cost_lambda`` under training's statistics.

        The held-out questions are scored on the objective PPO optimises, with the cost
        normaliser window and α of the first training env as synced at the start of this
        validation (nothing is updated). At λ = 0 this is the task metric; for λ > 0 it stops a
        λ-sweep from selecting each run's checkpoint on F1 alone, which would ignore the cost the
        run was asked to save.
        """
        return float(np.mean([self._per_question(r.to_dict(), cost_lambda) for r in records]))

    def write_report(self) -> tuple[Path, Path]:
        """Write ``validation.json`` (history + best) and ``validation.md`` (short report)."""
        json_path = self.run_dir / "validation.json"
        md_path = self.run_dir / "validation.md"
        atomic_write_json(
            json_path,
            {
                "select_metric": self.select_metric,
                "best_score": self.best_score,
                "best_step": self.best_step,
                "best": self.best_summary,
                "history": self.history,
            },
        )
        selected = (
            f"validation {self.select_metric} = {self.best_score:.4f} at step {self.best_step}"
            if self.best_score is not None
            else "n/a"
        )
        text = markdown_report(
            f"Validation of the best router ({len(self.items)} held-out questions)",
            self.best_summary or {},
            {
                "selected on": selected,
                "router": str(self.router_dir),
                "evaluations": len(self.history),
            },
        )
        history_lines = ["", "| step | score | f1 | module_cost | high_share |", "|---|---|---|---|---|"]
        for h in self.history:
            cells = (
                f"{h['score']:.4f}",
                f"{h['f1']:.4f}",
                f"{h['module_cost']:.4g}",
                f"{h['high_share']:.2f}",
            )
            history_lines.append(f"| {h['step']} | " + " | ".join(cells) + " |")
        per_lambda = (self.best_summary or {}).get("per_lambda") or {}
        if per_lambda:
            history_lines += [
                "",
                "Best router at each λ of the λ-conditioned run:",
                "",
                "| λ | objective | f1 | module_cost | high_share | p_high |",
                "|---|---|---|---|---|---|",
            ]
            for lam, v in per_lambda.items():
                history_lines.append(
                    f"| {lam} | {v['objective']:.4f} | {v['f1']:.4f} | {v['module_cost']:.4g} | "
                    f"{v['high_share']:.2f} | {v.get('p_high', float('nan')):.3f} |"
                )
        atomic_write_text(md_path, text + "\n".join(history_lines) + "\n")
        return json_path, md_path


class CheckpointCallback(BaseCallback):
    """Save a resumable checkpoint every ``save_freq`` timesteps and at the end.

    Checkpoints are saved when a rollout *starts*: after the previous rollout's PPO update, so the
    weights, the optimizer and the random streams are exactly those the next rollout begins with,
    and a resumed run continues as the uninterrupted one would. Asked to stop (``stop_requested``,
    a signal), it saves at the next rollout start and sets :attr:`stopped`; training then ends at
    the next step without saving again.

    Args:
        save: ``save(model) -> Path`` writing the checkpoint (see ``policies.training.checkpoint``).
        save_freq: Timesteps between checkpoints.
        stop_requested: Whether the run was asked to stop (None: never).

    Attributes:
        stopped: A stop was requested and its checkpoint saved.
        last_save_step: ``num_timesteps`` of the last checkpoint.
    """

    def __init__(
        self,
        save: Callable[[Any], Path],
        save_freq: int,
        verbose: int = 0,
        stop_requested: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(verbose)
        self.save = save
        self.save_freq = int(save_freq)
        self.stop_requested = stop_requested or (lambda: False)
        self.last_save_step = 0
        self.stopped = False

    def _on_training_start(self) -> None:
        self.last_save_step = int(self.num_timesteps)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        if self.stop_requested() and not self.stopped:
            self._save()
            self.stopped = True
        elif self.num_timesteps - self.last_save_step >= self.save_freq:
            self._save()

    def _on_training_end(self) -> None:
        if not self.stopped:
            self._save()

    def _save(self) -> None:
        path = self.save(self.model)
        self.last_save_step = int(self.num_timesteps)
        if self.verbose:
            print(f"[checkpoint] step {self.num_timesteps}: {path}")
