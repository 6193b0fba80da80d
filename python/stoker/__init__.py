"""Stoker: a native data engine that keeps the GPUs of a vision-language
fine-tuning run fed.

The work happens in C++ (``stoker._stoker``); this package is its Python face:

* :class:`stoker.Loader` — batches from JSONL manifests (:class:`stoker.Source` for
  weighted mixes), with prefetch, sharding, exact resume and stats; with
  :class:`stoker.ModelInputs`, padded Qwen-VL model inputs (tokens, labels, mRoPE ids,
  pixel_values);
* :mod:`stoker.codec` — one image at a time (``decode``, ``probe``);
* :mod:`stoker.vision` — Qwen-VL image preprocessing (``preprocess``,
  ``visual_token_count``), bit-exact with Hugging Face;
* :mod:`stoker.text` — tokenizer, chat templates, labels and mRoPE ids
  (``stoker.text.Tokenizer``, ``stoker.encode_sample``);
* :mod:`stoker.io` — object storage reads (local, ``s3://``, ``http(s)://``) with
  many requests in flight, retries and a URI security policy (``stoker.io.ObjectStore``);
* :mod:`stoker.errors` — the exceptions, one class per kind of failure;
* ``stoker`` on the command line — ``stoker demo``.
"""

from stoker import errors  # first: the native module raises these
from stoker import codec
from stoker import io
from stoker import text
from stoker import vision
from stoker.errors import StokerError
from stoker.loader import Loader
from stoker.model_inputs import ModelInputs
from stoker.sources import Source
from stoker.text import encode_sample

__version__ = "0.1.0"

__all__ = ["Loader", "ModelInputs", "Source", "StokerError", "codec", "encode_sample", "errors",
           "io", "text", "vision", "__version__"]
