"""Qwen-VL image preprocessing throughput: Stoker against Hugging Face, same bytes, one
thread, one run.

    python benchmarks/bench_vision.py [--model qwen2-vl] [--repeat 2] [--photos DIR]

Needs transformers, torch and torchvision next to stoker (they are not test
dependencies; use the reference environment of scripts/make_vision_goldens.py with
stoker importable). Every side starts from the same encoded bytes in memory and ends
with pixel_values + image_grid_thw, decode included:

* stoker (torchvision backend, the default) and stoker (pillow backend), each call
  returning a freshly allocated pixel_values array, as the Hugging Face processors do;
* stoker (torchvision, out=): the same writing into one preallocated array reused by
  every call (what a loader with a reused batch buffer does); shown for information,
  the ratios below use the fresh-array sides;
* HF fast: Image.open + convert("RGB") + Qwen2VLImageProcessor (torchvision backend);
* HF slow: Image.open + convert("RGB") + Qwen2VLImageProcessorPil;
* bare decode: stoker.codec.decode (libjpeg-turbo / libpng with Pillow's settings),
  the floor any preprocessing stays above.

The corpus is cut from the JPEG photos of --photos (default: the vendored
python/stoker/_data/photos), resized with
Pillow to 300x200 ... 4000x3000 and encoded as JPEG (quality 75-95) or PNG (every
fourth image). Each side's time is the sum over images of its best of --repeat calls on
that image, the sides taking turns image by image. Prints images/s and source
megapixels/s per side and the ratios.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np
from PIL import Image

import stoker

PHOTOS = Path(stoker.__file__).resolve().parent / "_data/photos"
SIZES = ((300, 200), (640, 480), (800, 600), (1024, 768), (1280, 960), (1600, 1200),
         (1920, 1080), (2048, 1536), (3000, 2000), (4000, 3000))


def make_corpus(photos: Path) -> list[bytes]:
    seeds = sorted(p for p in photos.iterdir() if p.suffix == ".jpg")
    out = []
    for i, size in enumerate(SIZES * 2):
        with Image.open(seeds[i % len(seeds)]) as im:
            im = im.convert("RGB").resize(size if i % 3 else size[::-1], Image.BICUBIC)
        buf = io.BytesIO()
        if i % 4 == 3:
            im.save(buf, format="PNG")
        else:
            im.save(buf, format="JPEG", quality=75 + (i * 7) % 21)
        out.append(buf.getvalue())
    return out


def best_times(sides: dict, items: list[bytes], repeat: int) -> dict[str, float]:
    """Per side, the sum over images of the best of `repeat` calls on that image.

    The sides take turns image by image (every side runs on image i before any runs on
    image i + 1), so a change of load on a shared machine hits every side alike instead
    of whichever side happened to be running."""
    best = {name: [float("inf")] * len(items) for name in sides}
    for _ in range(repeat):
        for i, data in enumerate(items):
            for name, fn in sides.items():
                start = time.perf_counter()
                fn(data)
                best[name][i] = min(best[name][i], time.perf_counter() - start)
    return {name: sum(times) for name, times in best.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2-vl", choices=stoker.vision.MODELS)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--photos", type=Path, default=PHOTOS,
                        help="directory of JPEG photos the corpus is cut from")
    args = parser.parse_args()

    import torch
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil)
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    torch.set_num_threads(1)

    cfg = stoker.vision.resolve_config(args.model)
    kwargs = dict(patch_size=cfg.patch_size, merge_size=cfg.merge_size,
                  temporal_patch_size=cfg.temporal_patch_size,
                  image_mean=list(cfg.image_mean), image_std=list(cfg.image_std),
                  min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)
    hf_fast = Qwen2VLImageProcessor(**kwargs)
    hf_slow = Qwen2VLImageProcessorPil(**kwargs)

    def pil_rgb(data: bytes) -> Image.Image:
        with Image.open(io.BytesIO(data)) as im:
            return im.convert("RGB")

    corpus = make_corpus(args.photos)
    megapixels = sum(stoker.codec.probe(d).width * stoker.codec.probe(d).height
                     for d in corpus) / 1e6
    # One buffer with room for the largest image's rows, reused by every call.
    rows = max(stoker.vision.visual_token_count(d, args.model) for d in corpus)
    rows *= cfg.merge_size ** 2
    reused = np.empty((rows, 3 * cfg.temporal_patch_size * cfg.patch_size ** 2),
                      dtype=np.float32)
    sides = {
        "stoker (torchvision)": lambda d: stoker.vision.preprocess([d], args.model),
        "stoker (pillow)": lambda d: stoker.vision.preprocess([d], args.model,
                                                              backend="pillow"),
        "stoker (torchvision, out=)": lambda d: stoker.vision.preprocess([d], args.model,
                                                                         out=reused),
        "HF fast (torchvision)": lambda d: hf_fast(images=[pil_rgb(d)], return_tensors="pt"),
        "HF slow (PIL)": lambda d: hf_slow(images=[pil_rgb(d)], return_tensors="np"),
        "bare decode (stoker.codec)": stoker.codec.decode,
    }
    for fn in sides.values():  # warm-up: imports, scratch buffers, lazy torch init
        fn(corpus[0])
    times = best_times(sides, corpus, args.repeat)

    n = len(corpus)
    print(f"{n} images ({megapixels:.1f} MP), model {args.model}, one thread, "
          f"per image best of {args.repeat}, sides interleaved")
    print(f"{'side':<28} {'images/s':>9} {'MP/s':>8} {'s':>7}")
    for name, t in times.items():
        print(f"{name:<28} {n / t:>9.1f} {megapixels / t:>8.1f} {t:>7.2f}")
    bare = times['bare decode (stoker.codec)']
    print()
    print(f"stoker (torchvision) vs HF fast: {times['HF fast (torchvision)'] / times['stoker (torchvision)']:.2f}x")
    print(f"stoker (pillow) vs HF slow:      {times['HF slow (PIL)'] / times['stoker (pillow)']:.2f}x")
    print(f"stoker (torchvision) / bare decode time: "
          f"{times['stoker (torchvision)'] / bare:.2f} "
          f"(rate {bare / times['stoker (torchvision)']:.0%} of bare decode)")
    print(f"stoker (torchvision, out=) / bare decode time: "
          f"{times['stoker (torchvision, out=)'] / bare:.2f} "
          f"(rate {bare / times['stoker (torchvision, out=)']:.0%} of bare decode)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
