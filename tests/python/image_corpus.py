"""Image corpus for decoder tests: many formats, modes and sizes, made from real photos.

Imported by the pytest tests (this module holds no tests itself). :func:`make_corpus` writes
``count_per_kind`` files for every kind in :data:`KINDS`: random crops of the vendored sample
photos (``python/stoker/_data/photos``), resized to sizes that range from degenerate (1x1, 3x200,
17x9) to ~1200 px, and encoded as JPEG, PNG or WebP in the mode that the kind names.
:func:`reference_rgb` gives the expected pixels: Pillow's decode followed by ``convert("RGB")``
for non-RGB modes, the way Hugging Face ``datasets``/VLM pipelines load images.

Pillow cannot write 16-bit RGB(A) or interlaced PNGs, so those are written by a small NumPy PNG
encoder (:func:`write_png`) that also varies the scanline filter per row (all five PNG filters)
and splits the data over several IDAT chunks.

Everything is deterministic given ``seed``.
"""

from __future__ import annotations

import dataclasses
import math
import random
import struct
import warnings
import zlib
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
from PIL import Image

__all__ = ["CorpusImage", "KINDS", "PHOTOS_DIR", "make_corpus", "reference_rgb", "write_png"]

PHOTOS_DIR = Path(__file__).resolve().parents[2] / "python/stoker/_data/photos"

_PHOTOS = (
    "astronaut.jpg",
    "chelsea.jpg",
    "coffee.jpg",
    "rocket.jpg",
    "retina.jpg",
    "hubble_deep_field.jpg",
)

#: kind -> container format (Pillow's format name).
KINDS: dict[str, str] = {
    # JPEG
    "jpeg_444": "JPEG",  # YCbCr, no chroma subsampling
    "jpeg_422": "JPEG",  # YCbCr 4:2:2
    "jpeg_420": "JPEG",  # YCbCr 4:2:0
    "jpeg_progressive": "JPEG",
    "jpeg_optimize": "JPEG",  # optimized Huffman tables
    "jpeg_gray": "JPEG",  # single component
    "jpeg_cmyk": "JPEG",  # four components, Adobe APP14 marker (inverted CMYK)
    "jpeg_restart": "JPEG",  # DRI + RSTn restart markers
    "jpeg_keep_rgb": "JPEG",  # RGB components without the YCbCr transform (Adobe transform 0)
    # PNG
    "png_rgb": "PNG",
    "png_rgba": "PNG",
    "png_l": "PNG",
    "png_la": "PNG",
    "png_p": "PNG",  # adaptive palette; 256, 16 and 2 colours -> 8-, 4- and 1-bit indices
    "png_p_transparency": "PNG",  # palette + tRNS (one transparent index, or per-entry alpha)
    "png_1bit": "PNG",  # mode "1", dithered
    "png_gray16": "PNG",  # mode "I;16"
    "png_rgb16": "PNG",  # 16-bit RGB (own writer)
    "png_rgba16": "PNG",  # 16-bit RGBA (own writer)
    "png_interlaced_rgb": "PNG",  # Adam7, 8-bit RGB (own writer)
    "png_interlaced_rgba": "PNG",  # Adam7, 8-bit RGBA (own writer)
    # WebP
    "webp_lossy": "WEBP",
    "webp_lossless": "WEBP",
    "webp_lossy_alpha": "WEBP",
    "webp_lossless_alpha": "WEBP",
}

_EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}

# Degenerate and odd sizes (width, height): single pixels, single rows/columns, sizes that are not
# multiples of the 8/16-pixel JPEG blocks and MCUs or of the 8-pixel Adam7 grid.
_EDGE_SIZES = (
    (1, 1),
    (17, 9),
    (3, 200),
    (200, 3),
    (2, 1),
    (1, 2),
    (9, 17),
    (1, 37),
    (15, 15),
    (5, 3),
    (33, 7),
    (7, 1),
)


