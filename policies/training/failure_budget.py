"""The failure budget: a run whose LLM calls mostly fail stops instead of exporting a router."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback


class FailureBudgetExceeded(RuntimeError):
    """Too many LLM calls failed; the message gives the counts and what to check."""


def _rate(failed: int, calls: int) -> float:
    return failed / calls if calls else 0.0


class FailureBudget(BaseCallback):
    """Count failed LLM calls of training episodes (as a callback) and check validations.

    Args:
        max_rate: Largest tolerated share of failed calls in one validation (0..1).
        backend: A short description of the LLM backend, for the error message.
    """

    def __init__(self, max_rate: float, backend: str = "", verbose: int = 0) -> None:
        super().__init__(verbose)
        self.max_rate = float(max_rate)
        self.backend = backend
        self.train_failed = self.train_calls = 0
        self.val_failed = self.val_calls = 0

    def _on_step(self) -> bool:
        for info, done in zip(self.locals.get("infos", []), self.locals.get("dones", []), strict=False):
            record = info.get("record") if done else None
            if record is not None:
                self.train_failed += int(record.failures)
                self.train_calls += int(record.calls)
        return True

    def check_validation(self, summary: Mapping[str, Any], step: int) -> None:
        """Print a validation's failed/total calls; raise if the rate passes the budget.

        Raises:
            FailureBudgetExceeded: ``failures / llm_calls > max_rate`` in this validation.
        """
        failed, calls = int(summary.get("failures", 0)), int(summary.get("llm_calls", 0))
        self.val_failed += failed
        self.val_calls += calls
        rate = _rate(failed, calls)
        print(
            f"[step {step}] validation LLM calls: {failed}/{calls} failed ({rate:.0%}); "
            f"training so far: {self.train_failed}/{self.train_calls} failed",
            flush=True,
        )
        if rate > self.max_rate:
            raise FailureBudgetExceeded(
                f"validation at step {step}: {failed} of {calls} LLM calls failed ({rate:.0%} > "
                f"train.max_failure_rate={self.max_rate:g}); the LLM backend {self.backend} is not "
                "answering (dead endpoint, wrong base_url, model or key?). Stopped before exporting a "
                "router. Fix the backend, or raise train.max_failure_rate to tolerate more failures"
            )

    def totals(self) -> dict[str, int]:
        """Failed and total LLM calls of training and validation episodes so far."""
        return {
            "train_failed": self.train_failed,
            "train_calls": self.train_calls,
            "val_failed": self.val_failed,
            "val_calls": self.val_calls,
        }

    def final_line(self) -> str:
        """The end-of-run line: failed/total calls of training and of validation."""
        t, v = (self.train_failed, self.train_calls), (self.val_failed, self.val_calls)
        return (
            f"failed LLM calls: training {t[0]}/{t[1]} ({_rate(*t):.0%}), "
            f"validation {v[0]}/{v[1]} ({_rate(*v):.0%})"
        )
