"""Call packs: export/import round trip, verification, versions, merging, filters and the config hook."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

import modules.cache as cache_mod
from envs.components import ConfigError, make_components
from modules import cache_pack_cli
from modules.backends.base import GenerationRequest
from modules.cache import CallCache
from modules.cache_pack import (
    Filters,
    PackError,
    PackVersionError,
    cache_summary_line,
    entry_sha256,
    export_pack,
    import_pack,
    read_pack,
    read_sqlite_entries,
)


def _value(i: int, module: str = "entity", model: str = "qwen") -> dict:
    return {
        "text": f"answer {i} é",
        "tokens_in": 10 + i,
        "tokens_out": 3,
        "latency_s": 0.125 * i,
        "model_id": model,
        "finish_reason": "stop",
        "truncated": False,
        "tags": {"module": module, "tier": "HIGH"},
    }


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "calls.sqlite"
    with CallCache(path) as c:
        c.put_many(
            [
                (f"k{i:02d}", _value(i, "entity" if i % 2 else "temporal", "qwen" if i < 6 else "smol"))
                for i in range(8)
            ]
        )
    return path


def _pack(source: Path, tmp_path: Path, **kw) -> Path:
    return export_pack(source, str(tmp_path / "packs") + "/", **kw).path


def _rewrite(pack: Path, edit) -> Path:
    """Decompress, let ``edit`` change the list of lines, recompress (a valid gzip with bad content)."""
    lines = gzip.decompress(pack.read_bytes()).decode().splitlines(keepends=True)
    out = pack.with_name("edited.pack.gz")
    out.write_bytes(gzip.compress("".join(edit(lines)).encode()))
    return out


def test_round_trip_into_empty_cache(source, tmp_path):
    rep = export_pack(source, str(tmp_path / "packs") + "/")
    m = rep.manifest
    assert rep.path.name == f"calls-{m['payload_sha256'][:16]}.pack.gz"
    assert m["count"] == 8 and m["cache_code_version"] == cache_mod.CODE_VERSION and m["git_commit"]
    pack = read_pack(rep.path)
    assert [k for k, _ in pack.entries] == [f"k{i:02d}" for i in range(8)]
    with CallCache(tmp_path / "dst.sqlite") as dst:
        r = import_pack(rep.path, dst)
        assert (r.total, r.imported, r.present, r.conflicts) == (8, 8, 0, [])
        assert (dst.hits, dst.misses) == (0, 0)  # importing is not a lookup
    assert read_sqlite_entries(tmp_path / "dst.sqlite") == read_sqlite_entries(source)
    # the same entries give the same payload, hence the same content address
    assert export_pack(source, str(tmp_path / "again") + "/").path.name == rep.path.name
    line = gzip.decompress(rep.path.read_bytes()).decode().splitlines()[1]
    assert json.loads(line)["sha256"] == entry_sha256("k00", _value(0, "temporal"))


def test_idempotent_reimport(source, tmp_path):
    pack = _pack(source, tmp_path)
    with CallCache(tmp_path / "dst.sqlite") as dst:
        import_pack(pack, dst)
        again = import_pack(pack, dst)
        assert (again.imported, again.present, len(dst)) == (0, 8, 8)
        assert "0 entries imported, 8 already present, 0 conflicts" in again.line()


def test_conflicting_value_is_reported_and_kept(source, tmp_path):
    pack = _pack(source, tmp_path)
    with CallCache(tmp_path / "dst.sqlite") as dst:
        dst.put("k03", {"text": "another answer"})
        r = import_pack(pack, dst)
        assert (r.imported, r.present, r.conflicts) == (7, 0, ["k03"])
        assert dst.store.get("k03") == {"text": "another answer"}
        assert "1 conflicts (existing values kept) e.g. k03" in r.line()


def test_corrupted_entry_names_pack_and_entry_and_writes_nothing(source, tmp_path):
    pack = _pack(source, tmp_path)
    bad = _rewrite(pack, lambda ls: [*ls[:3], ls[3].replace("answer 2", "answer X"), *ls[4:]])
    with CallCache(tmp_path / "dst.sqlite") as dst:
        with pytest.raises(
            PackError, match=r"edited\.pack\.gz: line 4 \(entry 3\), key k02.*sha256 mismatch"
        ):
            import_pack(bad, dst)
        assert len(dst) == 0
    dropped = _rewrite(pack, lambda ls: ls[:-1])  # a whole entry missing: the count catches it
    with pytest.raises(PackError, match="7 entries but the manifest says 8"):
        read_pack(dropped)
    garbage = _rewrite(pack, lambda ls: [*ls[:2], "{not json\n", *ls[3:]])
    with pytest.raises(PackError, match=r"line 3 .*not a pack entry"):
        read_pack(garbage)


def test_truncated_gzip_and_wrong_name(source, tmp_path):
    pack = _pack(source, tmp_path)
    cut = tmp_path / "cut.pack.gz"
    cut.write_bytes(pack.read_bytes()[: pack.stat().st_size // 2])
    with CallCache(tmp_path / "dst.sqlite") as dst:
        with pytest.raises(PackError, match=r"cut\.pack\.gz: truncated or corrupt gzip"):
            import_pack(cut, dst)
        assert len(dst) == 0
    renamed = tmp_path / "calls-0000000000000000.pack.gz"
    renamed.write_bytes(pack.read_bytes())
    with pytest.raises(PackError, match="file name says payload 0000000000000000"):
        read_pack(renamed)
    with pytest.raises(PackError, match="does not exist"):
        read_pack(tmp_path / "nope.pack.gz")


def test_version_mismatch_refused_unless_allowed(source, tmp_path, monkeypatch):
    pack = _pack(source, tmp_path)
    monkeypatch.setattr(cache_mod, "CODE_VERSION", "llm-call-v999")
    with CallCache(tmp_path / "dst.sqlite") as dst:
        with pytest.raises(
            PackVersionError, match="cache_code_version: pack 'llm-call-v1', code 'llm-call-v999'"
        ):
            import_pack(pack, dst)
        assert len(dst) == 0
        r = import_pack(pack, dst, allow_version_mismatch=True)
        assert r.imported == 8 and "despite version mismatch" in r.line()


def test_filters_by_tag_and_model(source, tmp_path):
    rep = export_pack(source, tmp_path / "f.pack.gz", filters=Filters({"module": "entity"}, ("qwen",)))
    # entity = odd i; qwen = i < 6 -> k01, k03, k05
    assert rep.skipped == 5
    assert rep.manifest["filters"] == {"tags": {"module": "entity"}, "models": ["qwen"], "local": []}
    assert [k for k, _ in read_pack(rep.path).entries] == ["k01", "k03", "k05"]


def _local(method: str | None) -> dict:
    tags = {"tags": {"module": "topic", "tier": "MID", "strategy": "implementation", "method": method}}
    return {"raw": ["a phrase"], "gflops": 0.5, "latency_s": 0.01, **(tags if method else {})}


def test_local_outputs_are_kept_by_method(source, tmp_path):
    """A model filter keeps only the listed local methods' outputs (those that can differ between CPUs);
    an untagged (older) local output goes with no method filter only."""
    with CallCache(source) as c:
        c.put_many([("t1", _local("textrank")), ("r1", _local("keyword")), ("u1", _local(None))])

    def keys(flt: Filters) -> list[str]:
        pack = export_pack(source, tmp_path / "x.pack.gz", filters=flt).path
        return [k for k, _ in read_pack(pack).entries]

    assert keys(Filters(models=("smol",), local=("textrank",))) == ["k06", "k07", "t1"]
    assert keys(Filters(models=("smol",))) == ["k06", "k07"]
    assert keys(Filters(local=("textrank", "keyword"))) == [f"k{i:02d}" for i in range(8)] + ["r1", "t1"]
    assert keys(Filters()) == [f"k{i:02d}" for i in range(8)] + ["r1", "t1", "u1"]
    assert keys(Filters({"module": "topic"}, local=("textrank",))) == ["t1"]


def test_cli_export_inspect_import(source, tmp_path, capsys):
    out = tmp_path / "cli.pack.gz"
    assert (
        cache_pack_cli.main(["export", "--cache", str(source), "--out", str(out), "--tag", "module=temporal"])
        == 0
    )
    assert "4 entries (4 filtered out)" in capsys.readouterr().out
    assert cache_pack_cli.main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "verified 4 entries" in text and "versions: match this code" in text
    assert cache_pack_cli.main(["import", str(out), "--cache", str(tmp_path / "d.sqlite")]) == 0
    assert "4 entries imported" in capsys.readouterr().out
    cut = tmp_path / "cut.pack.gz"
    cut.write_bytes(out.read_bytes()[:40])
    assert cache_pack_cli.main(["import", str(cut), "--cache", str(tmp_path / "d.sqlite")]) == 1
    assert "error: call pack" in capsys.readouterr().err


def test_delta_pack_holds_only_new_or_changed_calls_and_restores_the_cache_with_its_base(source, tmp_path):
    base = _pack(source, tmp_path)
    with CallCache(source) as c:
        c.put_many([("k08", _value(8)), ("k09", _value(9, "temporal"))])
        c.put("k00", _value(100))  # a changed value under a shipped key must travel too
    rep = export_pack(source, str(tmp_path / "delta") + "/", base_packs=[base])
    assert [k for k, _ in read_pack(rep.path).entries] == ["k00", "k08", "k09"]
    assert rep.skipped == 7  # k01..k07, shipped unchanged in the base
    assert rep.manifest["base_packs"] == [
        {"file": base.name, "payload_sha256": read_pack(base).manifest["payload_sha256"]}
    ]
    assert "base_packs" not in read_pack(base).manifest
    with CallCache(tmp_path / "restored.sqlite") as dst:
        first = import_pack(base, dst)
        second = import_pack(rep.path, dst)
    assert first.base_packs == [] and second.base_packs == [base.name]
    assert second.imported == 2 and second.conflicts == ["k00"]  # the base's k00 came first and is kept
    assert f"a delta of {base.name} (import {base.name} too)" in second.line()
    assert f"a delta of {base.name} (its bases are imported in this call)" in second.line([base.name])
    restored = dict(read_sqlite_entries(tmp_path / "restored.sqlite"))
    assert sorted(restored) == [f"k{i:02d}" for i in range(10)]
    # A corrupt base refuses the export instead of shipping a delta that rests on nothing.
    cut = tmp_path / "cut.pack.gz"
    cut.write_bytes(base.read_bytes()[:40])
    with pytest.raises(PackError, match=r"cut\.pack\.gz: truncated or corrupt"):
        export_pack(source, tmp_path / "x.pack.gz", base_packs=[cut])
    assert not (tmp_path / "x.pack.gz").exists()


def test_cli_delta_export_and_import_of_several_packs(source, tmp_path, capsys):
    base = _pack(source, tmp_path)
    with CallCache(source) as c:
        c.put("k08", _value(8))
    delta = tmp_path / "delta.pack.gz"
    assert (
        cache_pack_cli.main(["export", "--cache", str(source), "--out", str(delta), "--base", str(base)]) == 0
    )
    assert "1 entries (8 filtered out or in a base pack)" in capsys.readouterr().out
    dst = tmp_path / "d.sqlite"
    assert cache_pack_cli.main(["import", str(base), str(delta), "--cache", str(dst)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "8 entries imported" in out[0] and "1 entries imported" in out[1]
    assert out[1].endswith(f"a delta of {base.name} (its bases are imported in this call)")
    assert len(read_sqlite_entries(dst)) == 9


def test_summary_line_counts_replayed_calls(tmp_path):
    with CallCache(tmp_path / "c.sqlite") as c:
        c.put("a", {"x": 1})
        c.get_many(["a", "b", "a"])
        assert (
            "3 lookups, 2 replayed from the cache (67%), 1 computed; 1 entries stored"
            in cache_summary_line(c)
        )
        assert "1 lookups, 0 replayed" in cache_summary_line(c, hits0=2, misses0=0)
    assert "disabled" in cache_summary_line(None)


BASE = {
    "benchmark": {"name": "locomo"},
    "strategy": {"name": "implementation"},
    "encoder": "hashing",
    "backend": {"name": "fake", "model_id": "fake-llm"},
}


def _calls(comps, n: int = 3) -> list:
    reqs = [
        GenerationRequest(messages=({"role": "user", "content": f"q {i}"},), max_tokens=8) for i in range(n)
    ]
    return comps.llms["answer"].generate(reqs, tags={"module": "answer"})


def test_config_hook_imports_pack_before_the_run(tmp_path, capsys):
    cold = copy.deepcopy(BASE) | {"cache": {"path": str(tmp_path / "a.sqlite"), "pack": "none"}}
    comps = make_components(cold)
    try:
        assert comps.cache_pack is None
        assert not any(r.cached for r in _calls(comps))
    finally:
        comps.close()
    pack = export_pack(tmp_path / "a.sqlite", tmp_path / "calls.pack.gz").path
    capsys.readouterr()
    warm = copy.deepcopy(BASE) | {"cache": {"path": str(tmp_path / "b.sqlite"), "pack": str(pack)}}
    comps = make_components(warm)
    try:
        assert "3 entries imported, 0 already present" in capsys.readouterr().out
        assert [r.imported for r in comps.cache_pack] == [3]
        assert all(r.cached for r in _calls(comps))  # replayed, not recomputed
        assert "3 replayed from the cache (100%), 0 computed" in cache_summary_line(comps.cache)
    finally:
        comps.close()
    # A list: a full pack, then a delta of it, imported in order.
    with CallCache(tmp_path / "a.sqlite") as c:
        c.put("extra", _value(1))
    delta = export_pack(tmp_path / "a.sqlite", tmp_path / "delta.pack.gz", base_packs=[pack]).path
    both = copy.deepcopy(BASE) | {
        "cache": {"path": str(tmp_path / "c.sqlite"), "pack": [str(pack), str(delta)]}
    }
    comps = make_components(both)
    try:
        assert [(r.imported, r.base_packs) for r in comps.cache_pack] == [(3, []), (1, ["calls.pack.gz"])]
        assert "a delta of calls.pack.gz (its bases are imported in this call)" in capsys.readouterr().out
        assert all(r.cached for r in _calls(comps))
    finally:
        comps.close()
    with pytest.raises(ConfigError, match=r"expected a pack file, a list of them, or none"):
        make_components(copy.deepcopy(BASE) | {"cache": {"path": ":memory:", "pack": [str(pack), 3]}})
    with pytest.raises(ConfigError, match=r"cache\.pack=.*does not exist"):
        make_components(copy.deepcopy(BASE) | {"cache": {"path": ":memory:", "pack": str(tmp_path / "x.gz")}})
    with pytest.raises(ConfigError, match="needs a call cache"):
        make_components(copy.deepcopy(BASE) | {"cache": {"path": None, "pack": str(pack)}})


def test_project_config_defaults_to_no_pack():
    from evaluation.frontier_config import compose_default_config

    assert compose_default_config()["cache"]["pack"] == "none"
