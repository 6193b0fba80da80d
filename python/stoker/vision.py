"""Qwen-VL image preprocessing, bit-exact with Hugging Face's image processors.

:func:`preprocess` turns images into the ``pixel_values`` / ``image_grid_thw`` pair
that ``Qwen2VLImageProcessor`` (``backend="pillow"``, the slow path) or
``Qwen2VLImageProcessorFast`` (``backend="torchvision"``, the default processor of
current transformers) returns for the same pixels. :func:`visual_token_count` gives
the number of ``<|image_pad|>`` tokens an image expands to from its header alone.

The work (decode, smart_resize, bicubic resize, rescale + normalise + patchify) runs
in C++ without the GIL; this module only resolves the configuration.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence, Union

import numpy as np

from stoker import _stoker
from stoker.codec import DEFAULT_MAX_IMAGE_PIXELS

#: Accepted image inputs: encoded bytes (JPEG/PNG/WebP), a path, or decoded RGB
#: ``uint8`` pixels of shape ``[H, W, 3]``.
ImageInput = Union[bytes, bytearray, memoryview, str, os.PathLike, np.ndarray]

MODELS = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl")
BACKENDS = ("torchvision", "pillow")

_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class VisionConfig:
    """The numbers one Qwen-VL image processor runs with."""

    patch_size: int
    merge_size: int
    temporal_patch_size: int
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]
    rescale_factor: float
    min_pixels: int
    max_pixels: int

    @property
    def factor(self) -> int:
        """Side multiple of resized images: ``patch_size * merge_size``."""
        return self.patch_size * self.merge_size


# Published checkpoints' preprocessor_config.json values. `top_level` is what the hub
# file stores as top-level min_pixels / max_pixels (Qwen3-VL stores only `size`),
# which decides how call-time overrides combine (see _resolve).
_FAMILIES: dict[str, tuple[VisionConfig, bool]] = {
    "qwen2-vl": (VisionConfig(14, 2, 2, _CLIP_MEAN, _CLIP_STD, 1 / 255, 3136, 12845056), True),
    "qwen2.5-vl": (VisionConfig(14, 2, 2, _CLIP_MEAN, _CLIP_STD, 1 / 255, 3136, 12845056), True),
    "qwen3-vl": (VisionConfig(16, 2, 2, (0.5,) * 3, (0.5,) * 3, 1 / 255, 65536, 16777216), False),
}


def _family(model: str) -> str:
    name = model.lower().replace("_", "-")
    if name not in _FAMILIES:
        raise ValueError(f"unknown model {model!r}; expected one of {', '.join(MODELS)}")
    return name


def _read_checkpoint(checkpoint: str | os.PathLike) -> dict[str, Any]:
    path = Path(checkpoint)
    if path.is_dir():
        path = path / "preprocessor_config.json"
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no preprocessor_config.json there") from None


def _resolve(model: str, checkpoint: str | os.PathLike | None, min_pixels: int | None,
             max_pixels: int | None) -> VisionConfig:
    """The configuration Hugging Face's Qwen2-VL image processors end up using.

    Follows the processor's plumbing: the checkpoint's ``size`` dict
    (``shortest_edge``/``longest_edge``) is overridden by its top-level
    ``min_pixels``/``max_pixels``; at call time ``min_pixels``/``max_pixels`` default
    to those top-level values, and only when both are known do they replace ``size``.
    So for a config without top-level keys (Qwen3-VL), a lone ``max_pixels`` or
    ``min_pixels`` is ignored, as transformers ignores it (a warning says so).
    """
    base, has_top_level = _FAMILIES[_family(model)]
    top_min = base.min_pixels if has_top_level else None
    top_max = base.max_pixels if has_top_level else None
    config = base
    if checkpoint is not None:
        raw = _read_checkpoint(checkpoint)
        updates: dict[str, Any] = {}
        for key in ("patch_size", "merge_size", "temporal_patch_size"):
            if key in raw:
                updates[key] = int(raw[key])
        for key in ("image_mean", "image_std"):
            if key in raw:
                value = raw[key]
                updates[key] = tuple(float(v) for v in (value if isinstance(value, list)
                                                        else [value] * 3))
        if "rescale_factor" in raw:
            updates["rescale_factor"] = float(raw["rescale_factor"])
        size = raw.get("size") or {}
        if "shortest_edge" in size:
            updates["min_pixels"] = int(size["shortest_edge"])
        if "longest_edge" in size:
            updates["max_pixels"] = int(size["longest_edge"])
        top_min = raw.get("min_pixels")
        top_max = raw.get("max_pixels")
        if top_min is not None:
            updates["min_pixels"] = int(top_min)
        if top_max is not None:
            updates["max_pixels"] = int(top_max)
        config = replace(base, **updates)
    call_min = min_pixels if min_pixels is not None else top_min
    call_max = max_pixels if max_pixels is not None else top_max
    if call_min is not None and call_max is not None:
        config = replace(config, min_pixels=int(call_min), max_pixels=int(call_max))
    elif min_pixels is not None or max_pixels is not None:
        warnings.warn(
            f"{model}: a lone min_pixels/max_pixels is ignored when the config has no "
            "top-level min_pixels/max_pixels (transformers does the same); pass both",
            stacklevel=3)
    return config


@lru_cache(maxsize=64)
def _processor(config: VisionConfig, backend: str, size_rule: str,
               pillow_pass_order: str, max_image_pixels: int):
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return _stoker.VisionProcessor(
        config.patch_size, config.merge_size, config.temporal_patch_size,
        list(config.image_mean), list(config.image_std), config.rescale_factor,
        config.min_pixels, config.max_pixels, backend, size_rule,
        pillow_pass_order, max_image_pixels)


def resolve_config(model: str = "qwen2-vl", *, checkpoint: str | os.PathLike | None = None,
                   min_pixels: int | None = None,
                   max_pixels: int | None = None) -> VisionConfig:
    """The :class:`VisionConfig` :func:`preprocess` would use for these arguments."""
    return _resolve(model, checkpoint, min_pixels, max_pixels)


def _load(item: ImageInput, index: int) -> tuple[Any, str]:
    """(bytes or contiguous uint8 array, name for error messages)."""
    if isinstance(item, bytes):
        return item, f"image {index}"
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item), f"image {index}"
    if isinstance(item, (str, os.PathLike)):
        with open(item, "rb") as f:
            return f.read(), f"image {index} ({os.fspath(item)})"
    if isinstance(item, np.ndarray):
        if item.dtype != np.uint8 or item.ndim != 3 or item.shape[2] != 3:
            raise TypeError(f"image {index}: arrays must be uint8 [H, W, 3] RGB, got "
                            f"{item.dtype} {list(item.shape)}")
        return np.ascontiguousarray(item), f"image {index}"
    raise TypeError(f"image {index}: expected bytes, a path or a uint8 [H, W, 3] array, "
                    f"got {type(item).__name__}")


def preprocess(images: Sequence[ImageInput], model: str = "qwen2-vl", *,
               backend: str = "torchvision", min_pixels: int | None = None,
               max_pixels: int | None = None,
               checkpoint: str | os.PathLike | None = None,
               exif_transpose: bool = False, alpha_to_white: bool = False,
               size_rule: str = "hf", pillow_pass_order: str = "pillow13",
               max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
               out: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Preprocesses images for a Qwen-VL model, like the Hugging Face image processor.

    Args:
        images: encoded bytes (JPEG, PNG, WebP), paths, or decoded RGB ``uint8`` arrays
            ``[H, W, 3]`` (used as they are: no mode conversion, no EXIF rotation).
        model: ``"qwen2-vl"``, ``"qwen2.5-vl"`` or ``"qwen3-vl"`` (patch size, merge
            size, mean/std and pixel limits of the published checkpoints).
        backend: ``"torchvision"`` reproduces ``Qwen2VLImageProcessorFast`` (torch uint8
            antialiased bicubic, fused float32 normalisation); ``"pillow"`` reproduces
            the slow ``Qwen2VLImageProcessor`` (Pillow bicubic, NumPy normalisation).
        min_pixels, max_pixels: pixel-count range of the resized image; combined with
            the checkpoint config the way transformers does (see :func:`resolve_config`).
        checkpoint: a checkpoint directory (or its ``preprocessor_config.json``) whose
            values replace the model family's defaults.
        exif_transpose: apply a JPEG's EXIF orientation first, as
            ``transformers.image_utils.load_image`` does for paths and URLs.
        alpha_to_white: composite RGBA images onto white (qwen-vl-utils' ``to_rgb``)
            instead of dropping alpha (Pillow's ``convert("RGB")``, what HF does).
        size_rule: ``"hf"`` (transformers' smart_resize) or ``"qwen-vl-utils"``.
        pillow_pass_order: which Pillow release's choice of pass order to reproduce
            (pillow backend only; the uint8 intermediate makes the order visible):
            ``"pillow13"`` (vertical first when the height loses more than twice as
            many rows as the width loses columns), ``"pillow12.2"`` (vertical first for
            images more than 100 times taller than wide that shrink in height) or
            ``"legacy"`` (older Pillow: always horizontal first).
        max_image_pixels: source images with more pixels are refused from their header.
        out: a writable C-contiguous ``float32`` array ``[rows, 3 * T * P * P]`` with
            at least as many rows as the images have patches (e.g. a batch buffer reused
            across calls). The rows are written into its first rows and
            ``pixel_values`` is that slice of ``out`` (a view, not a copy); nothing is
            allocated for them. Without it a new array is returned.

    Returns:
        ``{"pixel_values": float32 [sum of patches, 3 * T * P * P],
        "image_grid_thw": int64 [len(images), 3]}`` (NumPy).

    Raises:
        stoker.errors.CorruptImageError, UnsupportedImageError: undecodable input.
        stoker.errors.LimitExceededError: a header declares more than ``max_image_pixels``.
        stoker.errors.InvalidArgumentError: zero-sized image, aspect ratio above 200.
        Messages name the image (its index, and its path when one was given). Every
        image's size is checked before any pixel is decoded or output allocated.
    """
    config = _resolve(model, checkpoint, min_pixels, max_pixels)
    processor = _processor(config, backend, size_rule, pillow_pass_order,
                           int(max_image_pixels))
    loaded = [_load(item, i) for i, item in enumerate(images)]
    if out is not None and not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy float32 array, got {type(out).__name__}")
    pixel_values, grid = processor.preprocess([data for data, _ in loaded],
                                              [name for _, name in loaded],
                                              bool(exif_transpose), bool(alpha_to_white),
                                              out)
    if out is not None:
        pixel_values = out[:pixel_values]
    return {"pixel_values": pixel_values, "image_grid_thw": grid}


