"""stoker.codec: pixel parity with Pillow, header probing, typed errors, zero-copy arrays.

The reference for every pixel is Pillow's ``Image.open(f).convert("RGB")``
(:func:`image_corpus.reference_rgb`); comparisons are exact.
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker import codec
from stoker.errors import (
    CorruptImageError,
    DecodeError,
    LimitExceededError,
    StokerError,
    UnsupportedImageError,
)

from image_corpus import KINDS, CorpusImage, make_corpus, reference_rgb

CORPUS_SEED = 20240611
COUNT_PER_KIND = 4

# Pillow's format names -> stoker.codec.probe's.
_PROBE_FORMAT = {"JPEG": "JPEG", "PNG": "PNG", "WEBP": "WebP"}


# ---------------------------------------------------------------------------------------------
# Helpers and fixtures
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[CorpusImage]:
    return make_corpus(tmp_path_factory.mktemp("corpus"), seed=CORPUS_SEED,
                       count_per_kind=COUNT_PER_KIND)


@pytest.fixture(scope="session")
def references(corpus: list[CorpusImage]) -> dict[Path, np.ndarray]:
    return {image.path: reference_rgb(image.path) for image in corpus}


def _pixels(seed: int = 0, height: int = 40, width: int = 50) -> np.ndarray:
    """Smooth-ish deterministic RGB content (compresses like a photo, not like noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 5, y * 6, (x + y) * 3], axis=-1) % 256
    noise = rng.integers(0, 24, size=(height, width, 3))
    return ((base + noise) % 256).astype(np.uint8)


def _encode(fmt: str, pixels: np.ndarray | None = None, **params: object) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(_pixels() if pixels is None else pixels).save(buf, fmt, **params)
    return buf.getvalue()


