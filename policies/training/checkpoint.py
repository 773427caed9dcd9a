"""Resumable training checkpoints: the SB3 model plus everything PPO does not save itself.

``runs/{run_name}/checkpoints/last/``::

    model.zip     PPO.save (policy, optimiser, num_timesteps, hyper-parameters)
    state.json    per-worker reward-shaper state (cost window, α history) and question-order RNG,
                  the validation callback's state (best score, history), the run name and config hash
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnv

from common.atomic import atomic_write_json
from common.atomic_dir import recoverable_copy, write_dir_atomically
from common.provenance import sha256_file
from common.redact import redact
from envs.config_schema import without_added_defaults
from envs.router_env import jsonable

MODEL_FILE = "model.zip"
STATE_FILE = "state.json"
STATE_VERSION = 1


#: Top-level config keys that may differ between a run and its resumption.
RESUME_FREE_KEYS = ("resume", "overwrite", "train", "wandb", "runs_dir", "run_dir", "cache", "data_dir")


class CheckpointError(ValueError):
    """A checkpoint cannot be resumed: damaged, tampered with, or from another config."""


def config_hash(
    config: Mapping[str, Any], ignore: tuple[str, ...] = RESUME_FREE_KEYS, *, secrets: bool = False
) -> str:
    """Hash of the parts of a config that must match for a resume to make sense.

    The training budget, paths (run, cache and data directories), the resume path and the
    tracking settings may change between the original and the resumed run; benchmark,
    strategy, backend, memory, cost and PPO settings may not. Keys the typed schema added at their
    defaults are left out (``envs.config_schema.ADDED_BY_SCHEMA``): checkpoints saved before it resume.
    Secrets (API keys, URL credentials) are hashed redacted: a rotated key is the same run, and a key
    never has to be given back as it was (``secrets=True`` hashes them as given, as older checkpoints did).
    """
    kept = {k: v for k, v in without_added_defaults(config).items() if k not in ignore}
    if isinstance(kept.get("question_bank"), Mapping):
        kept["question_bank"] = {k: v for k, v in kept["question_bank"].items() if k != "cache_dir"}
    if not secrets:
        kept = redact(kept)
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def accepted_config_hashes(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The config hashes a checkpoint of this config may carry.

    :func:`config_hash`, and the hash of the same config under the run name it had when λ was
    printed as written (``lam0.0`` for the default ``0.0``; run names now print λ in its shortest
    form, ``lam0``), so that those runs still resume.
    """
    current = config_hash(config)
    hashes = [current, config_hash(config, secrets=True)]  # a checkpoint that hashed its secrets
    section = config.get("cost")
    cost: Mapping[str, Any] = section if isinstance(section, Mapping) else {}
    lam, name = cost.get("lambda"), str(config.get("run_name", ""))
    if cost.get("lambdas") is None and isinstance(lam, float) and f"__lam{lam:g}__" in name:
        legacy = {**config, "run_name": name.replace(f"__lam{lam:g}__", f"__lam{lam}__", 1)}
        hashes += [config_hash(legacy), config_hash(legacy, secrets=True)]
    return tuple(dict.fromkeys(hashes))


