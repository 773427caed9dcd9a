r"""``python -m modules.cache_pack export|import|inspect``: move the call cache between machines.

Examples::

    # everything in the default cache, named by content, under results/packs/
    python -m modules.cache_pack export --out results/packs/
    # only the Qwen HIGH-tier and answer calls
    python -m modules.cache_pack export --out results/packs/ --model qwen2.5-1.5b --tag tier=HIGH
    # a delta: only the calls the committed pack lacks (a sitting of a long experiment)
    python -m modules.cache_pack export --out results/packs/ --base results/packs/calls-<sha16>.pack.gz
    python -m modules.cache_pack inspect results/packs/calls-<sha16>.pack.gz
    python -m modules.cache_pack import results/packs/calls-<sha16>.pack.gz [more packs] [--cache PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.datadir import PROJECT_ROOT
from modules.cache_pack import Filters, PackError, export_pack, import_pack, read_pack, version_mismatch

#: The project's default call cache (``cache.path`` in configs/config.yaml).
DEFAULT_CACHE = PROJECT_ROOT / ".cache" / "llm_calls.sqlite"


def _tags(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k:
            raise SystemExit(f"--tag {item!r}: expected KEY=VALUE, e.g. module=entity")
        out[k] = v
    return out


def build_parser() -> argparse.ArgumentParser:
    """The ``export``, ``import`` and ``inspect`` sub-commands."""
    parser = argparse.ArgumentParser(
        prog="python -m modules.cache_pack",
        description="Move the LLM call cache between machines as verified, content-addressed packs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the SQLite call cache (or part of it) as a pack")
    ex.add_argument("--cache", default=str(DEFAULT_CACHE), help="SQLite call cache (default: the project's)")
    ex.add_argument("--out", required=True, help="pack file, or a directory for calls-<sha16>.pack.gz")
    ex.add_argument(
        "--tag", action="append", default=[], metavar="KEY=VALUE", help="keep entries with this tag"
    )
    ex.add_argument(
        "--model",
        action="append",
        default=[],
        help="keep LLM calls of this model id (repeatable; drops local-tier outputs but --local's)",
    )
    ex.add_argument(
        "--local",
        action="append",
        default=[],
        metavar="METHOD",
        help="keep local-tier outputs of this method, e.g. textrank (repeatable; drops the other methods')",
    )
    ex.add_argument(
        "--base",
        action="append",
        default=[],
        metavar="PACK",
        help="leave out the calls this pack already ships (repeatable): writes a delta pack",
    )
    im = sub.add_parser("import", help="verify packs and merge them into a call cache")
    im.add_argument("packs", nargs="+", metavar="pack", help="pack files, imported in order")
    im.add_argument(
        "--cache", default=str(DEFAULT_CACHE), help="target cache path or URL (default: the project's)"
    )
    im.add_argument(
        "--allow-version-mismatch", action="store_true", help="import a pack of other code versions"
    )
    ins = sub.add_parser("inspect", help="verify a pack and print its manifest and contents")
    ins.add_argument("pack")
    return parser


def _source(value: Mapping[str, Any]) -> str:
    """What made a cache entry: the LLM's model id, or ``local <method>`` for a local tier's output."""
    if "model_id" in value:
        return str(value["model_id"])
    return f"local {(value.get('tags') or {}).get('method', 'tier')}"


def main(argv: list[str] | None = None) -> int:
    """Run one sub-command; returns the exit code (1 with a one-line message for a bad pack)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "export":
            flt = Filters(_tags(args.tag), tuple(args.model), tuple(args.local))
            rep = export_pack(args.cache, args.out, filters=flt, base_packs=args.base)
            m = rep.manifest
            left_out = "filtered out or in a base pack" if args.base else "filtered out"
            print(
                f"wrote {rep.path}: {m['count']} entries ({rep.skipped} {left_out}), "
                f"{rep.path.stat().st_size / 1e6:.2f} MB, payload sha256 {m['payload_sha256']}"
            )
        elif args.command == "import":
            return _import(args)
        else:
            pack = read_pack(args.pack)
            m = pack.manifest
            print(f"{pack.path}: verified {len(pack.entries)} entries (every sha256 and the payload's)")
            for k in sorted(m):
                print(f"  {k}: {m[k]}")
            bad = version_mismatch(m)
            print("  versions: " + ("match this code" if not bad else "DIFFER: " + "; ".join(bad)))
            # Local (non-LLM) tiers cache their outputs too, without a model id (and, before methods were
            # recorded, without tags).
            models = Counter(_source(v) for _, v in pack.entries)
            modules = Counter(str((v.get("tags") or {}).get("module", "untagged")) for _, v in pack.entries)
            print("  by model: " + ", ".join(f"{k} {n}" for k, n in models.most_common()))
            print("  by module tag: " + ", ".join(f"{k} {n}" for k, n in modules.most_common()))
    except PackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `inspect PACK | head`: the reader left; nothing is wrong with the pack
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _import(args: argparse.Namespace) -> int:
    """``import``: verify each pack, merge it; a cache file this command created is removed on failure."""
    from modules.cache import CallCache
    from modules.cache_stores import CacheStoreError, store_scheme

    target = Path(args.cache)
    local = store_scheme(args.cache) == "sqlite" and args.cache != ":memory:"
    if local and target.is_dir():
        print(
            f"error: --cache {target} is a directory; give the cache file, "
            f"e.g. {target / 'llm_calls.sqlite'}",
            file=sys.stderr,
        )
        return 1
    created = local and not target.exists()
    try:
        with CallCache(args.cache) as cache:
            # Each pack is verified before anything of it is written; a bad one stops the rest.
            names = {Path(p).name for p in args.packs}
            for pack_path in args.packs:
                rep_i = import_pack(pack_path, cache, allow_version_mismatch=args.allow_version_mismatch)
                print(rep_i.line(imported_with=names))
    except (PackError, CacheStoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if created:
            with CallCache(args.cache) as cache:
                empty = len(cache) == 0
            if empty:  # nothing of ours is in it: leave no empty cache behind
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{target}{suffix}").unlink(missing_ok=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
