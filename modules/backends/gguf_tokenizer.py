"""Tokenizers rebuilt from a GGUF file's metadata, cached on disk, loaded without transformers."""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from filelock import FileLock

from modules.backends.base import BackendError
from modules.models import cache_dir


class GGUFTokenizer:
    """Token counting for a GGUF model: plain text, raw prompts and chat templates.

    Args:
        directory: A directory written by ``save_pretrained`` (``tokenizer.json``,
            ``tokenizer_config.json`` and optionally ``chat_template.jinja``).
    """

    def __init__(self, directory: Path) -> None:
        import jinja2.sandbox
        import tokenizers

        self.directory = directory
        self._tok = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
        if isinstance(self._tok.normalizer, tokenizers.normalizers.NFC):
            # Newer transformers add an NFC normaliser to Qwen2 when they convert the GGUF (older ones and
            # llama.cpp do not): counts must not depend on which transformers converted it on this machine.
            self._tok.normalizer = None
        config = json.loads((directory / "tokenizer_config.json").read_text())
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        template_file = directory / "chat_template.jinja"
        source = template_file.read_text() if template_file.is_file() else config.get("chat_template")
        self.chat_template: str | None = source or None
        # The same environment settings transformers uses to render chat templates.
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(source) if source else None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``."""
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def count(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self.encode(text))

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The chat template applied to ``messages`` with the assistant prompt appended.

        Raises:
            BackendError: The model has no chat template.
        """
        if self._template is None:
            raise BackendError(f"tokenizer in {self.directory} has no chat template")
        return self._template.render(
            messages=messages, add_generation_prompt=True, bos_token=self.bos_token, eos_token=self.eos_token
        )

    def count_chat(self, messages: list[dict[str, str]]) -> int:
        """Prompt tokens of a chat request (template text, its special tokens parsed as such)."""
        return len(self.encode(self.render_chat(messages)))

    def count_prompt(self, prompt: str) -> int:
        """Prompt tokens of a raw completion prompt, with the tokenizer's BOS handling."""
        return len(self.encode(prompt, add_special_tokens=True))


def _token_text(value: Any) -> str:
    if isinstance(value, dict):  # older configs store AddedToken dicts
        return str(value.get("content", ""))
    return str(value or "")


def _raise(message: str) -> None:
    raise BackendError(f"chat template error: {message}")


def _cache_path(model_path: Path) -> Path:
    # Name + size identifies the GGUF well enough: the registry files are checksummed, and a
    # different quantisation or version of the same model has a different size.
    return cache_dir() / "tokenizers" / f"{model_path.stem}-{model_path.stat().st_size}"


def _convert(path: Path, out: Path) -> None:
    """Convert the GGUF's tokenizer with transformers and save it atomically to ``out``."""
    from transformers import AutoTokenizer  # lazy: a 10-20 s import, needed only once

    try:
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except ImportError as exc:
        raise BackendError(
            f"reading the tokenizer of {path} needs the 'gguf' package: "
            "pip install 'gguf>=0.17,<0.20'"
        ) from exc
    # Save into a temporary sibling and rename, so readers never see a half-written directory.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tok.save_pretrained(str(tmp))
        if getattr(tok, "chat_template", None) and not (tmp / "chat_template.jinja").is_file():
            (tmp / "chat_template.jinja").write_text(tok.chat_template)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@functools.lru_cache(maxsize=8)
def load_gguf_tokenizer(model_path: str) -> GGUFTokenizer:
    """Return the tokenizer of the GGUF at ``model_path`` (converted once, then cached on disk).

    Args:
        model_path: Path of a GGUF file.

    Returns:
        A ``GGUFTokenizer``.

    Raises:
        BackendError: The file is missing, or the ``gguf`` package is needed and missing.
    """
    path = Path(model_path)
    if not path.is_file():
        raise BackendError(f"GGUF file not found: {path}")
    out = _cache_path(path)
    if not (out / "tokenizer.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(out) + ".lock"):
            if not (out / "tokenizer.json").is_file():
                _convert(path, out)
    return GGUFTokenizer(out)
