"""Synthetic but realistic demo dataset for vision-language SFT.

:func:`generate_dataset` writes a small chat-style dataset (a ``train.jsonl`` manifest in the
``messages`` format plus a folder of images) that looks like real VLM supervised fine-tuning data:

* images are random crops of real photographs (the public-domain / CC0 / BSD sample photos vendored
  in ``stoker/_data/photos``, see the ``NOTICE.md`` there), resized to the sizes that real VQA,
  chat and document data hold (VGA up to 2048x1536, portrait phone shots, A4 document scans,
  small thumbnails), with mild brightness/contrast jitter, flips and sensor grain;
* about 75% JPEG (quality 75-95, mostly 4:2:0, some 4:4:4, ~10% progressive), about 20% PNG
  (RGB, RGBA, grayscale scans) and about 5% WebP;
* conversations mix single-image VQA, text-only chat, multi-turn multi-image dialogues and
  conversations with a system prompt, with templated but varied text (including a few non-ASCII
  samples).

Everything is deterministic given ``seed``: the same seed produces byte-identical files (for a given
Pillow build). A stamp file (``stoker-demo.json``) written last makes the call idempotent.

Run ``python -m stoker.demo_data OUT_DIR`` to generate the default dataset from a shell.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.resources
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter, ImageOps

__all__ = ["DemoDataset", "generate_dataset"]

#: Bumped whenever the generator's output changes, so that stale stamps force regeneration.
_GENERATOR_VERSION = 1
_STAMP_NAME = "stoker-demo.json"
_MANIFEST_NAME = "train.jsonl"
_IMAGES_DIR = "images"
_IMAGES_PER_FOLDER = 100

_PHOTO_SOURCES = ("astronaut", "chelsea", "coffee", "rocket", "retina", "hubble_deep_field")

# (width, height), weight. Sizes seen in real VQA / chat data: camera and screen resolutions,
# phone portraits, squares from social media and thumbnails at typical model input sizes.
_PHOTO_SIZES: tuple[tuple[tuple[int, int], int], ...] = (
    ((640, 480), 4),
    ((800, 600), 4),
    ((1024, 768), 4),
    ((1280, 720), 3),
    ((1600, 1200), 2),
    ((1920, 1080), 2),
    ((2048, 1536), 1),
    ((768, 1024), 2),
    ((720, 1280), 1),
    ((1080, 1440), 1),
    ((1080, 1080), 1),
    ((320, 240), 2),
    ((448, 448), 2),
    ((512, 384), 1),
)
# PNG encoding of large photos is slow (and rare in real data), so PNG photos stay moderate.
_PNG_PHOTO_SIZES: tuple[tuple[tuple[int, int], int], ...] = (
    ((640, 480), 3),
    ((800, 600), 3),
    ((1024, 768), 2),
    ((1280, 720), 2),
    ((768, 1024), 1),
    ((320, 240), 2),
    ((448, 448), 2),
)
_LOGO_SIZES: tuple[tuple[tuple[int, int], int], ...] = (
    ((256, 256), 2),
    ((400, 400), 2),
    ((512, 512), 3),
    ((800, 800), 1),
    ((1024, 1024), 1),
    ((640, 480), 1),
)
# A4 at 150 dpi dominates; US letter at 100 dpi, A4 at 200 dpi and a small letter thumbnail too.
_DOCUMENT_SIZES: tuple[tuple[tuple[int, int], int], ...] = (
    ((1240, 1754), 5),
    ((850, 1100), 2),
    ((1654, 2339), 1),
    ((612, 792), 1),
)


@dataclasses.dataclass(frozen=True)
class DemoDataset:
    """A generated demo dataset.

    Attributes:
        manifest: Path of the JSONL manifest (``train.jsonl``), one conversation per line.
        image_root: Directory that the image paths in the manifest are relative to.
        num_conversations: Number of lines in the manifest.
        num_images: Number of image files written.
        total_image_bytes: Sum of the sizes of the image files, in bytes.
    """

    manifest: Path
    image_root: Path
    num_conversations: int
    num_images: int
    total_image_bytes: int


@dataclasses.dataclass(frozen=True)
class _ImageSpec:
    """Plan for one image: what to draw and how to encode it."""

    index: int
    source: str  # one of _PHOTO_SOURCES, "logo" or "page"
    kind: str  # "photo", "logo" or "document"
    size: tuple[int, int]
    fmt: str  # "JPEG", "PNG" or "WEBP"
    save_kwargs: tuple[tuple[str, Any], ...]
    relpath: str


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def generate_dataset(
    out_dir: str | os.PathLike[str],
    *,
    num_conversations: int = 300,
    num_images: int = 120,
    seed: int = 0,
    progress: bool = True,
) -> DemoDataset:
    """Generate (or reuse) a demo VLM SFT dataset in ``out_dir``.

    Writes ``out_dir/train.jsonl`` (one ``{"messages": [...]}`` conversation per line), the images
    under ``out_dir/images/NNN/img_XXXXX.{jpg,png,webp}`` (paths in the manifest are relative to
    ``out_dir``) and finally a ``stoker-demo.json`` stamp. If the stamp shows that ``out_dir``
    already holds a complete dataset made with the same parameters, nothing is regenerated.

    Args:
        out_dir: Output directory; created if missing.
        num_conversations: Number of conversations in the manifest.
        num_images: Number of distinct image files. Conversations reference images by path and
            an image may be used by several conversations.
        seed: Non-negative seed for all randomness; the same seed gives byte-identical output.
        progress: Print a one-line progress indicator to stderr.

    Returns:
        A :class:`DemoDataset` describing the files.
    """
    if num_conversations < 0 or num_images < 0 or seed < 0:
        raise ValueError("num_conversations, num_images and seed must be non-negative")
    if num_images == 0 and num_conversations > 0:
        # Text-only chat would still work, but a VLM demo without images is almost surely a bug.
        raise ValueError("num_images must be positive when conversations are requested")
    out = Path(out_dir)
    params = {
        "generator_version": _GENERATOR_VERSION,
        "num_conversations": num_conversations,
        "num_images": num_images,
        "seed": seed,
    }
    existing = _load_complete(out, params)
    if existing is not None:
        return existing

    out.mkdir(parents=True, exist_ok=True)
    stamp = out / _STAMP_NAME
    had_stamp = stamp.exists()
    stamp.unlink(missing_ok=True)
    images_dir = out / _IMAGES_DIR
    if had_stamp and images_dir.is_dir():
        # Only wipe an images folder that an earlier run of this generator created.
        shutil.rmtree(images_dir)

    py_rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    sources = _load_sources()
    specs = _plan_images(py_rng, num_images)

    total_bytes = 0
    reporter = _Progress("generating demo images", num_images, enabled=progress)
    for spec in specs:
        image = _render(spec, sources, py_rng, np_rng)
        path = out / spec.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path, format=spec.fmt, **dict(spec.save_kwargs))
        total_bytes += path.stat().st_size
        reporter.update(spec.index + 1)
    reporter.close()

    conversations = _make_conversations(py_rng, specs, num_conversations)
    manifest = out / _MANIFEST_NAME
    tmp = manifest.with_name(manifest.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="\n") as f:
        for conv in conversations:
            f.write(json.dumps(conv, ensure_ascii=False, separators=(", ", ": ")))
            f.write("\n")
    tmp.replace(manifest)

    stamp_data = {
        "params": params,
        "num_conversations": len(conversations),
        "num_images": len(specs),
        "total_image_bytes": total_bytes,
        "images": [s.relpath for s in specs],
    }
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(json.dumps(stamp_data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(stamp)
    return DemoDataset(
        manifest=manifest,
        image_root=out,
        num_conversations=len(conversations),
        num_images=len(specs),
        total_image_bytes=total_bytes,
    )


def _load_complete(out: Path, params: dict[str, int]) -> DemoDataset | None:
    """Return the dataset in ``out`` if its stamp matches ``params`` and all files are present."""
    try:
        stamp = json.loads((out / _STAMP_NAME).read_text(encoding="utf-8"))
        if stamp.get("params") != params:
            return None
        manifest = out / _MANIFEST_NAME
        if not manifest.is_file():
            return None
        total = sum((out / rel).stat().st_size for rel in stamp["images"])
        if total != stamp["total_image_bytes"] or len(stamp["images"]) != stamp["num_images"]:
            return None
        return DemoDataset(
            manifest=manifest,
            image_root=out,
            num_conversations=int(stamp["num_conversations"]),
            num_images=int(stamp["num_images"]),
            total_image_bytes=int(total),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class _Progress:
    """Dependency-free single-line progress indicator on stderr."""

    def __init__(self, label: str, total: int, *, enabled: bool) -> None:
        self._label = label
        self._total = total
        self._width = len(str(total))
        self._enabled = enabled
        self._shown = False
        if enabled:
            self.update(0)

    def update(self, done: int) -> None:
        """Redraw the line with ``done`` items completed."""
        if not self._enabled:
            return
        sys.stderr.write(f"\r{self._label} {done:>{self._width}}/{self._total}")
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        """Terminate the progress line."""
        if self._enabled and self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------


def _load_sources() -> dict[str, Image.Image]:
    """Decode the vendored photos (package data ``stoker/_data/photos``)."""
    folder = importlib.resources.files("stoker") / "_data" / "photos"
    sources: dict[str, Image.Image] = {}
    for name in _PHOTO_SOURCES:
        with folder.joinpath(f"{name}.jpg").open("rb") as f:
            sources[name] = Image.open(f).convert("RGB")
    with folder.joinpath("logo.png").open("rb") as f:
        sources["logo"] = Image.open(f).convert("RGBA")
    with folder.joinpath("page.png").open("rb") as f:
        sources["page"] = _flatten_illumination(Image.open(f).convert("L"))
    return sources


def _flatten_illumination(page: Image.Image) -> Image.Image:
    """Remove the scan's uneven lighting and whiten its paper so that bands tile seamlessly."""
    background = page.filter(ImageFilter.MaxFilter(9)).filter(ImageFilter.GaussianBlur(6))
    a = np.asarray(page, dtype=np.float32)
    bg = np.maximum(np.asarray(background, dtype=np.float32), 1.0)
    flat = a / bg
    # Levels: the typical paper value becomes white, the ink stays dark.
    white = float(np.median(flat))
    black = float(np.percentile(flat, 2))
    flat = np.clip((flat - black) / max(white - black, 1e-3), 0.0, 1.0) * 255.0
    return Image.fromarray(np.round(flat).astype(np.uint8))