@dataclasses.dataclass(frozen=True)
class CorpusImage:
    """One corpus file.

    Attributes:
        path: Where the file was written.
        kind: One of :data:`KINDS` (e.g. ``"jpeg_420"``, ``"png_gray16"``).
        format: Container format as Pillow names it: ``"JPEG"``, ``"PNG"`` or ``"WEBP"``.
    """

    path: Path
    kind: str
    format: str


def make_corpus(
    out_dir: Path,
    *,
    seed: int = 0,
    count_per_kind: int = 3,
    kinds: tuple[str, ...] | list[str] | None = None,
) -> list[CorpusImage]:
    """Write a corpus of test images to ``out_dir`` and return what was written.

    Image 0 of every kind has a degenerate/odd size (1x1, 17x9, 3x200, ...; which one rotates
    with the kind and the seed), image 1 a large one (400-1200 px per side), image 3 another
    odd size and the others random sizes between 1 and 1200 px per side (log-uniform).

    Args:
        out_dir: Output directory (created if missing). Files are named ``{kind}_{i:02d}.{ext}``.
        seed: Seed for all randomness; the same seed gives byte-identical files.
        count_per_kind: Number of files per kind.
        kinds: Subset of :data:`KINDS` to generate (default: all). The pixels of a kind do not
            depend on which other kinds are generated.

    Returns:
        One :class:`CorpusImage` per file, grouped by kind in :data:`KINDS` order.
    """
    selected = list(KINDS) if kinds is None else list(kinds)
    unknown = [k for k in selected if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown corpus kinds: {unknown}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = _Sources()
    corpus: list[CorpusImage] = []
    for kind_index, kind in enumerate(KINDS):
        if kind not in selected:
            continue
        fmt = KINDS[kind]
        for i in range(count_per_kind):
            # One independent stream per (seed, kind, i): kinds can be generated separately.
            stream = (seed, kind_index, i)
            rng = random.Random(f"{seed}/{kind}/{i}")
            np_rng = np.random.default_rng(list(stream))
            size = _pick_size(rng, seed, i, kind_index)
            path = out_dir / f"{kind}_{i:02d}.{_EXTENSIONS[fmt]}"
            _GENERATORS[kind](_Job(path, size, i, sources, rng, np_rng))
            corpus.append(CorpusImage(path=path, kind=kind, format=fmt))
    return corpus


def reference_rgb(path: Path) -> np.ndarray:
    """Pillow's decode of ``path`` as Hugging Face pipelines do it: ``uint8`` array ``[H, W, 3]``.

    ``Image.open(path)``, then ``.convert("RGB")`` if the mode is not already RGB; no EXIF
    transpose, no alpha compositing (alpha is simply dropped, palette transparency ignored).
    """
    with Image.open(path) as im:
        if im.mode != "RGB":
            with warnings.catch_warnings():
                # Pillow warns about palette images with byte transparency; the pixels are what
                # they are, so keep test logs clean.
                warnings.simplefilter("ignore")
                im = im.convert("RGB")
        else:
            im.load()
        array = np.array(im, dtype=np.uint8)
    assert array.ndim == 3 and array.shape[2] == 3, array.shape
    return array


# --------------------------------------------------------------------------------------------
# Sources and sizes
# --------------------------------------------------------------------------------------------


class _Sources:
    """Lazily decoded vendored photos."""

    def __init__(self) -> None:
        self._cache: dict[str, Image.Image] = {}

    def get(self, name: str) -> Image.Image:
        if name not in self._cache:
            with Image.open(PHOTOS_DIR / name) as im:
                im.load()
                self._cache[name] = im.copy()  # RGB photos, RGBA logo, L page
        return self._cache[name]

    def photo(self, rng: random.Random) -> Image.Image:
        return self.get(rng.choice(_PHOTOS))


def _pick_size(rng: random.Random, seed: int, i: int, kind_index: int) -> tuple[int, int]:
    """Size of image ``i`` of a kind: edge case, large, random, another edge case, random..."""
    if i in (0, 3):
        offset = 0 if i == 0 else len(_EDGE_SIZES) // 2
        return _EDGE_SIZES[(seed + kind_index + offset) % len(_EDGE_SIZES)]
    if i == 1:
        return rng.randint(400, 1200), rng.randint(400, 1200)

    def side() -> int:
        return max(1, min(1200, round(math.exp(rng.uniform(0.0, math.log(1200))))))

    return side(), side()


def _crop(rng: random.Random, src: Image.Image, size: tuple[int, int]) -> Image.Image:
    """Random crop of ``src`` with the aspect ratio of ``size``, resized to ``size``."""
    w, h = size
    sw, sh = src.size
    aspect = w / h
    if sw / sh > aspect:
        max_w, max_h = sh * aspect, float(sh)
    else:
        max_w, max_h = float(sw), sw / aspect
    scale = rng.uniform(0.15, 1.0)
    cw = min(sw, max(1, round(max_w * scale)))
    ch = min(sh, max(1, round(max_h * scale)))
    x = rng.randint(0, sw - cw)
    y = rng.randint(0, sh - ch)
    region = src.crop((x, y, x + cw, y + ch))
    if region.size == (w, h):
        return region
    return region.resize((w, h), Image.Resampling.BICUBIC)


def _photo_rgb(rng: random.Random, sources: _Sources, size: tuple[int, int]) -> Image.Image:
    return _crop(rng, sources.photo(rng), size)


def _photo_gray(rng: random.Random, sources: _Sources, size: tuple[int, int]) -> Image.Image:
    if rng.random() < 0.3:
        return _crop(rng, sources.get("page.png"), size)
    return _photo_rgb(rng, sources, size).convert("L")


def _alpha(rng: random.Random, sources: _Sources, size: tuple[int, int]) -> Image.Image:
    """A real-content alpha channel: another photo's luminance, stretched to hit 0 and 255."""
    a = np.asarray(_photo_gray(rng, sources, size), dtype=np.float32)
    lo, hi = np.percentile(a, 15), np.percentile(a, 85)
    a = np.clip((a - lo) / max(hi - lo, 1.0), 0.0, 1.0) * 255.0
    return Image.fromarray(np.round(a).astype(np.uint8))


def _photo_rgba(rng: random.Random, sources: _Sources, size: tuple[int, int]) -> Image.Image:
    """RGBA content whose alpha is never all-opaque (encoders would drop such an alpha)."""
    if rng.random() < 0.4:
        logo = _crop(rng, sources.get("logo.png"), size)  # real transparency around a logo
        if logo.getchannel("A").getextrema()[0] < 255:
            return logo
    rgba = _photo_rgb(rng, sources, size).convert("RGBA")
    rgba.putalpha(_alpha(rng, sources, size))
    return rgba


def _to_16bit(np_rng: np.random.Generator, img8: np.ndarray) -> np.ndarray:
    """Spread 8-bit content over 0..65535 and plant some values below 256 and the extremes."""
    a = img8.astype(np.uint32) * 257 + np_rng.integers(-128, 129, size=img8.shape)
    a = np.clip(a, 0, 65535).astype(np.uint16)
    flat = a.reshape(-1)
    n = flat.size
    if n >= 2:
        low = np_rng.random(n) < 0.1
        flat[low] = np_rng.integers(0, 256, size=int(low.sum()))
        flat[0] = np_rng.integers(0, 256)  # always at least one value < 256 ...
        flat[-1] = 65535  # ... and one at full scale
    return a


# --------------------------------------------------------------------------------------------
# Generators, one per kind: _gen_<kind>(job) writes job.path
# --------------------------------------------------------------------------------------------


class _Job(NamedTuple):
    path: Path
    size: tuple[int, int]
    index: int
    sources: _Sources
    rng: random.Random
    np_rng: np.random.Generator


def _jpeg(path: Path, img: Image.Image, rng: random.Random, **kwargs: object) -> None:
    params: dict[str, object] = {"quality": rng.randint(50, 98)}
    params.update(kwargs)
    img.save(path, "JPEG", **params)


def _gen_jpeg_444(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size), rng, subsampling=0)