def check_resume_data(path: Path, state: Mapping[str, Any], current: Mapping[str, str]) -> None:
    """Refuse a resume whose data differ in content from what the run trained on.

    The data are compared by sha256, not by path: ``data_dir`` may move (another machine, a copy), the
    questions may not change under a run. A checkpoint records the checksums of the data it was trained
    on; one saved before it did is compared with the run's first record (``run_metadata.json``).

    Args:
        path: The checkpoint directory (``<run>/checkpoints/last``).
        state: Its ``state.json``.
        current: ``{file name: sha256}`` of the data this resume would read.

    Raises:
        CheckpointError: The contents differ (the message names each file and both checksums).
    """
    recorded = state.get("data_checksums")
    if recorded is None:
        record = path.parent.parent / "run_metadata.json"
        try:
            recorded = json.loads(record.read_text(encoding="utf-8")).get("data_checksums")
        except (OSError, ValueError, AttributeError):
            recorded = None
    if not isinstance(recorded, Mapping) or not recorded:
        return  # nothing recorded to compare with (a run on data the benchmark does not list)
    if sorted(recorded.values()) == sorted(current.values()):
        return
    changed = [n for n in sorted(set(recorded) | set(current)) if recorded.get(n) != current.get(n)]
    detail = "; ".join(
        f"{n}: sha256 {str(recorded.get(n, 'absent'))[:12]} when trained, "
        f"{str(current.get(n, 'absent'))[:12]} now"
        for n in changed
    )
    raise CheckpointError(
        f"resume={path}: the data differ from what the run trained on ({detail}); data_dir may move, the "
        "data may not change: point data_dir (or the benchmark's file option) at the data the run read, "
        "or train a new run on the new data"
    )


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
    rng = rng_states()
    # What the logger holds but has not written yet (the last update's train/* values, which SB3 dumps
    # with the next rollout's row): a resumed run records them again, so its first row is complete.
    logger = getattr(model, "_logger", None)
    pending: dict[str, list[Any]] = {}
    if logger is not None:
        for key, value in logger.name_to_value.items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                continue
            # the type too: the CSV writes a float32 (SB3's approx_kl) and an int (n_updates) their own way
            kind = type(value).__name__ if isinstance(value, int | float) else np.asarray(value).dtype.name
            pending[key] = [value.item() if isinstance(value, np.number) else value, kind]
            pending[key].append(list(logger.name_to_excluded.get(key) or ()))

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
                "rng": rng,
                "pending_log": pending,
                # SB3's window of finished episodes behind rollout/ep_rew_mean (not in model.zip)
                "ep_info_buffer": [jsonable(dict(info)) for info in model.ep_info_buffer or ()],
                "validation": dict(callback_state),
                **dict(meta),
            },
        )

    try:
        write_dir_atomically(path, fill)
    except OSError as exc:  # ENOSPC, EDQUOT, EIO: the previous checkpoint is untouched (atomic swap)
        try:
            kept = f"the previous checkpoint at step {checkpoint_step(path)} is intact at {path}"
        except (OSError, CheckpointError, KeyError, ValueError):
            kept = "no earlier checkpoint exists"
        raise CheckpointError(
            f"could not save the checkpoint at step {model.num_timesteps} to {path} "
            f"({exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}); {kept}. "
            "Free space and resume from it"
        ) from exc
    return path


