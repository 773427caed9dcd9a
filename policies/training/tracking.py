"""Logging: SB3's logger to CSV (always) and, when enabled, to Weights & Biases."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal, cast

from stable_baselines3.common.logger import CSVOutputFormat, HumanOutputFormat, KVWriter, Logger

from policies.training.settings import WandbSettings


class WandbOutputFormat(KVWriter):
    """An SB3 logger output that forwards each dump to ``wandb.log`` at step ``num_timesteps``.

    Args:
        run: The ``wandb`` run object.
    """

    def __init__(self, run: Any) -> None:
        self.run = run

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
        """Log the numeric values of one dump."""
        data = {}
        for key, value in sorted(key_values.items()):
            excluded = key_excluded.get(key)
            if excluded is not None and "wandb" in excluded:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                data[key] = value
            elif hasattr(value, "item") and getattr(value, "size", 2) == 1:
                data[key] = value.item()
        if data:
            self.run.log(data, step=int(step))

    def close(self) -> None:
        """Nothing to release (the run is finished by ``Tracker.finish``)."""


class Tracker:
    """Owns the SB3 logger and the optional wandb run of one training run.

    Args:
        run_dir: The run's output directory (the CSV log and wandb files go here).
        run_name: The run's name (also the wandb run name).
        settings: The ``wandb`` section.
        config: The resolved config (stored as the wandb run config).
        verbose: Also print SB3's table to stdout after every update.
        csv_name: File name of the CSV log inside ``run_dir``.
    """

    def __init__(
        self,
        run_dir: Path,
        run_name: str,
        settings: WandbSettings,
        config: dict[str, Any],
        verbose: int = 0,
        csv_name: str = "progress.csv",
    ) -> None:
        self.settings = settings
        self.run: Any = None
        # SB3's CSV writer truncates its file; a resumed run passes another name to keep the old one.
        formats: list[KVWriter] = [CSVOutputFormat(str(run_dir / csv_name))]
        if verbose:
            formats.append(HumanOutputFormat(sys.stdout))
        if settings.enabled:
            import wandb  # only here: a disabled run never imports wandb

            # A parsed config (policies.training.settings.Config) always names both.
            bench, strategy = config["benchmark"]["name"], config["strategy"]["name"]
            self.run = wandb.init(
                project=settings.project,
                entity=settings.entity,
                group=settings.group or f"{bench}__{strategy}",
                name=run_name,
                # WandbSettings checked the mode against WANDB_MODES, wandb's own literals.
                mode=cast(Literal["online", "offline", "disabled", "shared"], settings.mode),
                # $WANDB_DIR wins (wandb's own convention); otherwise the files stay in the run dir.
                dir=os.environ.get("WANDB_DIR") or str(run_dir),
                config=config,
                tags=list(settings.tags),
            )
            formats.append(WandbOutputFormat(self.run))
        self.logger = Logger(folder=str(run_dir), output_formats=formats)

    def summary(self, values: dict[str, Any]) -> None:
        """Store final values in the wandb run summary (no-op when wandb is disabled)."""
        if self.run is not None:
            for k, v in values.items():
                self.run.summary[k] = v

    def finish(self) -> None:
        """Close the logger files and finish the wandb run."""
        self.logger.close()
        if self.run is not None:
            self.run.finish()
            self.run = None
