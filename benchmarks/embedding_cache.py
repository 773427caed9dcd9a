"""On-disk cache of chunk embeddings, so repeated retrieval runs do not re-encode histories."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.cachedir import cache_root
from common.atomic import atomic_write_bytes
from memory.encoder import Encoder

CACHE_VERSION = "emb-v1"


class EmbeddingCache:
    """Per-history embedding files under ``<root>/embeddings/<encoder name>/``.

    Args:
        root: Cache root (default :func:`benchmarks.cachedir.cache_root`).

    Attributes:
        hits: Histories served from disk.
        misses: Histories encoded.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "embeddings"
        self.hits = 0
        self.misses = 0

    def key(self, encoder: Encoder, texts: Sequence[str]) -> str:
        """The cache key of ``texts`` under ``encoder``."""
        h = hashlib.sha256(f"{CACHE_VERSION}\0{encoder.name}\0{encoder.dim}".encode())
        for t in texts:
            h.update(b"\0")
            h.update(t.encode("utf-8"))
        return h.hexdigest()

    def encode(self, encoder: Encoder, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Return ``encoder.encode(texts)``, from disk when this exact input was seen before."""
        key = self.key(encoder, texts)
        path = self.root / encoder.name / key[:2] / f"{key}.npy"
        if path.is_file():
            vecs = np.load(path)
            if vecs.shape == (len(texts), encoder.dim):
                self.hits += 1
                return vecs
        self.misses += 1
        vecs = np.asarray(encoder.encode(list(texts), batch_size=batch_size), dtype=np.float32)
        buf = io.BytesIO()
        np.save(buf, vecs)
        atomic_write_bytes(path, buf.getvalue())
        return vecs
