"""Plain progress lines of a training run whose stdout is not a terminal."""

from __future__ import annotations

import io
from types import SimpleNamespace

from stable_baselines3.common.logger import Logger

from policies.training.progress_lines import ProgressLinesCallback, format_duration, progress_line


def test_format_duration() -> None:
    assert format_duration(9.4) == "9s"
    assert format_duration(125) == "2m05s"
    assert format_duration(3725) == "1h02m"
    assert format_duration(-3) == "0s"


def test_progress_line_rate_counts_only_this_process_steps() -> None:
    # Resumed at 1000; 200 steps in 100 s -> 800 left take 400 s.
    line = progress_line(
        1200, 2000, 100.0, 1000, {"rollout/f1": 0.5, "tiers/high_share": 0.25, "cache/hit_rate": 0.4}
    )
    assert line.startswith("[train] step 1200/2000 (60%)")
    assert "1m40s elapsed" in line
    assert "~6m40s left at this rate" in line
    assert "F1 0.500" in line and "HIGH share 0.25" in line and "40% of LLM calls replayed" in line


def test_progress_line_without_values_or_rate() -> None:
    line = progress_line(2000, 2000, 30.0, 0, {})
    assert line == "[train] step 2000/2000 (100%) · 30s elapsed"
    # Nothing run by this process yet: no rate to extrapolate.
    assert "left" not in progress_line(500, 2000, 0.0, 500, {})


def _callback(
    interval: float, clock: list[float]
) -> tuple[ProgressLinesCallback, SimpleNamespace, io.StringIO]:
    out = io.StringIO()
    cb = ProgressLinesCallback(100, min_interval_s=interval, stream=out, clock=lambda: clock[0])
    model = SimpleNamespace(num_timesteps=0, logger=Logger(folder=None, output_formats=[]))
    cb.init_callback(model)  # type: ignore[arg-type]
    cb.on_training_start({}, {})
    return cb, model, out


def test_callback_prints_first_rollout_then_throttles_and_always_at_the_end() -> None:
    clock = [0.0]
    cb, model, out = _callback(30.0, clock)
    for step, t, f1 in ((20, 10.0, 0.1), (40, 20.0, 0.2), (60, 45.0, 0.3), (80, 50.0, 0.4)):
        model.num_timesteps, clock[0] = step, t
        model.logger.record("rollout/f1", f1)
        cb.on_rollout_end()
        model.logger.dump(step)  # SB3 dumps (and clears the values) after each rollout
    model.num_timesteps, clock[0] = 100, 60.0
    cb.on_training_end()
    lines = out.getvalue().splitlines()
    # 20 (first), 60 (35 s after the last line), and the end; 40 and 80 came too soon.
    assert [ln.split()[2] for ln in lines] == ["20/100", "60/100", "100/100"]
    assert "F1 0.100" in lines[0] and "F1 0.300" in lines[1]
    assert "~40s left at this rate" in lines[0]