def _line_gaps(page: Image.Image, first_row: int, last_row: int) -> list[int]:
    """Rows between ``first_row`` and ``last_row`` that separate lines of text on the page."""
    dark = (np.asarray(page) < 128).sum(axis=1)
    blank = dark <= max(2, page.width // 100)
    gaps: list[int] = []
    run: list[int] = []
    for row in range(first_row, min(last_row, page.height)):
        if blank[row]:
            run.append(row)
        elif run:
            gaps.append(run[len(run) // 2])
            run = []
    if run:
        gaps.append(run[len(run) // 2])
    # A stray speck can split one gap in two; keep one row per gap.
    merged: list[int] = []
    for row in gaps:
        if merged and row - merged[-1] < 4:
            continue
        merged.append(row)
    return merged


def _weighted(rng: random.Random, table: Sequence[tuple[tuple[int, int], int]]) -> tuple[int, int]:
    sizes = [s for s, _ in table]
    weights = [w for _, w in table]
    return rng.choices(sizes, weights=weights, k=1)[0]


def _exact_flags(rng: random.Random, n: int, fraction: float) -> list[bool]:
    """``n`` shuffled booleans of which about ``n * fraction`` are True (one when n is small)."""
    k = round(n * fraction)
    if k == 0 and n * fraction >= 0.25:
        k = 1
    flags = [True] * k + [False] * (n - k)
    rng.shuffle(flags)
    return flags


def _plan_images(rng: random.Random, n: int) -> list[_ImageSpec]:
    """Decide source, size and encoding of every image (exact format proportions)."""
    n_webp = round(n * 0.05) if n >= 10 else 0
    n_png = round(n * 0.20) if n >= 3 else 0
    n_jpeg = n - n_webp - n_png
    formats = ["JPEG"] * n_jpeg + ["PNG"] * n_png + ["WEBP"] * n_webp
    rng.shuffle(formats)
    # PNG flavours: half RGB photos, a quarter RGBA logos, a quarter grayscale document scans.
    png_kinds = ["photo"] * (n_png - 2 * (n_png // 4)) + ["logo"] * (n_png // 4)
    png_kinds += ["document"] * (n_png // 4)
    rng.shuffle(png_kinds)
    jpeg_docs = _exact_flags(rng, n_jpeg, 0.08)
    jpeg_progressive = _exact_flags(rng, n_jpeg, 0.10)
    jpeg_444 = _exact_flags(rng, n_jpeg, 0.20)

    specs: list[_ImageSpec] = []
    i_png = i_jpeg = 0
    for index, fmt in enumerate(formats):
        save: dict[str, Any]
        if fmt == "JPEG":
            kind = "document" if jpeg_docs[i_jpeg] else "photo"
            progressive = jpeg_progressive[i_jpeg]
            save = {
                "quality": rng.randint(75, 95),
                "subsampling": 0 if jpeg_444[i_jpeg] else 2,
                "progressive": progressive,
                "optimize": progressive or rng.random() < 0.3,
            }
            i_jpeg += 1
            ext = "jpg"
        elif fmt == "PNG":
            kind = png_kinds[i_png]
            i_png += 1
            save = {"compress_level": 6}
            ext = "png"
        else:
            kind = "photo"
            save = {"quality": 80, "method": 4}
            ext = "webp"
        if kind == "photo":
            source = rng.choice(_PHOTO_SOURCES)
            size = _weighted(rng, _PNG_PHOTO_SIZES if fmt == "PNG" else _PHOTO_SIZES)
        elif kind == "logo":
            source = "logo"
            size = _weighted(rng, _LOGO_SIZES)
        else:
            source = "page"
            size = _weighted(rng, _DOCUMENT_SIZES)
        folder = f"{index // _IMAGES_PER_FOLDER:03d}"
        relpath = f"{_IMAGES_DIR}/{folder}/img_{index:05d}.{ext}"
        specs.append(
            _ImageSpec(index, source, kind, size, fmt, tuple(sorted(save.items())), relpath)
        )
    return specs


def _random_box(
    rng: random.Random, src_size: tuple[int, int], aspect: float
) -> tuple[int, int, int, int]:
    """Random crop box with the given width/height ratio covering >= 40% of the limiting side."""
    sw, sh = src_size
    if sw / sh > aspect:
        max_w, max_h = sh * aspect, float(sh)
    else:
        max_w, max_h = float(sw), sw / aspect
    scale = rng.uniform(0.4, 1.0)
    w = max(1, round(max_w * scale))
    h = max(1, round(max_h * scale))
    x = rng.randint(0, sw - w)
    y = rng.randint(0, sh - h)
    return x, y, x + w, y + h


def _jitter(rng: random.Random, img: Image.Image) -> Image.Image:
    """Small random brightness / contrast change (alpha, if any, is kept)."""
    alpha = img.getchannel("A") if img.mode == "RGBA" else None
    base = img.convert("RGB") if alpha is not None else img
    base = ImageEnhance.Brightness(base).enhance(rng.uniform(0.88, 1.12))
    base = ImageEnhance.Contrast(base).enhance(rng.uniform(0.88, 1.12))
    if alpha is not None:
        base = base.convert("RGBA")
        base.putalpha(alpha)
    return base


def _add_grain(np_rng: np.random.Generator, img: Image.Image, amplitude: int) -> Image.Image:
    """Add mild monochrome sensor grain (uniform noise in [-amplitude, amplitude])."""
    a = np.asarray(img, dtype=np.int16)
    noise = np_rng.integers(-amplitude, amplitude + 1, size=a.shape[:2], dtype=np.int16)
    a = a + (noise[..., None] if a.ndim == 3 else noise)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _render(
    spec: _ImageSpec,
    sources: dict[str, Image.Image],
    rng: random.Random,
    np_rng: np.random.Generator,
) -> Image.Image:
    """Draw the pixels for one image spec, in the mode its encoding needs."""
    width, height = spec.size
    if spec.kind == "document":
        img = _render_document(spec.size, sources["page"], rng, np_rng)
        return img if spec.fmt == "PNG" else img.convert("RGB")
    src = sources[spec.source]
    box = _random_box(rng, src.size, width / height)
    region = _jitter(rng, src.crop(box))
    if rng.random() < 0.3:
        region = ImageOps.mirror(region)
    resample = Image.Resampling.LANCZOS if rng.random() < 0.6 else Image.Resampling.BICUBIC
    img = region.resize((width, height), resample)
    if spec.kind == "photo" and rng.random() < 0.35:
        img = _add_grain(np_rng, img, rng.randint(1, 3))
    return img


def _render_document(
    size: tuple[int, int],
    page: Image.Image,
    rng: random.Random,
    np_rng: np.random.Generator,
) -> Image.Image:
    """Compose a scanned-document page from bands of the sample text page (grayscale)."""
    width, height = size
    paper = rng.randint(228, 250)
    canvas = Image.new("L", size, paper)
    margin_x = round(width * rng.uniform(0.07, 0.11))
    margin_top = round(height * rng.uniform(0.05, 0.08))
    margin_bottom = round(height * rng.uniform(0.05, 0.08))
    block_w = width - 2 * margin_x
    scale = block_w / page.width
    # Shift the paper tone of the flattened scan (background ~238) to this page's tone.
    # The flattened scan has white paper; scale it to this page's paper tone.
    lut = [v * paper // 255 for v in range(256)]
    # Paragraph line boundaries below the heading and above the code line of the sample page.
    gaps = _line_gaps(page, round(page.height * 0.22), round(page.height * 0.75))
    y = margin_top
    first = True
    while y < height - margin_bottom:
        if first or len(gaps) < 2:
            band = (0, 0, page.width, page.height)  # whole scan: heading, paragraph, code
        else:
            i = rng.randrange(len(gaps) - 1)
            j = rng.randint(i + 1, len(gaps) - 1)
            band = (0, gaps[i], page.width, gaps[j])
        first = False
        piece = page.crop(band)
        piece_h = max(1, round(piece.height * scale))
        piece = piece.resize((block_w, piece_h), Image.Resampling.BICUBIC).point(lut)
        room = height - margin_bottom - y
        if piece_h > room:
            piece = piece.crop((0, 0, block_w, room))
        canvas.paste(piece, (margin_x, y))
        y += piece_h + round(rng.uniform(0.0, 0.5) * 12 * scale)
    canvas = ImageEnhance.Contrast(canvas).enhance(rng.uniform(0.9, 1.1))
    if rng.random() < 0.5:
        canvas = canvas.rotate(rng.uniform(-0.8, 0.8), Image.Resampling.BICUBIC, fillcolor=paper)
    return _add_grain(np_rng, canvas, 2)


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------

# Per-source content: a one-line lead, extra detail sentences, countable objects, colours,
# things that are present / absent, a setting, and short translations for non-ASCII samples.
_SUBJECTS: dict[str, dict[str, Any]] = {
    "astronaut": {
        "noun": "an astronaut",
        "lead": [
            "The photo is a formal portrait of an astronaut in an orange launch-and-entry suit, "
            "smiling at the camera.",
            "It shows a smiling astronaut in an orange pressure suit posing for an official "
            "portrait.",
        ],
        "details": [
            "She is holding a white helmet with a dark visor under her left arm.",
            "An American flag hangs on the left side of the frame.",
            "A model of the Space Shuttle stack stands on a pedestal behind her right shoulder.",
            "Mission patches are sewn onto the chest of the suit.",
            "The background is a mottled grey studio backdrop, typical of NASA crew portraits.",
            "The lighting is soft and even, so there are almost no harsh shadows on her face.",
            "The neck ring of the suit is dark blue metal.",
        ],
        "count": [("people", 1), ("helmets", 1), ("flags", 1)],
        "colors": "orange, white and a little blue from the flag",
        "present": ["a helmet", "a flag", "a person"],
        "absent": ["a dog", "a bicycle", "a car"],
        "setting": "a photo studio at a NASA facility",
        "zh": "一位穿着橙色航天服的宇航员的肖像",
        "fr": "le portrait d'une astronaute en combinaison orange",
    },
    "chelsea": {
        "noun": "a cat",
        "lead": [
            "This is a close-up of a tabby cat looking slightly to the side with wide green eyes.",
            "The picture shows the face of a brown tabby cat in sharp focus.",
        ],
        "details": [
            "Its fur is a mix of light brown, grey and dark stripes.",
            "The ears are pointed upward and the whiskers are long and white.",
            "The nose is pinkish orange.",
            "The background is blurred, which suggests a shallow depth of field.",
            "The cat seems calm but attentive, as if watching something off camera.",
            "There are distinct dark stripes running over the top of its head.",
        ],
        "count": [("cats", 1), ("eyes", 2), ("ears", 2)],
        "colors": "light brown, grey and green (the eyes)",
        "present": ["a cat", "whiskers"],
        "absent": ["a dog", "a person", "a ball of yarn"],
        "setting": "indoors, probably at home",
        "zh": "一只虎斑猫的特写",
        "fr": "un gros plan d'un chat tigré",
    },
    "coffee": {
        "noun": "a cup of coffee",
        "lead": [
            "The image shows a cup of espresso on a red saucer, photographed from above on a "
            "wooden table.",
            "It is a top-down photo of a small red coffee cup with a metal spoon on the saucer.",
        ],
        "details": [
            "The cup is white inside and glossy red outside.",
            "A silver teaspoon rests on the saucer next to the cup.",
            "The coffee has a light brown crema on top.",
            "The table is made of dark, weathered wood with visible grain.",
            "Warm light comes from the upper left and creates a soft shadow.",
            "The composition is simple, with the cup slightly off centre.",
        ],
        "count": [("cups", 1), ("spoons", 1), ("saucers", 1)],
        "colors": "red, brown and white",
        "present": ["a cup", "a spoon", "a saucer"],
        "absent": ["a croissant", "a laptop", "a person"],
        "setting": "a coffee shop or a kitchen table",
        "zh": "一杯放在红色碟子上的浓缩咖啡",
        "fr": "une tasse d'expresso sur une soucoupe rouge",
    },
    "rocket": {
        "noun": "a rocket on a launch pad",
        "lead": [
            "The photo shows a white rocket standing on its launch pad at dusk, surrounded by "
            "lightning towers.",
            "A tall rocket is ready for launch on the pad, lit by floodlights against a deep blue "
            "evening sky.",
        ],
        "details": [
            "Four tall lattice towers surround the pad to protect it from lightning.",
            "Bright floodlights at the bottom of the frame create lens flares.",
            "The sky fades from deep blue at the top to a lighter blue near the horizon.",
            "The rocket appears to be a two-stage launcher with a payload fairing on top.",
            "There are no people visible, which is typical shortly before a launch.",
            "The low light suggests the picture was taken just after sunset or before sunrise.",
        ],
        "count": [("rockets", 1), ("lightning towers", 4)],
        "colors": "dark blue, white and warm yellow from the lights",
        "present": ["a rocket", "a tower", "lights"],
        "absent": ["an airplane", "a boat", "a crowd of people"],
        "setting": "a launch complex, most likely at Cape Canaveral",
        "zh": "黄昏时分矗立在发射台上的火箭",
        "fr": "une fusée sur son pas de tir au crépuscule",
    },
    "retina": {
        "noun": "a retinal fundus photograph",
        "lead": [
            "This is a fundus photograph of the back of the eye, showing the retina, the optic "
            "disc and the blood vessels.",
            "The image is a medical photograph of a human retina taken with a fundus camera.",
        ],
        "details": [
            "The optic disc appears as a bright yellowish circle on the left.",
            "Blood vessels branch out from the optic disc across the orange-red retina.",
            "The darker spot near the centre is the macula.",
            "The circular field of view is surrounded by a black border, as usual for fundus "
            "cameras.",
            "No obvious haemorrhages or exudates are visible at this resolution, but a diagnosis "
            "requires an ophthalmologist.",
            "The overall colour is a uniform orange-red, which is normal for a healthy fundus.",
        ],
        "count": [("optic discs", 1), ("eyes", 1)],
        "colors": "orange-red with a yellow optic disc and dark red vessels",
        "present": ["blood vessels", "the optic disc"],
        "absent": ["a face", "text labels", "a ruler"],
        "setting": "an ophthalmology clinic",
        "zh": "一张视网膜眼底照片",
        "fr": "une photographie du fond d'œil",
    },
    "hubble_deep_field": {
        "noun": "a deep-field image of distant galaxies",
        "lead": [
            "The image is a deep-field view of space filled with hundreds of faint galaxies.",
            "It shows the Hubble Deep Field: a tiny patch of sky crowded with distant galaxies of "
            "many shapes and colours.",
        ],
        "details": [
            "Almost every dot of light is a galaxy rather than a star.",
            "Some galaxies are spirals, others are elliptical or irregular smudges.",
            "The background is nearly black.",
            "A few bright foreground stars show small diffraction spikes.",
            "The reddish objects are generally the most distant ones.",
            "The picture was assembled from many long exposures taken by the Hubble Space "
            "Telescope.",
        ],
        "count": [("galaxies", "hundreds"), ("planets", 0)],
        "colors": "black with white, blue, orange and red specks",
        "present": ["galaxies", "stars"],
        "absent": ["a planet's surface", "a spacecraft", "the Moon"],
        "setting": "deep space, seen through the Hubble Space Telescope",
        "zh": "哈勃深空场中的遥远星系",
        "fr": "des galaxies lointaines du champ profond de Hubble",
    },
    "logo": {
        "noun": "a circular logo",
        "lead": [
            "This is a round logo split into a green half and an orange half by a white S-shaped "
            "curve, with a snake drawn over it.",
            "The image is the scikit-image logo: a circle with a white S curve and a snake's head "
            "and scales.",
        ],
        "details": [
            "The background outside the circle is transparent.",
            "The green half shows the snake's scales as a dark line drawing.",
            "The orange half shows the snake's head and eye in lighter orange tones.",
            "The white S curve separates the two halves and suggests the letter S.",
            "The design combines a photo-like texture with flat colours.",
        ],
        "count": [("snakes", 1), ("circles", 1)],
        "colors": "green, orange and white",
        "present": ["a snake", "a white curve"],
        "absent": ["any text", "a person", "a star"],
        "setting": "a graphic design, not a photograph",
        "zh": "一个绿色和橙色的圆形标志",
        "fr": "un logo rond vert et orange",
    },
    "page": {
        "noun": "a scanned document page",
        "lead": [
            "This is a scanned page from a technical book about image processing, with the "
            "heading 'Region-based segmentation'.",
            "The image shows a grayscale scan of a printed page that explains region-based "
            "segmentation.",
        ],
        "details": [
            "The text says that markers of the coins and the background are determined first.",
            "It explains that markers are pixels that can be labelled unambiguously as either "
            "object or background.",
            "The markers are found at the two extreme parts of the histogram of grey values.",
            "A Python code line at the bottom reads `markers = np.zeros_like(coins)`.",
            "The page is printed in a sans-serif font on slightly grey paper.",
            "The scan is straight and easy to read.",
        ],
        "count": [("headings", 1), ("code lines", 1), ("photographs", 0)],
        "colors": "black text on light grey paper",
        "present": ["text", "a heading", "a code snippet"],
        "absent": ["a photograph", "a table", "a signature"],
        "setting": "a page of a textbook or tutorial",
        "zh": "一页扫描的技术文档",
        "fr": "une page de document numérisée",
    },
}

_CAPTION_QUESTIONS = (
    "What is shown in this picture?",
    "Describe this image.",
    "Can you describe the image in detail?",
    "Write a short caption for this photo.",
    "What do you see here?",
    "Give me a one-sentence summary of the picture.",
    "Explain what is happening in this image.",
)
_DOCUMENT_QUESTIONS = (
    (
        "What is the title of this page?",
        'The heading of the page reads "Region-based segmentation".',
    ),
    (
        "Transcribe the first sentence of the main text.",
        '"Let us first determine markers of the coins and the background."',
    ),
    (
        "Which programming language is used in the code snippet?",
        "The snippet is Python: it creates the marker array with NumPy's np.zeros_like(coins).",
    ),
    ("Summarize this document.", None),
    ("What is this page about?", None),
)
_FOLLOW_UPS = (
    "Can you tell me more about it?",
    "What else can you notice?",
    "Interesting. Any other details?",
    "What colours stand out?",
    "Where do you think this was taken?",
    "Is there anything unusual in the picture?",
)
_NEW_IMAGE_PROMPTS = (
    "Here is another picture. What does it show?",
    "Now look at this one. How is it different from the previous image?",
    "And this image?",
    "Compare it with this one.",
)
_MULTI_IMAGE_PROMPTS = (
    "Compare these images.",
    "What do these pictures have in common?",
    "Describe each of these images briefly.",
)
_SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a helpful vision-language assistant. Answer questions about images accurately and "
    "concisely.",
    "You are an expert image analyst. Describe only what is visible and say when you are unsure.",
    "You are a careful assistant for document understanding and OCR tasks.",
    "Answer in a friendly tone. Keep answers short unless the user asks for details.",
)
_TEXT_CHATS: tuple[tuple[str, str], ...] = (
    (
        "What is the difference between JPEG and PNG?",
        "JPEG uses lossy compression that works well for photographs, so files are small but some "
        "detail is lost. PNG is lossless and supports transparency, which makes it a better choice "
        "for screenshots, logos and diagrams. For photos PNG files are usually several times "
        "larger.",
    ),
    (
        "How do I resize an image in Python without distorting it?",
        "Compute the scale factor from the target size and apply it to both sides so the aspect "
        "ratio stays the same. With Pillow you can call image.thumbnail((max_w, max_h)), which "
        "keeps the aspect ratio automatically. If you need an exact size, resize and then pad or "
        "crop the result.",
    ),
    (
        "Why do my training images look washed out after loading?",
        "The most common cause is a colour-space or normalization mismatch. Check that you convert "
        "to RGB before normalizing and that mean and standard deviation match the ones the model "
        "was trained with. Also make sure you do not normalize twice.",
    ),
    (
        "Give me three tips for taking sharper photos.",
        "Use a faster shutter speed or a tripod to avoid camera shake. Focus on the subject's eyes "
        "or the most important detail. Shoot in good light so the camera does not need a high ISO.",
    ),
    (
        "What is chroma subsampling?",
        "Chroma subsampling stores colour information at a lower resolution than brightness, "
        "because the eye is less sensitive to colour detail. In 4:2:0 the colour planes have half "
        "the width and half the height of the image. 4:4:4 keeps full colour resolution.",
    ),
    (
        "Explain what a vision-language model is in one paragraph.",
        "A vision-language model combines an image encoder with a language model so that it can "
        "read pictures and text together. The image is turned into a sequence of embeddings that "
        "the language model attends to like extra tokens. This lets the model answer questions "
        "about images, write captions and follow instructions that refer to visual content.",
    ),
    (
        "Write a haiku about autumn.",
        "Red leaves drift and fall\nthe old path hums with footsteps\nfog swallows the hill",
    ),
    (
        "What is the capital of Australia?",
        "The capital of Australia is Canberra.",
    ),
    (
        "How many bytes does an uncompressed 1920x1080 RGB image take?",
        "It takes 1920 x 1080 x 3 = 6,220,800 bytes, about 5.9 MiB.",
    ),
    (
        "Can you suggest a name for a small coffee shop?",
        "How about 'The Daily Grind'? Other options are 'Bean There', 'Crema Corner' or 'Second "
        "Cup'. Pick one that fits the neighbourhood and is easy to remember.",
    ),
)
_TEXT_FOLLOW_UPS: tuple[tuple[str, str], ...] = (
    ("Thanks! Can you make it shorter?", "Sure. In short: pick the right tool for the job."),
    ("Could you give an example?", "For example, a 4000x3000 holiday photo saved as JPEG at "
     "quality 85 is about 3 MB, while the same image as PNG is often over 20 MB."),
    ("Got it, thank you.", "You're welcome! Let me know if you have other questions."),
)
_UNICODE_SUFFIXES = (" 😊", " 📷", " Merci !", " 谢谢！", " 👍")


def _sentences(rng: random.Random, subject: dict[str, Any], n: int) -> str:
    """Lead sentence plus ``n - 1`` distinct detail sentences (1 <= n <= 6)."""
    details = rng.sample(subject["details"], min(n - 1, len(subject["details"])))
    return " ".join([rng.choice(subject["lead"]), *details])


def _answer_length(rng: random.Random) -> int:
    return rng.choices([1, 2, 3, 4, 5, 6], weights=[4, 5, 4, 3, 2, 1], k=1)[0]


def _vqa_pair(rng: random.Random, spec: _ImageSpec) -> tuple[str, str]:
    """One question about an image and its answer."""
    subject = _SUBJECTS[spec.source]
    if spec.kind == "document":
        question, answer = rng.choice(_DOCUMENT_QUESTIONS)
        if answer is None:
            answer = _sentences(rng, subject, rng.randint(2, 5))
        return question, answer
    roll = rng.random()
    if roll < 0.5:
        return rng.choice(_CAPTION_QUESTIONS), _sentences(rng, subject, _answer_length(rng))
    if roll < 0.65:
        obj, count = rng.choice(subject["count"])
        if isinstance(count, str):
            answer = f"There are {count} of {obj}, far too many to count exactly."
        elif count == 0:
            answer = f"There are no {obj} in this image."
        elif rng.random() < 0.4:
            answer = f"{count}."
        else:
            answer = f"There {'is' if count == 1 else 'are'} {count} {obj} in the image."
        return f"How many {obj} can you see?", answer
    if roll < 0.8:
        if rng.random() < 0.5:
            thing = rng.choice(subject["present"])
            return f"Is there {thing} in this image?", f"Yes, there is {thing} in the image."
        thing = rng.choice(subject["absent"])
        answer = f"No, I can't see {thing}. The image shows {subject['noun']}."
        return f"Is there {thing} in this picture?", answer
    if roll < 0.9:
        question = "What are the main colours in this image?"
        return question, f"The main colours are {subject['colors']}."
    return (
        "Where was this picture probably taken?",
        f"It was most likely taken in {subject['setting']}. " + _sentences(rng, subject, 1),
    )


def _image_item(spec: _ImageSpec) -> dict[str, str]:
    return {"type": "image", "image": spec.relpath}


def _text_item(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


class _ImagePicker:
    """Hands out images: first every image once (shuffled), then uniformly at random."""

    def __init__(self, rng: random.Random, specs: Sequence[_ImageSpec]) -> None:
        self._rng = rng
        self._specs = list(specs)
        self._first_pass: Iterator[_ImageSpec] = iter(rng.sample(self._specs, len(self._specs)))

    def pick(self) -> _ImageSpec:
        spec = next(self._first_pass, None)
        return spec if spec is not None else self._rng.choice(self._specs)


def _make_conversations(
    rng: random.Random, specs: Sequence[_ImageSpec], n: int
) -> list[dict[str, Any]]:
    """Build ``n`` conversations: ~50% VQA, 15% text-only, 25% multi-turn, 10% with a system."""
    kinds = ["vqa"] * round(n * 0.5) + ["text"] * round(n * 0.15) + ["multi"] * round(n * 0.25)
    kinds += ["system"] * max(0, n - len(kinds))
    kinds = kinds[:n]
    rng.shuffle(kinds)
    picker = _ImagePicker(rng, specs)
    conversations = []
    for kind in kinds:
        unicode_sample = rng.random() < 0.05
        if kind == "vqa":
            messages = _single_vqa(rng, picker, unicode_sample)
        elif kind == "text":
            messages = _text_chat(rng, unicode_sample)
        elif kind == "multi":
            messages = _multi_turn(rng, picker, unicode_sample)
        else:
            messages = [{"role": "system", "content": rng.choice(_SYSTEM_PROMPTS)}]
            if rng.random() < 0.7:
                messages += _single_vqa(rng, picker, unicode_sample)
            else:
                messages += _multi_turn(rng, picker, unicode_sample)
        conversations.append({"messages": messages})
    return conversations


def _single_vqa(
    rng: random.Random, picker: _ImagePicker, unicode_sample: bool
) -> list[dict[str, Any]]:
    spec = picker.pick()
    question, answer = _vqa_pair(rng, spec)
    if unicode_sample:
        question, answer = _unicode_variant(rng, spec, question, answer)
    user_content = [_image_item(spec), _text_item(question)]
    if rng.random() < 0.15:
        user_content.reverse()  # some datasets put the question before the image
    return [
        {"role": "user", "content": user_content},
        {"role": "assistant", "content": [_text_item(answer)]},
    ]


def _unicode_variant(
    rng: random.Random, spec: _ImageSpec, question: str, answer: str
) -> tuple[str, str]:
    """Rewrite a question/answer pair with non-ASCII text (Chinese, French or emoji)."""
    subject = _SUBJECTS[spec.source]
    roll = rng.random()
    if roll < 0.35:
        return "这张图片里有什么？请用中文回答。", f"图片中是{subject['zh']}。"
    if roll < 0.7:
        return "Décris cette image en une phrase, s'il te plaît.", f"On voit {subject['fr']}."
    return question + rng.choice(_UNICODE_SUFFIXES), answer + " 🙂"


def _text_chat(rng: random.Random, unicode_sample: bool) -> list[dict[str, Any]]:
    question, answer = rng.choice(_TEXT_CHATS)
    if unicode_sample:
        question += rng.choice(_UNICODE_SUFFIXES)
        answer += " ✨"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]
    if rng.random() < 0.3:
        follow_q, follow_a = rng.choice(_TEXT_FOLLOW_UPS)
        messages += [
            {"role": "user", "content": follow_q},
            {"role": "assistant", "content": follow_a},
        ]
    return messages


def _multi_turn(
    rng: random.Random, picker: _ImagePicker, unicode_sample: bool
) -> list[dict[str, Any]]:
    """2-4 user/assistant turns with 1-3 images placed in user turns (always one in turn 0)."""
    turns = rng.randint(2, 4)
    num_images = rng.choices([1, 2, 3], weights=[5, 4, 2], k=1)[0]
    placement = [0] + sorted(rng.randrange(turns) for _ in range(num_images - 1))
    per_turn = [placement.count(t) for t in range(turns)]
    messages: list[dict[str, Any]] = []
    last: _ImageSpec | None = None
    for t in range(turns):
        new = [picker.pick() for _ in range(per_turn[t])]
        if len(new) > 1:
            question = rng.choice(_MULTI_IMAGE_PROMPTS)
            parts = []
            for ordinal, spec in zip(("first", "second", "third"), new):
                lead = rng.choice(_SUBJECTS[spec.source]["lead"])
                parts.append(f"The {ordinal} image: {lead}")
            answer = " ".join(parts)
        elif new:
            spec = new[0]
            subject = _SUBJECTS[spec.source]
            if last is None:
                question, answer = _vqa_pair(rng, spec)
            else:
                question = rng.choice(_NEW_IMAGE_PROMPTS)
                answer = (
                    f"This one shows {subject['noun']}, whereas the previous image showed "
                    f"{_SUBJECTS[last.source]['noun']}. "
                    + _sentences(rng, subject, rng.randint(1, 3))
                )
        else:
            assert last is not None
            subject = _SUBJECTS[last.source]
            question = rng.choice(_FOLLOW_UPS)
            if question == "What colours stand out?":
                answer = f"Mostly {subject['colors']}."
            elif question == "Where do you think this was taken?":
                answer = f"Probably in {subject['setting']}."
            else:
                answer = " ".join(rng.sample(subject["details"], rng.randint(1, 3)))
        if new:
            last = new[-1]
        if unicode_sample and t == turns - 1:
            question += rng.choice(_UNICODE_SUFFIXES)
        content = [_image_item(spec) for spec in new] + [_text_item(question)]
        messages.append({"role": "user", "content": content})
        messages.append({"role": "assistant", "content": [_text_item(answer)]})
    return messages


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: ``python -m stoker.demo_data OUT_DIR``."""
    parser = argparse.ArgumentParser(description="Generate the Stoker demo VLM dataset.")
    parser.add_argument("out_dir")
    parser.add_argument("--num-conversations", type=int, default=300)
    parser.add_argument("--num-images", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    ds = generate_dataset(
        args.out_dir,
        num_conversations=args.num_conversations,
        num_images=args.num_images,
        seed=args.seed,
        progress=not args.quiet,
    )
    print(
        f"{ds.manifest}: {ds.num_conversations} conversations, {ds.num_images} images, "
        f"{ds.total_image_bytes / 2**20:.1f} MiB ({time.perf_counter() - start:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
