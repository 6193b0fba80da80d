#!/usr/bin/env python3
"""Records the vision parity goldens: what Hugging Face's Qwen2-VL image processors
produce for the corpus of tests/python/vision_corpus.py.

Runs in a separate environment with the reference stack (too large for CI):

    python3 -m venv <ref-venv>
    <ref-venv>/bin/pip install torch==2.14.1 torchvision==0.29.1 transformers pillow numpy
    <ref-venv>/bin/python scripts/make_vision_goldens.py

For every corpus image, every configuration in vision_corpus.CONFIGS and both
processors (the Pillow/NumPy one = backend "pillow", the torchvision one = backend
"torchvision") it stores image_grid_thw and the SHA-256 of the float32 pixel_values
bytes; for a few small images it stores the full pixel_values. It also records
encoded-input cases (EXIF-rotated JPEGs, RGBA PNGs composited onto white) with their
file bytes. Processors are built from explicit arguments: nothing is downloaded.
Output: tests/python/goldens/vision/goldens.npz and meta.json (versions, counts).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import PIL
import torch
import torchvision
import transformers
from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
import vision_corpus as vc  # noqa: E402

OUT_DIR = ROOT / "tests/python/goldens/vision"

FAMILY = {
    "qwen2-vl": dict(patch_size=14, merge_size=2, temporal_patch_size=2,
                     image_mean=[0.48145466, 0.4578275, 0.40821073],
                     image_std=[0.26862954, 0.26130258, 0.27577711],
                     min_pixels=3136, max_pixels=12845056),
    "qwen3-vl": dict(patch_size=16, merge_size=2, temporal_patch_size=2,
                     image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                     min_pixels=65536, max_pixels=16777216),
}
FULL_ARRAY_INDICES = (3, 4, 9, 12)  # small images (16-24 patches) stored in full


def processors(model: str, min_pixels: int | None, max_pixels: int | None):
    """(pillow processor, torchvision processor) for one configuration."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil)
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    kwargs = dict(FAMILY[model])
    if min_pixels is not None:
        kwargs["min_pixels"] = min_pixels
    if max_pixels is not None:
        kwargs["max_pixels"] = max_pixels
    return Qwen2VLImageProcessorPil(**kwargs), Qwen2VLImageProcessor(**kwargs)


def run(proc, rgb: np.ndarray, torch_out: bool) -> tuple[np.ndarray, np.ndarray]:
    out = proc(images=[rgb], return_tensors="pt" if torch_out else "np",
               input_data_format="channels_last")
    pv, grid = out["pixel_values"], out["image_grid_thw"]
    if torch_out:
        pv, grid = pv.numpy(), grid.numpy()
    return np.ascontiguousarray(pv, dtype=np.float32), np.asarray(grid, dtype=np.int64)


def sha(pv: np.ndarray) -> np.ndarray:
    assert pv.dtype == np.float32 and pv.flags.c_contiguous
    return np.frombuffer(hashlib.sha256(pv.tobytes()).digest(), dtype=np.uint8)


def encoded_cases() -> list[tuple[str, bytes, np.ndarray, dict]]:
    """(name, file bytes, reference RGB, preprocess options) for the encoded inputs."""
    rng = np.random.default_rng([vc.SEED, 999])
    cases = []
    # EXIF orientations 1..8 on a small non-square JPEG (Pillow writes the tag).
    for orientation in range(1, 9):
        h, w = 37 + orientation, 61 - orientation
        yy, xx = np.mgrid[0:h, 0:w]
        rgb = np.stack([xx * 255 // w, yy * 255 // h, (xx ^ yy) & 255], -1).astype(np.uint8)
        exif = Image.Exif()
        exif[0x0112] = orientation
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, format="JPEG", quality=90, exif=exif)
        data = buf.getvalue()
        with Image.open(io.BytesIO(data)) as im:
            ref = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
        cases.append((f"exif{orientation}", data, ref, {"exif_transpose": True}))
    # RGBA PNGs (alpha gradients, fully transparent and opaque areas) onto white.
    for i in range(8):
        h, w = int(rng.integers(20, 90)), int(rng.integers(20, 90))
        rgba = rng.integers(0, 256, size=(h, w, 4), dtype=np.uint8)
        rgba[..., 3] = np.clip(np.mgrid[0:h, 0:w][1] * 300 // w - 20, 0, 255)
        buf = io.BytesIO()
        Image.fromarray(rgba, "RGBA").save(buf, format="PNG")
        data = buf.getvalue()
        with Image.open(io.BytesIO(data)) as im:  # qwen-vl-utils to_rgb
            canvas = Image.new("RGB", im.size, (255, 255, 255))
            canvas.paste(im, mask=im.split()[3])
            ref = np.asarray(canvas)
        cases.append((f"rgba{i}", data, ref, {"alpha_to_white": True}))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    args = parser.parse_args()

    corpus = vc.items(args.count)
    photos = vc.PhotoSource(lambda b: np.asarray(Image.open(io.BytesIO(b)).convert("RGB")))
    arrays: dict[str, np.ndarray] = {}
    start = time.time()
    for name, model, min_px, max_px in vc.CONFIGS:
        slow, fast = processors(model, min_px, max_px)
        for backend, proc, torch_out in (("pillow", slow, False), ("torchvision", fast, True)):
            grids = np.zeros((len(corpus), 3), dtype=np.int64)
            hashes = np.zeros((len(corpus), 32), dtype=np.uint8)
            for item, rgb in vc.iter_images(corpus, photos):
                pv, grid = run(proc, rgb, torch_out)
                grids[item.index] = grid[0]
                hashes[item.index] = sha(pv)
                if item.index in FULL_ARRAY_INDICES and name == "qwen2-vl":
                    arrays[f"full/{backend}/{item.index}"] = pv
            arrays[f"grid/{name}/{backend}"] = grids
            arrays[f"sha/{name}/{backend}"] = hashes
            print(f"{name} {backend}: {len(corpus)} images, {time.time() - start:.0f} s",
                  flush=True)

    cases = encoded_cases()
    slow, fast = processors("qwen2-vl", None, None)
    for name, data, ref, _ in cases:
        arrays[f"encoded/{name}/bytes"] = np.frombuffer(data, dtype=np.uint8)
        for backend, proc, torch_out in (("pillow", slow, False), ("torchvision", fast, True)):
            pv, grid = run(proc, ref, torch_out)
            arrays[f"encoded/{name}/{backend}/grid"] = grid[0]
            arrays[f"encoded/{name}/{backend}/sha"] = sha(pv)

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "goldens.npz", **arrays)
    meta = {
        "count": len(corpus),
        "seed": vc.SEED,
        "configs": [list(c) for c in vc.CONFIGS],
        "encoded_cases": {name: opts for name, _, _, opts in cases},
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                     "numpy": np.__version__},
        "processors": {"pillow": "Qwen2VLImageProcessorPil",
                       "torchvision": "Qwen2VLImageProcessor (torchvision backend)"},
    }
    (OUT_DIR / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    size = (OUT_DIR / "goldens.npz").stat().st_size
    print(f"wrote {OUT_DIR}/goldens.npz ({size / 1e6:.2f} MB) in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
