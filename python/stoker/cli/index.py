"""``stoker index``: build (or check) the cached line index of JSONL manifests.

The loader indexes a manifest on first use anyway; running this ahead of a job moves
the work off the job's start-up, and on a shared file system lets every rank map the
same index.
"""

from __future__ import annotations

import argparse
import os
import time


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("index", help="build the cached line index of JSONL manifests",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("manifests", nargs="+", help="JSONL files or globs")
    p.add_argument("--cache-dir", default=None,
                   help="index cache directory (default: $STOKER_CACHE_DIR/index or "
                        "~/.cache/stoker/index)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from stoker import Loader, Source
    from stoker.loader import default_index_cache_dir

    cache_dir = args.cache_dir or default_index_cache_dir()
    total_bytes = 0
    start = time.perf_counter()
    for i, spec in enumerate(args.manifests):
        loader = Loader(Source(spec, name=f"manifest{i}"), index_cache_dir=cache_dir,
                        num_threads=1)
        for path, size, samples, cached in loader._engine.source_info()[0]["files"]:
            total_bytes += size
            how = "cached" if cached else "built"
            print(f"{path}: {samples:,} samples, {size / 1e6:,.1f} MB ({how})")
        loader.close()
    elapsed = time.perf_counter() - start
    rate = total_bytes / 1e6 / elapsed if elapsed > 0 else float("inf")
    print(f"indexed {total_bytes / 1e6:,.1f} MB in {elapsed:.2f} s ({rate:,.0f} MB/s) "
          f"into {os.path.abspath(cache_dir)}")
    return 0
