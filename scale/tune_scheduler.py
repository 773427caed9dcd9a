"""ASHA within each λ: a Ray Tune scheduler that never compares trials of different cost weights.

A λ sweep reports the validation objective ``F1 + λ·α·r_cost`` to Tune. Its scale grows with λ (on the
fake stack, where F1 is 0, it *is* λ times the cost saved), so one ASHA over the whole grid judged a λ = 0
trial against λ = 3 ones and stopped it: the quality end of the frontier was what got cut. Here every λ
has its own ASHA; trials of one λ (seeds, and the settings a ``--search`` draws) compete, and since ASHA
lets the best trial at each rung go on, every λ keeps at least one trial that runs to its end.

Imported only when a sweep asks for ``--scheduler asha`` (Ray is an optional extra).
"""

from __future__ import annotations

import pickle
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler


class PerLambdaASHA(FIFOScheduler):
    """One :class:`ASHAScheduler` per value of ``trial.config[group_key]``; FIFO order across them.

    Args:
        group_key: The trial-config key whose values must never be compared (``"lambda"``).
        **asha_kwargs: Passed to each group's ``ASHAScheduler`` (metric, mode, time_attr,
            grace_period, reduction_factor, ...). ``max_t`` defaults to effectively unbounded and
            ``stop_last_trials`` to False: a trial is stopped for trailing its group, never for being
            long.
    """

    def __init__(self, group_key: str = "lambda", **asha_kwargs: Any) -> None:
        super().__init__()
        self.group_key = group_key
        self._kwargs = {"max_t": 10**6, "stop_last_trials": False, **asha_kwargs}
        self._metric = asha_kwargs.get("metric")
        self._mode = asha_kwargs.get("mode")
        self._groups: dict[str, ASHAScheduler] = {}

    def group(self, trial: Trial) -> ASHAScheduler:
        """The ASHA of ``trial``'s group (made on first use)."""
        key = repr(trial.config.get(self.group_key))
        if key not in self._groups:
            self._groups[key] = ASHAScheduler(**self._kwargs)
        return self._groups[key]

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take Tune's metric and mode unless given at construction (as ``ASHAScheduler`` does)."""
        if (self._metric and metric) or (self._mode and mode):
            return False
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        self._kwargs.update({k: v for k, v in (("metric", self._metric), ("mode", self._mode)) if v})
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """Register the trial with its group's ASHA."""
        self.group(trial).on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        """Continue or stop, judged against this trial's group only."""
        return str(self.group(trial).on_trial_result(tune_controller, trial, result))

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> None:
        """Record the final result in the trial's group."""
        asha = self.group(trial)
        if trial.trial_id in asha._trial_info:  # a restored sweep may not have seen the trial added
            asha.on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        """Forget a removed trial."""
        self.group(trial)._trial_info.pop(trial.trial_id, None)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        """An errored trial is retried by Tune (FailureConfig); its group keeps its record."""

    def debug_string(self) -> str:
        """One line per group."""
        lines = [f"ASHA per {self.group_key} ({len(self._groups)} groups)"]
        lines += [f"  {self.group_key}={key}: {asha.debug_string()}" for key, asha in self._groups.items()]
        return "\n".join(lines)

    def save(self, checkpoint_path: str) -> None:
        """Pickle the groups (Tune saves the scheduler with the experiment)."""
        with open(checkpoint_path, "wb") as fh:
            pickle.dump(self.__dict__, fh)

    def restore(self, checkpoint_path: str) -> None:
        """Restore what :meth:`save` wrote."""
        with open(checkpoint_path, "rb") as fh:
            self.__dict__.update(pickle.load(fh))

