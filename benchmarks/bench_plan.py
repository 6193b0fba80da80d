"""Plan benchmarks: manifest indexing speed, and resume cost at a deep position.

    .venv/bin/python benchmarks/bench_plan.py [--lines 10000000] [--dir /tmp/stoker-bench-plan]

1. Indexing: builds the line index of a generated manifest (cold: no cache) and reports
   MB/s; then opens it again from the cache.
2. Resume: time from constructing a Loader to its first batch, cold at position 0
   against restored at global position 1,000,000 (shuffled, three weighted sources).
   Nothing is replayed, so both should take the same time.
The manifests are text-only so the first batch measures the plan, not image decoding.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import stoker


def write_manifest(path: Path, lines: int) -> None:
    if path.exists() and path.stat().st_size > 0:
        return
    line = json.dumps({"messages": [
        {"role": "user", "content": "Describe the picture in one sentence, please."},
        {"role": "assistant", "content": "A red bicycle leans against a brick wall."}]})
    chunk = (line + "\n") * 10_000
    with open(path, "w") as f:
        for _ in range(lines // 10_000):
            f.write(chunk)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/stoker-bench-plan"))
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    manifest = args.dir / "big.jsonl"
    write_manifest(manifest, args.lines)
    size_mb = manifest.stat().st_size / 1e6
    cache = args.dir / "cache"
    shutil.rmtree(cache, ignore_errors=True)

    t0 = time.perf_counter()
    stoker.Loader(str(manifest), index_cache_dir=cache, num_threads=1).close()
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    stoker.Loader(str(manifest), index_cache_dir=cache, num_threads=1).close()
    warm = time.perf_counter() - t0
    print(f"index: {args.lines:,} lines, {size_mb:,.0f} MB: built in {cold:.2f} s "
          f"({size_mb / cold:,.0f} MB/s, one thread, page cache warm); "
          f"reopened from the cache in {warm:.3f} s")

    def mix() -> list[stoker.Source]:
        return [stoker.Source(str(manifest), weight=w, name=n)
                for n, w in (("a", 0.5), ("b", 0.3), ("c", 0.2))]

    def first_batch(state: dict | None) -> float:
        t0 = time.perf_counter()
        loader = stoker.Loader(mix(), batch_size=32, shuffle=True, seed=7,
                               index_cache_dir=cache, output="numpy")
        if state is not None:
            loader.load_state_dict(state)
        next(iter(loader))
        elapsed = time.perf_counter() - t0
        loader.close()
        return elapsed

    probe = stoker.Loader(mix(), batch_size=32, shuffle=True, seed=7, index_cache_dir=cache)
    state = probe.state_dict()
    state["next_batch"] = 1_000_000 // 32  # global position 1,000,000
    probe.close()
    cold_s = min(first_batch(None) for _ in range(3))
    resumed_s = min(first_batch(state) for _ in range(3))
    print(f"first batch: cold start at position 0 in {cold_s * 1000:.1f} ms; "
          f"resumed at position 1,000,000 in {resumed_s * 1000:.1f} ms "
          f"(ratio {resumed_s / cold_s:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
