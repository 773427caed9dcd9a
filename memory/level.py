"""One HNSW level: an hnswlib index plus per-item metadata, with a logical capacity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import hnswlib
import numpy as np


@dataclass
class ItemBatch:
    """Parallel columns describing items moving into, out of, or between levels."""

    item_ids: np.ndarray  # int64 (n,)
    embeddings: np.ndarray  # float32 (n, dim)
    importance: np.ndarray  # float32 (n,)
    usage: np.ndarray  # int64 (n,)
    last_access: np.ndarray  # int64 (n,)
    texts: list[str] = field(default_factory=list)
    entities: list[frozenset[str]] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.item_ids)

    def take(self, sel: slice | np.ndarray) -> ItemBatch:
        """Return the rows selected by a slice or an index array."""
        idx = np.arange(len(self))[sel]
        return ItemBatch(
            item_ids=self.item_ids[idx],
            embeddings=self.embeddings[idx],
            importance=self.importance[idx],
            usage=self.usage[idx],
            last_access=self.last_access[idx],
            texts=[self.texts[i] for i in idx],
            entities=[self.entities[i] for i in idx],
            metadata=[self.metadata[i] for i in idx],
        )


class MemoryLevel:
    """An inner-product HNSW index over unit vectors with item metadata.

    Args:
        name: ``"L1"``, ``"L2"`` or ``"store"`` (the unbounded oracle).
        dim: Embedding width.
        capacity: Logical capacity; ``None`` means unbounded (the index grows by doubling).
        m: HNSW graph degree.
        ef_construction: Build-time beam width.
        ef: Query-time beam width.
        seed: Random seed of the level generator.
    """

    def __init__(
        self,
        name: str,
        dim: int,
        capacity: int | None,
        *,
        m: int = 16,
        ef_construction: int = 200,
        ef: int = 50,
        seed: int = 42,
        _index: hnswlib.Index | None = None,
    ) -> None:
        if capacity is not None and capacity <= 0:
            raise ValueError(f"level {name}: capacity must be > 0 (or None for unbounded), got {capacity}")
        self.name = name
        self.dim = int(dim)
        self.capacity = capacity
        self.ef = int(ef)
        rows = capacity if capacity is not None else 1024
        if _index is None:
            _index = hnswlib.Index(space="ip", dim=self.dim)
            _index.init_index(
                max_elements=rows,
                ef_construction=ef_construction,
                M=m,
                random_seed=seed,
                allow_replace_deleted=True,
            )
        # One thread: results must not depend on thread scheduling, and the callers are 1-query.
        _index.set_num_threads(1)
        _index.set_ef(self.ef)
        self.index = _index
        self._rows = 0
        self._alloc(max(rows, _index.get_max_elements()))
        self._row_of: dict[int, int] = {}
        #: Bumped on every insert or removal, so derived indexes (the lexical channel) know when to rebuild.
        self.version = 0

    # ---------------------------------------------------------------- storage

    def _alloc(self, rows: int) -> None:
        """Grow the metadata arrays to ``rows`` rows (new rows are free)."""
        old = self._rows
        if rows <= old:
            return

        def grow(arr: np.ndarray | None, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
            new = np.zeros(shape, dtype=dtype)
            if arr is not None:
                new[:old] = arr
            return new

        self.ids = grow(getattr(self, "ids", None), (rows,), np.int64)
        self.emb = grow(getattr(self, "emb", None), (rows, self.dim), np.float32)
        self.importance = grow(getattr(self, "importance", None), (rows,), np.float32)
        self.usage = grow(getattr(self, "usage", None), (rows,), np.int64)
        self.last_access = grow(getattr(self, "last_access", None), (rows,), np.int64)
        self.alive = grow(getattr(self, "alive", None), (rows,), bool)
        self.texts: list[str] = [*getattr(self, "texts", []), *[""] * (rows - old)]
        self.entities: list[frozenset[str]] = [*getattr(self, "entities", []), *[frozenset()] * (rows - old)]
        self.meta: list[dict[str, Any]] = [*getattr(self, "meta", []), *[{} for _ in range(rows - old)]]
        # Free rows as a stack; reversed so row 0 is handed out first (deterministic layout).
        self._free: list[int] = [*getattr(self, "_free", []), *range(rows - 1, old - 1, -1)]
        self._rows = rows

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._row_of

    @property
    def free_slots(self) -> int | None:
        """How many items fit before eviction is needed (``None`` if unbounded)."""
        return None if self.capacity is None else self.capacity - len(self)

    def row_of(self, item_id: int) -> int:
        """Row of a live item.

        Raises:
            KeyError: If the id is not stored in this level.
        """
        return self._row_of[int(item_id)]

    def live_rows(self) -> np.ndarray:
        """Row indices of live items (ascending)."""
        return np.flatnonzero(self.alive)

    def add(self, batch: ItemBatch) -> None:
        """Insert ``batch`` (must fit: callers evict first).

        Raises:
            ValueError: If the batch does not fit, or holds an id already present.
        """
        n = len(batch)
        if n == 0:
            return
        if self.capacity is not None and len(self) + n > self.capacity:
            raise ValueError(
                f"level {self.name}: adding {n} items to {len(self)} exceeds capacity {self.capacity}"
            )
        dup = [int(i) for i in batch.item_ids if int(i) in self._row_of]
        if dup:
            raise ValueError(f"level {self.name}: item ids already present: {dup[:5]}")
        if len(self) + n > self._rows:  # unbounded level: grow index and arrays by doubling
            new_rows = max(self._rows * 2, len(self) + n)
            self.index.resize_index(new_rows)
            self._alloc(new_rows)
        self._store(batch)
        # replace_deleted=True reuses the internal slots of evicted items (bounded memory).
        self.index.add_items(batch.embeddings, batch.item_ids, replace_deleted=True)

    def restore(self, batch: ItemBatch) -> None:
        """Fill metadata for items already present in a loaded hnswlib index.

        Raises:
            ValueError: If an item id is not a live label of the index.
        """
        labels = set(self.index.get_ids_list())
        missing = [int(i) for i in batch.item_ids if int(i) not in labels]
        if missing:
            raise ValueError(f"level {self.name}: ids {missing[:5]} are in the metadata but not in the index")
        if len(batch) > self._rows:
            self._alloc(len(batch))
        self._store(batch)

    def _store(self, batch: ItemBatch) -> None:
        n = len(batch)
        self.version += 1
        rows = np.array([self._free.pop() for _ in range(n)], dtype=np.int64)
        self.ids[rows] = batch.item_ids
        self.emb[rows] = batch.embeddings
        self.importance[rows] = batch.importance
        self.usage[rows] = batch.usage
        self.last_access[rows] = batch.last_access
        self.alive[rows] = True
        for r, iid, text, ents, meta in zip(
            rows.tolist(), batch.item_ids.tolist(), batch.texts, batch.entities, batch.metadata, strict=True
        ):
            self.texts[r] = text
            self.entities[r] = ents
            self.meta[r] = meta
            self._row_of[iid] = r

    def remove(self, item_ids: np.ndarray) -> ItemBatch:
        """Delete items by id and return their records.

        Raises:
            KeyError: If an id is not in this level.
        """
        try:
            rows = np.array([self._row_of.pop(int(i)) for i in item_ids], dtype=np.int64)
        except KeyError as exc:
            raise KeyError(f"level {self.name}: item id {exc.args[0]} is not stored here") from None
        out = self._batch(rows)
        self.version += 1
        for r, iid in zip(rows.tolist(), out.item_ids.tolist(), strict=True):
            self.index.mark_deleted(iid)
            self.alive[r] = False
            self.texts[r] = ""
            self.entities[r] = frozenset()
            self.meta[r] = {}
            self._free.append(r)
        return out

    def _batch(self, rows: np.ndarray) -> ItemBatch:
        """Copies of the records stored in ``rows``."""
        return ItemBatch(
            item_ids=self.ids[rows].copy(),
            embeddings=self.emb[rows].copy(),
            importance=self.importance[rows].copy(),
            usage=self.usage[rows].copy(),
            last_access=self.last_access[rows].copy(),
            texts=[self.texts[r] for r in rows],
            entities=[self.entities[r] for r in rows],
            metadata=[self.meta[r] for r in rows],
        )

    def all_items(self) -> ItemBatch:
        """Records of every live item, in row order (for persistence and inspection)."""
        rows = self.live_rows()
        return self._batch(rows)

    # ---------------------------------------------------------------- queries

    def row(self, item_id: int) -> int:
        """Row of a live item id."""
        return self._row_of[item_id]

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate k-NN by inner product.

        Args:
            query: Unit vector ``(dim,)``.
            k: Number of neighbours (clipped to the level size).

        Returns:
            ``(rows, similarities)``, best first; empty arrays if the level is empty.
        """
        k = min(k, len(self))
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        # hnswlib searches with max(ef, k); we raise ef when deleted nodes make a search come up short.
        ef = self.ef
        while True:
            try:
                labels, dists = self.index.knn_query(query.reshape(1, -1), k=k)
                break
            except RuntimeError:
                if ef >= len(self) + 1:
                    k = max(1, k // 2)  # give up on a full k rather than fail the query
                ef = min(ef * 2, len(self) + 1)
                self.index.set_ef(ef)
        if ef != self.ef:
            self.index.set_ef(self.ef)
        rows = np.fromiter(
            (self._row_of[int(lbl)] for lbl in labels[0]), dtype=np.int64, count=labels.shape[1]
        )
        return rows, (1.0 - dists[0]).astype(np.float32)

    def touch(self, rows: np.ndarray, clock: int) -> None:
        """Record a retrieval: ``usage += 1`` and ``last_access = clock``."""
        self.usage[rows] += 1
        self.last_access[rows] = clock
