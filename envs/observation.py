"""The router's observation: which module is being decided, the query and that module's input.

The observation is one flat float32 vector (a Gymnasium ``Box``)::

    [ one-hot of the module being decided (n_modules) | query embedding (embed_dim)
      | embedding of that module's current input text (embed_dim) | scalar features (n_scalars) ]
"""

from __future__ import annotations

import collections
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from memory.encoder import Encoder
from modules.tier import MODULE_ORDER

#: The scalar features, in order, that :class:`ObservationBuilder` computes by default.
DEFAULT_SCALARS: tuple[str, ...] = ("position", "input_len", "cost_so_far", "cost_lambda")

#: Scalars are clipped to this magnitude so the observation space is bounded.
SCALAR_BOUND = 100.0

#: Inputs of this many words map to ``input_len == 1``.
_INPUT_LEN_REF = math.log1p(4096)


@dataclass(frozen=True)
class ObservationSpec:
    """Layout of the flat observation vector.

    Attributes:
        embed_dim: Width of the query and input embeddings (the encoder's ``dim``).
        n_modules: Number of routed modules (width of the one-hot block).
        scalar_names: Names of the scalar features, in order.
        n_scalars: ``len(scalar_names)`` (derived; passing a different value is an error).
        module_names: The module names the one-hot block refers to, in order.
    """

    embed_dim: int
    n_modules: int = len(MODULE_ORDER)
    scalar_names: tuple[str, ...] = DEFAULT_SCALARS
    n_scalars: int = -1
    module_names: tuple[str, ...] = field(default=MODULE_ORDER)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scalar_names", tuple(self.scalar_names))
        object.__setattr__(self, "module_names", tuple(self.module_names))
        if self.n_scalars == -1:
            object.__setattr__(self, "n_scalars", len(self.scalar_names))
        if self.embed_dim <= 0:
            raise ValueError(f"ObservationSpec.embed_dim must be > 0, got {self.embed_dim}")
        if self.n_scalars != len(self.scalar_names):
            raise ValueError(
                f"ObservationSpec.n_scalars={self.n_scalars} but scalar_names has {len(self.scalar_names)} "
                f"entries: {self.scalar_names}"
            )
        if len(set(self.scalar_names)) != len(self.scalar_names):
            raise ValueError(f"ObservationSpec.scalar_names has duplicates: {self.scalar_names}")
        if self.n_modules != len(self.module_names):
            raise ValueError(
                f"ObservationSpec.n_modules={self.n_modules} but module_names has {len(self.module_names)} "
                f"entries: {self.module_names}"
            )

    @property
    def dim(self) -> int:
        """Total width of the observation vector."""
        return self.n_modules + 2 * self.embed_dim + self.n_scalars

    @property
    def module_slice(self) -> slice:
        """Slice of the one-hot module block."""
        return slice(0, self.n_modules)

    @property
    def query_slice(self) -> slice:
        """Slice of the query embedding."""
        start = self.n_modules
        return slice(start, start + self.embed_dim)

    @property
    def input_slice(self) -> slice:
        """Slice of the module-input embedding."""
        start = self.n_modules + self.embed_dim
        return slice(start, start + self.embed_dim)

    @property
    def scalar_slice(self) -> slice:
        """Slice of the scalar features."""
        start = self.n_modules + 2 * self.embed_dim
        return slice(start, start + self.n_scalars)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of every coordinate (one-hot [0,1], embeddings [-1,1])."""
        low = np.empty(self.dim, dtype=np.float32)
        high = np.empty(self.dim, dtype=np.float32)
        low[self.module_slice], high[self.module_slice] = 0.0, 1.0
        for sl in (self.query_slice, self.input_slice):
            low[sl], high[sl] = -1.0, 1.0
        low[self.scalar_slice], high[self.scalar_slice] = -SCALAR_BOUND, SCALAR_BOUND
        return low, high

    def space(self) -> gym.spaces.Box:
        """The Gymnasium observation space for this layout."""
        low, high = self.bounds()
        return gym.spaces.Box(low=low, high=high, dtype=np.float32)

    def module_index(self, obs: np.ndarray) -> int:
        """Return the index of the module an observation is about (-1 for the terminal zero vector)."""
        onehot = np.asarray(obs)[..., self.module_slice]
        if not onehot.any():
            return -1
        return int(np.argmax(onehot))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (saved with checkpoints)."""
        return {
            "embed_dim": self.embed_dim,
            "n_modules": self.n_modules,
            "n_scalars": self.n_scalars,
            "scalar_names": list(self.scalar_names),
            "module_names": list(self.module_names),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObservationSpec:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: If a required key is missing or the fields are inconsistent.
        """
        if "embed_dim" not in data:
            raise ValueError(f"ObservationSpec.from_dict: missing 'embed_dim' in {dict(data)}")
        return cls(
            embed_dim=int(data["embed_dim"]),
            n_modules=int(data.get("n_modules", len(MODULE_ORDER))),
            scalar_names=tuple(data.get("scalar_names", DEFAULT_SCALARS)),
            n_scalars=int(data.get("n_scalars", -1)),
            module_names=tuple(data.get("module_names", MODULE_ORDER)),
        )


class ObservationBuilder:
    """Fill observation vectors for a spec with a given encoder.

    Args:
        spec: The layout; ``spec.embed_dim`` must equal ``encoder.dim``.
        encoder: The sentence encoder (``name``, ``dim``, ``encode``).
        cache_size: How many text embeddings to memoise (LRU).

    Raises:
        ValueError: If the spec and the encoder disagree on the embedding width.
    """

    def __init__(self, spec: ObservationSpec, encoder: Encoder, cache_size: int = 50_000) -> None:
        if int(encoder.dim) != spec.embed_dim:
            raise ValueError(
                f"ObservationBuilder: encoder {encoder.name!r} has dim {encoder.dim} but the spec expects "
                f"embed_dim={spec.embed_dim}"
            )
        self.spec = spec
        self.encoder = encoder
        self.cache_size = int(cache_size)
        self._cache: collections.OrderedDict[str, np.ndarray] = collections.OrderedDict()
        self._low, self._high = spec.bounds()
        self.index = {name: i for i, name in enumerate(spec.module_names)}

    def embed(self, text: str) -> np.ndarray:
        """Embed one text (memoised on a hash of the text)."""
        key = hashlib.sha1(text.encode("utf-8")).hexdigest()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        vec = np.asarray(self.encoder.encode([text])[0], dtype=np.float32)
        vec.setflags(write=False)
        self._cache[key] = vec
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return vec

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        """Embed several texts in one encoder batch, filling the memo (used to pre-warm queries)."""
        missing = [
            t for t in dict.fromkeys(texts) if hashlib.sha1(t.encode("utf-8")).hexdigest() not in self._cache
        ]
        if missing:
            vecs = np.asarray(self.encoder.encode(missing), dtype=np.float32)
            for text, vec in zip(missing, vecs, strict=True):
                vec = vec.copy()
                vec.setflags(write=False)
                self._cache[hashlib.sha1(text.encode("utf-8")).hexdigest()] = vec
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return (
            np.stack([self.embed(t) for t in texts])
            if texts
            else np.zeros((0, self.spec.embed_dim), np.float32)
        )

    @staticmethod
    def scalar_features(
        module_index: int, n_modules: int, input_text: str, cost_so_far: float, cost_lambda: float
    ) -> dict[str, float]:
        """Compute the default scalar features (definitions: docs/design/envs.md)."""
        return {
            "position": module_index / max(1, n_modules - 1),
            "input_len": math.log1p(len(input_text.split())) / _INPUT_LEN_REF,
            "cost_so_far": math.log1p(max(0.0, float(cost_so_far))),
            "cost_lambda": float(cost_lambda),
        }

    def build(
        self, module_index: int, query_emb: np.ndarray, input_text: str, scalars: Mapping[str, float]
    ) -> np.ndarray:
        """Build one observation.

        Args:
            module_index: Index of the module being decided (0..n_modules-1).
            query_emb: The query embedding, shape ``(embed_dim,)``.
            input_text: The module's current input, rendered as text (embedded here).
            scalars: Values for every name in ``spec.scalar_names`` (extra keys are an error too,
                so a typo cannot silently drop a feature).

        Returns:
            float32 array of shape ``(spec.dim,)``, inside ``spec.space()``.

        Raises:
            ValueError: On a bad module index, embedding shape or scalar names.
        """
        spec = self.spec
        if not 0 <= module_index < spec.n_modules:
            raise ValueError(f"module_index must be in [0, {spec.n_modules}), got {module_index}")
        q = np.asarray(query_emb, dtype=np.float32)
        if q.shape != (spec.embed_dim,):
            raise ValueError(f"query_emb has shape {q.shape}, expected ({spec.embed_dim},)")
        if set(scalars) != set(spec.scalar_names):
            raise ValueError(
                f"scalars keys {sorted(scalars)} do not match the spec's scalar_names "
                f"{list(spec.scalar_names)}"
            )
        obs = np.zeros(spec.dim, dtype=np.float32)
        obs[module_index] = 1.0
        obs[spec.query_slice] = q
        obs[spec.input_slice] = self.embed(input_text)
        obs[spec.scalar_slice] = [float(scalars[name]) for name in spec.scalar_names]
        # Clip into the declared box: unit-norm embeddings can exceed 1 by float rounding only.
        np.clip(obs, self._low, self._high, out=obs)
        if not np.isfinite(obs).all():
            raise ValueError(f"non-finite observation for module {module_index} (scalars {dict(scalars)})")
        return obs

    def terminal(self) -> np.ndarray:
        """The observation returned with the terminal step: all zeros (no module is being decided)."""
        return np.zeros(self.spec.dim, dtype=np.float32)
