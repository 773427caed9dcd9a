"""Resumable training checkpoints: the SB3 model plus everything PPO does not save itself.

``runs/{run_name}/checkpoints/last/``::

    model.zip     PPO.save (policy, optimiser, num_timesteps, hyper-parameters)
    state.json    per-worker reward-shaper state (cost window, α history) and question-order RNG,
                  the validation callback's state (best score, history), the run name and config hash
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnv

from common.atomic import atomic_write_json
from common.atomic_dir import recoverable_copy, write_dir_atomically
from common.provenance import sha256_file
from envs.config_schema import without_added_defaults

MODEL_FILE = "model.zip"
STATE_FILE = "state.json"
STATE_VERSION = 1


#: Top-level config keys that may differ between a run and its resumption.
RESUME_FREE_KEYS = ("resume", "overwrite", "train", "wandb", "runs_dir", "run_dir", "cache", "data_dir")


class CheckpointError(ValueError):
    """A checkpoint cannot be resumed: damaged, tampered with, or from another config."""


def config_hash(config: Mapping[str, Any], ignore: tuple[str, ...] = RESUME_FREE_KEYS) -> str:
    """Hash of the parts of a config that must match for a resume to make sense.

    The training budget, paths (run, cache and data directories), the resume path and the
    tracking settings may change between the original and the resumed run; benchmark,
    strategy, backend, memory, cost and PPO settings may not. Keys the typed schema added at their
    defaults are left out (``envs.config_schema.ADDED_BY_SCHEMA``): checkpoints saved before it resume.
    """
    kept = {k: v for k, v in without_added_defaults(config).items() if k not in ignore}
    if isinstance(kept.get("question_bank"), Mapping):
        kept["question_bank"] = {k: v for k, v in kept["question_bank"].items() if k != "cache_dir"}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def save_checkpoint(
    path: Path, model: PPO, vec_env: VecEnv, callback_state: Mapping[str, Any], meta: Mapping[str, Any]
) -> Path:
    """Write a resumable checkpoint directory atomically.

    Args:
        path: Destination directory (e.g. ``runs/x/checkpoints/last``).
        model: The PPO model.
        vec_env: The training env (its workers' ``training_state`` is saved).
        callback_state: The validation callback's ``state_dict()``.
        meta: Extra facts (run name, config hash).

    Returns:
        The checkpoint directory.
    """
    env_states = vec_env.env_method("training_state")

    def fill(tmp: Path) -> None:
        model.save(tmp / MODEL_FILE)
        atomic_write_json(
            tmp / STATE_FILE,
            {
                "version": STATE_VERSION,
                "num_timesteps": int(model.num_timesteps),
                # Outside the zip: resume checks the zip against it before unpickling anything.
                "model_sha256": sha256_file(tmp / MODEL_FILE),
                "envs": env_states,
                "validation": dict(callback_state),
                **dict(meta),
            },
        )

    write_dir_atomically(path, fill)
    return path


def resolve_checkpoint(path: str | Path) -> Path:
    """Accept a run directory or a checkpoint directory and return the checkpoint directory.

    When ``checkpoints/last`` is missing because a save was killed mid-swap, the complete copy
    the swap left (``.last.new-*`` or ``.last.old-*``) is returned; the run restores it under
    its lock (``common.atomic_dir.recover_dir``).

    Raises:
        FileNotFoundError: If no checkpoint is found there.
        CheckpointError: If its ``state.json`` is unreadable.
    """
    p = Path(path).expanduser()
    cands = [p, p / "checkpoints" / "last"]
    cands += [c for c in (recoverable_copy(p), recoverable_copy(p / "checkpoints" / "last")) if c]
    for cand in cands:
        if (cand / MODEL_FILE).is_file() and (cand / STATE_FILE).is_file():
            read_state(cand)
            return cand
    raise FileNotFoundError(
        f"resume={path!s}: no checkpoint there (expected {MODEL_FILE} and {STATE_FILE} in it or in "
        "its checkpoints/last/)"
    )


def read_state(path: Path) -> dict[str, Any]:
    """The ``state.json`` of a checkpoint directory.

    Raises:
        CheckpointError: Naming the file when it is truncated, not UTF-8, or not a JSON object.
    """
    file = path / STATE_FILE
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{file} is damaged (truncated or not UTF-8 JSON: {exc}); resume from another checkpoint "
            f"or delete {path} to start over"
        ) from None
    if not isinstance(state, dict) or "num_timesteps" not in state:
        raise CheckpointError(f"{file} is not a checkpoint state (no num_timesteps); delete {path}")
    return state


def checkpoint_step(path: Path) -> int:
    """The ``num_timesteps`` a checkpoint directory was saved at."""
    return int(read_state(path)["num_timesteps"])


def check_checkpoint(path: Path, expected_hash: str, n_envs: int, *, warn: bool = True) -> dict[str, Any]:
    """Everything that can be checked about a checkpoint without loading it; returns its state.

    Runs before the run directory is touched, so a bad ``resume=`` changes nothing.

    Raises:
        CheckpointError: On an unknown state version, another config (hash), another worker count,
            or a ``model.zip`` whose sha256 differs from the one the run recorded.
    """
    state = read_state(path)
    if int(state.get("version", -1)) != STATE_VERSION:
        raise CheckpointError(f"{path / STATE_FILE}: unsupported state version {state.get('version')}")
    if state.get("config_hash") != expected_hash:
        raise CheckpointError(
            f"resume={path}: the checkpoint was trained with a different config (hash "
            f"{state.get('config_hash')} != {expected_hash}); only train.*, wandb.* and resume may change "
            "when resuming"
        )
    if len(state.get("envs") or ()) != n_envs:
        raise CheckpointError(
            f"resume={path}: checkpoint has {len(state.get('envs') or ())} env workers, config has {n_envs}"
        )
    recorded = state.get("model_sha256")
    if recorded is None:
        if warn:
            print(
                f"warning: {path / STATE_FILE} records no sha256 of {MODEL_FILE} (an older checkpoint); "
                "it is loaded unverified - resume only checkpoints you trust"
            )
    elif hashlib.sha256((path / MODEL_FILE).read_bytes()).hexdigest() != recorded:
        raise CheckpointError(
            f"{path / MODEL_FILE}: sha256 differs from the one recorded in {STATE_FILE} when the run "
            "wrote it: the zip was replaced or damaged and is not loaded (loading unpickles it)"
        )
    return state


def load_checkpoint(
    path: Path, vec_env: VecEnv, device: str, expected_hash: str
) -> tuple[PPO, dict[str, Any]]:
    """Load a checkpoint into ``vec_env`` and return ``(model, state)``.

    Raises:
        CheckpointError: See :func:`check_checkpoint` (checked again: the files may have changed).
    """
    state = check_checkpoint(path, expected_hash, vec_env.num_envs, warn=False)
    envs = state["envs"]
    model = PPO.load(path / MODEL_FILE, env=vec_env, device=device)
    for i, env_state in enumerate(envs):
        vec_env.env_method("load_training_state", env_state, indices=[i])
    return model, state
