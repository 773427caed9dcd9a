"""One training run, from a resolved config dict to an exported router and a validation report."""

from __future__ import annotations

import copy
import functools
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import yaml
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import CallbackList

from benchmarks.registry import get_benchmark
from benchmarks.splits import split_digest
from common.atomic import atomic_write_json, atomic_write_text
from common.atomic_dir import free_space
from common.config_error import ConfigError
from common.provenance import run_metadata
from common.redact import REDACTED, redact, redact_argv, redacted_placeholders
from envs.components import make_components
from envs.question_bank import question_bank_from
from envs.reward import RewardShaper
from envs.rollout import evaluate_policy
from modules.tier import Tier
from policies.sb3_policy import router_policy_kwargs
from policies.training.callbacks import (
    CheckpointCallback,
    EpisodeStatsCallback,
    ValidationCallback,
    cache_counts,
)
from policies.training.checkpoint import (
    accepted_config_hashes,
    check_checkpoint,
    check_resume_data,
    checkpoint_step,
    config_hash,
    load_checkpoint,
    pending_log_value,
    resolve_checkpoint,
    save_checkpoint,
)
from policies.training.config import lam_tag
from policies.training.failure_budget import FailureBudget
from policies.training.guard import ship_fixed_path
from policies.training.interrupt import GracefulStop, StopOnSignal, TrainingInterrupted, resume_command
from policies.training.progress_lines import ProgressLinesCallback
from policies.training.rundir import RunDirError, check_run_dir, claim_run_dir
from policies.training.settings import Config, parse_config
from policies.training.tracking import Tracker, trim_logs_after
from policies.training.vec_env import build_vec_env


def _bank_config(cfg: Mapping[str, Any], limit: int | None) -> dict[str, Any]:
    out = copy.deepcopy(dict(cfg))
    qb = dict(out.get("question_bank") or {})
    qb["limit"] = limit
    out["question_bank"] = qb
    return out


def _data_files(config: Config) -> list[Path]:
    bench = config.benchmark
    return list(get_benchmark(bench.name, data_dir=config.data_dir, **bench.options).data_files())


def export_metadata(config: Config, components: Any, provenance: Mapping[str, Any]) -> dict[str, Any]:
    """What every exported router records about how it was trained."""
    return {
        "run_name": config.run_name,
        "benchmark": components.benchmark,
        "strategy": config.strategy.name,
        "encoder": components.encoder.name,
        # cost_lambda and cost_lambdas (a λ-conditioned router's trained and validated λ values).
        **components.cost_weight.to_metadata(),
        "cost_unit": config.cost.unit,
        "task_metric": components.task_metric,
        "backend": redact(dict(config.backend)),
        "seed": config.seed,
        "observation_spec": components.obs_builder.spec.to_dict(),
        "provenance": dict(provenance),
    }


def _write_run_record(
    run_dir: Path,
    cfg: Mapping[str, Any],
    provenance: Mapping[str, Any],
    hydra_overrides: Sequence[str] | None,
    resumed_from: int | None = None,
) -> None:
    """``config.yaml``, ``run_metadata.json`` and (from ``train.py``) ``.hydra/``, secrets redacted.

    A resume never rewrites the record of what the run was: it adds ``run_metadata-from-<step>.json``
    (this piece's config, command, commit, packages and data checksums) beside it, as it adds
    ``progress-from-<step>.csv`` beside ``progress.csv``.
    """
    try:
        _write_record_files(run_dir, cfg, provenance, hydra_overrides, resumed_from)
    except OSError as exc:
        raise RunDirError(
            f"{run_dir}: the run record could not be written ({exc.strerror or exc}: "
            f"{exc.filename or run_dir}); {free_space(run_dir)} (disk full?); nothing was trained yet"
        ) from exc


