"""λ × seed sweep summary: a Hydra callback that writes one CSV row per finished job."""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from common.atomic import atomic_write_text
from common.redact import redact_yaml_file

#: CSV columns, in order.
COLUMNS = (
    "lambda",
    "seed",
    "status",
    "high_share",
    "val_p_high",
    "val_f1",
    "val_em",
    "val_judge",
    "val_module_cost",
    "val_total_cost",
    "llm_calls",
    "cache_hits",
    "cache_hit_rate",
    "timesteps",
    "wall_s",
    "run_name",
    "router",
    "error",
)


def _validation_columns(val: dict[str, Any]) -> dict[str, Any]:
    """The CSV's validation columns from a validation summary (or one λ's part of it)."""
    return {
        "high_share": val.get("high_share"),
        "val_p_high": val.get("p_high"),
        "val_f1": val.get("f1"),
        "val_em": val.get("em"),
        "val_judge": val.get("judge"),
        "val_module_cost": val.get("module_cost"),
        "val_total_cost": val.get("total_cost"),
    }


def summary_row(result: dict[str, Any]) -> dict[str, Any]:
    """One CSV row from ``policies.training.loop.train``'s result dict."""
    return {
        "lambda": result.get("cost_lambda"),
        "seed": result.get("seed"),
        "status": "completed",
        **_validation_columns(result.get("validation") or {}),
        "llm_calls": result.get("llm_calls"),
        "cache_hits": result.get("cache_hits"),
        "cache_hit_rate": result.get("cache_hit_rate"),
        "timesteps": result.get("timesteps"),
        "wall_s": result.get("wall_s"),
        "run_name": result.get("run_name"),
        "router": result.get("router"),
        "error": "",
    }


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """CSV rows of one result: one row, or one per λ for a λ-conditioned run (``cost.lambdas``).

    A conditioned run's rows share its run name, router, calls and timings; each carries that
    λ's validation numbers, so the CSV reads like a sweep of separately trained routers.
    """
    row = summary_row(result)
    per_lambda = (result.get("validation") or {}).get("per_lambda") or {}
    if not per_lambda:
        return [row]
    return [{**row, "lambda": float(lam), **_validation_columns(v)} for lam, v in per_lambda.items()]


def render_csv(rows: list[dict[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    """Rows as CSV text (floats with 6 significant digits) in ``columns``."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {k: (f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v)) for k, v in row.items()}
        )
    return buf.getvalue()


#: The environment variable that names the sweep a run belongs to (set by Hydra's ``-m`` through
#: :class:`SweepSummaryCallback` and by ``scale.sweep_ray``'s trials; unset for a single run).
SWEEP_ENV = "BUDGET_ROUTER_SWEEP"
#: The command that launched a run from elsewhere (a Ray trial: the sweep's command line, as JSON), which
#: trackers record instead of the worker process's own arguments.
LAUNCH_ENV = "BUDGET_ROUTER_LAUNCH_ARGV"


class SweepSummaryCallback(Callback):
    """Collect each multirun job's result and keep a CSV summary up to date.

    Args:
        summary_dir: Directory of the sweep CSVs (``runs/sweeps``).
    """

    def __init__(self, summary_dir: str = "runs/sweeps") -> None:
        self.summary_dir = Path(summary_dir)
        self.rows: list[dict[str, Any]] = []
        self.path: Path | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Name this sweep's CSV after its start time."""
        self.rows = []
        self.path = self.summary_dir / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        # Every job of this sweep carries its name (the wandb group and tag; policies.training.tracking).
        os.environ[SWEEP_ENV] = self.path.stem

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Redact secrets from the ``multirun.yaml`` Hydra's sweeper wrote before the first job."""
        sweep_dir = OmegaConf.select(config, "hydra.sweep.dir", default=None)
        if self.path is not None and sweep_dir is not None:
            redact_yaml_file(Path(str(sweep_dir)) / "multirun.yaml")

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """Append the job's row (or its error) and rewrite the CSV (multirun only)."""
        if self.path is None:
            return
        if job_return.status == JobStatus.COMPLETED and isinstance(job_return._return_value, dict):
            rows = summary_rows(job_return._return_value)
        else:
            row = dict.fromkeys(COLUMNS, None)
            row.update(
                status="failed",
                error=repr(job_return._return_value)[:300],
                run_name=str(config.get("run_name", "")),
                seed=config.get("seed"),
                **{"lambda": config.get("cost", {}).get("lambda")},
            )
            rows = [row]
        self.rows.extend(rows)
        atomic_write_text(self.path, render_csv(self.rows))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Print where the summary is."""
        if self.path is not None and self.rows:
            print(f"sweep summary ({len(self.rows)} runs): {self.path}")
