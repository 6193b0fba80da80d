"""Decoding single images: the codec stage on its own, for checks and tools."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stoker import _stoker

#: Images whose header declares more pixels are refused before decoding (Pillow's
#: decompression-bomb threshold, ``2 * Image.MAX_IMAGE_PIXELS``).
DEFAULT_MAX_IMAGE_PIXELS: int = _stoker.DEFAULT_MAX_IMAGE_PIXELS


class ImageInfo(NamedTuple):
    """What an image header says, read without decoding pixels."""

    format: str  #: ``"JPEG"``, ``"PNG"`` or ``"WebP"``
    width: int
    height: int


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected encoded image bytes, got {type(data).__name__}")


def decode(data: bytes | bytearray | memoryview, *,
           max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> np.ndarray:
    """Decodes a JPEG, PNG or WebP image to RGB.

    Returns a ``uint8`` array of shape ``[H, W, 3]`` with the pixels Pillow's
    ``Image.open(...).convert("RGB")`` gives (no EXIF rotation).

    Raises :class:`~stoker.errors.CorruptImageError` for damaged or truncated data,
    :class:`~stoker.errors.UnsupportedImageError` for other formats, and
    :class:`~stoker.errors.LimitExceededError` when the header declares more than
    ``max_pixels`` pixels (checked before any pixel memory is allocated;
    ``max_pixels <= 0`` disables the check).
    """
    return _stoker.decode(_as_bytes(data), int(max_pixels))


def probe(data: bytes | bytearray | memoryview) -> ImageInfo:
    """Reads an image's format and dimensions from its header alone."""
    fmt, width, height = _stoker.probe(_as_bytes(data))
    return ImageInfo(fmt, width, height)


__all__ = ["DEFAULT_MAX_IMAGE_PIXELS", "ImageInfo", "decode", "probe"]