def _write_record_files(
    run_dir: Path,
    cfg: Mapping[str, Any],
    provenance: Mapping[str, Any],
    hydra_overrides: Sequence[str] | None,
    resumed_from: int | None,
) -> None:
    if resumed_from is not None and (run_dir / "run_metadata.json").is_file():
        piece = {**provenance, "resumed_from_step": resumed_from}
        if hydra_overrides is not None:
            piece["overrides"] = redact_argv(list(hydra_overrides))
        atomic_write_json(run_dir / f"run_metadata-from-{resumed_from}.json", piece)
        return
    public = yaml.safe_dump(redact(dict(cfg)), sort_keys=False)
    atomic_write_text(run_dir / "config.yaml", public)
    atomic_write_json(run_dir / "run_metadata.json", provenance)
    if hydra_overrides is not None:
        # Hydra's own .hydra/ would be written before any check (configs/config.yaml turns it off).
        atomic_write_text(run_dir / ".hydra" / "config.yaml", public)
        overrides = redact_argv(list(hydra_overrides))
        atomic_write_text(run_dir / ".hydra" / "overrides.yaml", yaml.safe_dump(overrides))


#: ``report(metrics, checkpoint_dir)``: called after each checkpoint that follows a new validation.
Reporter = Callable[[dict[str, float], Path], None]

#: The validation numbers a reporter receives (when the validation has them).
REPORTED_METRICS = ("f1", "em", "module_cost", "high_share", "p_high", "objective")


