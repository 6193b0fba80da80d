"""``stoker.Loader``: batches from a JSONL manifest, prepared by the native engine."""

from __future__ import annotations

import importlib.util
import logging
import os
import weakref
from collections.abc import Iterator
from typing import Any, Literal

from stoker import _stoker
from stoker.codec import DEFAULT_MAX_IMAGE_PIXELS

logger = logging.getLogger("stoker")

Batch = dict[str, Any]


def default_num_threads() -> int:
    """The CPUs this process may run on (respects affinity masks and cgroups' cpusets)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _resolve_output(output: str) -> str:
    if output == "auto":
        return "torch" if importlib.util.find_spec("torch") is not None else "numpy"
    if output not in ("torch", "numpy"):
        raise ValueError(f"output must be 'auto', 'torch' or 'numpy', got {output!r}")
    return output


class Loader:
    """Iterates batches of samples from a JSONL manifest.

    Work happens on native threads: samples of upcoming batches are read and decoded
    in any order, and batches come out strictly in manifest order. ``prefetch``
    batches are prepared ahead of the one the training loop is waiting for, so at
    most ``prefetch + 1`` batches are in memory at once.

    Each ``iter(loader)`` (each ``for`` loop) is one epoch. A batch is a dict:

    ``"sample_keys"``
        ``"<manifest>:<line>"`` of each sample, in order.
    ``"samples"``
        The raw JSON line of each sample.
    ``"images"``
        Per sample, the list of its decoded images, each ``uint8 [H, W, 3]`` RGB; a
        ``torch.Tensor`` (or NumPy array) that views the engine's memory, no copy.
    ``"batch_index"``
        The batch's number in the epoch's plan.

    Args:
        manifest: path of a JSONL file in the messages format.
        image_root: directory that relative image paths are resolved against
            (default: the manifest's directory).
        batch_size: samples per batch.
        num_threads: worker threads (default: the CPUs this process may use).
        prefetch: batches prepared ahead of the consumer; 0 disables prefetching.
        on_error: ``"raise"`` raises the first failed sample's error (a
            :class:`~stoker.errors.StokerError` naming the sample, the file and the
            cause); ``"skip"`` drops failed samples, logs each on the ``stoker``
            logger and counts them in :meth:`stats`.
        max_consecutive_errors: under ``"skip"``, more failed samples than this in a
            row raise :class:`~stoker.errors.LimitExceededError` (broken storage
            should stop a run, not silently empty it).
        max_image_pixels: images whose header declares more pixels are refused
            before decoding.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        output: ``"torch"``, ``"numpy"``, or ``"auto"`` (torch when installed).
        buffer_pool_bytes: idle pixel memory kept for reuse between batches.
    """

    def __init__(
        self,
        manifest: str | os.PathLike[str],
        *,
        image_root: str | os.PathLike[str] | None = None,
        batch_size: int = 1,
        num_threads: int | None = None,
        prefetch: int = 2,
        on_error: Literal["raise", "skip"] = "raise",
        max_consecutive_errors: int = 16,
        max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
        drop_last: bool = False,
        output: Literal["auto", "torch", "numpy"] = "auto",
        buffer_pool_bytes: int = 512 << 20,
    ) -> None:
        self._manifest = os.fspath(manifest)
        self._output = _resolve_output(output)
        self._num_threads = default_num_threads() if num_threads is None else int(num_threads)
        self._batch_size = int(batch_size)
        self._prefetch = int(prefetch)
        self._on_error = on_error
        self._epochs: weakref.WeakSet[_stoker.Epoch] = weakref.WeakSet()
        self._engine = _stoker.Loader(
            self._manifest,
            "" if image_root is None else os.fspath(image_root),
            self._batch_size,
            self._num_threads,
            self._prefetch,
            on_error,
            int(max_consecutive_errors),
            int(max_image_pixels),
            bool(drop_last),
            int(buffer_pool_bytes),
        )

    def __iter__(self) -> Iterator[Batch]:
        if self._engine is None:
            raise RuntimeError("this Loader is closed")
        epoch = self._engine.start_epoch(self._output)
        self._epochs.add(epoch)
        return self._iterate(epoch)

    def _iterate(self, epoch: _stoker.Epoch) -> Iterator[Batch]:
        # A generator so that leaving a for loop early (break, exception, garbage
        # collection of the iterator) runs `finally` and stops the epoch's threads.
        # A method, not a staticmethod: the generator's frame keeps `self` alive, so
        # `for batch in Loader(...)` does not collect the Loader (whose __del__ closes
        # its epochs) while the loop is still running.
        try:
            while True:
                item = epoch.next()
                if item is None:
                    return
                batch, skipped = item
                for key, code, message in skipped:
                    logger.warning("skipped sample %s (%s): %s", key, code, message)
                if batch is None:  # failures with no batch to carry them: ask again
                    continue
                yield batch
        finally:
            epoch.close()

    def __len__(self) -> int:
        """Batches per epoch (before samples skipped under ``on_error="skip"``)."""
        return self._require_engine().num_batches

    @property
    def num_samples(self) -> int:
        """Samples in the manifest (non-blank lines)."""
        return self._require_engine().num_samples

    def stats(self) -> dict[str, Any]:
        """Counters since the loader was created.

        ``stages``: per stage (``parse``, ``read``, ``decode``) the busy time summed
        over threads (``busy_s``), ``items`` and ``bytes``. ``consumer``: batches
        delivered, the time the training loop spent waiting inside ``next()``
        (``wait_s``; the latest and longest single waits are ``last_wait_s`` and
        ``max_wait_s``), the time from its first ``next()`` to its latest return
        (``wall_s``) and their ratio, the **wait ratio**. ``samples``: delivered and
        skipped counts; ``recent_skips``: the latest skipped samples and why.
        ``buffer_pool``: pixel memory reuse.
        """
        return self._require_engine().stats()

    def close(self) -> None:
        """Stops every running epoch and joins its threads. Idempotent."""
        for epoch in list(self._epochs):
            epoch.close()
        self._epochs.clear()
        self._engine = None

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __repr__(self) -> str:
        return (
            f"stoker.Loader({self._manifest!r}, batch_size={self._batch_size}, "
            f"num_threads={self._num_threads}, prefetch={self._prefetch}, "
            f"on_error={self._on_error!r}, output={self._output!r})"
        )

    def _require_engine(self) -> Any:
        if self._engine is None:
            raise RuntimeError("this Loader is closed")
        return self._engine


__all__ = ["Loader", "Batch", "default_num_threads"]
