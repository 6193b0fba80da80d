"""``stoker.Loader``: batches from JSONL manifests, prepared by the native engine."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import logging
import os
import tempfile
import weakref
from collections.abc import Iterator
from typing import Any, Literal

from stoker import _stoker
from stoker.codec import DEFAULT_MAX_IMAGE_PIXELS
from stoker.io import ObjectStore
from stoker.model_inputs import ModelInputs
from stoker.sources import Source, as_sources, integer_weights

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


#: Version of the dict returned by Loader.state_dict().
STATE_VERSION = 1


def default_index_cache_dir() -> str:
    """Where manifest indexes are kept: $STOKER_CACHE_DIR, else $XDG_CACHE_HOME/stoker,
    else ~/.cache/stoker; the ``index`` folder inside it."""
    root = os.environ.get("STOKER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "stoker")
    return os.path.join(root, "index")


def default_rank_and_world_size() -> tuple[int, int]:
    """torch.distributed's rank and world size when it is initialised, else the
    RANK / WORLD_SIZE environment variables (torchrun sets them), else (0, 1)."""
    if "torch" in sys.modules:  # never import torch just to ask
        dist = getattr(sys.modules["torch"], "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    try:
        return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    except ValueError as e:
        raise ValueError(f"RANK / WORLD_SIZE environment variables are not integers: {e}") from None


def _describe_differences(saved: Any, current: Any, path: str = "") -> list[str]:
    if isinstance(saved, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(saved) | set(current), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in saved:
                out.append(f"{where} is new ({current[key]!r})")
            elif key not in current:
                out.append(f"{where} was removed (was {saved[key]!r})")
            else:
                out.extend(_describe_differences(saved[key], current[key], where))
        return out
    if isinstance(saved, list) and isinstance(current, list) and len(saved) == len(current):
        out = []
        for i, (a, b) in enumerate(zip(saved, current)):
            out.extend(_describe_differences(a, b, f"{path}[{i}]"))
        return out
    return [] if saved == current else [f"{path}: saved {saved!r}, now {current!r}"]


class Loader:
    """Iterates batches of samples from one or more JSONL manifests.

    Work happens on native threads: samples of upcoming batches are read and decoded
    in any order, and batches come out strictly in plan order. ``prefetch`` batches are
    prepared ahead of the one the training loop is waiting for, so at most
    ``prefetch + 1`` batches are in memory at once.

    The order is planned before any byte is read, as a pure function of the sources,
    their weights, ``seed``, ``shuffle``, the epoch policy and the global batch size
    (``batch_size * world_size``): every rank computes the same global stream and takes
    its slice of each global batch, all ranks get the same number of batches, and
    :meth:`state_dict` / :meth:`load_state_dict` resume exactly — also on a different
    number of ranks, as long as the global batch size is the same.

    Each ``for`` loop over the loader is a new epoch (epoch 0, 1, ...), except the first
    loop after :meth:`load_state_dict`, which continues the restored epoch from the
    first batch its trainer had not received. A batch is a dict:

    ``"sample_keys"``
        ``"<manifest>:<line>"`` of each sample, in order.
    ``"samples"``
        The raw JSON line of each sample.
    ``"images"``
        Per sample, the list of its decoded images, each ``uint8 [H, W, 3]`` RGB; a
        ``torch.Tensor`` (or NumPy array) that views the engine's memory, no copy.
    ``"batch_index"``, ``"epoch"``
        The batch's number in this rank's plan of the epoch, and the epoch.

    Args:
        sources: a manifest path, a :class:`stoker.Source`, or a list of them.
        image_root: directory relative image paths resolve against, for sources that
            set none (default: each source's first manifest's directory).
        batch_size: samples per batch on this rank.
        num_threads: worker threads (default: the CPUs this process may use).
        prefetch: batches prepared ahead of the consumer; 0 disables prefetching.
        seed: seeds the shuffle and the substitutes for failed samples.
        shuffle: visit each source in a seeded random order, new every epoch.
        rank, world_size: this process's data-parallel rank and the number of ranks
            (default: torch.distributed when initialised, else $RANK / $WORLD_SIZE).
        epoch_policy: ``"first_exhausted"`` (default: an epoch ends when a source runs
            out; with one source, one pass), ``"samples"`` (``samples_per_epoch``
            samples; sources wrap around) or ``"repeat"`` (every sample of each source
            exactly ``Source.repeat`` times).
        samples_per_epoch: epoch length for ``epoch_policy="samples"``.
        drop_last: drop the last global batch when it is not full (it is also dropped
            when it holds fewer samples than there are ranks).
        on_error: ``"raise"`` raises the first failed sample's error (a
            :class:`~stoker.errors.StokerError` naming the sample, the file and the
            cause); ``"skip"`` replaces a failed sample by a deterministic substitute
            (batches keep their size, a resumed run makes the same replacements), logs
            it on the ``stoker`` logger and counts it in :meth:`stats`.
        max_consecutive_errors: under ``"skip"``, more failures than this in a row
            raise :class:`~stoker.errors.LimitExceededError` (broken storage should stop
            a run, not silently empty it).
        max_image_pixels: images whose header declares more pixels are refused
            before decoding.
        output: ``"torch"``, ``"numpy"``, or ``"auto"`` (torch when installed).
        buffer_pool_bytes: idle pixel memory kept for reuse between batches.
        index_cache_dir: where manifest indexes persist between runs (default:
            :func:`default_index_cache_dir`); ``""`` keeps them in memory only.
        model_inputs: a :class:`stoker.ModelInputs`: batches carry the model's inputs
            (tokens, labels, mRoPE ids, pixel_values) instead of decoded images.
        max_prefetch_bytes: with ``model_inputs``, the most ``pixel_values`` bytes the
            engine holds for batches it has sized but not yet handed out (``None``: no
            limit but ``prefetch``). A batch that would cross it is planned from image
            headers and then waits, undecoded, until the trainer takes earlier batches;
            the next batch due always proceeds, so a single batch larger than the
            budget still passes. Default 4 GiB.
        storage: a :class:`stoker.io.ObjectStore` to read through: manifests may then
            be ``s3://`` / ``http(s)://`` URIs (copied once by ranged reads into the
            cache folder, reused while their ETag is unchanged, and named by their URI
            in sample keys; their images default to the manifest's prefix), and image
            references (or ``image_root``) may be URIs, fetched with the store's
            retries, timeouts and URI policy; local image paths must then lie under
            the store's own ``image_root``. ``stats()`` gains its ``io`` counters.
            Without it manifests and images are local files.
    """

    def __init__(
        self,
        sources: str | os.PathLike[str] | Source | list[str | os.PathLike[str] | Source],
        *,
        image_root: str | os.PathLike[str] | None = None,
        batch_size: int = 1,
        num_threads: int | None = None,
        prefetch: int = 2,
        seed: int = 0,
        shuffle: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        epoch_policy: Literal["first_exhausted", "samples", "repeat"] = "first_exhausted",
        samples_per_epoch: int | None = None,
        drop_last: bool = False,
        on_error: Literal["raise", "skip"] = "raise",
        max_consecutive_errors: int = 16,
        max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
        output: Literal["auto", "torch", "numpy"] = "auto",
        buffer_pool_bytes: int = 512 << 20,
        index_cache_dir: str | os.PathLike[str] | None = None,
        model_inputs: ModelInputs | None = None,
        max_prefetch_bytes: int | None = 4 << 30,
        storage: ObjectStore | None = None,
    ) -> None:
        if storage is not None and not isinstance(storage, ObjectStore):
            raise TypeError(f"storage must be a stoker.io.ObjectStore, "
                            f"got {type(storage).__name__}")
        if model_inputs is not None and not isinstance(model_inputs, ModelInputs):
            raise TypeError(f"model_inputs must be a stoker.ModelInputs, "
                            f"got {type(model_inputs).__name__}")
        self._engine = None
        self._sources = as_sources(sources)
        self._output = _resolve_output(output)
        self._num_threads = default_num_threads() if num_threads is None else int(num_threads)
        self._batch_size = int(batch_size)
        self._prefetch = int(prefetch)
        self._on_error = on_error
        default_rank, default_world = default_rank_and_world_size()
        self._rank = default_rank if rank is None else int(rank)
        self._world_size = default_world if world_size is None else int(world_size)
        if epoch_policy == "samples" and samples_per_epoch is None:
            raise ValueError("epoch_policy='samples' needs samples_per_epoch")
        if samples_per_epoch is not None and epoch_policy != "samples":
            raise ValueError("samples_per_epoch is only used with epoch_policy='samples'")
        self._order = {
            "sources": None,  # filled in once the manifests are indexed
            "seed": int(seed),
            "shuffle": bool(shuffle),
            "epoch_policy": epoch_policy,
            "samples_per_epoch": samples_per_epoch,
            "global_batch_size": self._batch_size * self._world_size,
            "drop_last": bool(drop_last),
        }
        root = None if image_root is None else os.fspath(image_root)
        if index_cache_dir is None:
            index_cache_dir = default_index_cache_dir()
        self._staging: tempfile.TemporaryDirectory[str] | None = None
        engine_sources = []
        for s, w in zip(self._sources, integer_weights(self._sources)):
            local, display = self._stage_manifests(s.paths, storage, os.fspath(index_cache_dir))
            # A remote manifest's images default to its own "directory".
            remote_root = s.paths[0].rsplit("/", 1)[0] + "/" if "://" in s.paths[0] else ""
            engine_sources.append((s.name, local, s.image_root or root or remote_root, w,
                                   s.repeat, display))
        self._epochs: weakref.WeakSet[_stoker.Epoch] = weakref.WeakSet()
        self._model_inputs = model_inputs
        self._engine = _stoker.Loader(
            engine_sources, self._batch_size, int(seed) & ((1 << 64) - 1), bool(shuffle),
            epoch_policy, int(samples_per_epoch or 0), self._world_size, self._rank,
            bool(drop_last), self._num_threads, self._prefetch, on_error,
            int(max_consecutive_errors), int(max_image_pixels), int(buffer_pool_bytes),
            os.fspath(index_cache_dir),
            None if model_inputs is None else model_inputs._native,
            int(max_prefetch_bytes or 0),
            None if storage is None else storage._native)
        self._order["sources"] = [
            {"name": s.name, "weight": s.weight, "repeat": s.repeat,
             "files": [[os.path.basename(path), size, n] for path, size, n, _ in info["files"]]}
            for s, info in zip(self._sources, self._engine.source_info())
        ]
        # Position: the next batch this rank's trainer will receive.
        self._epoch = 0
        self._next_batch = 0
        self._started = False  # has an iter() begun an epoch?
        self._resume = False   # does the next iter() continue a restored position?

    def _stage_manifests(self, paths: tuple[str, ...], storage: ObjectStore | None,
                         index_cache_dir: str) -> tuple[list[str], list[str]]:
        """Local paths for the engine and the names sample keys use. Object-store
        manifests are copied (by ranged reads, reused while unchanged) next to the index
        cache, or into a temporary folder living as long as the loader."""
        if not any("://" in p for p in paths):
            return list(paths), []
        if storage is None:
            remote = next(p for p in paths if "://" in p)
            raise ValueError(f"manifest {remote!r} is an object-store URI; give the Loader "
                             "storage=stoker.io.ObjectStore(...) to read it")
        if index_cache_dir:
            folder = os.path.join(os.path.dirname(index_cache_dir), "manifests")
        else:
            if self._staging is None:
                self._staging = tempfile.TemporaryDirectory(prefix="stoker-manifests-")
            folder = self._staging.name
        local = [storage.stage(p, folder) if "://" in p else p for p in paths]
        return local, list(paths)

    def __iter__(self) -> Iterator[Batch]:
        engine = self._require_engine()
        # As with torch's DataLoader, every iter() is a new epoch from its start; the
        # exception is the first iter() after load_state_dict(), which resumes.
        if self._resume:
            self._resume = False
            if self._next_batch >= engine.plan_info(self._epoch)["num_batches"]:
                self._epoch, self._next_batch = self._epoch + 1, 0
        elif self._started:
            self._epoch, self._next_batch = self._epoch + 1, 0
        self._started = True
        run = engine.start_epoch(self._epoch, self._next_batch, self._output)
        self._epochs.add(run)
        return self._iterate(run, self._epoch)

    def _iterate(self, run: _stoker.Epoch, epoch: int) -> Iterator[Batch]:
        # A generator so that leaving a for loop early (break, exception, garbage
        # collection of the iterator) runs `finally` and stops the epoch's threads.
        # A method, not a staticmethod: the generator's frame keeps `self` alive, so
        # `for batch in Loader(...)` does not collect the Loader (whose __del__ closes
        # its epochs) while the loop is still running.
        try:
            while True:
                item = run.next()
                if item is None:
                    return
                batch, skipped = item
                for key, code, message in skipped:
                    logger.warning("skipped sample %s (%s): %s", key, code, message)
                if batch is None:  # failures with no batch to carry them: ask again
                    continue
                batch["epoch"] = epoch
                # The position moves when the trainer receives the batch: a state saved
                # from here on resumes after it.
                self._epoch, self._next_batch = epoch, batch["batch_index"] + 1
                yield batch
        finally:
            run.close()

    def __len__(self) -> int:
        """Batches of the current epoch on this rank (the same on every rank)."""
        return self._require_engine().plan_info(self._epoch)["num_batches"]

    @property
    def num_samples(self) -> int:
        """Samples in all sources (non-blank manifest lines)."""
        return sum(info["num_samples"] for info in self._require_engine().source_info())

    @property
    def epoch(self) -> int:
        """The epoch of the latest (or restored) position."""
        return self._epoch

    def plan(self, epoch: int | None = None) -> dict[str, int]:
        """The plan of an epoch without reading any sample: ``num_batches`` (per rank),
        ``epoch_samples``, ``global_batch_size`` and ``dropped_tail`` (samples of a final
        global batch too small to share among the ranks, or dropped by ``drop_last``)."""
        return self._require_engine().plan_info(self._epoch if epoch is None else epoch)

    def plan_keys(self, epoch: int, batch: int, *, global_batch: bool = False) -> list[str]:
        """The sample keys of this rank's batch (``global_batch=True``: of all ranks'
        parts of it, rank 0's first), from the plan alone."""
        return self._require_engine().plan_keys(epoch, batch, global_batch)

    def state_dict(self) -> dict[str, Any]:
        """The loader's position as a small JSON-serialisable dict.

        It describes what the trainer has *received*: batches prefetched but not yet
        delivered are recomputed after :meth:`load_state_dict`. Restoring costs the
        same at any position (nothing is replayed).
        """
        self._require_engine()
        return {
            "format": "stoker.Loader",
            "version": STATE_VERSION,
            "config_digest": self._config_digest(),
            "order": json.loads(json.dumps(self._order)),
            "epoch": self._epoch,
            "next_batch": self._next_batch,
            "world_size": self._world_size,
            "rank": self._rank,
            "batch_size": self._batch_size,
            "skipped_samples": int(self.stats()["samples"]["skipped"]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continues from a :meth:`state_dict`, in this process or a fresh one.

        The world size may differ from the one that saved the state as long as the
        global batch size (``batch_size * world_size``) is the same: the global stream
        is identical and each rank takes its new share. Anything else that would change
        the order is refused with a message naming what differs; so are states from
        another format or version, and positions outside the epoch. Iterators already
        running are closed; the next ``for`` loop starts at the restored position.
        """
        engine = self._require_engine()
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from Loader.state_dict(), "
                            f"got {type(state).__name__}")
        if state.get("format") != "stoker.Loader":
            raise ValueError("not a stoker.Loader state dict (format is "
                             f"{state.get('format')!r})")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported state version {state.get('version')!r} "
                             f"(this Stoker reads version {STATE_VERSION})")
        missing = [k for k in ("config_digest", "order", "epoch", "next_batch")
                   if k not in state]
        if missing:
            raise ValueError(f"state dict is missing {missing} (truncated or edited?)")
        if state["config_digest"] != self._config_digest():
            differences = _describe_differences(state["order"], self._order)
            if not differences:
                raise ValueError("state dict's config_digest does not match its own order "
                                 "description (edited or corrupted state)")
            raise ValueError("cannot resume: what decides the sample order changed since "
                             "the state was saved: " + "; ".join(differences))
        epoch, next_batch = state["epoch"], state["next_batch"]
        if not (isinstance(epoch, int) and isinstance(next_batch, int)) or epoch < 0:
            raise ValueError(f"bad position in state dict: epoch={epoch!r}, "
                             f"next_batch={next_batch!r}")
        num_batches = engine.plan_info(epoch)["num_batches"]
        if not 0 <= next_batch <= num_batches:
            raise ValueError(f"state dict position next_batch={next_batch} is outside epoch "
                             f"{epoch}, which has {num_batches} batches per rank")
        for run in list(self._epochs):
            run.close()
        self._epoch, self._next_batch = epoch, next_batch
        self._resume = True

    def _config_digest(self) -> str:
        text = json.dumps(self._order, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def stats(self) -> dict[str, Any]:
        """Counters since the loader was created.

        ``stages``: per stage the busy time summed over threads (``busy_s``),
        ``items`` and ``bytes``: ``parse`` (manifest lines), ``read`` (image files),
        ``decode`` (images, for batches of decoded images); with model inputs
        ``probe`` (image headers), ``text`` (template, tokens, labels, position ids;
        bytes: tokens), ``vision`` (decode + resize + normalise into pixel_values) and
        ``collate`` (padded batch tensors). ``consumer``: batches
        delivered, the time the training loop spent waiting inside ``next()``
        (``wait_s``; the latest and longest single waits are ``last_wait_s`` and
        ``max_wait_s``), the time from its first ``next()`` to its latest return
        (``wall_s``) and their ratio, the **wait ratio**. ``samples``: delivered and
        skipped counts, and with ``max_length`` the samples ``truncated`` and
        ``dropped_overlong`` (replaced under ``overlong="drop"``); ``recent_skips``: the latest skipped samples and why.
        ``buffer_pool``: pixel memory reuse. ``io`` (with ``storage``): the object
        store's requests, bytes, retries by reason and latency histograms.
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
        sources = ", ".join(
            s.uri if len(self._sources) == 1 else f"{s.name}={s.uri} (weight {s.weight:g})"
            for s in self._sources)
        return (
            f"stoker.Loader([{sources}], batch_size={self._batch_size}, "
            f"rank={self._rank}/{self._world_size}, seed={self._order['seed']}, "
            f"shuffle={self._order['shuffle']}, num_threads={self._num_threads}, "
            f"prefetch={self._prefetch}, on_error={self._on_error!r}, "
            f"output={self._output!r}"
            + ("" if self._model_inputs is None else f", model_inputs={self._model_inputs!r}")
            + ")"
        )

    def _require_engine(self) -> Any:
        if self._engine is None:
            raise RuntimeError("this Loader is closed")
        return self._engine


__all__ = ["Loader", "Batch", "Source", "default_num_threads", "default_index_cache_dir",
           "default_rank_and_world_size"]
