"""Text preparation for Qwen-VL fine-tuning: tokenizer, chat templates, labels, mRoPE.

Everything runs in C++ (``stoker._stoker``); this module is its typed Python face.

* :class:`Tokenizer` — byte-level BPE loaded from a Hugging Face ``tokenizer.json``,
  giving the ids Hugging Face ``tokenizers`` gives (Qwen2/2.5/3 vocabularies, o200k,
  and other byte-level BPE files whose components it supports).
* :func:`encode_sample` — one conversation to ``input_ids``, ``labels``,
  ``attention_mask`` and ``position_ids``, as a Qwen-VL SFT run consumes them.
* :func:`pack_position_ids` — the four-row position ids of several packed samples.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from stoker import _stoker
from stoker.errors import ManifestError

#: Label of tokens that are not trained (PyTorch's ``ignore_index``).
IGNORE_INDEX: int = -100

#: Model families :func:`encode_sample` renders.
MODELS = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl")

#: Label modes of :func:`encode_sample`.
LABEL_MODES = ("assistant", "last_assistant", "all")


def image_grid(height: int, width: int, model: str = "qwen2-vl", *,
               min_pixels: int | None = None, max_pixels: int | None = None
               ) -> tuple[int, int, int]:
    """The ``(t, h, w)`` patch grid the model's image processor gives an image of
    ``height`` x ``width`` pixels: :func:`stoker.vision.smart_resize` (transformers'
    rule: round half to even, then scale into [min_pixels, max_pixels]) divided by the
    patch size. Defaults are the published checkpoints' limits.
    """
    from stoker import vision  # the vision stage owns the resize rule

    if model not in MODELS:
        raise ValueError(f"unknown model {model!r} (expected one of {', '.join(MODELS)})")
    config = vision.resolve_config(model, min_pixels=min_pixels, max_pixels=max_pixels)
    resized_h, resized_w = vision.smart_resize(height, width, model, min_pixels=min_pixels,
                                               max_pixels=max_pixels)
    return (1, resized_h // config.patch_size, resized_w // config.patch_size)


def _why_not_text(text: Any) -> str:
    """Why a value cannot be encoded ('' if it can)."""
    if not isinstance(text, str):
        return f"expected str, got {type(text).__name__}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"text contains a lone surrogate U+{ord(text[e.start]):04X} at index "
                f"{e.start}; it has no UTF-8 form (Hugging Face tokenizers refuses it too)")
    return ""


class Tokenizer:
    """A byte-level BPE tokenizer read from a Hugging Face ``tokenizer.json``.

    Encoding is exact with respect to Hugging Face ``tokenizers`` for the files it
    accepts (it refuses, naming the component, any file it cannot reproduce). The model
    is immutable and shared; every call borrows its own scratch, so one ``Tokenizer``
    may be used from several threads. Calls release the GIL.
    """

    def __init__(self, native: Any, path: str) -> None:
        self._native = native
        self._path = path

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *,
                  hand_written_splitter: bool = True,
                  split_special_tokens: bool | None = None) -> "Tokenizer":
        """Loads ``path``: a ``tokenizer.json`` or a folder holding one.

        A ``tokenizer_config.json`` beside it, when present, gives the names of the
        special tokens (:attr:`eos_token`, ...) and ``split_special_tokens``; passing
        ``split_special_tokens`` overrides the latter (True: special added tokens are
        encoded as plain text, like transformers' option of that name).

        ``hand_written_splitter=False`` runs every split pattern through Oniguruma
        (the engine ``tokenizers`` uses) instead of Stoker's scanner for the Qwen
        pattern; both give the same pieces, the scanner is faster.
        """
        path = os.fspath(path)
        split = -1 if split_special_tokens is None else int(bool(split_special_tokens))
        return cls(_stoker.Tokenizer.from_file(path, hand_written_splitter, split), path)

    @classmethod
    def bundled_qwen(cls) -> "Tokenizer":
        """The Qwen vocabulary shipped with Stoker (Qwen3's ``tokenizer.json`` and
        ``tokenizer_config.json``; its ids are those of Qwen2-VL, Qwen2.5-VL and
        Qwen3-VL), for use without a model hub. Decompressed once into
        ``$STOKER_CACHE_DIR/tokenizers`` (default ``~/.cache/stoker``)."""
        import lzma
        import shutil

        from stoker.loader import default_index_cache_dir

        source = os.path.join(os.path.dirname(__file__), "_data", "tokenizers", "qwen3")
        folder = os.path.join(os.path.dirname(default_index_cache_dir()), "tokenizers",
                              "qwen3")
        target = os.path.join(folder, "tokenizer.json")
        if not os.path.exists(target):
            os.makedirs(folder, exist_ok=True)
            partial = f"{target}.{os.getpid()}.partial"
            with lzma.open(os.path.join(source, "tokenizer.json.xz")) as src, \
                    open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
            shutil.copy(os.path.join(source, "tokenizer_config.json"), folder)
            os.replace(partial, target)  # atomic: a concurrent reader never sees half
        return cls.from_file(folder)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """The token ids of ``text``.

        ``add_special_tokens`` is accepted for compatibility; the supported
        post-processors (ByteLevel or none, as in the Qwen and o200k files) add none.
        """
        try:
            return self._native.encode(text)
        except TypeError:
            raise TypeError(_why_not_text(text)) from None

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False, *,
                     num_threads: int | None = None) -> list[list[int]]:
        """The ids of each text, computed in parallel (``num_threads`` defaults to the
        machine's CPU count) with the GIL released."""
        texts = list(texts)
        try:
            return self._native.encode_batch(texts, int(num_threads or 0))
        except TypeError:
            for i, text in enumerate(texts):
                reason = _why_not_text(text)
                if reason:
                    raise TypeError(f"texts[{i}]: {reason}") from None
            raise

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of ``ids``; byte sequences that are not valid UTF-8 become U+FFFD.
        ``skip_special_tokens`` drops added tokens flagged special (not e.g. ``<think>``)."""
        return self._native.decode([int(i) for i in ids], skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string (vocabulary strings are in byte-level form, e.g.
        ``"Ġhello"``), or None."""
        return self._native.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        """The token string of an id, or None."""
        return self._native.id_to_token(int(id))

    @property
    def bos_token(self) -> str | None:
        """``bos_token`` of tokenizer_config.json, or None."""
        return self._native.config_token("bos_token")

    @property
    def eos_token(self) -> str | None:
        """``eos_token`` of tokenizer_config.json (``<|im_end|>`` for Qwen-VL Instruct)."""
        return self._native.config_token("eos_token")

    @property
    def pad_token(self) -> str | None:
        """``pad_token`` of tokenizer_config.json (``<|endoftext|>`` for Qwen)."""
        return self._native.config_token("pad_token")

    @property
    def eos_token_id(self) -> int | None:
        return None if self.eos_token is None else self.token_to_id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return None if self.pad_token is None else self.token_to_id(self.pad_token)

    @property
    def vocab_size(self) -> int:
        """Number of distinct tokens, added tokens included."""
        return self._native.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer({self._path!r}, vocab_size={self.vocab_size})"


@functools.lru_cache(maxsize=16)
def _model_inputs(model: str, tokenizer: Tokenizer, checkpoint: str | None, backend: str,
                  min_pixels: int | None, max_pixels: int | None, max_length: int | None,
                  label_mode: str, add_vision_id: bool, qwen3_empty_think: bool,
                  train_trailing_newline: bool) -> Any:
    """encode_sample's ModelInputs, reused from call to call with the same options."""
    from stoker.model_inputs import ModelInputs
    return ModelInputs(model, tokenizer=tokenizer, checkpoint=checkpoint, backend=backend,
                       min_pixels=min_pixels, max_pixels=max_pixels, max_length=max_length,
                       label_mode=label_mode, add_vision_id=add_vision_id,
                       qwen3_empty_think=qwen3_empty_think,
                       train_trailing_newline=train_trailing_newline,
                       pad_token_id=tokenizer.pad_token_id or 0)


def encode_sample(sample: Mapping[str, Any] | str, *, model: str = "qwen2-vl",
                  tokenizer: Tokenizer,
                  image_grids: Sequence[Sequence[int]] | None = None,
                  image_sizes: Sequence[Sequence[int]] | None = None,
                  image_root: str | os.PathLike[str] | None = None,
                  backend: str = "torchvision", min_pixels: int | None = None,
                  max_pixels: int | None = None,
                  checkpoint: str | os.PathLike[str] | None = None,
                  max_length: int | None = None, label_mode: str = "assistant",
                  add_vision_id: bool = False, add_generation_prompt: bool = False,
                  qwen3_empty_think: bool = False,
                  train_trailing_newline: bool = True) -> dict[str, Any]:
    """Prepares the text side of one training sample.

    ``sample`` is a manifest record (a dict or its JSON text) in the messages format or
    the LLaVA/ShareGPT format (``{"image": ..., "conversations": [{"from": "human",
    "value": "<image>\\n..."}, ...]}``). The conversation is rendered with the chat
    template of ``model`` (``"qwen2-vl"``, ``"qwen2.5-vl"`` or ``"qwen3-vl"``), each
    image's ``<|image_pad|>`` is repeated ``t*h*w/4`` times for its grid, the text is
    tokenized, and labels and mRoPE position ids are computed.

    By default the images are read (relative paths against ``image_root``, default the
    working directory) and preprocessed like the model's Hugging Face image processor
    (``backend``, ``min_pixels``, ``max_pixels``, ``checkpoint`` as in
    :func:`stoker.vision.preprocess`): the result then also holds ``pixel_values``
    ``float32 [patches, 3*T*P*P]`` and ``image_grid_thw`` ``int64 [images, 3]``, computed
    by the same native code as :class:`stoker.Loader` batches (see
    :class:`stoker.ModelInputs`).

    To prepare the text alone, give ``image_grids``: one ``(t, h, w)`` patch grid per
    image, in order of appearance (``image_grid_thw`` of the image processor), or
    ``image_sizes``: each image's ``(height, width)`` in pixels, the grids following from
    the model's resize rule (:func:`image_grid`, published min/max pixels).

    ``label_mode``: ``"assistant"`` (train each assistant turn's content, its
    ``<|im_end|>`` and the following newline; mask everything else),
    ``"last_assistant"`` (only the last assistant turn: mask history) or ``"all"``
    (train on every token, the prompt included). ``qwen3_empty_think`` injects a trained
    ``<think>\\n\\n</think>\\n\\n`` into Qwen3-VL assistant turns without one (as
    LLaMA-Factory's ``qwen3_vl`` template does). ``max_length`` truncates, never
    through an image's placeholder run: the sample then ends before that image (which
    is left out of ``pixel_values`` too).

    Returns a dict of NumPy int64 arrays ``input_ids`` [L], ``labels`` [L],
    ``attention_mask`` [L], ``position_ids`` [3, L], plus ``rope_delta``, the rendered
    ``text``, the ``images`` references in order (those kept after truncation) and
    ``truncated``.
    """
    if isinstance(sample, str):
        line = sample
    else:
        line = json.dumps(sample, ensure_ascii=False)
    if image_grids is not None and image_sizes is not None:
        raise ValueError("give image_grids or image_sizes, not both")
    if image_grids is None and image_sizes is None:
        if add_generation_prompt:
            raise ValueError("add_generation_prompt needs image_grids or image_sizes "
                             "(training samples end with the assistant's answer)")
        inputs = _model_inputs(model, tokenizer, None if checkpoint is None else
                               os.fspath(checkpoint), backend, min_pixels, max_pixels,
                               max_length, label_mode, bool(add_vision_id),
                               bool(qwen3_empty_think), bool(train_trailing_newline))
        try:
            return inputs.encode(line, image_root=image_root)
        except TypeError:
            reason = _why_not_text(line)
            if reason:
                raise ManifestError(f"sample: {reason}") from None
            raise
    if image_sizes is not None:
        image_grids = [image_grid(int(h), int(w), model) for h, w in image_sizes]
    grids = [] if image_grids is None else [[int(v) for v in g] for g in image_grids]
    try:
        return _stoker.encode_sample(
            line, tokenizer._native, model, grids, int(max_length or 0), label_mode,
            bool(add_vision_id), bool(add_generation_prompt), bool(qwen3_empty_think),
            bool(train_trailing_newline))
    except TypeError:
        reason = _why_not_text(line)
        if reason:
            raise ManifestError(f"sample: {reason}") from None
        raise


def pack_position_ids(position_ids: Sequence[np.ndarray]) -> np.ndarray:
    """Packs several samples' ``[3, L_i]`` position ids into one ``[4, sum L_i]`` array:
    row 0 restarts at 0 in every sample (the sequence boundaries FlashAttention reads),
    rows 1-3 are the samples' own mRoPE rows."""
    flat = [np.ascontiguousarray(p, dtype=np.int64).reshape(-1).tolist() for p in position_ids]
    return _stoker.pack_position_ids(flat)


__all__ = ["IGNORE_INDEX", "LABEL_MODES", "MODELS", "Tokenizer", "encode_sample",
           "image_grid", "pack_position_ids"]
