"""Model weight files as engines see them: their sha256, and GGUF files rebuilt as HF directories.

Two engines that read the same GGUF can still produce different text (another dtype, other kernels),
and two files with one name can hold different weights; a call's cache identity therefore names the
weights by content (:func:`file_sha256`). vLLM's CPU build cannot read GGUF at all, so
:func:`hf_dir_from_gguf` writes a GGUF's weights once as a Hugging Face directory (dequantised by
transformers), keyed by the GGUF's sha256 and the dtype, under a lock and atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from filelock import FileLock

from common.atomic import atomic_write_json
from modules.backends.base import BackendError
from modules.models import cache_dir

#: Dtypes a converted directory may hold (what ``torch_dtype`` names, as vLLM's ``dtype`` spells them).
HF_DTYPES = ("float32", "bfloat16", "float16")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file, memoised on disk by (resolved path, size, mtime).

    Hashing a 1.1 GB GGUF takes seconds; every backend start needs the digest for its cache
    identity, so it is computed once per file version and kept in ``<cache>/sha256/``.

    Raises:
        BackendError: The file does not exist.
    """
    p = Path(path).resolve()
    if not p.is_file():
        raise BackendError(f"weights file not found: {p}")
    st = p.stat()
    tag = hashlib.sha256(f"{p}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:32]
    memo = cache_dir() / "sha256" / f"{tag}.json"
    try:
        return str(json.loads(memo.read_text())["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or unreadable memo: recompute (and rewrite it)
    digest = hashlib.sha256()
    with open(p, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    value = digest.hexdigest()
    atomic_write_json(memo, {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": value})
    return value


def hf_dir_from_gguf(gguf: str | os.PathLike[str], dtype: str = "float32") -> Path:
    """A Hugging Face model directory holding ``gguf``'s weights in ``dtype`` (built once, cached).

    The directory is ``<cache>/hf/<sha256[:16]>-<dtype>/`` with ``config.json``, the safetensors and
    the tokenizer (chat template included). Concurrent callers serialise on a lock; the directory is
    written to a temporary sibling and renamed, so a crash never leaves a half-written model.

    Args:
        gguf: Path of the GGUF file.
        dtype: One of :data:`HF_DTYPES`: the dtype the dequantised weights are stored in.

    Returns:
        The directory.

    Raises:
        BackendError: Unknown dtype, missing file, or transformers cannot read the GGUF.
    """
    if dtype not in HF_DTYPES:
        raise BackendError(f"dtype {dtype!r} is not one of {HF_DTYPES}")
    src = Path(gguf)
    sha = file_sha256(src)
    out = cache_dir() / "hf" / f"{sha[:16]}-{dtype}"
    child = ["modules.backends.weights", str(src), str(out), dtype, sha]
    build_model_dir_once(out, child, f"rebuilding {src} as a Hugging Face model")
    return out


def build_model_dir_once(out: Path, child: list[str], what: str) -> None:
    """Build the model directory ``out`` once: ``python -m <child...>`` writes it, under a lock.

    In a child process: converting weights holds the whole model in float (6 GB for 1.5B parameters),
    which the caller, about to load an engine, should not keep paying for. A new interpreter, not
    multiprocessing: its spawn re-imports the caller's __main__, and a script without a __main__ guard then
    waited forever on the lock this process holds. The child writes a temporary sibling and renames it.

    Raises:
        BackendError: The child failed (its last line of stderr is quoted after ``what``).
    """
    if (out / "config.json").is_file():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / "config.json").is_file():
            return
        proc = subprocess.run(
            [sys.executable, "-m", *child], capture_output=True, text=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )  # fmt: skip
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise BackendError(f"{what} failed: {last}")


def _convert(src: Path, out: Path, dtype: str, sha: str) -> None:
    import torch  # lazy: only a conversion needs them (tens of seconds, once per file and dtype)
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        try:
            tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(src.parent),
                gguf_file=src.name,
                dtype=getattr(torch, dtype),
                # plain tensors: a model still marked GGUF-quantised cannot be saved
                quantization_config=GgufConfig(dequantize=True),
            )
        except (ImportError, ValueError, OSError) as exc:
            raise BackendError(
                f"cannot rebuild {src} as a Hugging Face model ({type(exc).__name__}: {exc}); "
                "transformers needs 'gguf>=0.17,<0.20' and 'accelerate' for this"
            ) from exc
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        if getattr(tok, "chat_template", None) and not (tmp / "chat_template.jinja").is_file():
            (tmp / "chat_template.jinja").write_text(tok.chat_template)
        (tmp / "SOURCE.json").write_text(json.dumps({"gguf": str(src), "sha256": sha, "dtype": dtype}))
        tmp.chmod(0o755)  # mkdtemp makes it private; the model cache may be shared
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":  # the child of hf_dir_from_gguf: SRC OUT DTYPE SHA256
    try:
        _convert(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
