"""Fault injection, issue 15 item 3: a dead LLM endpoint is not a successful run.

``backend.name=openai`` pointed at a closed port used to fail every HIGH and answer call, exit 0
and export a router, with no warning. The failure budget (policies/training/failure_budget.py)
prints failed/total calls at every validation and at the end and stops the run above
``train.max_failure_rate``.
"""

from __future__ import annotations

import re

import pytest

from common.config_error import ConfigError
from policies.training.failure_budget import FailureBudget, FailureBudgetExceeded, failure_rate_lower_bound
from policies.training.settings import TrainSettings
from scale.serving import free_port
from tests.reliability_support import RUN_NAME, config, one_line_error, run_cli
from tests.support import needs_locomo


@needs_locomo
def test_dead_endpoint_stops_the_run_before_any_router_exists(tmp_path):
    dead = f"http://user:hunter2@127.0.0.1:{free_port()}/v1"  # nothing listens there
    backend = [
        "backend.name=openai",
        "+backend.model=fake-llm",
        f"+backend.base_url={dead}",
        "+backend.max_retries=0",
        "+backend.timeout_s=2",
    ]
    proc = run_cli(tmp_path, *backend)
    line = one_line_error(proc)
    m = re.search(r"(\d+) of (\d+) LLM calls failed \(100% > train.max_failure_rate=0.2; at least \d+%", line)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) > 0, line
    assert "hunter2" not in line and "***REDACTED***" in line  # the message names the backend safely
    assert re.search(r"\[step 20\] validation LLM calls: (\d+)/\1 failed \(100%\)", proc.stdout), proc.stdout
    run = tmp_path / "runs" / RUN_NAME
    # the calls' failure reasons quote the URL: they reach episode records redacted, like the message
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and b"hunter2" in p.read_bytes()]
    assert not leaked, leaked
    assert not (run / "router").exists() and not (run / "checkpoints").exists()
    assert not (run / "result.json").exists()
    # Retrying the same command does not silently replace the failed run's record either.
    retry = one_line_error(run_cli(tmp_path, *backend))
    assert "no checkpoint to resume" in retry and "overwrite=true" in retry


@needs_locomo
def test_a_healthy_run_reports_its_failed_calls(tmp_path, capsys):
    from policies.training.loop import train

    result = train(config(tmp_path))
    out = capsys.readouterr().out
    assert re.search(r"\[step 20\] validation LLM calls: 0/\d+ failed \(0%\)", out), out
    totals = result["failed_calls"]
    assert totals["train_failed"] == 0 and totals["train_calls"] > 0 and totals["val_calls"] > 0
    assert f"failed LLM calls: training 0/{totals['train_calls']} (0%)" in out


def test_the_budget_is_a_configurable_share_of_one_validation(capsys):
    budget = FailureBudget(0.2, "fake")
    budget.check_validation({"failures": 2, "llm_calls": 10}, 20)  # 20%: at the limit, allowed
    assert "[step 20] validation LLM calls: 2/10 failed (20%)" in capsys.readouterr().out
    budget.check_validation({"failures": 4, "llm_calls": 10}, 30)  # 40% of 10: not above 20% with confidence
    stopped = r"5 of 10 LLM calls failed \(50% > train.max_failure_rate=0.2; at least 27% with 95% confidence"
    with pytest.raises(FailureBudgetExceeded, match=stopped):
        budget.check_validation({"failures": 5, "llm_calls": 10}, 40)
    FailureBudget(0.5).check_validation({"failures": 5, "llm_calls": 10}, 40)
    budget.check_validation({"failures": 0, "llm_calls": 0}, 60)  # an all-LOW policy makes no calls
    assert budget.totals()["val_failed"] == 11 and budget.totals()["val_calls"] == 30
    assert TrainSettings().max_failure_rate == 0.2
    with pytest.raises(ConfigError, match="max_failure_rate"):
        TrainSettings(max_failure_rate=1.5)


def test_a_small_models_unlucky_window_goes_on_and_an_outage_stops():
    """The README's sweep with SmolLM2 (7% of its calls fail to parse) stopped on 5 of 22 failed calls in one
    training window (23% > 20%): chance, not an outage. The budget now asks for 95% confidence."""
    assert failure_rate_lower_bound(5, 22) == pytest.approx(0.115, abs=0.001)
    assert failure_rate_lower_bound(0, 0) == 0.0 and failure_rate_lower_bound(0, 30) == 0.0
    assert failure_rate_lower_bound(22, 22) > 0.85 and failure_rate_lower_bound(1, 100) > 0.0

    class Record:
        def __init__(self, failures: int, calls: int) -> None:
            self.failures, self.calls = failures, calls
            self.errors = ("topic/HIGH: parse failure",) * failures

    def window(failed: int, calls: int, max_rate: float = 0.2) -> None:
        budget = FailureBudget(max_rate, "fake")
        budget.locals = {"infos": [{"record": Record(failed, calls)}], "dones": [True]}
        budget._on_step()
        budget.check_training(140)

    window(5, 22)  # goes on
    with pytest.raises(FailureBudgetExceeded, match=r"20 of 22 .*at least 76% with 95% confidence"):
        window(20, 22)
    with pytest.raises(FailureBudgetExceeded):  # a zero budget stops at the first failure
        window(1, 22, max_rate=0.0)


def test_the_final_line_says_what_the_failed_calls_were_and_what_they_did(capsys):
    """A small model's unparseable outputs are named as such, not left as a bare "9/155 failed"."""
    budget = FailureBudget(0.5, "fake")
    assert budget.final_line() == "failed LLM calls: training 0/0 (0%), validation 0/0 (0%)"
    truncated = "topic/HIGH: parse failure: truncated JSON with no complete 'items' item"
    reasons = [truncated, truncated, "answer: backend error: 500"]
    budget.check_validation({"failures": 3, "llm_calls": 10}, 20, reasons)
    line = budget.final_line()
    assert line.startswith("failed LLM calls: training 0/0 (0%), validation 3/10 (30%): ")
    assert "2 outputs that did not parse" in line and "1 calls the backend did not answer" in line
    assert f"e.g. {truncated!r}" in line and "fallback" in line
