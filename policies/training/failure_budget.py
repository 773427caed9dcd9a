"""The failure budget: a run whose LLM calls mostly fail stops instead of exporting a router."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from common.redact import redact_text


class FailureBudgetExceeded(RuntimeError):
    """Too many LLM calls failed; the message gives the counts and what to check."""


def _rate(failed: int, calls: int) -> float:
    return failed / calls if calls else 0.0


#: One-sided 95% normal quantile of :func:`failure_rate_lower_bound`.
_Z95 = 1.6448536269514722


def failure_rate_lower_bound(failed: int, calls: int) -> float:
    """The one-sided 95% Wilson lower bound of a failure rate seen as ``failed`` of ``calls``.

    A run stops only when this bound passes ``train.max_failure_rate``: a small model whose calls fail 7%
    of the time shows 5 of 22 failed (23%) in some window by chance (bound 11%: it goes on), while an outage
    shows 20 of 22 (bound 76%) or 5 of 5 validation calls (bound 65%) and stops.
    """
    if calls <= 0 or failed <= 0:  # nothing failed: exactly 0 (the formula leaves float dust)
        return 0.0
    p, n, z2 = failed / calls, calls, _Z95 * _Z95
    centre = p + z2 / (2 * n)
    spread = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z2 / n))


#: Training calls a window must hold before its failure rate can stop a run: a rollout of two
#: episodes with one failed call is not an outage.
MIN_WINDOW_CALLS = 20


def _reasons(counts: Counter[str]) -> str:
    if not counts:
        return ""
    top = "; ".join(f"{redact_text(reason)!r} ({n}x)" for reason, n in counts.most_common(3))
    return f"; why: {top}"


class FailureBudget(BaseCallback):
    """Count failed LLM calls of training episodes (as a callback) and check them and validations.

    A validation whose calls fail above the budget stops the run, and so do the training calls: every
    rollout end looks at the calls since the last look (once they number :data:`MIN_WINDOW_CALLS`), so
    a backend that dies mid-run stops it even when every validation replays its calls from the cache.
    "Above the budget" means with 95% confidence (:func:`failure_rate_lower_bound`): a window of a few
    dozen calls of a healthy small model passes 20% by chance.
    The messages name the first failure reasons the calls reported (``HTTP 500: boom``, a field of the
    reply that does not parse), not a guess.

    Args:
        max_rate: Largest tolerated share of failed calls in one validation, or in one window of
            training calls (0..1).
        backend: A short description of the LLM backend, for the error message.
    """

    def __init__(self, max_rate: float, backend: str = "", verbose: int = 0) -> None:
        super().__init__(verbose)
        self.max_rate = float(max_rate)
        self.backend = backend
        self.train_failed = self.train_calls = 0
        self.val_failed = self.val_calls = 0
        self._window_failed = self._window_calls = 0
        self._window_start = 0
        self._train_reasons: Counter[str] = Counter()
        self._all_reasons: Counter[str] = Counter()  # every failure of the run, for the final line

    def _on_step(self) -> bool:
        for info, done in zip(self.locals.get("infos", []), self.locals.get("dones", []), strict=False):
            record = info.get("record") if done else None
            if record is not None:
                self.train_failed += int(record.failures)
                self.train_calls += int(record.calls)
                self._window_failed += int(record.failures)
                self._window_calls += int(record.calls)
                self._train_reasons.update(record.errors)
                self._all_reasons.update(record.errors)
        return True

    def _on_rollout_end(self) -> None:
        self.check_training(int(self.num_timesteps))

    def check_training(self, step: int, *, final: bool = False) -> None:
        """Stop the run if the training calls since the last check fail above the budget.

        Args:
            step: The current timestep (for the message).
            final: The run is about to export its router: check whatever the window holds.

        Raises:
            FailureBudgetExceeded: The failure rate of at least :data:`MIN_WINDOW_CALLS` training calls
                (any number when ``final``) is above ``max_rate`` with 95% confidence.
        """
        failed, calls = self._window_failed, self._window_calls
        if calls < (1 if final else MIN_WINDOW_CALLS):
            return
        start, rate = self._window_start, _rate(failed, calls)
        self._window_failed = self._window_calls = 0
        self._window_start = step
        low = failure_rate_lower_bound(failed, calls)
        if low > self.max_rate:
            raise FailureBudgetExceeded(
                f"training steps {start}-{step}: {failed} of {calls} LLM calls failed ({rate:.0%} > "
                f"train.max_failure_rate={self.max_rate:g}; at least {low:.0%} with 95% confidence)"
                f"{_reasons(self._train_reasons)}; "
                f"LLM backend {self.backend}. Stopped before exporting a router. Fix the backend (or "
                "raise train.max_failure_rate to tolerate more failures)"
            )

    def check_validation(
        self, summary: Mapping[str, Any], step: int, reasons: Iterable[str] = ()
    ) -> None:
        """Print a validation's failed/total calls; raise if the rate passes the budget.

        Args:
            summary: The validation's summary (``failures``, ``llm_calls``).
            step: The timestep it ran at.
            reasons: The failure reasons its episodes reported.

        Raises:
            FailureBudgetExceeded: This validation's failure rate is above ``max_rate`` with 95% confidence.
        """
        failed, calls = int(summary.get("failures", 0)), int(summary.get("llm_calls", 0))
        reasons = list(reasons)
        self._all_reasons.update(reasons)
        self.val_failed += failed
        self.val_calls += calls
        rate = _rate(failed, calls)
        print(
            f"[step {step}] validation LLM calls: {failed}/{calls} failed ({rate:.0%}); "
            f"training so far: {self.train_failed}/{self.train_calls} failed",
            flush=True,
        )
        low = failure_rate_lower_bound(failed, calls)
        if low > self.max_rate:
            why = _reasons(Counter(reasons)) or (
                "; no reason was reported (dead endpoint, wrong base_url, model or key?)"
            )
            raise FailureBudgetExceeded(
                f"validation at step {step}: {failed} of {calls} LLM calls failed ({rate:.0%} > "
                f"train.max_failure_rate={self.max_rate:g}; at least {low:.0%} with 95% confidence){why}; "
                f"LLM backend {self.backend}. Stopped "
                "before exporting a router. Fix the backend, or raise train.max_failure_rate to "
                "tolerate more failures"
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
        """The end-of-run line: failed/total calls of training and of validation, and what they were.

        A failure is either a call the backend did not answer or an answer that did not parse (a small
        model that runs to its token limit inside a JSON item); both leave the module with its
        documented fallback and are scored as they are, so the line says which and what it means.
        """
        t, v = (self.train_failed, self.train_calls), (self.val_failed, self.val_calls)
        line = (
            f"failed LLM calls: training {t[0]}/{t[1]} ({_rate(*t):.0%}), "
            f"validation {v[0]}/{v[1]} ({_rate(*v):.0%})"
        )
        return line + explain_failures(self._all_reasons)


#: What a failure reason's kind means for the run (keyed by the text ``modules.llm_tier`` reports).
_FAILURE_KINDS = {
    "parse failure": "outputs that did not parse (the model ran out of tokens or off the format)",
    "prompt too long": "prompts too long for the model's context",
    "backend error": "calls the backend did not answer",
}


def explain_failures(reasons: Counter[str]) -> str:
    """What the failed calls were and what they did, or ``""`` where none failed.

    Args:
        reasons: Failure reasons (``"topic/HIGH: parse failure: ..."``) and how often each occurred.
    """
    if not reasons:
        return ""
    kinds: Counter[str] = Counter()
    for reason, n in reasons.items():
        kind = next((k for k in _FAILURE_KINDS if k in reason), None)
        kinds[_FAILURE_KINDS[kind] if kind else "other failures"] += n
    parts = ", ".join(f"{n} {what}" for what, n in kinds.most_common())
    example = redact_text(reasons.most_common(1)[0][0])
    return (
        f": {parts}, e.g. {example!r}. Each failed module used its fallback (the retrieved chunks, no "
        "relations, the template summary) and its episode was scored as it was; a larger HIGH-tier model "
        "fails less (the cpu_quality ladder's Qwen2.5-Coder-1.5B-Instruct less than SmolLM2-135M); "
        "train.max_failure_rate stops a run that fails more"
    )
