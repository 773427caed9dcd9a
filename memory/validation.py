"""Input validation for :class:`memory.HierarchicalMemory`: clear errors that name the field and value."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Default importance of ingested items when the caller gives none.
DEFAULT_IMPORTANCE = 0.5


def check_texts(texts: Sequence[str], where: str) -> list[str]:
    """Return ``texts`` as a list; reject a bare string, non-strings and empty/whitespace texts."""
    if isinstance(texts, str):
        raise TypeError(f"{where}: texts must be a sequence of strings, not a single str ({texts[:40]!r})")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{where}: texts[{i}] is {type(t).__name__}, expected str")
        if not t.strip():
            raise ValueError(f"{where}: texts[{i}] is empty or whitespace; every item needs text")
    return out


def check_importance(importance: Sequence[float] | np.ndarray | None, n: int) -> np.ndarray:
    """Return ``n`` float32 importances (default 0.5); reject misaligned, NaN or out-of-[0, 1] values."""
    if importance is None:
        return np.full(n, DEFAULT_IMPORTANCE, dtype=np.float32)
    imp = np.asarray(importance, dtype=np.float64).reshape(-1)
    if imp.shape[0] != n:
        raise ValueError(f"ingest: got {imp.shape[0]} importance values for {n} texts")
    bad = np.flatnonzero(~np.isfinite(imp) | (imp < 0.0) | (imp > 1.0))
    if len(bad):
        raise ValueError(f"ingest: importance[{bad[0]}] = {float(imp[bad[0]])!r} is not a number in [0, 1]")
    return imp.astype(np.float32)


def check_metadata(metadata: Sequence[dict[str, Any]] | None, n: int) -> list[dict[str, Any]]:
    """Return ``n`` metadata dicts (default empty); reject non-dicts and non-JSON values (saved later)."""
    if metadata is None:
        return [{} for _ in range(n)]
    metas = list(metadata)
    if len(metas) != n:
        raise ValueError(f"ingest: got {len(metas)} metadata dicts for {n} texts")
    for i, m in enumerate(metas):
        if not isinstance(m, dict):
            raise TypeError(f"ingest: metadata[{i}] is {type(m).__name__}, expected dict")
        try:
            json.dumps(m)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"ingest: metadata[{i}] is not JSON-serialisable ({exc}); it must be saved"
            ) from exc
    return [dict(m) for m in metas]


def check_embeddings(emb: np.ndarray, n: int, dim: int, what: str) -> np.ndarray:
    """Return an L2-normalised float32 ``(n, dim)`` copy; reject wrong shapes, NaN/inf and zero rows."""
    arr = np.asarray(emb)
    if arr.ndim != 2 or arr.shape != (n, dim):
        raise ValueError(f"{what}: expected shape ({n}, {dim}), got {arr.shape}; wrong embedding dimension?")
    arr = arr.astype(np.float32, copy=True)
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        raise ValueError(f"{what}: row {int(np.flatnonzero(~finite)[0])} contains NaN or inf")
    norms = np.linalg.norm(arr, axis=1)
    if (norms < 1e-12).any():
        raise ValueError(
            f"{what}: row {int(np.flatnonzero(norms < 1e-12)[0])} is all zeros (cannot normalise)"
        )
    arr /= norms[:, None]
    return arr
