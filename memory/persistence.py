"""Save and load a :class:`memory.HierarchicalMemory` (both levels, all metadata, counters).

Layout of a saved directory::

    manifest.json   format version, encoder name and dim, config, counters, file checksums
    L1.hnsw L1.npz L1.json   hnswlib index, numeric columns, texts/entities/metadata
    L2.hnsw L2.npz L2.json   (absent for the single-store oracle mode)
"""

from __future__ import annotations

import io
import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hnswlib
import numpy as np

from common.atomic import atomic_write_bytes, atomic_write_json, atomic_write_with
from common.provenance import sha256_file
from memory.config import MemoryConfig
from memory.encoder import Encoder
from memory.level import ItemBatch, MemoryLevel

if TYPE_CHECKING:
    from memory.hierarchical import HierarchicalMemory
    from memory.rerank import Reranker

FORMAT = "htm-ear-memory"
FORMAT_VERSION = 1


class MemoryLoadError(ValueError):
    """A saved memory is missing, corrupted, or incompatible with the given encoder."""


def save_memory(mem: HierarchicalMemory, directory: str | os.PathLike[str]) -> Path:
    """Write ``mem`` to ``directory`` (created if needed); returns the manifest path."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    levels: dict[str, Any] = {}
    for name, level in mem.levels.items():
        items = level.all_items()
        index_path = atomic_write_with(root / f"{name}.hnsw", partial(_save_index, level.index))
        buf = io.BytesIO()
        np.savez(
            buf,
            item_ids=items.item_ids,
            embeddings=items.embeddings,
            importance=items.importance,
            usage=items.usage,
            last_access=items.last_access,
        )
        npz_path = atomic_write_bytes(root / f"{name}.npz", buf.getvalue())
        json_path = atomic_write_json(
            root / f"{name}.json",
            {
                "texts": items.texts,
                "entities": [sorted(e) for e in items.entities],
                "metadata": items.metadata,
            },
            indent=None,
        )
        for p in (index_path, npz_path, json_path):
            files[p.name] = sha256_file(p)
        levels[name] = {"capacity": level.capacity, "count": len(items)}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "encoder": mem.encoder.name,
        "dim": mem.dim,
        "config": mem.config.to_dict(),
        "gate_threshold": mem.gate_threshold,
        "next_id": mem.next_id,
        "clock": mem.clock,
        "stats": mem.stats,
        # The manifest key predates the level/tier naming split; it stays "tiers" so memories saved
        # before the rename (and their checksums) still load. It holds the storage levels.
        "tiers": levels,
        "files": files,
    }
    return atomic_write_json(root / "manifest.json", manifest)


def _save_index(index: hnswlib.Index, path: Path) -> None:
    """Hnswlib writes to a path itself (``atomic_write_with`` hands it the temporary one)."""
    index.save_index(str(path))


def _fail(root: Path, msg: str) -> MemoryLoadError:
    return MemoryLoadError(f"cannot load memory from {root}: {msg}")


def load_memory(
    directory: str | os.PathLike[str], encoder: Encoder, *, reranker: Reranker | None = None
) -> HierarchicalMemory:
    """Load a memory written by :func:`save_memory`.

    Raises:
        MemoryLoadError: Missing/corrupted files, a checksum mismatch, or an encoder whose name or
            dimension differs from the one the memory was built with.
    """
    from memory.hierarchical import HierarchicalMemory

    root = Path(directory)
    man_path = root / "manifest.json"
    if not man_path.is_file():
        raise _fail(root, "manifest.json not found (was it saved with HierarchicalMemory.save?)")
    try:
        man = json.loads(man_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(root, f"manifest.json is not valid JSON ({exc})") from exc
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        raise _fail(root, f"manifest.json is not an {FORMAT} manifest")
    if man.get("format_version") != FORMAT_VERSION:
        raise _fail(root, f"format_version {man.get('format_version')!r}, this code reads {FORMAT_VERSION}")
    _check_manifest(root, man)
    if man["encoder"] != encoder.name:
        raise _fail(root, f"saved with encoder {man['encoder']!r} but loading with {encoder.name!r}")
    if int(man["dim"]) != int(encoder.dim):
        raise _fail(
            root, f"saved embeddings have dim {man['dim']} but encoder {encoder.name!r} has dim {encoder.dim}"
        )
    for fname, digest in man["files"].items():
        path = root / fname
        if not path.is_file():
            raise _fail(root, f"{fname} is missing")
        if sha256_file(path) != digest:
            raise _fail(root, f"{fname} is corrupted or from another save (sha256 mismatch)")
    try:
        config = MemoryConfig.from_dict(man["config"])
    except (TypeError, ValueError) as exc:
        raise _fail(root, f"bad config in manifest: {exc}") from exc
    # Keep the gate threshold the memory was built with, even if calibrations changed since.
    if config.gate_threshold is None and man.get("gate_threshold") is not None:
        config = config.replace(gate_threshold=float(man["gate_threshold"]))
    mem = HierarchicalMemory(config, encoder, reranker=reranker)
    for name, info in man["tiers"].items():
        if name not in mem.levels:
            raise _fail(root, f"level {name!r} does not exist in mode {config.mode!r}")
        mem.levels[name] = _load_level(root, name, info, mem.levels[name], int(man["dim"]))
    mem.next_id = int(man["next_id"])
    mem.clock = int(man["clock"])
    mem.stats.update({k: int(v) for k, v in man["stats"].items()})
    return mem


#: Keys every manifest written by save_memory has.
MANIFEST_KEYS = ("encoder", "dim", "config", "next_id", "clock", "stats", "tiers", "files")


def _check_manifest(root: Path, man: dict[str, Any]) -> None:
    """Every manifest key present, and a checksum for every file of every level.

    An empty ``files`` map used to turn every checksum off silently; now each level's three
    files must be listed.
    """
    fix = f"the save is incomplete or edited: delete {root} so the memory is rebuilt"
    missing = [k for k in MANIFEST_KEYS if k not in man]
    if missing:
        raise _fail(root, f"manifest.json lacks {missing}; {fix}")
    if not isinstance(man["files"], dict) or not isinstance(man["tiers"], dict):
        raise _fail(root, f"manifest.json 'files' and 'levels' must be objects; {fix}")
    expected = [f"{name}.{ext}" for name in man["tiers"] for ext in ("hnsw", "npz", "json")]
    unlisted = [f for f in expected if f not in man["files"]]
    if unlisted or not man["files"]:
        raise _fail(root, f"manifest.json records no checksum for {unlisted or 'any file'}; {fix}")


def _load_level(root: Path, name: str, info: dict[str, Any], fresh: MemoryLevel, dim: int) -> MemoryLevel:
    try:
        with np.load(root / f"{name}.npz") as z:
            cols = {k: z[k] for k in ("item_ids", "embeddings", "importance", "usage", "last_access")}
        side = json.loads((root / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError) as exc:
        raise _fail(root, f"{name} metadata unreadable ({exc})") from exc
    n = len(cols["item_ids"])
    if n != info["count"] or any(len(side[k]) != n for k in ("texts", "entities", "metadata")):
        raise _fail(root, f"{name} metadata columns disagree in length (expected {info['count']} items)")
    if cols["embeddings"].shape != (n, dim):
        raise _fail(
            root, f"{name}.npz embeddings have shape {cols['embeddings'].shape}, expected ({n}, {dim})"
        )
    index = hnswlib.Index(space="ip", dim=dim)
    try:
        index.load_index(str(root / f"{name}.hnsw"), allow_replace_deleted=True)
    except RuntimeError as exc:
        raise _fail(root, f"{name}.hnsw unreadable by hnswlib ({exc})") from exc
    if index.dim != dim:
        raise _fail(root, f"{name}.hnsw has dim {index.dim}, expected {dim}")
    level = MemoryLevel(
        name,
        dim,
        info["capacity"],
        ef=fresh.ef,
        _index=index,
    )
    batch = ItemBatch(
        item_ids=cols["item_ids"].astype(np.int64),
        embeddings=cols["embeddings"].astype(np.float32),
        importance=cols["importance"].astype(np.float32),
        usage=cols["usage"].astype(np.int64),
        last_access=cols["last_access"].astype(np.int64),
        texts=list(side["texts"]),
        entities=[frozenset(e) for e in side["entities"]],
        metadata=list(side["metadata"]),
    )
    level.restore(batch)
    return level
