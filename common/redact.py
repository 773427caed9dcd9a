"""Keep secrets given in a config out of everything a run writes to disk."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REDACTED = "***REDACTED***"

_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "credentials"})
#: Suffixes that make a key *name* a secret (an environment variable or file holding it) but its
#: value only a reference.
_REFERENCE_SUFFIXES = ("env", "var", "file", "path")
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_QUERY_PARAM = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s]*)")
#: ``name=value`` overrides, alone or joined by commas (Hydra's ``override_dirname``).
_OVERRIDE = re.compile(r"(?P<sep>^|,)(?P<name>[+~]*[A-Za-z_][\w.-]*)=(?P<value>[^,]*)")


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.\-/]+", spaced) if w]


def is_secret_name(name: str) -> bool:
    """Whether a config key (or override path such as ``backend.api_key``) names a secret value."""
    words = _words(str(name).split(".")[-1])
    if not words or words[-1] in _REFERENCE_SUFFIXES:
        return False
    return any(w in _SECRET_WORDS for w in words)


def redact_text(text: str) -> str:
    """``text`` with secret overrides, URL credentials and secret query parameters redacted."""

    def override(m: re.Match[str]) -> str:
        if is_secret_name(m.group("name").lstrip("+~")) and m.group("value"):
            return f"{m.group('sep')}{m.group('name')}={REDACTED}"
        return m.group(0)

    out = _OVERRIDE.sub(override, text) if "=" in text else text
    out = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", out)

    def query(m: re.Match[str]) -> str:
        if is_secret_name(m.group("name")) and m.group("value"):
            return f"{m.group('sep')}{m.group('name')}={REDACTED}"
        return m.group(0)

    return _QUERY_PARAM.sub(query, out) if "=" in out else out


def redact(obj: Any) -> Any:
    """A copy of ``obj`` (dicts, lists, strings, scalars) with every secret replaced.

    Args:
        obj: A JSON/YAML-like value, e.g. a resolved config.

    Returns:
        The same structure; secret values are ``"***REDACTED***"``, strings have URL
        credentials removed. Non-string scalars are returned as they are.
    """
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if is_secret_name(str(k)) and v not in (None, "") else redact(v))
            for k, v in obj.items()
        }
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, (bytes, bytearray)):
        return [redact(v) for v in obj]
    return obj


def redacted_placeholders(obj: Any, prefix: str = "") -> list[str]:
    """Dotted keys of ``obj`` whose value holds :data:`REDACTED`.

    That is a printed command run as it was printed: its secret is now the placeholder, not the key.
    """
    if isinstance(obj, Mapping):
        return [k for key, v in obj.items() for k in redacted_placeholders(v, f"{prefix}{key}.")]
    if isinstance(obj, str):
        return [prefix.rstrip(".")] if REDACTED in obj else []
    if isinstance(obj, Sequence) and not isinstance(obj, (bytes, bytearray)):
        return [k for i, v in enumerate(obj) for k in redacted_placeholders(v, f"{prefix}{i}.")]
    return []


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``sys.argv``-style arguments with secret overrides and URL credentials redacted."""
    return [redact_text(str(a)) for a in argv]


def redact_yaml_file(path: Path) -> bool:
    """Rewrite a YAML file someone else wrote (Hydra's ``multirun.yaml``) with its secrets redacted.

    Returns:
        Whether the file existed and had something to redact.
    """
    import yaml

    from common.atomic import atomic_write_text

    if not path.is_file():
        return False
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    clean = redact(data)
    if clean == data:
        return False
    atomic_write_text(path, yaml.safe_dump(clean, sort_keys=False))
    return True
