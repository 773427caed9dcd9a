"""Call packs: the call cache as one compressed, content-addressed, verifiable file."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sqlite3
import zlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.atomic import atomic_write_bytes
from common.provenance import git_commit
from modules.backends.result_check import InvalidResult, check_stored

FORMAT = "budget-router-call-pack"
FORMAT_VERSION = 1
PACK_SUFFIX = ".pack.gz"
_NAME_RE = re.compile(r"calls-([0-9a-f]{16})\.pack\.gz$")


class PackError(ValueError):
    """A pack is corrupt, truncated, of another format, or cannot be exported/imported."""


class PackVersionError(PackError):
    """A pack was made under other code/prompt versions (use ``allow_version_mismatch``)."""


def code_versions() -> dict[str, str]:
    """The version tags a pack's calls depend on (bumped when prompts or parsing change)."""
    from modules.base import MODULES_CODE_VERSION
    from modules.cache import CODE_VERSION

    return {"cache_code_version": CODE_VERSION, "modules_code_version": MODULES_CODE_VERSION}


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def entry_sha256(key: str, value: Mapping[str, Any]) -> str:
    """Hash of one entry: sha256 of the canonical JSON ``[key, value]``."""
    return hashlib.sha256(_canonical([key, value]).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Filters:
    """Which cache entries an export keeps (empty = all).

    Attributes:
        tags: ``{tag: value}`` that an entry's ``tags`` must all match (e.g. ``{"module": "entity"}``).
        models: Model ids, one of which an LLM call's ``model_id`` must be.
        local: Local-tier methods (e.g. ``textrank``) whose outputs are kept. With ``models`` or
            ``local`` given, a local-tier output is kept only if its method is listed (outputs stored
            before methods were recorded have none, and are dropped); with neither, all are kept.
    """

    tags: Mapping[str, str] = field(default_factory=dict)
    models: Sequence[str] = ()
    local: Sequence[str] = ()

    def match(self, value: Mapping[str, Any]) -> bool:
        """Whether a cache value passes the filters."""
        tags = value.get("tags") or {}
        if any(str(tags.get(k)) != str(v) for k, v in self.tags.items()):
            return False
        if "model_id" not in value:  # a local tier's output
            return str(tags.get("method")) in self.local or not (self.local or self.models)
        return not self.models or str(value.get("model_id")) in self.models

    def to_dict(self) -> dict[str, Any]:
        """JSON form recorded in the manifest."""
        tags = dict(sorted(self.tags.items()))
        return {"tags": tags, "models": sorted(self.models), "local": sorted(self.local)}


def read_sqlite_entries(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """All ``(key, value)`` rows of a SQLite call cache, sorted by key, read without writing to it.

    Raises:
        PackError: If the file is missing, not a SQLite cache, or holds a value that is not JSON.
    """
    p = Path(path)
    if not p.is_file():
        raise PackError(f"call cache {p} does not exist")
    try:
        # Read-only URI (percent-escaped by as_uri): exporting never writes to the cache.
        conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT key, value FROM calls ORDER BY key").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise PackError(f"call cache {p}: cannot read its 'calls' table ({exc})") from exc
    out = []
    for key, raw in rows:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PackError(f"call cache {p}: key {key}: value is not JSON ({exc.msg})") from exc
        out.append((str(key), value))
    return out


@dataclass(frozen=True)
class ExportReport:
    """What :func:`export_pack` wrote: the path, its manifest, and how many entries were skipped."""

    path: Path
    manifest: dict[str, Any]
    skipped: int


def export_pack(
    cache_path: str | Path,
    out: str | Path,
    *,
    filters: Filters | None = None,
    base_packs: Sequence[str | Path] = (),
) -> ExportReport:
    """Write the entries of a SQLite call cache (optionally filtered) as a pack.

    Args:
        cache_path: The SQLite call cache file.
        out: Destination file, or an existing directory (or a path ending in ``/``) to get the
            content-addressed name ``calls-<sha16>.pack.gz`` inside it.
        filters: Keep only matching entries.
        base_packs: Packs already shipped: an entry one of them holds with the same value is left
            out, so the result is a *delta* pack of only the new calls (a long experiment then
            commits a few hundred kB per sitting instead of re-shipping every call). The manifest
            names them under ``base_packs``; import them together with the delta.

    Returns:
        The :class:`ExportReport` (``skipped`` counts filtered and base entries).

    Raises:
        PackError: If the cache or a base pack cannot be read or fails verification.
    """
    flt = filters or Filters()
    shipped: dict[str, dict[str, Any]] = {}
    bases = []
    for bp in base_packs:
        base = read_pack(bp)  # verified: a delta must not rest on a corrupt base
        shipped.update(base.entries)
        bases.append({"file": base.path.name, "payload_sha256": base.manifest["payload_sha256"]})
    entries = read_sqlite_entries(cache_path)
    kept = [(k, v) for k, v in entries if flt.match(v) and shipped.get(k) != v]
    lines = [_canonical({"key": k, "sha256": entry_sha256(k, v), "value": v}) + "\n" for k, v in kept]
    payload = "".join(lines).encode("utf-8")
    payload_sha = hashlib.sha256(payload).hexdigest()
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        **code_versions(),
        "count": len(kept),
        "payload_sha256": payload_sha,
        "filters": flt.to_dict(),
        **({"base_packs": bases} if bases else {}),
        "git_commit": git_commit(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": str(cache_path),
    }
    dest = Path(out)
    if dest.is_dir() or str(out).endswith(("/", "\\")):
        dest = dest / f"calls-{payload_sha[:16]}{PACK_SUFFIX}"
    head = (_canonical({"manifest": manifest}) + "\n").encode("utf-8")
    # mtime=0: the same entries always give the same bytes.
    blob = gzip.compress(head + payload, compresslevel=9, mtime=0)
    atomic_write_bytes(dest, blob)
    return ExportReport(dest, manifest, len(entries) - len(kept))


@dataclass(frozen=True)
class Pack:
    """A verified pack in memory: its manifest and entries (sorted by key)."""

    path: Path
    manifest: dict[str, Any]
    entries: list[tuple[str, dict[str, Any]]]


def read_pack(path: str | Path) -> Pack:
    """Read a pack and verify its format, every entry's hash, the count and the payload hash.

    Raises:
        PackError: Naming the file and the first bad line/entry, for any corruption.
    """
    p = Path(path)
    try:
        raw = gzip.decompress(p.read_bytes())
    except FileNotFoundError as exc:
        raise PackError(f"call pack {p} does not exist") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise PackError(f"call pack {p}: truncated or corrupt gzip stream ({exc}); nothing imported") from exc
    head, _, payload = raw.partition(b"\n")
    try:
        manifest = json.loads(head.decode("utf-8"))["manifest"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise PackError(f"call pack {p}: line 1: not a pack manifest ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise PackError(f"call pack {p}: line 1: format is not {FORMAT!r}")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise PackError(
            f"call pack {p}: format_version {manifest.get('format_version')!r}, "
            f"this code reads {FORMAT_VERSION}"
        )
    entries: list[tuple[str, dict[str, Any]]] = []
    for n, line in enumerate(payload.decode("utf-8", errors="replace").splitlines(), start=2):
        where = f"call pack {p}: line {n} (entry {n - 1})"
        try:
            obj = json.loads(line)
            key, value, sha = obj["key"], obj["value"], obj["sha256"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise PackError(f"{where}: not a pack entry ({exc}); nothing imported") from exc
        if not isinstance(key, str) or not isinstance(value, dict) or entry_sha256(key, value) != sha:
            raise PackError(
                f"{where}, key {str(key)[:16]}...: sha256 mismatch (corrupt entry); nothing imported"
            )
        if entries and key <= entries[-1][0]:
            raise PackError(f"{where}: key {key[:16]}... out of order or duplicated; nothing imported")
        entries.append((key, value))
    if len(entries) != manifest.get("count"):
        raise PackError(
            f"call pack {p}: {len(entries)} entries but the manifest says {manifest.get('count')} "
            "(truncated?); nothing imported"
        )
    if hashlib.sha256(payload).hexdigest() != manifest.get("payload_sha256"):
        raise PackError(f"call pack {p}: payload sha256 does not match the manifest; nothing imported")
    named = _NAME_RE.search(p.name)
    if named and not str(manifest["payload_sha256"]).startswith(named.group(1)):
        raise PackError(f"call pack {p}: file name says payload {named.group(1)}, content is another")
    return Pack(p, manifest, entries)


def version_mismatch(manifest: Mapping[str, Any]) -> list[str]:
    """``"name: pack X, code Y"`` for each code version that differs from this checkout's."""
    return [
        f"{k}: pack {manifest.get(k)!r}, code {v!r}"
        for k, v in code_versions().items()
        if manifest.get(k) != v
    ]


@dataclass
class ImportReport:
    """What :func:`import_pack` did.

    Attributes:
        pack: The pack file.
        total: Entries in the pack.
        imported: New entries written.
        present: Entries the cache already held with the same value.
        conflicts: Keys the cache holds with a *different* value (kept, not overwritten).
        version_mismatch: Differing code versions (non-empty only when allowed).
        base_packs: File names of the packs this delta pack was exported against (empty for a
            full pack): the delta alone replays only the calls they lack.
    """

    pack: Path
    total: int
    imported: int
    present: int
    conflicts: list[str] = field(default_factory=list)
    version_mismatch: list[str] = field(default_factory=list)
    base_packs: list[str] = field(default_factory=list)

    def line(self, imported_with: Collection[str] = ()) -> str:
        """One human-readable summary line.

        Args:
            imported_with: File names of the packs imported in the same call; a delta's hint to
                import its base names only the bases not among them.
        """
        text = (
            f"call pack {self.pack}: {self.imported} entries imported, {self.present} already present"
            f", {len(self.conflicts)} conflicts (existing values kept)"
        )
        if self.conflicts:
            text += f" e.g. {', '.join(k[:16] for k in self.conflicts[:3])}"
        if self.version_mismatch:
            text += f"; imported despite version mismatch ({'; '.join(self.version_mismatch)})"
        if self.base_packs:
            together = set(imported_with)
            missing = [b for b in self.base_packs if b not in together]
            hint = f"import {', '.join(missing)} too" if missing else "its bases are imported in this call"
            text += f"; a delta of {', '.join(self.base_packs)} ({hint})"
        return text


def import_pack(pack_path: str | Path, cache: Any, *, allow_version_mismatch: bool = False) -> ImportReport:
    """Verify a pack, then merge its entries into ``cache`` (a :class:`modules.cache.CallCache`).

    Args:
        pack_path: The pack file.
        cache: The target cache; only its store is used, so its hit/miss counters stay untouched.
        allow_version_mismatch: Import a pack made under other code versions anyway.

    Returns:
        The :class:`ImportReport`.

    Raises:
        PackError: For a corrupt pack (nothing written).
        PackVersionError: For a pack of other code versions, unless allowed (nothing written).
    """
    pack = read_pack(pack_path)
    mismatch = version_mismatch(pack.manifest)
    if mismatch and not allow_version_mismatch:
        raise PackVersionError(
            f"call pack {pack.path} was made under other code versions ({'; '.join(mismatch)}): "
            "its calls may not be what this code would compute. Nothing imported; pass "
            "--allow-version-mismatch (allow_version_mismatch=True) to import it anyway."
        )
    for key, value in pack.entries:
        try:
            check_stored(value)
        except InvalidResult as exc:
            raise PackError(
                f"call pack {pack.path}: entry {key} is not a valid cached result ({exc}); nothing imported"
            ) from None
    store = cache.store
    # Insert-if-absent in one transaction (SQLite) / one MULTI (Redis): a value another writer stores
    # meanwhile is kept and counted below, never overwritten.
    stored = set(store.put_new_many(pack.entries))
    rest = [(k, v) for k, v in pack.entries if k not in stored]
    present, conflicts = 0, []
    for (key, value), old in zip(rest, store.get_many([k for k, _ in rest]) if rest else [], strict=True):
        if old == value:
            present += 1
        else:
            conflicts.append(key)
    bases = [str(b.get("file")) for b in pack.manifest.get("base_packs") or []]
    return ImportReport(pack.path, len(pack.entries), len(stored), present, conflicts, mismatch, bases)


def cache_summary_line(cache: Any, *, hits0: int = 0, misses0: int = 0) -> str:
    """``call cache <where>: N lookups, H replayed (x%), M computed; E entries`` since the given counts."""
    if cache is None:
        return "call cache: disabled (cache.path=null): every call was computed"
    hits, misses = int(cache.hits) - hits0, int(cache.misses) - misses0
    n = hits + misses
    rate = f"{hits / n:.0%}" if n else "n/a"
    return (
        f"call cache {cache.path}: {n} lookups, {hits} replayed from the cache ({rate}), "
        f"{misses} computed; {len(cache)} entries stored"
    )


if __name__ == "__main__":
    import sys

    from modules.cache_pack_cli import main

    sys.exit(main())
