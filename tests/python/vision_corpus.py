"""Deterministic RGB image corpus for the vision parity tests.

Used twice: by ``scripts/make_vision_goldens.py``, which runs Hugging Face's image
processors on it and records the results, and by ``tests/python/test_vision_parity.py``,
which regenerates the same images from the same seed and compares Stoker's output.
Images are NumPy ``uint8 [H, W, 3]`` arrays made with NumPy's PCG64 generator only
(stable across NumPy versions), plus crops of the vendored photos decoded by a caller-
supplied decoder (Pillow in the script, ``stoker.codec.decode`` in the tests; the codec
tests hold those two equal). No image goes through a resampler, so the corpus does not
depend on the Pillow version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import numpy as np

PHOTOS_DIR = Path(__file__).resolve().parents[2] / "python/stoker/_data/photos"
PHOTOS = ("astronaut.jpg", "chelsea.jpg", "coffee.jpg", "rocket.jpg", "retina.jpg",
          "hubble_deep_field.jpg")

SEED = 20261129
KINDS = ("noise", "gradient", "blocks", "photo", "flat", "binary")

# Sizes (height, width) every corpus contains: the reference table's inputs, rounding
# ties for factor 28 (odd multiples of 14) and 32 (odd multiples of 16), tiny and odd
# sizes, aspect ratios at and near the limit of 200, and a few large photos' sizes.
FIXED_SIZES: tuple[tuple[int, int], ...] = (
    (480, 640), (1080, 1920), (300, 400), (42, 42), (70, 70), (14, 2800), (250, 250),
    (126, 98), (1, 1), (1, 2), (2, 1), (3, 3), (5, 7), (13, 17), (27, 29), (28, 28),
    (55, 57), (56, 56), (14, 14), (42, 70), (98, 126), (154, 182), (16, 16), (48, 80),
    (80, 112), (144, 176), (14, 16), (16, 14), (210, 238), (240, 272),
    (1, 200), (200, 1), (2, 400), (400, 2), (3, 600), (7, 1400), (1400, 7), (10, 1999),
    (30, 6000), (6000, 30), (5, 999), (999, 5), (28, 5600), (16, 3200), (3200, 16),
)
LARGE_SIZES: tuple[tuple[int, int], ...] = ((4000, 6000), (3000, 4000), (4032, 3024))


class CorpusItem(NamedTuple):
    index: int
    kind: str
    height: int
    width: int


def _random_size(rng: np.random.Generator, lo: int, hi: int) -> tuple[int, int]:
    while True:
        h, w = (int(v) for v in np.exp(rng.uniform(np.log(lo), np.log(hi), size=2)).round())
        h, w = max(h, 1), max(w, 1)
        if max(h, w) / min(h, w) <= 200:
            return h, w


def items(count: int = 2000, *, include_large: bool = True) -> list[CorpusItem]:
    """The corpus: FIXED_SIZES, then random sizes (mostly small, some medium), then
    LARGE_SIZES when asked. Deterministic given SEED and `count`."""
    rng = np.random.default_rng(SEED)
    sizes = list(FIXED_SIZES)
    n_random = max(0, count - len(FIXED_SIZES) - len(LARGE_SIZES))
    for i in range(n_random):
        sizes.append(_random_size(rng, 1, 160) if i % 5 else _random_size(rng, 100, 900))
    if include_large:
        sizes.extend(LARGE_SIZES)
    return [CorpusItem(i, KINDS[i % len(KINDS)], h, w) for i, (h, w) in enumerate(sizes)]


class PhotoSource:
    """Decoded vendored photos, tiled with mirroring to cover any size."""

    def __init__(self, decode: Callable[[bytes], np.ndarray]) -> None:
        self._photos = [decode((PHOTOS_DIR / name).read_bytes()) for name in PHOTOS]

    def crop(self, rng: np.random.Generator, h: int, w: int) -> np.ndarray:
        photo = self._photos[int(rng.integers(len(self._photos)))]
        ph, pw = photo.shape[:2]
        if h > ph or w > pw:
            reps = (-(-h // ph) + 1, -(-w // pw) + 1)
            row = np.concatenate([photo, photo[:, ::-1]], axis=1)
            tile = np.concatenate([row, row[::-1]], axis=0)
            photo = np.tile(tile, (reps[0] // 2 + 1, reps[1] // 2 + 1, 1))
            ph, pw = photo.shape[:2]
        y = int(rng.integers(ph - h + 1))
        x = int(rng.integers(pw - w + 1))
        return np.ascontiguousarray(photo[y:y + h, x:x + w])


def image(item: CorpusItem, photos: PhotoSource) -> np.ndarray:
    """The pixels of one corpus item (uint8 [H, W, 3])."""
    rng = np.random.default_rng([SEED, item.index])
    h, w = item.height, item.width
    if item.kind == "noise":
        return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    if item.kind == "gradient":
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        a, b = rng.uniform(-3, 3, size=(2, 3))
        c = rng.uniform(0, 255, size=3)
        v = c + a * yy[..., None] * 200 / max(h, 1) + b * xx[..., None] * 200 / max(w, 1)
        v += rng.normal(0, 2, size=(h, w, 3))
        return np.clip(np.rint(v), 0, 255).astype(np.uint8)
    if item.kind == "blocks":
        out = np.empty((h, w, 3), dtype=np.uint8)
        out[:] = rng.integers(0, 256, size=3, dtype=np.uint8)
        for _ in range(int(rng.integers(1, 12))):
            y0, y1 = sorted(int(v) for v in rng.integers(0, h + 1, size=2))
            x0, x1 = sorted(int(v) for v in rng.integers(0, w + 1, size=2))
            out[y0:y1 + 1, x0:x1 + 1] = rng.choice([0, 255], size=3).astype(np.uint8)
        return out
    if item.kind == "photo":
        return photos.crop(rng, h, w)
    if item.kind == "flat":
        out = np.empty((h, w, 3), dtype=np.uint8)
        out[:] = rng.integers(0, 256, size=3, dtype=np.uint8)
        n = max(1, (h * w) // 500)
        ys, xs = rng.integers(0, h, size=n), rng.integers(0, w, size=n)
        out[ys, xs] = rng.integers(0, 256, size=(n, 3), dtype=np.uint8)
        return out
    # binary: 0 / 255 patterns with random period, the hardest case for ringing/clipping
    period = int(rng.integers(1, 5))
    yy, xx = np.mgrid[0:h, 0:w]
    pattern = ((yy // period + xx // period) % 2).astype(np.uint8) * 255
    return np.repeat(pattern[..., None], 3, axis=2) ^ rng.choice(
        [0, 255], size=3).astype(np.uint8)


def iter_images(corpus: list[CorpusItem], photos: PhotoSource) -> Iterator[tuple[CorpusItem, np.ndarray]]:
    for item in corpus:
        yield item, image(item, photos)


# Configurations the goldens are recorded for: (name, model, min_pixels, max_pixels).
# "qwen2-vl-small" caps the area so medium images are shrunk, not only enlarged.
# Qwen2.5-VL uses the very same image processor class and config values as Qwen2-VL, so
# the tests check "qwen2.5-vl" against the "qwen2-vl" goldens.
CONFIGS: tuple[tuple[str, str, int | None, int | None], ...] = (
    ("qwen2-vl", "qwen2-vl", None, None),
    ("qwen3-vl", "qwen3-vl", None, None),
    ("qwen2-vl-small", "qwen2-vl", 3136, 200704),
)