def train(
    cfg: Mapping[str, Any], hydra_overrides: Sequence[str] | None = None, report: Reporter | None = None
) -> dict[str, Any]:
    """Train one router; return a summary dict (also written to ``run_dir/result.json``).

    Args:
        cfg: The resolved config (``OmegaConf.to_container(cfg, resolve=True)``).
        hydra_overrides: The command line's overrides (``train.py``), saved to ``.hydra/``.
        report: Called with the latest validation (``score``, ``step`` and :data:`REPORTED_METRICS`)
            and the checkpoint directory each time a checkpoint follows a new validation: how a
            Ray Tune trial reports to its scheduler (``scale.sweep_ray``).

    Returns:
        ``run_name``, ``run_dir``, ``router`` (path), ``validation`` (best summary),
        ``cost_lambda``, ``cost_lambdas`` (λ-conditioned runs), ``seed``, ``timesteps``,
        ``llm_calls``, ``cache_hits``,
        ``cache_hit_rate``, ``wall_s`` and per-phase timings.
    """
    t0 = time.perf_counter()
    cfg = copy.deepcopy(dict(cfg))
    if placeholders := redacted_placeholders(cfg):
        raise ConfigError(
            f"{', '.join(placeholders)}: {REDACTED!r} is the placeholder printed in place of a secret; give "
            "the secret itself again (a rotated one is fine), or keep it in the environment and name the "
            "variable (backend.api_key_env)"
        )
    config = parse_config(cfg)
    ts, ps, ws, seed = config.train, config.ppo, config.wandb, config.seed
    run_name = config.run_name
    run_dir = Path(config.run_dir).resolve()

    # -- checks that need no model: nothing is written into run_dir before they all pass --
    chash = config_hash(cfg)
    accepted_hashes = accepted_config_hashes(cfg)
    # Resolve the checkpoint before loading any model, so a bad path fails in a second.
    ckpt = resolve_checkpoint(config.resume) if config.resume else None
    if ckpt is not None:
        ckpt_state = check_checkpoint(ckpt, accepted_hashes, ts.n_envs, config=cfg)
    check_run_dir(run_dir, ckpt, config.overwrite)
    provenance = run_metadata(cfg, _data_files(config))
    if ckpt is not None:
        check_resume_data(ckpt, ckpt_state, provenance["data_checksums"])
    resumed_from = checkpoint_step(ckpt) if ckpt is not None else None
    csv_name = "progress.csv" if resumed_from is None else f"progress-from-{resumed_from}.csv"
    # One line per training episode (what was chosen for which question), per piece like the CSV.
    episodes_name = csv_name.replace("progress", "episodes").replace(".csv", ".jsonl")

    # -- components and question banks -------------------------------------------------
    components = make_components(cfg)
    vec_env = None
    tracker = None
    lock = None
    try:
        train_items = question_bank_from(
            _bank_config(cfg, ts.train_limit), ts.train_split, components.encoder
        )
        val_items = question_bank_from(_bank_config(cfg, ts.val_limit), ts.val_split, components.encoder)
        overlap = {(it.sample_id, it.question.question_id) for it in train_items} & {
            (it.sample_id, it.question.question_id) for it in val_items
        }
        if overlap:
            raise ValueError(f"validation questions overlap the training questions: {sorted(overlap)[:5]}")
        # Which questions the run trained and selected on: sizes and a fingerprint of the ids, so two runs
        # (or a run and a paper) can be checked for the same sets without the data.
        provenance["question_sets"] = {
            role: {"split": split, "questions": len(items), "ids_sha256": split_digest(
                [f"{it.sample_id}/{it.question.question_id}" for it in items])}
            for role, split, items in (
                ("train", ts.train_split, train_items), ("val", ts.val_split, val_items)
            )
        }  # fmt: skip

        # -- everything checked: own the run directory, then write into it ------------------
        lock, repairs = claim_run_dir(run_dir, ckpt, config.overwrite)
        for line in repairs:
            print(line)
        if ckpt is not None and ckpt.parent == run_dir / "checkpoints" and ckpt.name != "last":
            ckpt = run_dir / "checkpoints" / "last"  # the interrupted swap's copy, now restored
        _write_run_record(run_dir, cfg, provenance, hydra_overrides, resumed_from)
        if resumed_from is not None:  # the logs describe the run the checkpoint holds, nothing it lost
            for line in trim_logs_after(run_dir, resumed_from):
                print(f"resume: {line}")
        t_setup = time.perf_counter() - t0

        # After the memories are built (the encoder may use every core), before the policy exists:
        # the router MLP is tiny and a fixed thread count keeps its arithmetic reproducible.
        if ts.torch_threads:
            torch.set_num_threads(ts.torch_threads)
        vec_env = build_vec_env(train_items, cfg, ts.n_envs, seed, ts.vec_env, components)
        weight = components.cost_weight.to_metadata()
        tags = [
            components.benchmark,
            config.strategy.name,
            lam_tag(weight["cost_lambda"], weight["cost_lambdas"] or None),
            f"seed{seed}",
        ]
        tracker = Tracker(
            run_dir, run_name, ws, redact(cfg), verbose=ts.verbose, csv_name=csv_name, tags=tags
        )
        budget = FailureBudget(ts.max_failure_rate, str(redact(dict(config.backend))))
        hits0, miss0 = cache_counts(components.cache)

        # SB3's bar (rich) draws nothing into a file or pipe: print plain lines there instead.
        bar = ts.progress_bar and sys.stdout.isatty()
        lines = ts.progress_bar and not bar
        validation = ValidationCallback(
            val_items,
            components,
            functools.partial(evaluate_policy, concurrency=ts.eval_concurrency),
            run_dir,
            lambda: export_metadata(config, components, provenance),
            eval_freq=ts.eval_freq,
            select_metric=ts.select_metric,
            verbose=max(ts.verbose, int(lines)),
            check_summary=budget.check_validation,
            reward_shaper=RewardShaper(config.cost),
        )
        ckpt_dir = run_dir / "checkpoints" / "last"

        reported = {"step": -1}

        def save(model: PPO) -> Path:
            meta = {
                "run_name": run_name,
                "config_hash": chash,
                "data_checksums": provenance["data_checksums"],
            }
            path = save_checkpoint(ckpt_dir, model, vec_env, validation.state_dict(), meta)
            last = validation.history[-1] if validation.history else None
            if report is not None and last is not None and last["step"] > reported["step"]:
                reported["step"] = last["step"]
                metrics = {"score": float(last["score"]), "step": float(last["step"])}
                numbers = {k: last.get(k) for k in REPORTED_METRICS}
                metrics |= {k: float(v) for k, v in numbers.items() if isinstance(v, int | float)}
                report(metrics, path)
            return path

        # -- model: fresh or resumed -----------------------------------------------------
        if ckpt is not None:
            model, state = load_checkpoint(ckpt, vec_env, ts.device, accepted_hashes)
            validation.load_state_dict(state["validation"])
            print(f"resuming from {ckpt} at step {model.num_timesteps}")
        else:
            policy = ps.policy
            policy_kwargs = router_policy_kwargs(
                components.obs_builder.spec,
                hidden=policy.hidden,
                latent=policy.latent,
                pi_layers=policy.pi_layers,
                vf_layers=policy.vf_layers,
                activation=policy.activation,
            )
            model = PPO(
                "MlpPolicy",
                vec_env,
                policy_kwargs=policy_kwargs,
                seed=seed,
                device=ts.device,
                verbose=0,
                **ps.ppo_kwargs(),
            )
        model.set_logger(tracker.logger)
        if ckpt is not None:  # the last update's values, which the saved run had not written yet
            for key, entry in (state.get("pending_log") or {}).items():
                value, exclude = pending_log_value(entry)
                tracker.logger.record(key, value, exclude=exclude)
        remaining = ts.total_timesteps - int(model.num_timesteps)
        stop = GracefulStop()
        checkpoints = CheckpointCallback(save, ts.checkpoint_freq, stop_requested=lambda: stop.requested)
        # A stop asked for at any point, the end of training included, skips the final validation: the
        # checkpoint saved at the end holds the finished training, and its resume runs the validation.
        validation.skip_final = lambda: checkpoints.stopped or stop.requested
        callbacks = CallbackList(
            [
                StopOnSignal(lambda: checkpoints.stopped),
                EpisodeStatsCallback(components.cache, episodes_path=run_dir / episodes_name),
                # After the episode statistics (it prints them), before validation (it announces it).
                *([ProgressLinesCallback(ts.total_timesteps)] if lines else []),
                budget,
                validation,
                checkpoints,
            ]
        )
        t1 = time.perf_counter()
        if remaining > 0:
            with stop.installed():
                model.learn(
                    total_timesteps=remaining,
                    callback=callbacks,
                    progress_bar=bar,
                    reset_num_timesteps=ckpt is None,
                    log_interval=1,
                )
            # The final validation runs in on_training_end, after SB3's last dump.
            tracker.logger.dump(model.num_timesteps)
            if stop.signal_name is not None:
                command = resume_command(redact_argv(list(hydra_overrides or [])), run_dir)
                raise TrainingInterrupted(
                    f"{stop.signal_name} at step {checkpoints.last_save_step}: checkpoint saved to "
                    f"{ckpt_dir}; continue with: {command}",
                    stop.signal_name,
                )
        else:
            # A finished run's last update was logged by the end-of-run dump, which resume trims with the
            # other rows no rollout holds; the checkpoint carries those values, so write them back.
            tracker.logger.dump(model.num_timesteps)
            print(
                f"nothing to do: the checkpoint is at {model.num_timesteps} >= {ts.total_timesteps} timesteps"
            )
            # Attached to the restored model and env: the closing verdict and the guard score validation
            # with the reward statistics the run trained with.
            validation.init_callback(model)
            if validation.needs_final(int(model.num_timesteps)):
                # The run was stopped after its training, before its final validation: run it now.
                validation.num_timesteps = int(model.num_timesteps)  # set by on_step(), which ran in learn()
                validation.validate()
                tracker.logger.dump(model.num_timesteps)
                save(model)  # the validation history now holds it: a second resume does not repeat it
        t_learn = time.perf_counter() - t1

        # Says whether the selected router is more than a fixed tier path (issue #14), with the
        # fixed paths measured on the same validation questions; before the call counts, which
        # include its calls.
        verdict = validation.fixed_path_verdict()
        # The guard: the learned router ships only where validation vouches for it over the fixed paths.
        guard = validation.vouch_for_router(ts.guard, Tier.parse(config.actions.max_tier))
        if guard is not None and guard["ships"] == "fixed":
            ship_fixed_path(validation.router_dir, run_dir / "router_learned", guard)
        hits1, miss1 = cache_counts(components.cache)
        calls = (hits1 - hits0) + (miss1 - miss0)
        _, md_report = validation.write_report()
        best = validation.best_summary or {}
        result = {
            "run_name": run_name,
            "run_dir": str(run_dir),
            "router": str(validation.router_dir),
            "checkpoint": str(ckpt_dir),
            "report": str(md_report),
            "benchmark": components.benchmark,
            "strategy": config.strategy.name,
            **components.cost_weight.to_metadata(),
            "seed": seed,
            "timesteps": int(model.num_timesteps),
            "n_train_questions": len(train_items),
            "n_val_questions": len(val_items),
            "select_metric": ts.select_metric,
            "best_score": validation.best_score,
            "best_step": validation.best_step,
            "validation": {k: v for k, v in best.items() if k != "tiers"},
            "llm_calls": calls,
            "cache_hits": hits1 - hits0,
            "cache_hit_rate": (hits1 - hits0) / calls if calls else 0.0,
            "failed_calls": budget.totals(),
            "seconds": {
                "setup": t_setup,
                "learn": t_learn,
                "validation": sum(h["seconds"] for h in validation.history),
            },
            "wall_s": time.perf_counter() - t0,
            "fixed_path_verdict": verdict,
            "guard": guard,
        }
        atomic_write_json(run_dir / "result.json", result)
        tracker.summary(
            {f"best/{k}": v for k, v in result["validation"].items() if isinstance(v, (int, float))}
            | {
                "verdict": " ".join(final_lines(verdict, validation.best_summary is not None)),
                "llm_calls": calls,
                "llm_calls_replayed": hits1 - hits0,
                "llm_calls_computed": miss1 - miss0,
                "wall_s": result["wall_s"],
                "timesteps": result["timesteps"],
                "router": result["router"],
            }
        )
        tracker.log_outputs(
            validation.router_dir,
            ckpt_dir,
            [md_report, run_dir / "validation.json", run_dir / episodes_name, run_dir / "result.json"],
            {"config": redact(cfg), "validation": result["validation"], "timesteps": result["timesteps"]},
        )
        _print_result(result, md_report)
        print(budget.final_line())
        print("\n".join(final_lines(verdict, validation.best_summary is not None)))
        if guard is not None:
            print("\n".join(guard["lines"]))
        return result
    finally:
        if tracker is not None:
            tracker.finish()
        if vec_env is not None:
            vec_env.close()
        components.close()
        if lock is not None:
            lock.release()