def _gen_jpeg_422(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size), rng, subsampling=1)


def _gen_jpeg_420(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size), rng, subsampling=2)


def _gen_jpeg_progressive(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size), rng, progressive=True, subsampling=i % 3)


def _gen_jpeg_optimize(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size), rng, optimize=True, subsampling=(i + 2) % 3)


def _gen_jpeg_gray(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_gray(rng, sources, size), rng, progressive=i % 2 == 1)


def _gen_jpeg_cmyk(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size).convert("CMYK"), rng)


def _gen_jpeg_restart(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    if i % 2 == 0:
        restart = {"restart_marker_blocks": rng.choice([1, 2, 3, 7])}
    else:
        restart = {"restart_marker_rows": rng.choice([1, 2])}
    _jpeg(path, _photo_rgb(rng, sources, size), rng, subsampling=i % 3, **restart)


def _gen_jpeg_keep_rgb(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _jpeg(path, _photo_rgb(rng, sources, size), rng, keep_rgb=True, subsampling=0)


def _gen_png_rgb(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _photo_rgb(rng, sources, size).save(path, "PNG", compress_level=rng.choice([1, 6, 9]))


def _gen_png_rgba(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _photo_rgba(rng, sources, size).save(path, "PNG")


def _gen_png_l(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _photo_gray(rng, sources, size).save(path, "PNG")


def _gen_png_la(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    gray = _photo_gray(rng, sources, size)
    Image.merge("LA", (gray, _alpha(rng, sources, size))).save(path, "PNG")


def _gen_png_p(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    colors = (256, 16, 2, 4, 64)[i % 5]
    rgb = _photo_rgb(rng, sources, size)
    img = rgb.quantize(colors=colors, dither=Image.Dither.FLOYDSTEINBERG)
    img.save(path, "PNG")


def _gen_png_p_transparency(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    if i % 2 == 0:
        # Classic GIF-style transparency: one palette index fully transparent.
        img = _photo_rgb(rng, sources, size).quantize(colors=rng.choice([16, 64, 256]))
        used = sorted({c for _, c in img.getcolors(maxcolors=256) or []})
        img.save(path, "PNG", transparency=rng.choice(used))
    else:
        # Palette entries with their own alpha (tRNS with several values).
        rgba = _photo_rgba(rng, sources, size)
        img = rgba.quantize(colors=rng.choice([16, 256]), method=Image.Quantize.FASTOCTREE)
        img.save(path, "PNG")


def _gen_png_1bit(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _photo_gray(rng, sources, size).convert("1").save(path, "PNG")


def _gen_png_gray16(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    gray8 = np.asarray(_photo_gray(rng, sources, size))
    Image.fromarray(_to_16bit(np_rng, gray8)).save(path, "PNG")  # uint16 -> mode "I;16"


def _gen_png_rgb16(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    rgb8 = np.asarray(_photo_rgb(rng, sources, size))
    write_png(path, _to_16bit(np_rng, rgb8), np_rng=np_rng)


def _gen_png_rgba16(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    rgba8 = np.asarray(_photo_rgba(rng, sources, size))
    write_png(path, _to_16bit(np_rng, rgba8), np_rng=np_rng)


def _gen_png_interlaced_rgb(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    rgb8 = np.asarray(_photo_rgb(rng, sources, size))
    write_png(path, rgb8, interlace=True, np_rng=np_rng)


def _gen_png_interlaced_rgba(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    rgba8 = np.asarray(_photo_rgba(rng, sources, size))
    write_png(path, rgba8, interlace=True, np_rng=np_rng)


def _gen_webp_lossy(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _photo_rgb(rng, sources, size).save(path, "WEBP", quality=rng.randint(50, 95))


def _gen_webp_lossless(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    img = _photo_rgb(rng, sources, size)
    effort = rng.choice([0, 50, 100])  # lossless "quality" is encoder effort
    img.save(path, "WEBP", lossless=True, quality=effort, method=rng.randint(0, 4))


def _gen_webp_lossy_alpha(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    _photo_rgba(rng, sources, size).save(path, "WEBP", quality=rng.randint(50, 95))


def _gen_webp_lossless_alpha(job: _Job) -> None:
    path, size, i, sources, rng, np_rng = job
    img = _photo_rgba(rng, sources, size)
    img.save(path, "WEBP", lossless=True, exact=i % 2 == 1, method=rng.randint(0, 4))


_GENERATORS: dict[str, Callable[[_Job], None]] = {
    kind: globals()[f"_gen_{kind}"] for kind in KINDS
}


# --------------------------------------------------------------------------------------------
# Minimal PNG encoder (16-bit samples, Adam7 interlacing, all five row filters)
# --------------------------------------------------------------------------------------------

_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type (gray, gray+A, RGB, RGBA)
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))  # (x0, y0, dx, dy)


def write_png(
    path: Path,
    pixels: np.ndarray,
    *,
    interlace: bool = False,
    np_rng: np.random.Generator | None = None,
    idat_chunk: int = 8192,
) -> None:
    """Write ``pixels`` (``uint8``/``uint16``, ``[H, W]`` or ``[H, W, C]``, C in 1..4) as a PNG.

    Each scanline gets a filter type drawn from ``np_rng`` (all of None/Sub/Up/Average/Paeth
    occur), or filter 0 without a generator. The zlib stream is split into IDAT chunks of
    ``idat_chunk`` bytes. 16-bit samples are written big-endian as PNG requires.
    """
    a = np.asarray(pixels)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in _COLOR_TYPES or a.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"unsupported pixel array {a.dtype} {a.shape}")
    height, width, channels = a.shape
    if width < 1 or height < 1:
        raise ValueError("PNG images must be at least 1x1")
    bit_depth = 8 * a.dtype.itemsize
    bpp = channels * a.dtype.itemsize  # bytes per complete pixel
    # Big-endian bytes per row: [H, W * bpp].
    big_endian = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder(">"))
    rows = big_endian.view(np.uint8).reshape(height, -1)

    raw = bytearray()
    if interlace:
        for x0, y0, dx, dy in _ADAM7:
            sub = rows.reshape(height, width, bpp)[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += _filter_scanlines(sub.reshape(sub.shape[0], -1), bpp, np_rng)
    else:
        raw += _filter_scanlines(rows, bpp, np_rng)

    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, _COLOR_TYPES[channels], 0, 0,
                       1 if interlace else 0)
    data = zlib.compress(bytes(raw), 6)
    out = bytearray(b"\x89PNG\r\n\x1a\n")
    out += _chunk(b"IHDR", ihdr)
    for start in range(0, max(len(data), 1), idat_chunk):
        out += _chunk(b"IDAT", data[start : start + idat_chunk])
    out += _chunk(b"IEND", b"")
    Path(path).write_bytes(bytes(out))


def _chunk(tag: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + tag + payload + struct.pack(
        ">I", zlib.crc32(tag + payload) & 0xFFFFFFFF
    )


def _filter_scanlines(rows: np.ndarray, bpp: int, np_rng: np.random.Generator | None) -> bytes:
    """Apply a PNG filter to every row (vectorised; filters only look at unfiltered bytes)."""
    h, n = rows.shape
    x = rows.astype(np.int16)
    left = np.zeros_like(x)
    left[:, bpp:] = x[:, :-bpp]
    up = np.zeros_like(x)
    up[1:] = x[:-1]
    up_left = np.zeros_like(x)
    up_left[1:, bpp:] = x[:-1, :-bpp]
    kinds = np_rng.integers(0, 5, size=h) if np_rng is not None else np.zeros(h, dtype=np.int64)

    out = np.empty((h, n + 1), dtype=np.uint8)
    out[:, 0] = kinds
    for f in range(5):
        sel = kinds == f
        if not sel.any():
            continue
        r, a, b, c = x[sel], left[sel], up[sel], up_left[sel]
        if f == 0:
            pred = np.zeros_like(r)
        elif f == 1:
            pred = a
        elif f == 2:
            pred = b
        elif f == 3:
            pred = (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
            pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        out[sel, 1:] = ((r - pred) & 0xFF).astype(np.uint8)
    return out.tobytes()