def _pillow_rgb(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.array(im.convert("RGB"), dtype=np.uint8)


def _chunk(tag: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(tag + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", crc)


def _png(width: int, height: int, bit_depth: int, color_type: int, rows: list[bytes],
         extra_chunks: bytes = b"") -> bytes:
    """A PNG from already packed scanlines (filter type 0 on every row)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    idat = zlib.compress(b"".join(b"\x00" + row for row in rows))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + extra_chunks + _chunk(b"IDAT", idat)
            + _chunk(b"IEND", b""))


def _pack_bits(values: np.ndarray, depth: int) -> bytes:
    """One row of sub-byte samples, most significant bits first, as PNG packs them."""
    per_byte = 8 // depth
    out = bytearray((len(values) + per_byte - 1) // per_byte)
    for i, v in enumerate(values.tolist()):
        out[i // per_byte] |= v << (8 - depth * (i % per_byte + 1))
    return bytes(out)


def _assert_same_pixels(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert isinstance(got, np.ndarray), f"{what}: {type(got)}"
    assert got.dtype == np.uint8, f"{what}: dtype {got.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, Pillow {want.shape}"
    if not np.array_equal(got, want):
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
        where = tuple(int(i) for i in np.argwhere(diff)[0])
        raise AssertionError(
            f"{what}: {int(np.count_nonzero(diff.any(axis=-1)))} of "
            f"{want.shape[0] * want.shape[1]} pixels differ from Pillow, max |diff| "
            f"{int(diff.max())}, first at {where[:2]}: got {got[where[:2]].tolist()}, "
            f"Pillow {want[where[:2]].tolist()}")


# ---------------------------------------------------------------------------------------------
# Parity with Pillow
# ---------------------------------------------------------------------------------------------


def test_corpus_covers_every_kind(corpus: list[CorpusImage]) -> None:
    assert {image.kind for image in corpus} == set(KINDS)
    assert len(corpus) == len(KINDS) * COUNT_PER_KIND


@pytest.mark.parametrize("kind", list(KINDS))
def test_decode_matches_pillow(kind: str, corpus: list[CorpusImage],
                               references: dict[Path, np.ndarray]) -> None:
    images = [image for image in corpus if image.kind == kind]
    assert images
    failures = []
    for image in images:
        want = references[image.path]
        try:
            got = codec.decode(image.path.read_bytes())
            _assert_same_pixels(got, want, f"{image.path.name} ({want.shape[1]}x{want.shape[0]})")
        except (AssertionError, StokerError) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


def test_probe_matches_pillow(corpus: list[CorpusImage]) -> None:
    for image in corpus:
        info = codec.probe(image.path.read_bytes())
        with Image.open(image.path) as im:
            pillow_format, pillow_size = im.format, im.size
        assert pillow_format == image.format
        assert info == codec.ImageInfo(_PROBE_FORMAT[pillow_format], *pillow_size), image.path.name
        assert (info.format, info.width, info.height) == (_PROBE_FORMAT[pillow_format],
                                                          *pillow_size)


def _png_variants() -> dict[str, bytes]:
    """PNG layouts the corpus does not write: sub-byte grey and palette depths, tRNS on every
    colour type, 16-bit grey+alpha and grey with tRNS."""
    rng = np.random.default_rng(7)
    w, h = 13, 7
    out: dict[str, bytes] = {}
    for depth in (1, 2, 4):
        values = rng.integers(0, 2**depth, size=(h, w))
        rows = [_pack_bits(row, depth) for row in values]
        palette = _chunk(b"PLTE", rng.integers(0, 256, size=(2**depth, 3), dtype=np.uint8).tobytes())
        out[f"gray{depth}"] = _png(w, h, depth, 0, rows)
        out[f"gray{depth}_trns"] = _png(w, h, depth, 0, rows, _chunk(b"tRNS", struct.pack(">H", 1)))
        out[f"palette{depth}"] = _png(w, h, depth, 3, rows, palette)
        out[f"palette{depth}_trns"] = _png(w, h, depth, 3, rows,
                                           palette + _chunk(b"tRNS", bytes([0, 128])))
    gray8 = rng.integers(0, 256, size=(h, w), dtype=np.uint8)
    out["gray8_trns"] = _png(w, h, 8, 0, [r.tobytes() for r in gray8],
                             _chunk(b"tRNS", struct.pack(">H", int(gray8[0, 0]))))
    rgb8 = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    out["rgb8_trns"] = _png(w, h, 8, 2, [r.tobytes() for r in rgb8],
                            _chunk(b"tRNS", struct.pack(">HHH", *map(int, rgb8[0, 0]))))
    gray16 = rng.integers(0, 65536, size=(h, w), dtype=np.uint16)
    gray16[0, :5] = [0, 1, 255, 256, 65535]
    out["gray16_trns"] = _png(w, h, 16, 0, [r.astype(">u2").tobytes() for r in gray16],
                              _chunk(b"tRNS", struct.pack(">H", int(gray16[0, 1]))))
    la16 = rng.integers(0, 65536, size=(h, w, 2), dtype=np.uint16)
    out["gray_alpha16"] = _png(w, h, 16, 4, [r.astype(">u2").tobytes() for r in la16])
    rgb16 = rng.integers(0, 65536, size=(h, w, 3), dtype=np.uint16)
    out["rgb16_trns"] = _png(w, h, 16, 2, [r.astype(">u2").tobytes() for r in rgb16],
                             _chunk(b"tRNS", struct.pack(">HHH", *map(int, rgb16[0, 0]))))
    return out


@pytest.mark.parametrize("name,data", sorted(_png_variants().items()))
def test_png_variants_match_pillow(name: str, data: bytes) -> None:
    _assert_same_pixels(codec.decode(data), _pillow_rgb(data), name)


def test_jpeg_with_complete_scan_but_no_eoi_matches_pillow() -> None:
    # A baseline JPEG whose EOI marker was replaced by padding (seen in the wild): every
    # scanline decodes, only the search for EOI runs out of data. Pillow returns the image;
    # so must we (regression: this used to be reported as truncated).
    jpeg = _encode("JPEG", quality=90)
    assert jpeg.endswith(b"\xff\xd9")
    for name, data in {
        "zero padding": jpeg[:-2] + b"\x00" * 64,
        "cut trailing segment": jpeg[:-2] + b"\xff\xe1\x10\x00abc",
        "junk after EOI": jpeg + b"junk" * 10,
    }.items():
        _assert_same_pixels(codec.decode(data), _pillow_rgb(data), name)


def test_jpeg_truncation_agrees_with_pillow() -> None:
    # Missing entropy-coded data is truncation for Pillow (it raises) and for us, also when
    # only the final EOI marker is cut, and for progressive files padded after the cut.
    baseline = _encode("JPEG", quality=90)
    progressive = _encode("JPEG", quality=90, progressive=True)
    for name, data in {
        "baseline without EOI": baseline[:-2],
        "baseline cut by 10 bytes": baseline[:-10],
        "progressive without EOI": progressive[:-2],
        "progressive without EOI, zero padded": progressive[:-2] + b"\x00" * 64,
    }.items():
        with pytest.raises(OSError, match="truncated"):
            with Image.open(io.BytesIO(data)) as im:
                im.load()
        with pytest.raises(CorruptImageError, match="truncated"):
            codec.decode(data)


# ---------------------------------------------------------------------------------------------
# Bad inputs: typed errors with useful messages
# ---------------------------------------------------------------------------------------------


def test_empty_input() -> None:
    with pytest.raises(UnsupportedImageError, match="empty") as info:
        codec.decode(b"")
    assert "0 bytes" in str(info.value)
    with pytest.raises(UnsupportedImageError, match="empty"):
        codec.probe(b"")


def test_gif_is_unsupported() -> None:
    gif = _encode("GIF")
    assert gif.startswith(b"GIF8")
    with pytest.raises(UnsupportedImageError, match="GIF"):
        codec.decode(gif)
    with pytest.raises(UnsupportedImageError, match="GIF"):
        codec.probe(gif)


def test_unknown_format_shows_first_bytes() -> None:
    with pytest.raises(UnsupportedImageError, match=r"unknown image format.*00 01 02 03"):
        codec.decode(bytes(range(32)))


def test_truncated_jpeg() -> None:
    jpeg = _encode("JPEG", quality=90)
    with pytest.raises(CorruptImageError, match="truncated") as info:
        codec.decode(jpeg[: len(jpeg) // 2])
    assert "JPEG" in str(info.value)
    # Cut inside the header, before the frame header: the probe already refuses it.
    with pytest.raises(CorruptImageError, match="JPEG"):
        codec.decode(jpeg[:10])


def test_truncated_png() -> None:
    png = _encode("PNG")
    with pytest.raises(CorruptImageError, match="truncated") as info:
        codec.decode(png[: len(png) // 2])
    assert "PNG" in str(info.value)
    with pytest.raises(CorruptImageError, match=r"PNG.*IHDR"):
        codec.decode(png[:20])


def _corrupt_crc(png: bytes, tag: bytes) -> bytes:
    at = png.index(tag)
    length = struct.unpack(">I", png[at - 4 : at])[0]
    crc_at = at + 4 + length
    damaged = bytearray(png)
    damaged[crc_at] ^= 0xFF
    return bytes(damaged)


@pytest.mark.parametrize("tag", [b"IHDR", b"IDAT"])
def test_png_bad_crc(tag: bytes) -> None:
    with pytest.raises(CorruptImageError, match="CRC") as info:
        codec.decode(_corrupt_crc(_encode("PNG"), tag))
    assert "PNG" in str(info.value)


def _png_header_only(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b""))
            + _chunk(b"IEND", b""))


def test_huge_png_header_is_refused_before_decoding() -> None:
    bomb = _png_header_only(100000, 100000)
    assert codec.probe(bomb) == codec.ImageInfo("PNG", 100000, 100000)
    with pytest.raises(LimitExceededError) as info:
        codec.decode(bomb)
    message = str(info.value)
    assert "100000x100000" in message
    assert str(codec.DEFAULT_MAX_IMAGE_PIXELS) in message
    assert "max_image_pixels" in message
    assert codec.DEFAULT_MAX_IMAGE_PIXELS == 2 * Image.MAX_IMAGE_PIXELS


def test_max_pixels_argument() -> None:
    png = _encode("PNG")  # 50x40 = 2000 pixels
    want = _pillow_rgb(png)
    with pytest.raises(LimitExceededError, match=r"50x40.*1999") as info:
        codec.decode(png, max_pixels=1999)
    assert "1999" in str(info.value)
    _assert_same_pixels(codec.decode(png, max_pixels=2000), want, "at the limit")
    _assert_same_pixels(codec.decode(png, max_pixels=0), want, "limit disabled (0)")
    _assert_same_pixels(codec.decode(png, max_pixels=-1), want, "limit disabled (-1)")
    # The limit applies to every format, from the header alone.
    for fmt in ("JPEG", "WEBP"):
        with pytest.raises(LimitExceededError, match="50x40"):
            codec.decode(_encode(fmt), max_pixels=100)


def test_garbage_after_jpeg_soi() -> None:
    rng = np.random.default_rng(3)
    garbage = rng.integers(0, 256, size=500, dtype=np.uint8).tobytes()
    # SOI + a marker prefix, then noise: sniffed as JPEG, refused as damaged.
    with pytest.raises(CorruptImageError, match="JPEG"):
        codec.decode(b"\xff\xd8\xff" + garbage)
    # SOI then noise that does not even start a marker: Pillow does not recognise it as a
    # JPEG either, and we say what the bytes look like.
    with pytest.raises(UnsupportedImageError, match="ff d8"):
        codec.decode(b"\xff\xd8" + bytes([0x15]) + garbage)
    # A valid header up to the scan, then noise as entropy-coded data that runs into an
    # unsupported marker: Pillow refuses it too.
    jpeg = _encode("JPEG", quality=90)
    sos = jpeg.index(b"\xff\xda")
    header = jpeg[: sos + 2 + struct.unpack(">H", jpeg[sos + 2 : sos + 4])[0]]
    noise = np.random.default_rng(0).integers(0, 256, size=3000, dtype=np.uint8).tobytes()
    with pytest.raises(OSError):
        with Image.open(io.BytesIO(header + noise)) as im:
            im.load()
    with pytest.raises(CorruptImageError, match="JPEG"):
        codec.decode(header + noise)


def test_truncated_webp() -> None:
    for params in ({"quality": 80}, {"lossless": True}):
        webp = _encode("WEBP", **params)
        with pytest.raises(CorruptImageError, match="WebP") as info:
            codec.decode(webp[: len(webp) // 2])
        assert "truncated" in str(info.value)
        with pytest.raises(CorruptImageError, match=r"WebP: file is truncated"):
            codec.decode(webp[:20])


def test_riff_that_is_not_webp() -> None:
    with pytest.raises(UnsupportedImageError, match="RIFF"):
        codec.decode(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(32))


def test_exception_hierarchy() -> None:
    for cls, builtin in ((CorruptImageError, ValueError), (UnsupportedImageError, ValueError),
                         (LimitExceededError, Exception)):
        assert issubclass(cls, StokerError)
        assert issubclass(cls, builtin)
    assert issubclass(CorruptImageError, DecodeError)
    assert stoker.StokerError is StokerError

    jpeg = _encode("JPEG")
    with pytest.raises(ValueError):  # a plain `except ValueError` catches decode failures
        codec.decode(jpeg[:100])
    with pytest.raises(stoker.StokerError) as info:
        codec.decode(jpeg[:100])
    assert type(info.value) is CorruptImageError
    assert info.value.code == "CorruptImage"
    assert info.value.sample_key is None  # no manifest involved
    with pytest.raises(stoker.StokerError) as info:
        codec.decode(_png_header_only(100000, 100000))
    assert type(info.value) is LimitExceededError


# ---------------------------------------------------------------------------------------------
# Input types and returned arrays
# ---------------------------------------------------------------------------------------------


def test_accepts_bytes_like_inputs() -> None:
    png = _encode("PNG")
    want = _pillow_rgb(png)
    for data in (png, bytearray(png), memoryview(png), memoryview(bytearray(png))):
        _assert_same_pixels(codec.decode(data), want, type(data).__name__)
        assert codec.probe(data) == ("PNG", 50, 40)


@pytest.mark.parametrize("bad", ["not bytes", 42, None, [1, 2, 3]])
def test_rejects_non_bytes(bad: object) -> None:
    with pytest.raises(TypeError, match="bytes"):
        codec.decode(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        codec.probe(bad)  # type: ignore[arg-type]


def test_decoded_array_is_a_zero_copy_view() -> None:
    arr = codec.decode(_encode("PNG"))
    assert arr.flags.owndata is False
    assert arr.base is not None
    assert arr.flags.c_contiguous
    assert arr.shape == (40, 50, 3) and arr.dtype == np.uint8


def test_arrays_stay_valid_across_many_decodes(corpus: list[CorpusImage],
                                               references: dict[Path, np.ndarray]) -> None:
    # Decode 50 images keeping every array, then check them all at the end: memory handed to
    # Python must never be reused by a later decode (the pool recycles buffers aggressively).
    paths = [image.path for image in corpus]
    chosen = [paths[i % len(paths)] for i in range(0, 50 * 7, 7)]
    kept = [(path, codec.decode(path.read_bytes())) for path in chosen]
    assert len(kept) == 50
    for path, arr in kept:
        assert arr.flags.owndata is False
        _assert_same_pixels(arr, references[path], path.name)
    # Dropping arrays returns their memory for reuse; new decodes are still correct and the
    # survivors unaffected.
    survivors = kept[::5]
    del kept
    again = [(path, codec.decode(path.read_bytes())) for path in chosen]
    for path, arr in survivors + again:
        _assert_same_pixels(arr, references[path], path.name)


def test_decoded_array_is_writable_and_independent() -> None:
    png = _encode("PNG")
    a = codec.decode(png)
    b = codec.decode(png)
    assert a.flags.writeable
    a[:] = 0
    _assert_same_pixels(b, _pillow_rgb(png), "second decode after writing to the first")