def visual_token_count(image: ImageInput, model: str = "qwen2-vl", *,
                       min_pixels: int | None = None, max_pixels: int | None = None,
                       checkpoint: str | os.PathLike | None = None,
                       exif_transpose: bool = False, size_rule: str = "hf",
                       max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> int:
    """How many ``<|image_pad|>`` tokens the image becomes: ``(H'/f) * (W'/f)``.

    Reads the header only (no pixel decode) for bytes and paths; arrays use their
    shape. Arguments as for :func:`preprocess`; the backend does not matter.
    """
    config = _resolve(model, checkpoint, min_pixels, max_pixels)
    processor = _processor(config, "torchvision", size_rule, "pillow13",
                           int(max_image_pixels))
    data, name = _load(image, 0)
    try:
        if isinstance(data, np.ndarray):
            plan = processor.plan_size(data.shape[0], data.shape[1])
        else:
            plan = processor.plan_encoded(data, bool(exif_transpose))
    except Exception as e:  # name the file, keep the type
        if isinstance(image, (str, os.PathLike)):
            e.args = (f"{os.fspath(image)}: {e.args[0]}",) + e.args[1:]
        raise
    _, _, _, _, grid_t, grid_h, grid_w = plan
    return grid_t * grid_h * grid_w // (config.merge_size ** 2)


def smart_resize(height: int, width: int, model: str = "qwen2-vl", *,
                 min_pixels: int | None = None, max_pixels: int | None = None,
                 checkpoint: str | os.PathLike | None = None,
                 rule: str = "hf") -> tuple[int, int]:
    """The ``(height, width)`` an image is resized to (transformers' smart_resize, or
    qwen-vl-utils' variant with ``rule="qwen-vl-utils"``)."""
    config = _resolve(model, checkpoint, min_pixels, max_pixels)
    return _stoker.smart_resize(int(height), int(width), config.factor, config.min_pixels,
                                config.max_pixels, rule)


__all__ = ["BACKENDS", "MODELS", "VisionConfig", "preprocess", "resolve_config",
           "smart_resize", "visual_token_count"]
