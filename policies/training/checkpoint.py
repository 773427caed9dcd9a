"""Resumable training checkpoints: the SB3 model plus everything PPO does not save itself.

``runs/{run_name}/checkpoints/last/``::

    model.zip     PPO.save (policy, optimiser, num_timesteps, hyper-parameters)
    state.json    per-worker reward-shaper state (cost window, α history) and question-order RNG,
                  the validation callback's state (best score, history), the run name and config hash

The directory is replaced atomically (``policies.export.write_dir_atomically``). A resumed run
continues from ``num_timesteps`` with the same normaliser statistics and best-so-far record;
it is not bit-identical to an uninterrupted run (SB3 does not save the rollout buffer or the
in-flight episodes), which is the same guarantee SB3's own checkpoints give.
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
from policies.export import write_dir_atomically

MODEL_FILE = "model.zip"
STATE_FILE = "state.json"
STATE_VERSION = 1


#: Top-level config keys that may differ between a run and its resumption.
RESUME_FREE_KEYS = ("resume", "train", "wandb", "runs_dir", "run_dir", "cache", "data_dir")


def config_hash(config: Mapping[str, Any], ignore: tuple[str, ...] = RESUME_FREE_KEYS) -> str:
    """Hash of the parts of a config that must match for a resume to make sense.

    The training budget, paths (run, cache and data directories), the resume path and the
    tracking settings may change between the original and the resumed run; benchmark,
    strategy, backend, memory, cost and PPO settings may not.
    """
    kept = {k: v for k, v in config.items() if k not in ignore}
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
                "envs": env_states,
                "validation": dict(callback_state),
                **dict(meta),
            },
        )

    write_dir_atomically(path, fill)
    return path


def resolve_checkpoint(path: str | Path) -> Path:
    """Accept a run directory or a checkpoint directory and return the checkpoint directory.

    Raises:
        FileNotFoundError: If no checkpoint is found there.
    """
    p = Path(path).expanduser()
    for cand in (p, p / "checkpoints" / "last"):
        if (cand / MODEL_FILE).is_file() and (cand / STATE_FILE).is_file():
            return cand
    raise FileNotFoundError(
        f"resume={path!s}: no checkpoint there (expected {MODEL_FILE} and {STATE_FILE} in it or in "
        "its checkpoints/last/)"
    )


def checkpoint_step(path: Path) -> int:
    """The ``num_timesteps`` a checkpoint directory was saved at."""
    return int(json.loads((path / STATE_FILE).read_text(encoding="utf-8"))["num_timesteps"])


def load_checkpoint(
    path: Path, vec_env: VecEnv, device: str, expected_hash: str
) -> tuple[PPO, dict[str, Any]]:
    """Load a checkpoint into ``vec_env`` and return ``(model, state)``.

    Raises:
        ValueError: If the checkpoint was trained with a different config (hash) or worker count.
    """
    state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    if int(state.get("version", -1)) != STATE_VERSION:
        raise ValueError(f"{path / STATE_FILE}: unsupported checkpoint state version {state.get('version')}")
    if state.get("config_hash") != expected_hash:
        raise ValueError(
            f"resume={path}: the checkpoint was trained with a different config (hash "
            f"{state.get('config_hash')} != {expected_hash}); only train.*, wandb.* and resume may change "
            "when resuming"
        )
    envs = state["envs"]
    if len(envs) != vec_env.num_envs:
        raise ValueError(
            f"resume={path}: checkpoint has {len(envs)} env workers, config has {vec_env.num_envs}"
        )
    model = PPO.load(path / MODEL_FILE, env=vec_env, device=device)
    for i, env_state in enumerate(envs):
        vec_env.env_method("load_training_state", env_state, indices=[i])
    return model, state
