"""Plain progress lines for training runs whose output is not a terminal.

SB3's progress bar draws with ``rich``, which renders nothing while stdout is a file or a pipe
(``nohup``, Slurm, CI logs): a two-hour training run then prints no line between the question
bank and the final report. This callback takes its place there and prints one line per rollout,
at most every ``min_interval_s`` seconds, with the numbers a user watches a run for.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from stable_baselines3.common.callbacks import BaseCallback


def format_duration(seconds: float) -> str:
    """``3725 -> '1h02m'``, ``125 -> '2m05s'``, ``9 -> '9s'`` (what a log line needs)."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def progress_line(step: int, total: int, elapsed_s: float, start_step: int, values: dict[str, Any]) -> str:
    """One progress line: steps, elapsed, the time left at this run's rate, the rollout's numbers.

    Args:
        step: Timesteps done (counting a resumed run's earlier steps).
        total: ``train.total_timesteps``.
        elapsed_s: Seconds since this process started learning.
        start_step: The step this process started at (0, or the checkpoint's step on resume);
            the rate counts only the steps this process ran.
        values: The SB3 logger's values of the rollout (``rollout/f1``, ``tiers/high_share``,
            ``cache/hit_rate``); missing keys are left out of the line.
    """
    parts = [f"[train] step {step}/{total} ({step / total:.0%})" if total else f"[train] step {step}"]
    parts.append(f"{format_duration(elapsed_s)} elapsed")
    done = step - start_step
    if done > 0 and step < total:
        # The rate falls as paths repeat and the call cache replays them, so this over-estimates.
        parts.append(f"~{format_duration(elapsed_s / done * (total - step))} left at this rate")
    labels = (("rollout/f1", "F1 {:.3f}"), ("tiers/high_share", "HIGH share {:.2f}"))
    parts += [fmt.format(float(values[key])) for key, fmt in labels if key in values]
    if "cache/hit_rate" in values:
        parts.append(f"{float(values['cache/hit_rate']):.0%} of LLM calls replayed")
    return " · ".join(parts)


class ProgressLinesCallback(BaseCallback):
    """Print :func:`progress_line` after rollouts, at most every ``min_interval_s`` seconds.

    Place it after the callback that records the rollout's statistics (``EpisodeStatsCallback``),
    so the logger holds this rollout's values when it prints.

    Args:
        total_timesteps: ``train.total_timesteps`` (the denominator of the line).
        min_interval_s: Fewest seconds between two lines; the first rollout and the end of
            training always print.
        stream: Where lines go (stdout).
        clock: Seconds counter (tests pass a fake one).
    """

    def __init__(
        self,
        total_timesteps: int,
        min_interval_s: float = 30.0,
        stream: TextIO | None = None,
        clock: Any = time.perf_counter,
    ) -> None:
        super().__init__(verbose=0)
        self.total_timesteps = int(total_timesteps)
        self.min_interval_s = float(min_interval_s)
        self.stream = stream
        self.clock = clock
        self._t0 = 0.0
        self._start_step = 0
        self._last_print: float | None = None

    def _on_training_start(self) -> None:
        self._t0 = self.clock()
        self._start_step = int(self.model.num_timesteps)
        self._last_print = None

    def _on_step(self) -> bool:
        return True

    def _print(self) -> None:
        now = self.clock()
        values = dict(self.logger.name_to_value)
        line = progress_line(
            int(self.model.num_timesteps), self.total_timesteps, now - self._t0, self._start_step, values
        )
        print(line, file=self.stream or sys.stdout, flush=True)
        self._last_print = now

    def _on_rollout_end(self) -> None:
        if self._last_print is None or self.clock() - self._last_print >= self.min_interval_s:
            self._print()

    def _on_training_end(self) -> None:
        self._print()
