"""Fault injection, issue 15 item 7: every corrupt file gives one clear error naming it and the fix.

Each of these used to end in a raw traceback with no file named (``sqlite3.DatabaseError``,
``UnicodeDecodeError``, ``AttributeError: 'list' object…``, ``KeyError``), or, for a memory
manifest with an empty ``files`` map, in a silently unchecked load.
(The damaged ``state.json`` cases are in test_reliability_checkpoint.py.)
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from benchmarks.registry import get_benchmark
from common.datadir import DataFileError
from memory import HierarchicalMemory, MemoryConfig, MemoryLoadError, get_encoder
from modules.cache import CallCache
from modules.cache_stores.base import CacheStoreError
from policies.router import METADATA_FILE, WEIGHTS_FILE, Router, RouterLoadError
from tests.reliability_support import RUN_NAME, config, one_line_error, run_cli
from tests.support import needs_locomo
from tests.test_benchmarks_malformed import hotpot_record, write_hotpot


def test_a_cache_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "calls.sqlite"
    path.write_bytes(b"this is not an SQLite file" * 200)
    with pytest.raises(CacheStoreError, match=rf"call cache {path} is corrupt .*delete the cache at {path}"):
        CallCache(path)


def _damage_pages(path, first_page: int = 2) -> None:
    """Overwrite every page from ``first_page`` on; page 1 (header and schema) stays readable."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    start = (first_page - 1) * page_size
    assert len(data) > start, "the cache has a single page: nothing to damage"
    data[start:] = (b"\xde\xad\xbe\xef" * (len(data) // 4 + 1))[: len(data) - start]
    path.write_bytes(bytes(data))


@needs_locomo
def test_a_damaged_cache_page_found_mid_training_is_one_clear_error(tmp_path):
    from policies.training.loop import train

    train(config(tmp_path))  # fills calls.sqlite (and the question-bank cache)
    cache = tmp_path / "calls.sqlite"
    assert not (tmp_path / "calls.sqlite-wal").exists()  # closed cleanly: every entry is in the file
    _damage_pages(cache)
    # The damage is not visible when the file is opened: only a lookup reads the broken pages.
    CallCache(cache).close()
    with sqlite3.connect(cache) as conn, pytest.raises(sqlite3.DatabaseError, match="malformed"):
        conn.execute("SELECT COUNT(*) FROM calls").fetchone()

    proc = run_cli(tmp_path, "seed=1")  # a new run: it starts, then its first LLM lookup fails
    line = one_line_error(proc)
    assert f"the SQLite call cache {cache} is corrupt" in line and f"delete the cache at {cache}" in line
    run = tmp_path / "runs" / RUN_NAME.replace("s0", "s1")
    assert (run / "config.yaml").is_file()  # it failed mid-training, not at startup
    assert not (run / "router").exists()


def test_non_utf8_hotpotqa_line_is_named(tmp_path):
    good = json.dumps(hotpot_record("h1"))
    write_hotpot(tmp_path, [good, good.replace("h1", "h2")])
    path = tmp_path / "hotpotqa_aflow_validate200.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"h2"', b'"h\xff2"')
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataFileError, match=rf"{path}: record at line 2: field <encoding>: not UTF-8"):
        get_benchmark("hotpotqa", tmp_path).load("train")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"[1, 2]", "holds a JSON list, not the metadata object"),
        (b'{"format": "\xff"}', "is not UTF-8"),
        # issue 49, item 9: these two were raw tracebacks
        (
            b'{"format": "budget-router/router", "format_version": "abc"}',
            "has format_version 'abc', not a number",
        ),
    ],
    ids=["list", "not-utf8", "version-abc"],
)
def test_router_metadata_that_is_a_list_or_not_utf8(tmp_path, content, match):
    (tmp_path / METADATA_FILE).write_bytes(content)
    (tmp_path / WEIGHTS_FILE).write_bytes(b"weights")
    with pytest.raises(RouterLoadError, match=rf"{tmp_path}/{METADATA_FILE} {match}"):
        Router.load(tmp_path)


def _saved_memory(tmp_path):
    cfg = MemoryConfig(l1_capacity=8, l2_capacity=32, reranker="lexical")
    mem = HierarchicalMemory(cfg, get_encoder("hashing"))
    mem.ingest([f"fact number {i} about item {i * 7}" for i in range(20)], [0.5] * 20)
    mem.save(tmp_path)
    return tmp_path / "manifest.json"


def test_memory_manifest_missing_a_key(tmp_path):
    manifest = _saved_memory(tmp_path)
    man = json.loads(manifest.read_text())
    del man["clock"]
    manifest.write_text(json.dumps(man))
    match = rf"{tmp_path}: manifest.json lacks \['clock'\].*delete {tmp_path}"
    with pytest.raises(MemoryLoadError, match=match):
        HierarchicalMemory.load(tmp_path, get_encoder("hashing"))


def test_memory_manifest_with_empty_files_map_does_not_turn_checksums_off(tmp_path):
    manifest = _saved_memory(tmp_path)
    man = json.loads(manifest.read_text())
    level = next(iter(man["tiers"]))
    side = tmp_path / f"{level}.json"
    side.write_text(side.read_text().replace("fact number", "FACT NUMBER"))  # a corrupted save
    man["files"] = {}
    manifest.write_text(json.dumps(man))
    with pytest.raises(MemoryLoadError, match=rf"records no checksum for \[.*'{level}.json'"):
        HierarchicalMemory.load(tmp_path, get_encoder("hashing"))


def test_router_metadata_whose_network_is_not_an_object(tmp_path):
    """Issue 49, item 9: ``network: [1]`` gave a raw AttributeError."""
    import hashlib

    from policies.router import FORMAT, FORMAT_VERSION

    weights = b"weights"
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "network": [1]}
    meta["weights_sha256"] = hashlib.sha256(weights).hexdigest()
    (tmp_path / METADATA_FILE).write_text(json.dumps(meta))
    (tmp_path / WEIGHTS_FILE).write_bytes(weights)
    with pytest.raises(RouterLoadError, match=rf"{tmp_path}: bad network config in metadata"):
        Router.load(tmp_path)


def test_a_cache_row_that_is_not_json_is_a_miss_named_by_its_key(tmp_path):
    """Issue 49, item 9: a row that is not JSON crashed every lookup of the cache."""
    import sqlite3

    from modules.cache import CallCache

    path = tmp_path / "calls.sqlite"
    cache = CallCache(path)
    cache.put("k1", {"raw": [0], "gflops": 1.0, "latency_s": 0.1})
    cache.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE calls SET value = ? WHERE key = 'k1'", ("{not json",))
    cache = CallCache(path)
    with pytest.warns(UserWarning, match=rf"call cache {path}: entry k1 is not JSON"):
        assert cache.get("k1") is None
    cache.put("k1", {"raw": [1], "gflops": 1.0, "latency_s": 0.1})  # the recomputed value replaces it
    assert cache.get("k1")["raw"] == [1]


def test_describe_with_data_dir_as_an_option_names_the_flag(capsys):
    """Issue 49, item 9: ``--option data_dir=...`` gave `got multiple values for keyword argument`."""
    import evaluate

    with pytest.raises(SystemExit, match=r"--option 'data_dir=/x': the data directory is --data-dir /x"):
        evaluate.main(["describe", "--benchmark", "hotpotqa", "--option", "data_dir=/x"])