def resolve_checkpoint(path: str | Path) -> Path:
    """Accept a run directory or a checkpoint directory and return the checkpoint directory.

    When ``checkpoints/last`` is missing because a save was killed mid-swap, the complete copy
    the swap left (``.last.new-*`` or ``.last.old-*``) is returned; the run restores it under
    its lock (``common.atomic_dir.recover_dir``).

    Raises:
        CheckpointError: No checkpoint there (the message says why and what to do instead), or its
            ``state.json`` is unreadable.
    """
    p = Path(path).expanduser()
    cands = [p, p / "checkpoints" / "last"]
    cands += [c for c in (recoverable_copy(p), recoverable_copy(p / "checkpoints" / "last")) if c]
    for cand in cands:
        if (cand / MODEL_FILE).is_file() and (cand / STATE_FILE).is_file():
            read_state(cand)
            return cand
    if not p.exists():
        raise CheckpointError(f"resume={path!s}: no such directory; give a run directory (runs/<run_name>)")
    if (p / "config.yaml").is_file() and not (p / "checkpoints").exists():
        # A run that stopped (error, disk full, Ctrl-C twice) before its first checkpoint.
        raise CheckpointError(
            f"resume={path!s}: no checkpoint there: the run stopped before its first one "
            "(train.checkpoint_freq); nothing can be resumed, so start it again with the same command "
            "and overwrite=true"
        )
    raise CheckpointError(
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


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out |= _flat(v, f"{prefix}{k}.")
        return out
    return {prefix.rstrip("."): obj}


def config_differences(run_dir: Path, config: Mapping[str, Any], limit: int = 5) -> list[str]:
    """``key: A when trained, B now`` for the hashed keys where ``config`` differs from the run's record.

    The record is the run's ``config.yaml`` (secrets redacted, as the hash sees them); empty when it is
    missing or unreadable.
    """
    import yaml

    try:
        recorded = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(recorded, Mapping):
        return []

    def hashed(cfg: Mapping[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in without_added_defaults(cfg).items() if k not in RESUME_FREE_KEYS}
        flat = _flat(redact(kept))
        flat.pop("question_bank.cache_dir", None)
        return flat

    then, now = hashed(recorded), hashed(config)
    missing = object()
    keys = [k for k in sorted(set(then) | set(now)) if then.get(k, missing) != now.get(k, missing)]
    return [
        f"{k}: {then.get(k, '(unset)')!r} when trained, {now.get(k, '(unset)')!r} now" for k in keys[:limit]
    ] + ([f"and {len(keys) - limit} more"] if len(keys) > limit else [])


def check_checkpoint(
    path: Path,
    expected_hash: str | tuple[str, ...],
    n_envs: int,
    *,
    warn: bool = True,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything that can be checked about a checkpoint without loading it; returns its state.

    Runs before the run directory is touched, so a bad ``resume=`` changes nothing.

    Raises:
        CheckpointError: On an unknown state version, another config (hash), another worker count,
            or a ``model.zip`` whose sha256 differs from the one the run recorded.
    """
    state = read_state(path)
    try:
        version = int(state.get("version", -1))
    except (TypeError, ValueError):
        version = None
    if version != STATE_VERSION:
        raise CheckpointError(
            f"{path / STATE_FILE}: unsupported state version {state.get('version')!r} (this code reads "
            f"{STATE_VERSION}); resume from a checkpoint this code wrote, or start the run again"
        )
    accepted = (expected_hash,) if isinstance(expected_hash, str) else expected_hash
    if state.get("config_hash") not in accepted:
        diff = config_differences(path.parent.parent, config) if config is not None else []
        what = "; ".join(diff) if diff else f"hash {state.get('config_hash')} != {accepted[0]}"
        raise CheckpointError(
            f"resume={path}: the checkpoint was trained with a different config ({what}); only train.*, "
            "wandb.*, paths and resume may change when resuming: give those keys their trained values, or "
            "start a new run"
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
    path: Path, vec_env: VecEnv, device: str, expected_hash: str | tuple[str, ...]
) -> tuple[PPO, dict[str, Any]]:
    """Load a checkpoint into ``vec_env`` and return ``(model, state)``.

    Raises:
        CheckpointError: See :func:`check_checkpoint` (checked again: the files may have changed).
    """
    state = check_checkpoint(path, expected_hash, vec_env.num_envs, warn=False)
    envs = state["envs"]
    # PPO.load seeds torch, numpy, random and the envs with the run's seed again ...
    model = PPO.load(path / MODEL_FILE, env=vec_env, device=device)
    observations = [
        vec_env.env_method("load_training_state", env_state, indices=[i])[0]
        for i, env_state in enumerate(envs)
    ]
    if all(obs is not None for obs in observations):
        # ... so learn() must not reset the envs (that would draw new questions from re-seeded
        # generators): it continues from the observations the saved run was at.
        model._last_obs = np.stack(observations)
        # SB3's episode_starts flag: an episode that has taken no step yet
        model._last_episode_starts = np.array([not s["resume_point"]["actions"] for s in envs])
    if state.get("ep_info_buffer") is not None:  # learn() keeps a buffer it finds (reset_num_timesteps=False)
        model.ep_info_buffer = deque(state["ep_info_buffer"], maxlen=model._stats_window_size)
        model.ep_success_buffer = deque(maxlen=model._stats_window_size)
    if state.get("rng"):
        # ... and the random streams PPO samples actions and minibatches from continue where they were.
        restore_rng_states(state["rng"])
    return model, state


def pending_log_value(entry: Sequence[Any]) -> tuple[Any, tuple[str, ...] | None]:
    """``(value, exclude)`` of a ``pending_log`` entry, in the type SB3 had recorded it."""
    value, kind, exclude = entry
    if kind in ("int", "float"):
        restored: Any = int(value) if kind == "int" else float(value)
    else:
        restored = np.dtype(kind).type(value)
    return restored, tuple(exclude) or None


def rng_states() -> dict[str, Any]:
    """The process-wide random states a training run draws from (torch, numpy's global, Python's)."""
    np_state = cast(tuple[Any, ...], np.random.get_state(legacy=True))
    py_version, py_internal, py_gauss = random.getstate()
    return {
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode("ascii"),
        "numpy": [
            str(np_state[0]),
            [int(x) for x in np_state[1]],
            int(np_state[2]),
            int(np_state[3]),
            float(np_state[4]),
        ],
        "python": [py_version, list(py_internal), py_gauss],
    }


def restore_rng_states(state: Mapping[str, Any]) -> None:
    """Set the states :func:`rng_states` saved."""
    raw = np.frombuffer(base64.b64decode(state["torch"]), dtype=np.uint8).copy()
    torch.set_rng_state(torch.from_numpy(raw))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