def final_lines(verdict: Mapping[str, Any] | None, validated: bool) -> list[str]:
    """The run's last lines: the fixed-path verdict, or what the router is when there is none."""
    if verdict:
        return list(verdict["lines"])
    if not validated:
        return [
            "router: not validated yet, so nothing was exported; the run validates when it reaches "
            "train.total_timesteps (resume with a larger value)"
        ]
    return ["router: routes by question, not a fixed tier path"]


def _print_result(result: Mapping[str, Any], md_report: Path) -> None:
    v = result["validation"]
    cwd = Path(os.getcwd())

    def rel(p: str) -> str:
        try:
            return str(Path(p).relative_to(cwd))
        except ValueError:
            return p

    print(
        f"\n== {result['run_name']}: {result['timesteps']} timesteps in {result['wall_s']:.0f} s "
        f"(setup {result['seconds']['setup']:.0f} s, learning {result['seconds']['learn']:.0f} s)"
    )
    if v:
        print(
            f"validation ({result['n_val_questions']} held-out questions, "
            f"best at step {result['best_step']}): "
            f"F1 {v.get('f1', float('nan')):.4f}, module cost {v.get('module_cost', float('nan')):.4g}, "
            f"HIGH share {v.get('high_share', float('nan')):.2f}"
        )
        for lam, pv in (v.get("per_lambda") or {}).items():
            print(
                f"  at λ={lam}: objective {pv['objective']:.4f}, F1 {pv['f1']:.4f}, "
                f"module cost {pv['module_cost']:.4g}, HIGH share {pv['high_share']:.2f}"
            )
    print(
        f"LLM calls {result['llm_calls']}: {result['cache_hits']} replayed from the call cache "
        f"({result['cache_hit_rate']:.0%}), {result['llm_calls'] - result['cache_hits']} computed"
    )
    # No validation has run (e.g. a resume at the checkpoint's step): no router was exported.
    router = rel(result["router"]) if v else "none exported yet (no validation has run)"
    print(f"router:            {router}")
    print(f"checkpoint:        {rel(result['checkpoint'])}  (resume=<this path>)")
    print(f"validation report: {rel(str(md_report))}")
