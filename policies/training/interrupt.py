"""Ctrl-C and ``kill`` during training: stop at the next step, save a checkpoint, say how to resume.

While :class:`GracefulStop` is installed, the first SIGINT or SIGTERM only asks the training loop to stop.
The checkpoint callback saves at the next rollout start (after the running rollout and its PPO update, the
point a resumed run continues from exactly), :class:`StopOnSignal` then ends ``PPO.learn``, the final
validation is skipped, and the loop raises :class:`TrainingInterrupted`, which ``train.py`` prints as one
line with the ``resume=`` command. A second SIGINT quits at once, without saving (``KeyboardInterrupt``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

#: The signals that ask for a graceful stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(RuntimeError):
    """Training stopped on a signal after saving a checkpoint; the message says how to resume.

    Attributes:
        signal_name: ``SIGINT`` or ``SIGTERM``.
        exit_code: The shell's code for that signal (130 or 143).
    """

    def __init__(self, message: str, signal_name: str) -> None:
        super().__init__(message)
        self.signal_name = signal_name
        self.exit_code = 128 + int(signal.Signals[signal_name])


class GracefulStop:
    """Turns the first SIGINT/SIGTERM into a stop request instead of an exception.

    Attributes:
        signal_name: The signal that asked to stop, or None.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.signal_name is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: the user wants out now
        self.signal_name = signal.Signals(signum).name
        print(
            f"\n{self.signal_name}: stopping to save a checkpoint after the current step (a running "
            "validation finishes first; Ctrl-C again to quit without saving)",
            file=sys.stderr,
            flush=True,
        )

    @contextlib.contextmanager
    def installed(self) -> Iterator[GracefulStop]:
        """Handle the stop signals inside the block (only the main thread may install handlers)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class StopOnSignal(BaseCallback):
    """Ends ``PPO.learn`` at the next environment step once ``saved()`` says the stop's checkpoint exists."""

    def __init__(self, saved: Callable[[], bool]) -> None:
        super().__init__()
        self.saved = saved

    def _on_step(self) -> bool:
        return not self.saved()


def ignore_interrupts_in_worker() -> None:
    """In a subprocess environment worker: leave the stop signals of :data:`STOP_SIGNALS` to the parent.

    Ctrl-C reaches the whole process group, and so does a scheduler's SIGTERM (Slurm, ``kill -TERM
    -PGID``). The parent stops the workers itself after saving; a worker killed by the signal would take
    the environment state the checkpoint needs with it. A worker whose parent is gone (even by SIGKILL)
    still ends: it reads EOF from its pipe, and SB3's workers are daemons.
    """
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def resume_command(overrides: list[str] | None, run_dir: Any) -> str:
    """``python train.py <the run's overrides> resume=<run_dir>``: the command that continues the run."""
    kept = [o for o in overrides or [] if o.split("=", 1)[0].lstrip("+~") not in ("resume", "overwrite")]
    return " ".join(["python train.py", *kept, f"resume={run_dir}"])
