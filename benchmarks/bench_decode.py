"""Decode throughput: stoker.codec.decode against Pillow, same files, same run, one thread.

    .venv/bin/python benchmarks/bench_decode.py [--data-dir stoker-demo-data] [--repeat 3]

Both sides start from the encoded bytes in memory and end with an RGB uint8 array
[H, W, 3] (Pillow: Image.open + convert("RGB") + np.asarray, what HF processors do).
Uses the demo dataset (generated on first use). Prints images/s, source megapixels/s
and the ratio per format.
"""

from __future__ import annotations

import argparse
import io
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from PIL import Image

import stoker
from stoker.demo_data import generate_dataset


def pillow_decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im if im.mode == "RGB" else im.convert("RGB"))


def best_time(fn, items: list[bytes], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for data in items:
            fn(data)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("stoker-demo-data"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    dataset = generate_dataset(args.data_dir, progress=False)
    by_format: dict[str, list[bytes]] = defaultdict(list)
    pixels: dict[str, int] = defaultdict(int)
    for path in sorted(dataset.image_root.rglob("*")):
        if path.suffix.lower() not in (".jpg", ".jpeg", ".png", ".webp"):
            continue
        data = path.read_bytes()
        info = stoker.codec.probe(data)
        by_format[info.format].append(data)
        pixels[info.format] += info.width * info.height

    print(f"{'format':<6} {'images':>6} {'stoker img/s':>13} {'stoker MP/s':>12} "
          f"{'Pillow img/s':>13} {'Pillow MP/s':>12} {'ratio':>6}")
    for fmt in sorted(by_format):
        items = by_format[fmt]
        for data in items:  # parity check before timing: same pixels or no claim
            assert np.array_equal(stoker.codec.decode(data), pillow_decode(data)), fmt
        t_stoker = best_time(stoker.codec.decode, items, args.repeat)
        t_pillow = best_time(pillow_decode, items, args.repeat)
        mp = pixels[fmt] / 1e6
        print(f"{fmt:<6} {len(items):>6} {len(items) / t_stoker:>13.1f} {mp / t_stoker:>12.1f} "
              f"{len(items) / t_pillow:>13.1f} {mp / t_pillow:>12.1f} "
              f"{t_pillow / t_stoker:>5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
