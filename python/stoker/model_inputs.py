"""``stoker.ModelInputs``: what turns a manifest sample into a Qwen-VL model's inputs.

One object holds the tokenizer, the chat template family, the vision processor
configuration and the label and length rules. :class:`stoker.Loader` takes it
(``model_inputs=``) to deliver padded model-input batches, and
:meth:`ModelInputs.encode` runs the very same native code on one sample.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, Mapping

from stoker import _stoker
from stoker import text as _text
from stoker import vision as _vision
from stoker.codec import DEFAULT_MAX_IMAGE_PIXELS


class ModelInputs:
    """Chat template + tokenizer + Qwen-VL image processing + labels + mRoPE.

    Args:
        model: ``"qwen2-vl"``, ``"qwen2.5-vl"`` or ``"qwen3-vl"``: the chat template,
            the image processor's family defaults and the mRoPE rule.
        tokenizer: a :class:`stoker.text.Tokenizer`, or a path to a ``tokenizer.json``
            (or its folder). Default: the ``checkpoint`` folder's.
        checkpoint: a checkpoint folder: its ``preprocessor_config.json`` overrides the
            family's image settings (as transformers combines them) and its tokenizer
            is used when ``tokenizer`` is not given.
        backend: ``"torchvision"`` (``Qwen2VLImageProcessorFast``, what ``AutoProcessor``
            gives when torchvision is installed) or ``"pillow"`` (the slow processor).
        min_pixels, max_pixels: pixel-count range of resized images.
        max_length: the most tokens a sample may have (``None``: no limit).
        overlong: over ``max_length``, ``"truncate"`` keeps the first ``max_length``
            tokens but never splits an image's placeholder run (the sample then ends
            before that image, whose pixels are left out too); ``"drop"`` replaces the
            sample by a deterministic substitute. ``Loader.stats()`` counts both.
        label_mode: ``"assistant"`` (train assistant turns, their ``<|im_end|>`` and the
            newline after it), ``"last_assistant"`` or ``"all"``.
        add_vision_id: prefix each image with ``"Picture N: "``.
        qwen3_empty_think: give Qwen3-VL assistant turns without a think block an
            empty, trained ``<think>\\n\\n</think>\\n\\n``.
        train_trailing_newline: train the ``"\\n"`` after an assistant's ``<|im_end|>``.
        exif_transpose: apply JPEG EXIF orientation (transformers' ``load_image``
            does for paths and URLs).
        alpha_to_white: composite RGBA onto white (qwen-vl-utils) instead of dropping
            alpha.
        pad_token_id: the id padding uses in ``input_ids`` (default: the tokenizer's
            pad token).
        max_image_pixels: images whose header declares more pixels are refused before
            decoding.
    """

    def __init__(
        self,
        model: str = "qwen2-vl",
        *,
        tokenizer: _text.Tokenizer | str | os.PathLike[str] | None = None,
        checkpoint: str | os.PathLike[str] | None = None,
        backend: Literal["torchvision", "pillow"] = "torchvision",
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        max_length: int | None = None,
        overlong: Literal["truncate", "drop"] = "truncate",
        label_mode: Literal["assistant", "last_assistant", "all"] = "assistant",
        add_vision_id: bool = False,
        qwen3_empty_think: bool = False,
        train_trailing_newline: bool = True,
        exif_transpose: bool = False,
        alpha_to_white: bool = False,
        pad_token_id: int | None = None,
        max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    ) -> None:
        family = _vision._family(model)
        if tokenizer is None:
            if checkpoint is None:
                raise ValueError("ModelInputs needs a tokenizer (or a checkpoint folder "
                                 "holding tokenizer.json)")
            tokenizer = checkpoint
        if not isinstance(tokenizer, _text.Tokenizer):
            tokenizer = _text.Tokenizer.from_file(tokenizer)
        if max_length is not None and int(max_length) <= 0:
            raise ValueError(f"max_length must be a positive number of tokens, got {max_length}")
        if pad_token_id is None:
            pad_token_id = tokenizer.pad_token_id
            if pad_token_id is None:
                raise ValueError(f"{tokenizer!r} names no pad token (tokenizer_config.json); "
                                 "pass pad_token_id")
        self.model = family
        self.tokenizer = tokenizer
        self.vision_config = _vision.resolve_config(family, checkpoint=checkpoint,
                                                    min_pixels=min_pixels,
                                                    max_pixels=max_pixels)
        self.backend = backend
        self.max_length = None if max_length is None else int(max_length)
        self.overlong = overlong
        self.label_mode = label_mode
        self.pad_token_id = int(pad_token_id)
        processor = _vision._processor(self.vision_config, backend, "hf", "pillow13",
                                       int(max_image_pixels))
        self._native = _stoker.ModelInputs(
            tokenizer._native, processor, family, bool(exif_transpose), bool(alpha_to_white),
            label_mode, int(self.max_length or 0), overlong, bool(add_vision_id),
            bool(qwen3_empty_think), bool(train_trailing_newline), self.pad_token_id)

    @property
    def row_length(self) -> int:
        """Floats per ``pixel_values`` row (``3 * temporal_patch * patch * patch``)."""
        return self._native.row_length

    def encode(self, sample: Mapping[str, Any] | str, *,
               image_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """One sample's model inputs, unpadded, as NumPy arrays: ``input_ids``,
        ``labels``, ``attention_mask`` ``[L]``, ``position_ids`` ``[3, L]``,
        ``pixel_values`` ``[patches, row_length]``, ``image_grid_thw`` ``[images, 3]``;
        plus ``rope_delta``, the rendered ``text``, the kept ``images`` and whether the
        sample was ``truncated`` (or, under ``overlong="drop"``, ``dropped``: then no
        pixels are computed). Relative image paths resolve against ``image_root``
        (default: the working directory)."""
        line = sample if isinstance(sample, str) else json.dumps(sample, ensure_ascii=False)
        root = "" if image_root is None else os.fspath(image_root)
        return self._native.encode(line, root)

    def __repr__(self) -> str:
        return (f"ModelInputs({self.model!r}, tokenizer={self.tokenizer!r}, "
                f"backend={self.backend!r}, min_pixels={self.vision_config.min_pixels}, "
                f"max_pixels={self.vision_config.max_pixels}, max_length={self.max_length}, "
                f"overlong={self.overlong!r}, label_mode={self.label_mode!r})")


__all__ = ["ModelInputs"]
