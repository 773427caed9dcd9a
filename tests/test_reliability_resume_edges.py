"""Resume at the edges, and failures that cannot hide (reliability round 4, B1-B3 and B5).

* B1: resuming a finished run ("nothing to do") deleted the last PPO update's log row for good.
* B2: a resume on edited data went ahead silently and overwrote the run's record of its data; every
  resume rewrote ``config.yaml`` (a 200-step run's record said 40 after a ``total_timesteps=40`` resume).
* B3: a backend that died mid-run failed half the training calls while validation replayed its calls
  from the cache, and the run exported a router with exit 0.
* B5: a secret in the config blocked resume: the printed continue command (key redacted) and a rotated
  key both failed the config hash.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.config_error import ConfigError
from common.datadir import data_file
from policies.training.checkpoint import CheckpointError
from policies.training.failure_budget import FailureBudget, FailureBudgetExceeded
from tests.reliability_support import RUN_NAME, config, progress_values
from tests.support import needs_locomo

ALIGNED = ("ppo.n_steps=10", "ppo.batch_size=10", "train.checkpoint_freq=20", "train.eval_freq=20")


def _train(base: Path, *overrides: str) -> dict[str, Any]:
    from policies.training.loop import train

    return train(config(base, *overrides))


@needs_locomo
def test_resuming_a_finished_run_loses_no_row_and_keeps_its_record(tmp_path, capsys):
    _train(tmp_path, *ALIGNED, "train.total_timesteps=40")
    run = tmp_path / "runs" / RUN_NAME
    before = progress_values(run)
    record = {name: (run / name).read_text() for name in ("config.yaml", "run_metadata.json")}
    assert before[1], "the run logged no PPO update"
    sets = json.loads(record["run_metadata.json"])["question_sets"]  # which questions, by fingerprint
    assert set(sets) == {"train", "val"} and all(s["questions"] > 0 and len(s["ids_sha256"]) == 16
                                                 for s in sets.values())  # fmt: skip
    _train(tmp_path, *ALIGNED, "train.total_timesteps=40", f"resume={run}")
    assert "nothing to do" in capsys.readouterr().out
    assert progress_values(run) == before  # the last update's train/* row is back, once
    # A resume with another budget adds its own record and leaves the run's as it was.
    _train(tmp_path, *ALIGNED, "train.total_timesteps=20", f"resume={run}")
    assert progress_values(run) == before
    assert {name: (run / name).read_text() for name in record} == record
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["total_timesteps"] == 40
    piece = json.loads((run / "run_metadata-from-40.json").read_text())
    assert piece["resumed_from_step"] == 40 and piece["config"]["train"]["total_timesteps"] == 20


@needs_locomo
def test_resume_reads_data_by_content_moved_is_fine_changed_is_refused(tmp_path):
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(data_file("locomo10.json"), moved / "locomo10.json")
    _train(tmp_path, *ALIGNED, "train.total_timesteps=20")
    run = tmp_path / "runs" / RUN_NAME
    first_record = (run / "run_metadata.json").read_text()
    # The same bytes elsewhere: data_dir may move.
    _train(tmp_path, *ALIGNED, "train.total_timesteps=40", f"resume={run}", f"data_dir={moved}")
    state = json.loads((run / "checkpoints" / "last" / "state.json").read_text())
    assert list(state["data_checksums"]) == ["locomo10.json"]
    # One question edited: refused before anything is written, naming the file and both checksums.
    data = json.loads((moved / "locomo10.json").read_text())
    data[0]["qa"][0]["question"] += " (edited)"
    (moved / "locomo10.json").write_text(json.dumps(data))
    logs = sorted(p.name for p in run.iterdir())
    changed = r"locomo10\.json: sha256 [0-9a-f]{12} when trained, [0-9a-f]{12} now"
    with pytest.raises(CheckpointError, match=changed):
        _train(tmp_path, *ALIGNED, "train.total_timesteps=60", f"resume={run}", f"data_dir={moved}")
    assert sorted(p.name for p in run.iterdir()) == logs
    assert (run / "run_metadata.json").read_text() == first_record


@needs_locomo
def test_a_backend_that_dies_mid_run_stops_training_before_export(tmp_path):
    # Validation only at the end: the training calls alone have to stop the run.
    dying = ("+backend.fail_after=40", "+backend.error_message=HTTP 500: boom")
    budget = ("train.total_timesteps=200", "train.eval_freq=1000", "train.checkpoint_freq=1000")
    with pytest.raises(FailureBudgetExceeded) as info:
        _train(tmp_path, "ppo.n_steps=10", "ppo.batch_size=10", *budget, *dying)
    message = str(info.value)
    assert re.search(r"training steps \d+-\d+: \d+ of \d+ LLM calls failed \(\d+% > ", message), message
    assert "'HTTP 500: boom'" in message  # the reason the calls gave, not a guess
    run = tmp_path / "runs" / RUN_NAME
    assert not (run / "router").exists() and not (run / "result.json").exists()


def test_the_training_window_needs_enough_calls_and_names_reasons():
    class Record:
        def __init__(self, failures: int, calls: int, errors: tuple[str, ...] = ()) -> None:
            self.failures, self.calls, self.errors = failures, calls, errors

    budget = FailureBudget(0.2, "fake")
    budget.locals = {"infos": [{"record": Record(3, 3, ("timeout after 2 s",))}], "dones": [True]}
    budget._on_step()
    budget.check_training(10)  # 3 calls: not enough to judge an outage
    budget.locals = {"infos": [{"record": Record(10, 20, ("HTTP 500: boom",))}], "dones": [True]}
    for _ in range(2):
        budget._on_step()
    stopped = r"training steps 0-30: 23 of 43 .*'HTTP 500: boom' \(2x\)"
    with pytest.raises(FailureBudgetExceeded, match=stopped):
        budget.check_training(30)
    budget.check_training(40)  # the window starts again
    assert budget.totals()["train_failed"] == 23
    # A validation's message quotes its reasons too, and says when there were none.
    with pytest.raises(FailureBudgetExceeded, match=r"why: 'reply field usage\.prompt_tokens'"):
        budget.check_validation({"failures": 5, "llm_calls": 5}, 50, ["reply field usage.prompt_tokens"])
    with pytest.raises(FailureBudgetExceeded, match="no reason was reported"):
        budget.check_validation({"failures": 5, "llm_calls": 5}, 60)


@needs_locomo
def test_a_secret_never_blocks_resume(tmp_path):
    from policies.training.checkpoint import accepted_config_hashes, config_hash

    cfg = config(tmp_path, "backend=openai", "+backend.model=m", "+backend.api_key=sk-first-0123456789")
    rotated = config(tmp_path, "backend=openai", "+backend.model=m", "+backend.api_key=sk-rotated-987")
    other = config(tmp_path, "backend=openai", "+backend.model=x", "+backend.api_key=sk-first-0123456789")
    assert config_hash(cfg) == config_hash(rotated) != config_hash(other)
    # A checkpoint saved before secrets were hashed redacted still resumes with its own key.
    assert config_hash(cfg, secrets=True) in accepted_config_hashes(cfg)
    # The printed command's placeholder is named before anything runs, not taken for a key.
    run = tmp_path / "runs" / RUN_NAME
    placeholder = r"backend\.api_key: '\*\*\*REDACTED\*\*\*' is the placeholder"
    with pytest.raises(ConfigError, match=placeholder):
        _train(tmp_path, "backend=openai", "+backend.model=m", "+backend.api_key=***REDACTED***",
               f"resume={run}")  # fmt: skip
    assert not run.exists()


@needs_locomo
@pytest.mark.parametrize("when", ["before-final-validation", "during-final-validation"])
def test_a_stop_at_the_end_of_training_exits_as_a_stop_and_resume_finishes(tmp_path, monkeypatch, when):
    # The weak spot: SIGINT during the final validation printed that a checkpoint would be saved, then
    # finished the run and exited 0. Now any stop asked for during learn() ends as a stop (exit 130 from
    # train.py), and resuming the run finishes what is left: the final validation, result.json.
    import os
    import signal

    from policies.training.callbacks import ValidationCallback
    from policies.training.interrupt import TrainingInterrupted

    original_end, original_validate = ValidationCallback._on_training_end, ValidationCallback.validate

    def end(self):
        if when == "before-final-validation":
            os.kill(os.getpid(), signal.SIGINT)
        return original_end(self)

    def validate(self):
        if when == "during-final-validation" and self.num_timesteps >= 60:
            os.kill(os.getpid(), signal.SIGINT)
        return original_validate(self)

    monkeypatch.setattr(ValidationCallback, "_on_training_end", end)
    monkeypatch.setattr(ValidationCallback, "validate", validate)
    # rollouts of 20 steps: a validation at step 40 and, at the end of training, the final one at 60
    budget = ("ppo.n_steps=10", "ppo.batch_size=10", "train.eval_freq=25", "train.total_timesteps=60")
    with pytest.raises(TrainingInterrupted, match=r"SIGINT at step 60: checkpoint saved"):
        _train(tmp_path, *budget)
    run = tmp_path / "runs" / RUN_NAME
    assert not (run / "result.json").exists()
    history = json.loads((run / "checkpoints" / "last" / "state.json").read_text())["validation"]["history"]
    assert (history[-1]["step"] == 60) is (when == "during-final-validation")
    monkeypatch.setattr(ValidationCallback, "_on_training_end", original_end)
    monkeypatch.setattr(ValidationCallback, "validate", original_validate)
    result = _train(tmp_path, *budget, f"resume={run}")
    assert result["timesteps"] == 60 and result["best_step"] is not None
    assert json.loads((run / "validation.json").read_text())["history"][-1]["step"] == 60
