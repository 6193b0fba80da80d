"""stoker.Loader: order, content, epochs, output types, early exit, error policies, stats.

Every dataset is generated here (Pillow-encoded images from seeded NumPy content and a
manifest in the messages format); expected pixels come from Pillow
(:func:`image_corpus.reference_rgb`).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import gc
import io
import json
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker import errors
from stoker.errors import (
    CancelledError,
    CorruptImageError,
    ImageNotFoundError,
    InvalidArgumentError,
    LimitExceededError,
    ManifestError,
    StokerError,
    StorageError,
    UnsupportedImageError,
)
from stoker.loader import default_index_cache_dir

from image_corpus import reference_rgb

# ---------------------------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Sample:
    line: int  # 1-based line number in the manifest file
    text: str  # the raw JSON line (no line terminator)
    images: list[str]  # image references, in order


@dataclasses.dataclass
class Dataset:
    root: Path
    manifest: Path
    samples: list[Sample]
    pixels: dict[str, np.ndarray]  # image reference -> Pillow's RGB

    def key(self, sample: Sample, manifest: str | None = None) -> str:
        return f"{manifest or self.manifest}:{sample.line}"

    @property
    def keys(self) -> list[str]:
        return [self.key(s) for s in self.samples]


def _content(rng: np.random.Generator, height: int, width: int, channels: int) -> np.ndarray:
    """Gradients plus noise: deterministic, photo-like enough for JPEG."""
    y, x = np.mgrid[0:height, 0:width]
    phase = rng.integers(0, 256, size=channels)
    planes = [(x * rng.integers(1, 9) + y * rng.integers(1, 9) + phase[c]) for c in range(channels)]
    a = np.stack(planes, axis=-1) + rng.integers(0, 40, size=(height, width, channels))
    a = (a % 256).astype(np.uint8)
    return a[:, :, 0] if channels == 1 else a


def _write_image(path: Path, i: int, rng: np.random.Generator) -> None:
    """Image i: JPEG or PNG in a rotating mode, small random size (1x1 included)."""
    if i == 0:
        h, w = 1, 1
    else:
        h, w = (int(v) for v in rng.integers(1, 72, size=2))
    variant = i % 6
    if path.suffix == ".jpg":
        if variant == 5:
            Image.fromarray(_content(rng, h, w, 1)).save(path, "JPEG", quality=85)  # grey
        else:
            Image.fromarray(_content(rng, h, w, 3)).save(
                path, "JPEG", quality=int(rng.integers(60, 96)), subsampling=int(variant % 3))
    elif variant in (0, 2):
        Image.fromarray(_content(rng, h, w, 4), "RGBA").save(path, "PNG")
    elif variant == 4:
        Image.fromarray(_content(rng, h, w, 1), "L").save(path, "PNG")
    else:
        Image.fromarray(_content(rng, h, w, 3)).save(path, "PNG")


def _message_line(refs: list[str], text: str, *, string_content: bool = False,
                  system: bool = False) -> str:
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": "You are a careful assistant."})
    if string_content:
        messages.append({"role": "user", "content": text})
    else:
        content: list[dict[str, str]] = [{"type": "image", "image": r} for r in refs]
        content.append({"type": "text", "text": text})
        messages.append({"role": "user", "content": content})
    messages.append({"role": "assistant", "content": f"answer to {text}"})
    return json.dumps({"messages": messages}, ensure_ascii=False)


def _write_manifest(path: Path, entries: list[str | bytes], *, crlf_at: set[int] = frozenset(),
                    final_newline: bool = True) -> None:
    """Writes entries as lines ('' or whitespace are blank lines); bytes are written as is."""
    out = bytearray()
    for i, entry in enumerate(entries):
        out += entry if isinstance(entry, bytes) else entry.encode("utf-8")
        if i < len(entries) - 1 or final_newline:
            out += b"\r\n" if i in crlf_at else b"\n"
    path.write_bytes(bytes(out))


NUM_IMAGES = 40


def _build_dataset(root: Path, seed: int = 1234) -> Dataset:
    rng = np.random.default_rng(seed)
    (root / "imgs").mkdir(parents=True)
    refs = [f"imgs/{i}.{'jpg' if i % 2 else 'png'}" for i in range(NUM_IMAGES)]
    for i, ref in enumerate(refs):
        _write_image(root / ref, i, rng)
    pixels = {ref: reference_rgb(root / ref) for ref in refs}

    # 45 samples with 0, 1 or 2 images (every image used at least once), some with plain
    # string content, some with a system message, non-ASCII text. Around them: a leading
    # blank line, blank and whitespace-only lines, a CRLF line ending and no newline after
    # the last line.
    entries: list[str] = [""]
    samples: list[Sample] = []
    next_image = 0
    blank_after = {4: "", 10: "   \t", 22: "", 30: "\t"}
    for j in range(45):
        n = j % 3
        images = [refs[(next_image + k) % NUM_IMAGES] for k in range(n)]
        next_image += n
        text = f"sample {j}: what is in the picture? ½ ✓"
        line = _message_line(images, text, string_content=(n == 0 and j % 2 == 0),
                             system=(j % 7 == 3))
        entries.append(line)
        samples.append(Sample(line=len(entries), text=line, images=images))  # 1-based
        if j in blank_after:
            entries.append(blank_after[j])
    manifest = root / "manifest.jsonl"
    _write_manifest(manifest, entries, crlf_at={samples[7].line - 1}, final_newline=False)
    return Dataset(root=root, manifest=manifest, samples=samples, pixels=pixels)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return _build_dataset(tmp_path_factory.mktemp("dataset"))


@pytest.fixture(scope="session")
def slow_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Many samples of two 640x640 JPEGs each: an epoch takes seconds, so early exits happen
    with work in flight and prefetched batches waiting."""
    root = tmp_path_factory.mktemp("slow")
    rng = np.random.default_rng(99)
    for i in range(4):
        Image.fromarray(_content(rng, 640, 640, 3)).save(root / f"big{i}.jpg", quality=92)
    lines = [_message_line([f"big{i % 4}.jpg", f"big{(i + 1) % 4}.jpg"], f"s{i}")
             for i in range(600)]
    manifest = root / "slow.jsonl"
    _write_manifest(manifest, lines)
    return manifest


def _expected_batches(ds: Dataset, batch_size: int, drop_last: bool = False) -> list[list[Sample]]:
    batches = [ds.samples[i : i + batch_size] for i in range(0, len(ds.samples), batch_size)]
    if drop_last and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


def _check_batch(ds: Dataset, batch: dict[str, Any], expected: list[Sample], index: int,
                 manifest: str | None = None, tensor_type: type = np.ndarray) -> None:
    assert set(batch) >= {"sample_keys", "samples", "images", "batch_index", "epoch"}
    assert batch["batch_index"] == index
    assert batch["sample_keys"] == [ds.key(s, manifest) for s in expected]
    assert batch["samples"] == [s.text for s in expected]
    assert len(batch["images"]) == len(expected)
    for sample, images in zip(expected, batch["images"]):
        assert isinstance(images, list)
        assert len(images) == len(sample.images), ds.key(sample)
        for ref, image in zip(sample.images, images):
            assert isinstance(image, tensor_type), type(image)
            array = image.numpy() if tensor_type is not np.ndarray else image
            assert array.dtype == np.uint8
            want = ds.pixels[ref]
            assert array.shape == want.shape, (ds.key(sample), ref)
            assert np.array_equal(array, want), (ds.key(sample), ref)


def _run_epoch(loader: stoker.Loader) -> list[dict[str, Any]]:
    return list(loader)


# ---------------------------------------------------------------------------------------------
# Order and content
# ---------------------------------------------------------------------------------------------


def test_dataset_shape(dataset: Dataset) -> None:
    counts = {n: sum(len(s.images) == n for s in dataset.samples) for n in (0, 1, 2)}
    assert all(counts.values()), counts
    user_contents = [next(m["content"] for m in json.loads(s.text)["messages"]
                          if m["role"] == "user") for s in dataset.samples]
    assert any(isinstance(c, str) for c in user_contents)
    assert any(isinstance(c, list) and len(c) == 1 for c in user_contents)  # text only
    raw = dataset.manifest.read_bytes().split(b"\n")
    for s in dataset.samples:  # the line numbers are those of the file
        assert raw[s.line - 1].rstrip(b"\r").decode() == s.text


@pytest.mark.parametrize("num_threads", [1, 2, 4])
@pytest.mark.parametrize("prefetch", [0, 1, 4])
def test_every_sample_once_in_order(dataset: Dataset, num_threads: int, prefetch: int) -> None:
    batch_size = 4
    expected = _expected_batches(dataset, batch_size)
    runs = []
    for _ in range(2):  # two loaders ...
        loader = stoker.Loader(dataset.manifest, batch_size=batch_size, num_threads=num_threads,
                               prefetch=prefetch, output="numpy")
        assert len(loader) == len(expected)
        assert loader.num_samples == len(dataset.samples)
        for epoch in range(2):  # ... two epochs each
            batches = _run_epoch(loader)
            assert len(batches) == len(expected)
            assert [b["epoch"] for b in batches] == [epoch] * len(expected)
            for i, (batch, want) in enumerate(zip(batches, expected)):
                _check_batch(dataset, batch, want, i, manifest=str(dataset.manifest))
            runs.append([b["sample_keys"] for b in batches])
        loader.close()
    assert all(run == runs[0] for run in runs)
    assert [k for keys in runs[0] for k in keys] == dataset.keys  # each sample exactly once


@pytest.mark.parametrize("batch_size", [1, 7, 45, 100])
def test_batch_sizes_and_drop_last(dataset: Dataset, batch_size: int) -> None:
    n = len(dataset.samples)
    for drop_last in (False, True):
        loader = stoker.Loader(dataset.manifest, batch_size=batch_size, drop_last=drop_last,
                               num_threads=2, output="numpy")
        expected = _expected_batches(dataset, batch_size, drop_last)
        assert len(loader) == len(expected) == (n // batch_size if drop_last else
                                                -(-n // batch_size))
        assert loader.num_samples == n
        batches = _run_epoch(loader)
        assert len(batches) == len(expected)
        for i, (batch, want) in enumerate(zip(batches, expected)):
            _check_batch(dataset, batch, want, i)
        delivered = [k for b in batches for k in b["sample_keys"]]
        assert delivered == dataset.keys[: len(delivered)]
        if drop_last:
            assert len(delivered) == (n // batch_size) * batch_size
        loader.close()


def test_manifest_path_is_kept_as_given(dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(dataset.root)
    loader = stoker.Loader("manifest.jsonl", batch_size=8, output="numpy")
    batches = _run_epoch(loader)
    assert [k for b in batches for k in b["sample_keys"]] == \
        [f"manifest.jsonl:{s.line}" for s in dataset.samples]
    for i, (batch, want) in enumerate(zip(batches, _expected_batches(dataset, 8))):
        _check_batch(dataset, batch, want, i, manifest="manifest.jsonl")
    # A path-like object is accepted and spelled as str() spells it.
    loader = stoker.Loader(Path("./manifest.jsonl"), batch_size=45, output="numpy")
    assert next(iter(loader))["sample_keys"][0] == f"manifest.jsonl:{dataset.samples[0].line}"


def test_image_root(dataset: Dataset, tmp_path: Path) -> None:
    # The manifest elsewhere, its relative image paths resolved against image_root.
    moved = tmp_path / "elsewhere.jsonl"
    moved.write_bytes(dataset.manifest.read_bytes())
    loader = stoker.Loader(moved, image_root=dataset.root, batch_size=10, output="numpy")
    for i, (batch, want) in enumerate(zip(_run_epoch(loader), _expected_batches(dataset, 10))):
        _check_batch(dataset, batch, want, i, manifest=str(moved))
    # Without it, they resolve against the manifest's directory: not found there.
    with pytest.raises(ImageNotFoundError):
        _run_epoch(stoker.Loader(moved, batch_size=10, output="numpy"))


def test_absolute_image_paths(dataset: Dataset, tmp_path: Path) -> None:
    sample = next(s for s in dataset.samples if len(s.images) == 2)
    line = _message_line([str(dataset.root / r) for r in sample.images], "absolute")
    manifest = tmp_path / "abs.jsonl"
    _write_manifest(manifest, [line])
    (batch,) = _run_epoch(stoker.Loader(manifest, output="numpy"))
    for ref, image in zip(sample.images, batch["images"][0]):
        assert np.array_equal(image, dataset.pixels[ref])


def test_blank_lines_keep_file_line_numbers(tmp_path: Path, dataset: Dataset) -> None:
    good = [s for s in dataset.samples if s.images][:3]
    entries: list[str] = ["", "", good[0].text, "  ", "", good[1].text, "\t \r", good[2].text,
                          "", ""]
    manifest = tmp_path / "blanks.jsonl"
    _write_manifest(manifest, entries)
    loader = stoker.Loader(manifest, image_root=dataset.root, batch_size=2, output="numpy")
    assert loader.num_samples == 3
    assert len(loader) == 2
    batches = _run_epoch(loader)
    assert [k for b in batches for k in b["sample_keys"]] == \
        [f"{manifest}:3", f"{manifest}:6", f"{manifest}:8"]
    assert [t for b in batches for t in b["samples"]] == [s.text for s in good]


def test_numpy_output(dataset: Dataset) -> None:
    loader = stoker.Loader(dataset.manifest, batch_size=5, output="numpy")
    for i, (batch, want) in enumerate(zip(loader, _expected_batches(dataset, 5))):
        _check_batch(dataset, batch, want, i, tensor_type=np.ndarray)
        for images in batch["images"]:
            for image in images:
                assert image.flags.owndata is False  # a view of engine memory
                assert image.ndim == 3 and image.shape[2] == 3


def test_torch_output(dataset: Dataset) -> None:
    torch = pytest.importorskip("torch")
    loader = stoker.Loader(dataset.manifest, batch_size=5, output="torch")
    assert "output='torch'" in repr(loader)
    seen = 0
    for i, (batch, want) in enumerate(zip(loader, _expected_batches(dataset, 5))):
        _check_batch(dataset, batch, want, i, tensor_type=torch.Tensor)
        for images in batch["images"]:
            for t in images:
                assert t.dtype == torch.uint8
                assert t.dim() == 3 and t.shape[2] == 3
                assert t.device.type == "cpu"
                view = t.numpy()
                assert view.flags.owndata is False
                assert view.ctypes.data == t.data_ptr()  # same memory, no copy
                seen += 1
    assert seen == sum(len(s.images) for s in dataset.samples)


def test_auto_output_prefers_torch(dataset: Dataset) -> None:
    torch = pytest.importorskip("torch")
    loader = stoker.Loader(dataset.manifest, batch_size=45)
    batch = next(iter(loader))
    first = next(images[0] for images in batch["images"] if images)
    assert isinstance(first, torch.Tensor)


def test_arrays_outlive_the_loader(dataset: Dataset) -> None:
    # Arrays own a reference to their memory: closing and dropping the loader, and running
    # further epochs that recycle pooled buffers, must not change pixels handed out before.
    loader = stoker.Loader(dataset.manifest, batch_size=6, output="numpy", num_threads=2)
    kept = _run_epoch(loader)
    for _ in range(2):
        _run_epoch(loader)
    loader.close()
    del loader
    gc.collect()
    for i, (batch, want) in enumerate(zip(kept, _expected_batches(dataset, 6))):
        _check_batch(dataset, batch, want, i)


def test_loader_used_as_a_temporary(dataset: Dataset) -> None:
    # `for batch in Loader(...)`: nothing but the iterator references the Loader. Regression:
    # the Loader was collected at once and its __del__ closed the epoch (CancelledError).
    keys = [k for b in stoker.Loader(dataset.manifest, batch_size=8, output="numpy")
            for k in b["sample_keys"]]
    assert keys == dataset.keys
    it = iter(stoker.Loader(dataset.manifest, batch_size=8, output="numpy"))
    gc.collect()
    assert len(list(it)) == len(_expected_batches(dataset, 8))


def test_repr(dataset: Dataset) -> None:
    loader = stoker.Loader(dataset.manifest, batch_size=3, num_threads=2, prefetch=5,
                           on_error="skip", output="numpy", rank=0, world_size=1)
    text = repr(loader)
    assert text.startswith(f"stoker.Loader([{dataset.manifest}], ")
    assert "batch_size=3" in text
    assert "rank=0/1" in text and "seed=0" in text and "shuffle=False" in text
    assert "num_threads=2" in text and "prefetch=5" in text
    assert "on_error='skip'" in text and "output='numpy'" in text
    # Several sources: each by name, path and weight.
    loader = stoker.Loader([stoker.Source(str(dataset.manifest), weight=3, name="a"),
                            stoker.Source(str(dataset.manifest), name="b")],
                           batch_size=2, seed=5, shuffle=True, rank=1, world_size=2,
                           output="numpy")
    text = repr(loader)
    assert f"[a={dataset.manifest} (weight 3), b={dataset.manifest} (weight 1)]" in text
    assert "batch_size=2" in text and "rank=1/2" in text
    assert "seed=5" in text and "shuffle=True" in text
    assert "on_error='raise'" in text and "output='numpy'" in text


def test_index_cache_stays_in_the_session_cache_dir(dataset: Dataset, tmp_path: Path,
                                                    stoker_cache_dir: Path) -> None:
    # conftest.py points $STOKER_CACHE_DIR at a temporary directory: loaders built without
    # index_cache_dir keep their manifest indexes there, never in the home directory.
    index_dir = Path(default_index_cache_dir())
    assert index_dir == stoker_cache_dir / "index"
    manifest = tmp_path / "cached.jsonl"
    manifest.write_bytes(dataset.manifest.read_bytes())
    before = set(index_dir.iterdir()) if index_dir.exists() else set()
    stoker.Loader(manifest, image_root=dataset.root, output="numpy").close()
    assert len(set(index_dir.iterdir()) - before) == 1
    # index_cache_dir overrides it; "" keeps the index in memory only.
    elsewhere = tmp_path / "indexes"
    stoker.Loader(manifest, image_root=dataset.root, index_cache_dir=elsewhere,
                  output="numpy").close()
    assert len(list(elsewhere.iterdir())) == 1
    other = tmp_path / "uncached.jsonl"
    other.write_bytes(dataset.manifest.read_bytes())
    before = set(index_dir.iterdir())
    loader = stoker.Loader(other, image_root=dataset.root, index_cache_dir="", batch_size=45,
                           output="numpy")
    assert next(iter(loader))["sample_keys"][0] == f"{other}:{dataset.samples[0].line}"
    loader.close()
    assert set(index_dir.iterdir()) == before
    assert len(list(elsewhere.iterdir())) == 1


# ---------------------------------------------------------------------------------------------
# Epochs
# ---------------------------------------------------------------------------------------------


def test_each_for_loop_is_a_new_epoch(dataset: Dataset) -> None:
    # As with torch's DataLoader: every loop over the loader is a new epoch, from its first
    # batch. Without shuffle, every epoch has the same order.
    loader = stoker.Loader(dataset.manifest, batch_size=4, num_threads=2, output="numpy")
    expected = _expected_batches(dataset, 4)
    assert loader.epoch == 0
    epochs = []
    for epoch in (0, 1):
        keys = []
        for i, batch in enumerate(loader):
            assert batch["epoch"] == epoch
            _check_batch(dataset, batch, expected[i], i)
            keys.append(batch["sample_keys"])
        assert loader.epoch == epoch
        assert len(keys) == len(loader) == len(expected)
        epochs.append(keys)
    assert epochs[0] == epochs[1]
    assert [k for keys in epochs[0] for k in keys] == dataset.keys
    # Leaving a loop early does not carry its position over to the next loop.
    for batch in loader:
        assert (batch["epoch"], batch["batch_index"]) == (2, 0)
        break
    batches = list(loader)
    assert [(b["epoch"], b["batch_index"]) for b in batches] == \
        [(3, i) for i in range(len(expected))]
    assert [b["sample_keys"] for b in batches] == epochs[0]


def test_shuffle_visits_every_sample_in_a_new_order_each_epoch(dataset: Dataset) -> None:
    n = len(dataset.samples)
    by_key = {dataset.key(s): s for s in dataset.samples}
    options: dict[str, Any] = dict(batch_size=4, shuffle=True, num_threads=3, output="numpy")
    loader = stoker.Loader(dataset.manifest, seed=7, **options)
    orders = []
    for epoch in (0, 1):
        batches = _run_epoch(loader)
        assert [(b["epoch"], b["batch_index"]) for b in batches] == \
            [(epoch, i) for i in range(len(loader))]
        assert [len(b["sample_keys"]) for b in batches] == [4] * (n // 4) + [n % 4]
        for i, batch in enumerate(batches):
            assert batch["sample_keys"] == loader.plan_keys(epoch, i)
            _check_batch(dataset, batch, [by_key[k] for k in batch["sample_keys"]], i)
        keys = [k for b in batches for k in b["sample_keys"]]
        assert sorted(keys) == sorted(dataset.keys)  # a permutation: each sample once
        assert keys != dataset.keys
        orders.append(keys)
    assert orders[0] != orders[1]
    # The orders are a function of the seed: another loader with the same seed repeats
    # them, epoch by epoch; another seed does not.
    again = stoker.Loader(dataset.manifest, seed=7, **options)
    assert [[k for b in _run_epoch(again) for k in b["sample_keys"]] for _ in range(2)] == orders
    other = stoker.Loader(dataset.manifest, seed=8, **options)
    assert [k for b in _run_epoch(other) for k in b["sample_keys"]] != orders[0]


# ---------------------------------------------------------------------------------------------
# Early exit and thread cleanup
# ---------------------------------------------------------------------------------------------


def _thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def _wait_for_threads(baseline: int, timeout: float = 2.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        count = _thread_count()
        if count <= baseline or time.monotonic() > deadline:
            return count
        time.sleep(0.02)


@pytest.fixture
def thread_baseline() -> Iterator[int]:
    gc.collect()
    baseline = _thread_count()
    yield baseline
    # Whatever the test did, no engine thread may outlive it.
    assert _wait_for_threads(baseline) == baseline, "engine threads left running"


def _slow_loader(manifest: Path, **kwargs: Any) -> stoker.Loader:
    options: dict[str, Any] = dict(batch_size=2, num_threads=4, prefetch=8, output="numpy")
    options.update(kwargs)
    return stoker.Loader(manifest, **options)


def test_break_stops_promptly(slow_manifest: Path, thread_baseline: int) -> None:
    loader = _slow_loader(slow_manifest)
    assert _thread_count() == thread_baseline  # threads belong to epochs, not loaders
    started = None
    for i, batch in enumerate(loader):
        assert _thread_count() > thread_baseline  # workers + scheduler are running
        assert batch["batch_index"] == i
        if i == 2:
            started = time.monotonic()
            break
    del batch
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"leaving the loop took {elapsed:.2f} s"
    assert _wait_for_threads(thread_baseline) == thread_baseline
    # The loader is still usable: a new epoch starts from the beginning.
    first = next(iter(loader))
    assert first["batch_index"] == 0
    assert first["sample_keys"][0] == f"{slow_manifest}:1"
    loader.close()


def test_del_loader_and_iterator_mid_epoch(slow_manifest: Path, thread_baseline: int) -> None:
    loader = _slow_loader(slow_manifest)
    it = iter(loader)
    for _ in range(3):
        next(it)
    assert _thread_count() > thread_baseline
    started = time.monotonic()
    del loader, it
    gc.collect()
    assert time.monotonic() - started < 2.0
    assert _wait_for_threads(thread_baseline) == thread_baseline


def test_del_unstarted_iterator(slow_manifest: Path, thread_baseline: int) -> None:
    # iter() starts the epoch's threads before the first next(); dropping such an iterator
    # must stop them too.
    loader = _slow_loader(slow_manifest)
    it = iter(loader)
    time.sleep(0.05)
    del it
    assert _wait_for_threads(thread_baseline) == thread_baseline
    loader.close()


def test_exception_in_loop_body(slow_manifest: Path, thread_baseline: int) -> None:
    loader = _slow_loader(slow_manifest)

    class Boom(Exception):
        pass

    started = None
    with pytest.raises(Boom):
        for i, _batch in enumerate(loader):
            if i == 3:
                started = time.monotonic()
                raise Boom
    assert time.monotonic() - started < 2.0
    assert _wait_for_threads(thread_baseline) == thread_baseline
    loader.close()


def test_close_then_continue(slow_manifest: Path, thread_baseline: int) -> None:
    loader = _slow_loader(slow_manifest)
    it = iter(loader)
    next(it)
    next(it)
    started = time.monotonic()
    loader.close()
    assert time.monotonic() - started < 2.0
    assert _wait_for_threads(thread_baseline) == thread_baseline  # before `it` is dropped
    with pytest.raises(CancelledError, match="closed"):
        next(it)
    with pytest.raises(StopIteration):  # the iterator is finished afterwards
        next(it)
    loader.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        iter(loader)
    with pytest.raises(RuntimeError, match="closed"):
        len(loader)
    with pytest.raises(RuntimeError, match="closed"):
        loader.stats()


def test_close_stops_every_epoch(slow_manifest: Path, thread_baseline: int) -> None:
    loader = _slow_loader(slow_manifest, num_threads=2)
    iterators = [iter(loader) for _ in range(3)]
    for it in iterators:
        next(it)
    loader.close()
    assert _wait_for_threads(thread_baseline) == thread_baseline
    for it in iterators:
        with pytest.raises(CancelledError):
            next(it)


def test_context_manager(slow_manifest: Path, thread_baseline: int) -> None:
    with _slow_loader(slow_manifest) as loader:
        assert isinstance(loader, stoker.Loader)
        it = iter(loader)
        next(it)
        assert _thread_count() > thread_baseline
    assert _wait_for_threads(thread_baseline) == thread_baseline
    with pytest.raises(CancelledError):
        next(it)
    with pytest.raises(RuntimeError, match="closed"):
        iter(loader)
    # Leaving the block by an exception closes too.
    with pytest.raises(KeyError):
        with _slow_loader(slow_manifest) as loader:
            for _ in loader:
                raise KeyError("stop")
    assert _wait_for_threads(thread_baseline) == thread_baseline


def test_full_epoch_leaves_no_threads(dataset: Dataset, thread_baseline: int) -> None:
    loader = stoker.Loader(dataset.manifest, batch_size=4, num_threads=4, output="numpy")
    for _ in range(3):
        assert len(_run_epoch(loader)) == len(_expected_batches(dataset, 4))
        assert _wait_for_threads(thread_baseline) == thread_baseline


# ---------------------------------------------------------------------------------------------
# Failing samples
# ---------------------------------------------------------------------------------------------


def _png_bytes(rng: np.random.Generator) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(_content(rng, 12, 17, 3)).save(buf, "PNG")
    return buf.getvalue()


def _jpeg_bytes(rng: np.random.Generator) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(_content(rng, 48, 64, 3)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _chunk(tag: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(tag + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", crc)


def _bad_crc_png(rng: np.random.Generator) -> bytes:
    png = bytearray(_png_bytes(rng))
    at = png.index(b"IDAT")
    length = struct.unpack(">I", png[at - 4 : at])[0]
    png[at + 4 + length] ^= 0xFF
    return bytes(png)


def _huge_png() -> bytes:
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b""))
            + _chunk(b"IEND", b""))


@dataclasses.dataclass
class BadCase:
    """One way for a sample to fail: the manifest line, the files it needs, what to expect."""

    name: str
    error: type[StokerError]
    builtin: type[BaseException]
    code: str  # stats()["recent_skips"][i]["error"]
    fragments: tuple[str, ...]  # must appear in str(exc)
    image: str | None = None  # image reference (named in the message) ...
    image_bytes: bytes | None = None  # ... written with these bytes (None: not created)
    line: bytes | None = None  # a raw manifest line instead of a sample with `image`


def _bad_cases() -> list[BadCase]:
    rng = np.random.default_rng(5)
    jpeg = _jpeg_bytes(rng)
    return [
        BadCase("missing_image", ImageNotFoundError, FileNotFoundError, "NotFound",
                ("No such file",), image="bad/missing.jpg"),
        BadCase("truncated_jpeg", CorruptImageError, ValueError, "CorruptImage",
                ("truncated", "JPEG"), image="bad/truncated.jpg", image_bytes=jpeg[: len(jpeg) // 2]),
        BadCase("png_bad_crc", CorruptImageError, ValueError, "CorruptImage", ("CRC", "PNG"),
                image="bad/crc.png", image_bytes=_bad_crc_png(rng)),
        BadCase("zero_byte_image", UnsupportedImageError, ValueError, "UnsupportedImage",
                ("empty",), image="bad/empty.png", image_bytes=b""),
        BadCase("huge_png_header", LimitExceededError, StokerError, "LimitExceeded",
                ("100000x100000", "max_image_pixels"), image="bad/huge.png",
                image_bytes=_huge_png()),
        BadCase("malformed_json", ManifestError, ValueError, "ManifestError",
                ("malformed JSON",), line=b'{"messages": [{"role": "user", "content": "hi"}'),
        BadCase("invalid_utf8", ManifestError, ValueError, "ManifestError", ("UTF-8",),
                line=b'{"messages": [{"role": "user", "content": "caf\xe9 \xff\xfe"}]}'),
        BadCase("not_messages_format", ManifestError, ValueError, "ManifestError",
                ("messages",), line=b'{"image": "imgs/1.jpg", "text": "describe it"}'),
        BadCase("unknown_role", ManifestError, ValueError, "ManifestError",
                ("messages[0]", "unknown role 'robot'"),
                line=b'{"messages": [{"role": "robot", "content": "beep"}]}'),
        BadCase("bad_content_item", ManifestError, ValueError, "ManifestError",
                ("messages[0].content[0]", "video"),
                line=b'{"messages": [{"role": "user", "content": [{"type": "video", '
                     b'"video": "a.mp4"}]}]}'),
    ]


BAD_CASES = _bad_cases()


def _bad_line(dataset: Dataset, case: BadCase) -> bytes:
    if case.line is not None:
        return case.line
    assert case.image is not None
    if case.image_bytes is not None:
        path = dataset.root / case.image
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(case.image_bytes)
    # A good image first: the sample fails on its second image.
    good = dataset.samples[1].images[0]
    return _message_line([good, case.image], f"bad sample: {case.name}").encode()


def _manifest_with(tmp_path: Path, dataset: Dataset, insert: dict[int, bytes],
                   name: str = "m.jsonl") -> tuple[Path, list[str | bytes], list[int]]:
    """The dataset's samples (no blank lines), with `insert[i]` placed before sample i.
    Returns the manifest, its lines and, per dataset sample, its line number."""
    entries: list[str | bytes] = []
    good_lines = []
    for i, s in enumerate(dataset.samples):
        if i in insert:
            entries.append(insert[i])
        entries.append(s.text)
        good_lines.append(len(entries))
    manifest = tmp_path / name
    # Relative image paths must resolve against the dataset.
    _write_manifest(manifest, entries)
    return manifest, entries, good_lines


@pytest.mark.parametrize("case", BAD_CASES, ids=[c.name for c in BAD_CASES])
@pytest.mark.parametrize("num_threads", [1, 4])
def test_raise_names_sample_file_and_cause(dataset: Dataset, tmp_path: Path, case: BadCase,
                                           num_threads: int) -> None:
    position = 13  # the bad line comes after 13 good samples: batches 0..2 of 4 are intact
    manifest, entries, good_lines = _manifest_with(tmp_path, dataset,
                                                   {position: _bad_line(dataset, case)})
    bad_line_number = position + 1
    key = f"{manifest}:{bad_line_number}"
    loader = stoker.Loader(manifest, image_root=dataset.root, batch_size=4,
                           num_threads=num_threads, prefetch=4, on_error="raise", output="numpy")
    delivered = []
    with pytest.raises(case.error) as info:
        for batch in loader:
            delivered.append(batch)
    # Everything before the failing batch, in order and intact.
    assert len(delivered) == position // 4
    for i, batch in enumerate(delivered):
        want = dataset.samples[4 * i : 4 * i + 4]
        assert batch["sample_keys"] == [f"{manifest}:{good_lines[4 * i + k]}" for k in range(4)]
        assert batch["samples"] == [s.text for s in want]
        for sample, images in zip(want, batch["images"]):
            assert [img.shape for img in images] == [dataset.pixels[r].shape for r in sample.images]
            assert all(np.array_equal(img, dataset.pixels[r])
                       for r, img in zip(sample.images, images))
    exc = info.value
    assert isinstance(exc, StokerError)
    assert isinstance(exc, case.builtin)
    assert exc.code == case.code
    assert exc.sample_key == key
    message = str(exc)
    assert message.startswith(key + ":"), message
    if case.image is not None:
        assert f"'{case.image}'" in message, message
        assert str(dataset.root / case.image) in message, message
    for fragment in case.fragments:
        assert fragment in message, message


def test_error_does_not_leave_threads(dataset: Dataset, tmp_path: Path,
                                      thread_baseline: int) -> None:
    case = BAD_CASES[0]
    manifest, _, _ = _manifest_with(tmp_path, dataset, {20: _bad_line(dataset, case)})
    loader = stoker.Loader(manifest, image_root=dataset.root, batch_size=2, num_threads=4,
                           prefetch=8, output="numpy")
    with pytest.raises(ImageNotFoundError):
        for _ in loader:
            pass
    assert _wait_for_threads(thread_baseline) == thread_baseline
    # A new epoch fails the same way, after the same batches.
    it = iter(loader)
    assert len([next(it) for _ in range(10)]) == 10
    with pytest.raises(ImageNotFoundError):
        next(it)


# on_error="skip": a failed sample is replaced by the plan's deterministic substitute for
# its slot (attempt 0, 1, ...), up to max_consecutive_errors failures per slot.

SkipRecord = tuple[str, str, str]  # (sample key, error code, message), as logged


class _WarningLog(logging.Handler):
    """Collects the warnings of the ``stoker`` logger."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.pending: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.pending.append(record)

    def take(self) -> list[SkipRecord]:
        """The records logged since the last take(), as (key, code, message)."""
        out = []
        for record in self.pending:
            assert record.levelno == logging.WARNING
            key, code, message = record.args
            assert record.getMessage() == f"skipped sample {key} ({code}): {message}"
            out.append((key, code, message))
        self.pending = []
        return out


@dataclasses.dataclass
class _LoggedEpoch:
    batches: list[dict[str, Any]]
    logs: list[list[SkipRecord]]  # per batch: the failures logged while next() fetched it
    tail: list[SkipRecord]  # logged after the last batch (before the end or the error)
    error: StokerError | None

    @property
    def keys(self) -> list[str]:
        return [k for b in self.batches for k in b["sample_keys"]]

    @property
    def records(self) -> list[SkipRecord]:
        return [r for logs in self.logs for r in logs] + self.tail


def _run_logged(loader: stoker.Loader) -> _LoggedEpoch:
    """One iter() of the loader, each warning of the ``stoker`` logger attributed to the
    batch whose next() logged it; a StokerError ends the run and is kept."""
    logger = logging.getLogger("stoker")
    handler = _WarningLog()
    saved_level, saved_disabled = logger.level, logger.disabled
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.disabled = False
    run = _LoggedEpoch([], [], [], None)
    try:
        it = iter(loader)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            except StokerError as exc:
                run.error = exc
                break
            run.batches.append(batch)
            run.logs.append(handler.take())
        run.tail = handler.take()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved_level)
        logger.disabled = saved_disabled
    return run


def _recent_skips(loader: stoker.Loader) -> list[SkipRecord]:
    return [(s["sample_key"], s["error"], s["message"]) for s in loader.stats()["recent_skips"]]


def _line(key: str) -> int:
    return int(key.rsplit(":", 1)[1])


@dataclasses.dataclass
class _Lines:
    """A manifest written from good dataset samples and bad cases, one per line."""

    manifest: Path
    good: dict[str, Sample]  # key -> the dataset sample on that line
    bad: dict[str, BadCase]  # key -> how that line fails

    @property
    def keys(self) -> list[str]:
        return sorted([*self.good, *self.bad], key=_line)


def _write_lines(tmp_path: Path, dataset: Dataset, lines: list[Sample | BadCase],
                 name: str = "m.jsonl") -> _Lines:
    manifest = tmp_path / name
    _write_manifest(manifest, [line.text if isinstance(line, Sample) else
                               _bad_line(dataset, line) for line in lines])
    out = _Lines(manifest, {}, {})
    for number, line in enumerate(lines, 1):
        if isinstance(line, Sample):
            out.good[f"{manifest}:{number}"] = line
        else:
            out.bad[f"{manifest}:{number}"] = line
    return out


def _check_sample(dataset: Dataset, batch: dict[str, Any], slot: int, sample: Sample) -> None:
    """The batch's sample at `slot` is `sample`: its text, and Pillow's pixels for each of
    its images."""
    assert batch["samples"][slot] == sample.text
    images = batch["images"][slot]
    assert len(images) == len(sample.images)
    for ref, image in zip(sample.images, images):
        want = dataset.pixels[ref]
        assert image.shape == want.shape and np.array_equal(image, want), ref


def _splits_into_slots(keys: list[str], failing: list[str], limit: int) -> bool:
    """Whether `keys` reads as: failing[0], then its failed substitutes, failing[1], then
    its failed substitutes, ...; each slot failing at most `limit` times in all."""

    @functools.cache
    def rest(i: int, slot: int) -> bool:
        if slot == len(failing):
            return i == len(keys)
        if i == len(keys) or keys[i] != failing[slot]:
            return False
        return any(rest(i + 1 + extra, slot + 1)
                   for extra in range(min(limit - 1, len(keys) - i - 1) + 1))

    return rest(0, 0)


def _check_failure_records(records: list[SkipRecord], lines: _Lines, failing: list[str],
                           limit: int) -> None:
    """What one batch's next() logged: for each failing planned sample, in slot order, its
    failure and those of its failed substitutes; each record names a failing line with that
    line's error code and cause."""
    for key, code, message in records:
        assert key in lines.bad, f"{key} logged as failed, but it is a good sample"
        case = lines.bad[key]
        assert code == case.code, (key, code, message)
        assert message.startswith(key + ":"), message
        for fragment in case.fragments:
            assert fragment in message, (key, message)
    keys = [r[0] for r in records]
    assert _splits_into_slots(keys, failing, limit), (keys, failing)


def _check_skip_epoch(loader: stoker.Loader, run: _LoggedEpoch, lines: _Lines,
                      dataset: Dataset, epoch: int, limit: int, first_batch: int = 0) -> None:
    """A complete on_error="skip" epoch against the plan: every batch full; the planned
    sample wherever it is good; a good substitute (never a failing line) wherever it is
    not; text and pixels of every delivered sample; each batch's failures logged with it,
    none after the last batch."""
    assert run.error is None, run.error
    num_batches = loader.plan(epoch)["num_batches"]
    assert [b["batch_index"] for b in run.batches] == list(range(first_batch, num_batches))
    for batch, records in zip(run.batches, run.logs):
        planned = loader.plan_keys(epoch, batch["batch_index"])
        assert batch["epoch"] == epoch
        assert len(batch["sample_keys"]) == len(batch["samples"]) == len(batch["images"]) \
            == len(planned)
        failing = []
        for slot, (got, want) in enumerate(zip(batch["sample_keys"], planned)):
            assert got in lines.good, f"batch {batch['batch_index']}: {got} is a failing line"
            if want in lines.good:
                assert got == want
            else:
                assert want in lines.bad
                failing.append(want)
            _check_sample(dataset, batch, slot, lines.good[got])
        _check_failure_records(records, lines, failing, limit)
    assert run.tail == []


def _substitutes(loader: stoker.Loader, run: _LoggedEpoch, lines: _Lines,
                 epoch: int) -> list[str]:
    """The delivered samples at the positions whose planned sample fails, in order."""
    return [got for batch in run.batches
            for got, want in zip(batch["sample_keys"],
                                 loader.plan_keys(epoch, batch["batch_index"]))
            if want in lines.bad]


def test_skip_replaces_bad_samples(dataset: Dataset, tmp_path: Path) -> None:
    # Every bad case once, spread through the manifest, a few of them adjacent.
    positions = [0, 3, 4, 9, 15, 16, 22, 30, 31, 44]
    assert len(positions) == len(BAD_CASES)
    insert = dict(zip(positions, BAD_CASES))
    spec: list[Sample | BadCase] = []
    for i, sample in enumerate(dataset.samples):
        if i in insert:
            spec.append(insert[i])
        spec.append(sample)
    lines = _write_lines(tmp_path, dataset, spec)
    n = len(spec)
    options: dict[str, Any] = dict(image_root=dataset.root, batch_size=4, on_error="skip",
                                   output="numpy")

    loader = stoker.Loader(lines.manifest, num_threads=3, **options)
    assert loader.num_samples == n == len(dataset.samples) + len(BAD_CASES)
    assert len(loader) == -(-n // 4)
    assert [k for b in range(len(loader)) for k in loader.plan_keys(0, b)] == lines.keys
    run = _run_logged(loader)
    _check_skip_epoch(loader, run, lines, dataset, epoch=0, limit=16)
    assert len(run.keys) == n  # batches keep their size: as many samples as planned
    assert not set(run.keys) & set(lines.bad)
    assert [got for got, want in zip(run.keys, lines.keys) if want in lines.good] == \
        list(lines.good)
    logged = run.records
    stats = loader.stats()
    assert stats["samples"] == {"delivered": n, "skipped": len(logged),
                                "truncated": 0, "dropped_overlong": 0}
    assert len(logged) >= len(BAD_CASES)
    assert _recent_skips(loader) == logged[-32:]
    assert stats["consumer"]["batches"] == len(loader)

    # The same stream, substitutes and failure log with any thread count and prefetch depth,
    # and in another loader.
    for threads, prefetch in ((1, 0), (3, 6)):
        other = stoker.Loader(lines.manifest, num_threads=threads, prefetch=prefetch, **options)
        again = _run_logged(other)
        assert [b["sample_keys"] for b in again.batches] == [b["sample_keys"] for b in run.batches]
        assert again.logs == run.logs
        _check_skip_epoch(other, again, lines, dataset, epoch=0, limit=16)
        other.close()

    # A run resumed from a state dict makes the same replacements in the batches left.
    first = stoker.Loader(lines.manifest, num_threads=2, **options)
    it = iter(first)
    for _ in range(5):
        next(it)
    state = first.state_dict()
    first.close()
    resumed = stoker.Loader(lines.manifest, num_threads=2, **options)
    resumed.load_state_dict(state)
    rest = _run_logged(resumed)
    _check_skip_epoch(resumed, rest, lines, dataset, epoch=0, limit=16, first_batch=5)
    assert [b["sample_keys"] for b in rest.batches] == [b["sample_keys"] for b in run.batches[5:]]
    assert rest.logs == run.logs[5:]

    # The substitutes are keyed by the seed and the epoch; the planned samples are not
    # (no shuffle). A second epoch fails on the same planned samples again and counts on.
    second = _run_logged(loader)
    _check_skip_epoch(loader, second, lines, dataset, epoch=1, limit=16)
    assert [loader.plan_keys(1, b) for b in range(len(loader))] == \
        [loader.plan_keys(0, b) for b in range(len(loader))]
    substitutes = _substitutes(loader, run, lines, 0)
    assert len(substitutes) == len(BAD_CASES)
    assert _substitutes(loader, second, lines, 1) != substitutes
    assert loader.stats()["samples"]["skipped"] == len(logged) + len(second.records)
    reseeded = stoker.Loader(lines.manifest, num_threads=2, seed=1, **options)
    other_seed = _run_logged(reseeded)
    _check_skip_epoch(reseeded, other_seed, lines, dataset, epoch=0, limit=16)
    assert [reseeded.plan_keys(0, b) for b in range(len(loader))] == \
        [loader.plan_keys(0, b) for b in range(len(loader))]
    assert _substitutes(reseeded, other_seed, lines, 0) != substitutes


def test_skip_fills_batches_whose_every_sample_fails(dataset: Dataset, tmp_path: Path) -> None:
    # Batch 1 fails entirely: it is delivered all the same, full of substitutes (the only
    # good lines are 1 and 6), and the next batch follows.
    case = BAD_CASES[0]
    lines = _write_lines(tmp_path, dataset, [dataset.samples[0], case, case, case, case,
                                             dataset.samples[1]])
    # Two good lines in six: a generous limit keeps a run of failed substitutes in.
    loader = stoker.Loader(lines.manifest, image_root=dataset.root, batch_size=2,
                           on_error="skip", max_consecutive_errors=64, output="numpy")
    run = _run_logged(loader)
    _check_skip_epoch(loader, run, lines, dataset, epoch=0, limit=64)
    assert [b["batch_index"] for b in run.batches] == [0, 1, 2]
    assert [len(b["sample_keys"]) for b in run.batches] == [2, 2, 2]
    assert run.batches[0]["sample_keys"][0] == f"{lines.manifest}:1"
    assert run.batches[2]["sample_keys"][1] == f"{lines.manifest}:6"
    assert set(run.batches[1]["sample_keys"]) <= {f"{lines.manifest}:1", f"{lines.manifest}:6"}
    assert [r[0] for r in run.logs[1]][:1] == [f"{lines.manifest}:3"]
    stats = loader.stats()
    assert stats["consumer"]["batches"] == 3
    assert stats["samples"] == {"delivered": 6, "skipped": len(run.records),
                                "truncated": 0, "dropped_overlong": 0}


def test_skip_logs_failures_of_the_last_batches(dataset: Dataset, tmp_path: Path) -> None:
    # The last two batches are planned from failing lines only. Their failures are logged
    # with them, before the last batch is handed out; nothing is left for the end of the
    # epoch. Regression (when failed samples were dropped): records of failures after the
    # last delivered batch were counted in stats() but never logged.
    case = BAD_CASES[5]  # malformed JSON
    lines = _write_lines(tmp_path, dataset, [dataset.samples[0], dataset.samples[1],
                                             case, case, case])
    loader = stoker.Loader(lines.manifest, image_root=dataset.root, batch_size=2,
                           on_error="skip", max_consecutive_errors=64, output="numpy")
    run = _run_logged(loader)
    _check_skip_epoch(loader, run, lines, dataset, epoch=0, limit=64)
    assert [len(b["sample_keys"]) for b in run.batches] == [2, 2, 1]
    assert run.batches[0]["sample_keys"] == [f"{lines.manifest}:1", f"{lines.manifest}:2"]
    assert run.logs[0] == []
    assert [r[0] for r in run.logs[1]][:1] == [f"{lines.manifest}:3"]
    assert [r[0] for r in run.logs[2]][:1] == [f"{lines.manifest}:5"]
    assert loader.stats()["samples"]["skipped"] == len(run.records)
    assert _recent_skips(loader) == run.records[-32:]

    # A manifest in which every sample fails: no substitute can succeed, so the first slot
    # fails max_consecutive_errors + 1 times and the epoch ends in LimitExceededError, every
    # one of those failures logged before it.
    _write_manifest(lines.manifest, [_bad_line(dataset, case)] * 3)
    all_bad = _Lines(lines.manifest, {}, {f"{lines.manifest}:{n}": case for n in (1, 2, 3)})
    loader = stoker.Loader(lines.manifest, batch_size=2, on_error="skip",
                           max_consecutive_errors=3, output="numpy")
    run = _run_logged(loader)
    assert run.batches == []
    assert isinstance(run.error, LimitExceededError)
    assert len(run.tail) == 4
    _check_failure_records(run.tail, all_bad, [f"{lines.manifest}:1"], limit=4)
    assert run.error.sample_key == run.tail[-1][0]
    assert "4 consecutive samples failed (max_consecutive_errors=3)" in str(run.error)
    assert run.tail[-1][2] in str(run.error)  # the last failure's cause
    assert loader.stats()["samples"]["skipped"] == 4
    assert _recent_skips(loader) == run.tail


def _serve_fifo(fifo: Path, delay: float, stop: threading.Event) -> threading.Thread:
    """Until `stop`: `delay` after each read begins (or after the start), opens `fifo` for
    writing as soon as a reader waits on it, then closes it: the reader's open() returns and
    it reads an empty file. Every read of the FIFO is slow, however often it is read."""

    def writer() -> None:
        while not stop.is_set():
            if stop.wait(delay):
                return
            while not stop.is_set():
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:
                    if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                        raise
                    time.sleep(0.01)
                    continue
                os.close(fd)
                break

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


def test_skip_logs_failures_while_waiting_for_a_slow_batch(dataset: Dataset,
                                                           tmp_path: Path) -> None:
    # Batch 2's planned sample takes longer than next()'s internal wait slice (0.1 s, for
    # Ctrl-C) to fail, and batch 1's substitutes may be slow too: next() goes round its wait
    # loop while the failure records of the batch it waits for are pending. Regression: those
    # records were dropped when next() went round that loop, so they were never logged.
    # The slow sample's image is a FIFO: each read blocks until the writer opens it (0.4 s
    # later), then finds it empty, a failure of its own.
    fifo = tmp_path / "slow.png"
    os.mkfifo(fifo)
    slow = BadCase("fifo", UnsupportedImageError, ValueError, "UnsupportedImage", ("empty",),
                   line=_message_line([str(fifo)], "slow").encode())
    lines = _write_lines(tmp_path, dataset, [dataset.samples[3], BAD_CASES[5], slow,
                                             dataset.samples[4]])
    loader = stoker.Loader(lines.manifest, image_root=dataset.root, batch_size=1, prefetch=0,
                           num_threads=1, on_error="skip", output="numpy")
    stop = threading.Event()
    writer = _serve_fifo(fifo, delay=0.4, stop=stop)
    try:
        run = _run_logged(loader)
    finally:
        stop.set()
        writer.join(timeout=30)
    _check_skip_epoch(loader, run, lines, dataset, epoch=0, limit=16)
    key = lines.keys
    assert run.batches[0]["sample_keys"] == [key[0]]
    assert run.batches[3]["sample_keys"] == [key[3]]
    assert set(run.keys[1:3]) <= {key[0], key[3]}  # the only good lines
    assert loader.stats()["consumer"]["wait_s"] > 0.3  # next() did wait for the FIFO
    assert [r[0] for r in run.logs[1]][:1] == [key[1]]
    assert [r[0] for r in run.logs[2]][:1] == [key[2]]
    assert run.logs[0] == run.logs[3] == []
    assert (run.logs[1][0][1], run.logs[2][0][1]) == ("ManifestError", "UnsupportedImage")
    assert _recent_skips(loader) == run.records
    assert loader.stats()["samples"]["skipped"] == len(run.records)


def _probe_failures(tmp_path: Path, dataset: Dataset, num_lines: int, seed: int, limit: int,
                    batch: int) -> list[int]:
    """Line numbers of the planned sample and the first `limit` substitutes of batch
    `batch` (batch_size 1) in epoch 0, for a manifest of `num_lines` lines and `seed`: the
    substitutes depend on the number of samples, not on their content, so a manifest whose
    every line fails shows them all, in order, in its failure log."""
    case = BAD_CASES[1]
    probe = _write_lines(tmp_path, dataset, [case] * num_lines,
                         name=f"probe-{seed}-{limit}-{batch}.jsonl")
    loader = stoker.Loader(probe.manifest, image_root=dataset.root, batch_size=1, seed=seed,
                           on_error="skip", max_consecutive_errors=limit, num_threads=1,
                           output="numpy")
    if batch:
        state = loader.state_dict()
        state["next_batch"] = batch
        loader.load_state_dict(state)
    run = _run_logged(loader)
    loader.close()
    assert run.batches == [] and isinstance(run.error, LimitExceededError)
    assert len(run.tail) == limit + 1
    _check_failure_records(run.tail, probe, [f"{probe.manifest}:{batch + 1}"], limit=limit + 1)
    assert run.error.sample_key == run.tail[-1][0]
    return [_line(key) for key, _, _ in run.tail]


@pytest.mark.parametrize("limit", [0, 2, 5])
def test_max_consecutive_errors(dataset: Dataset, tmp_path: Path, limit: int) -> None:
    # Batch size 1, no shuffle: batch b plans line b + 1. Slot `tolerated` (batch 1) fails
    # exactly `limit` times: its planned line and its first limit - 1 substitutes fail, the
    # next substitute is good. Slot `crossing` (batch 4) fails limit + 1 times: its planned
    # line and its first `limit` substitutes fail. Every other line is good. The substitutes
    # are found by probing (see _probe_failures); a seed is picked for which the two sets of
    # requirements do not contradict each other.
    num_lines, tolerated, crossing = 40, 1, 4
    case = BAD_CASES[1]  # truncated JPEG
    if limit == 0:
        # The first failure is one too many: batch 1 raises at once, with no substitute.
        seed, crossing = 0, tolerated
        chain_t: list[int] = []
        chain_c = [tolerated + 1]
        failing = set(chain_c)
    else:
        for seed in range(100):
            chain_t = _probe_failures(tmp_path, dataset, num_lines, seed, limit, tolerated)
            chain_c = _probe_failures(tmp_path, dataset, num_lines, seed, limit, crossing)
            failing = set(chain_t[:limit]) | set(chain_c)
            # Good: batches 0, 2 and 3, and the tolerated slot's substitute number `limit`.
            if not failing & {1, 3, 4, chain_t[limit]}:
                break
        else:
            pytest.fail("no seed gives a consistent layout")
    spec: list[Sample | BadCase] = [case if n in failing else dataset.samples[n % 45]
                                    for n in range(1, num_lines + 1)]
    lines = _write_lines(tmp_path, dataset, spec)
    key = {n: f"{lines.manifest}:{n}" for n in range(1, num_lines + 1)}
    loader = stoker.Loader(lines.manifest, image_root=dataset.root, batch_size=1, seed=seed,
                           on_error="skip", max_consecutive_errors=limit, num_threads=2,
                           output="numpy")
    run = _run_logged(loader)

    if limit == 0:
        expected = [[key[1]]]
    else:
        expected = [[key[1]], [key[chain_t[limit]]], [key[3]], [key[4]]]
    assert [b["sample_keys"] for b in run.batches] == expected
    for batch in run.batches:
        _check_sample(dataset, batch, 0, lines.good[batch["sample_keys"][0]])
    # The tolerated slot logged exactly its `limit` failures, with its batch.
    assert [[r[0] for r in logs] for logs in run.logs] == \
        [[key[n] for n in chain_t[:limit]] if b == tolerated else [] for b in range(len(expected))]
    # The crossing slot's limit + 1 failures, logged before the error.
    # Regression (when failed samples were dropped): the run's records were dropped with the
    # error.
    assert [r[0] for r in run.tail] == [key[n] for n in chain_c]
    for record in run.records:
        assert record[1] == case.code and "truncated" in record[2]
    error = run.error
    assert isinstance(error, LimitExceededError)
    message = str(error)
    assert f"{limit + 1} consecutive samples failed" in message
    assert f"max_consecutive_errors={limit}" in message
    assert "truncated" in message  # the last failure's cause
    assert run.tail[-1][2] in message
    assert error.sample_key == key[chain_c[-1]]
    assert loader.stats()["samples"]["skipped"] == 2 * limit + 1
    assert _recent_skips(loader) == run.records


def test_skip_with_default_limit_survives_scattered_errors(dataset: Dataset,
                                                           tmp_path: Path) -> None:
    # Half the manifest fails, every other line: far more failures in all than the default
    # limit of 16, but never 17 in one slot (a substitute fails with probability 1/2).
    spec: list[Sample | BadCase] = []
    for sample in dataset.samples:
        spec += [BAD_CASES[0], sample]
    lines = _write_lines(tmp_path, dataset, spec)
    loader = stoker.Loader(lines.manifest, image_root=dataset.root, batch_size=5,
                           on_error="skip", output="numpy", num_threads=4)
    run = _run_logged(loader)
    _check_skip_epoch(loader, run, lines, dataset, epoch=0, limit=16)
    assert len(run.keys) == len(spec)
    stats = loader.stats()
    assert stats["samples"] == {"delivered": len(spec), "skipped": len(run.records),
                                "truncated": 0, "dropped_overlong": 0}
    assert stats["samples"]["skipped"] >= len(dataset.samples) > 16
    assert _recent_skips(loader) == run.records[-32:]
    assert len(stats["recent_skips"]) == 32


# ---------------------------------------------------------------------------------------------
# Construction errors
# ---------------------------------------------------------------------------------------------


def test_missing_manifest(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "missing.jsonl"
    with pytest.raises(ImageNotFoundError) as info:
        stoker.Loader(path)
    assert isinstance(info.value, FileNotFoundError)
    assert str(path) in str(info.value)
    assert "No such file" in str(info.value)


def test_manifest_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        stoker.Loader(tmp_path)
    assert isinstance(info.value, OSError)
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n\t\r\n"], ids=["empty", "blank"])
def test_empty_manifest(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(ManifestError, match="no sample") as info:
        stoker.Loader(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "option,value,fragment",
    [
        ("batch_size", 0, "batch_size must be >= 1, got 0"),
        ("batch_size", -3, "batch_size must be >= 1, got -3"),
        ("num_threads", 0, "num_threads must be >= 1, got 0"),
        ("prefetch", -1, "prefetch must be >= 0, got -1"),
        ("on_error", "ignore", "on_error must be 'raise' or 'skip', got 'ignore'"),
        ("output", "jax", "output must be 'auto', 'torch' or 'numpy', got 'jax'"),
        ("max_consecutive_errors", -1, "max_consecutive_errors must be >= 0"),
        ("buffer_pool_bytes", -1, "buffer_pool_bytes must be >= 0"),
    ],
)
def test_bad_options(dataset: Dataset, option: str, value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        stoker.Loader(dataset.manifest, **{option: value})
    assert fragment in str(info.value)
    assert option in str(info.value)
    if option != "output":  # checked in Python before the engine sees it
        assert isinstance(info.value, InvalidArgumentError)


def test_bad_options_checked_before_the_manifest(tmp_path: Path) -> None:
    # An option error is reported even when the manifest is also missing.
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        stoker.Loader(tmp_path / "missing.jsonl", batch_size=0)


def test_manifest_errors_carry_no_sample_key(tmp_path: Path) -> None:
    with pytest.raises(StokerError) as info:
        stoker.Loader(tmp_path / "missing.jsonl")
    assert info.value.sample_key is None


# ---------------------------------------------------------------------------------------------
# stats()
# ---------------------------------------------------------------------------------------------


def test_stats_after_one_epoch(dataset: Dataset) -> None:
    loader = stoker.Loader(dataset.manifest, batch_size=4, num_threads=2, output="numpy")
    before = loader.stats()
    assert before["consumer"]["batches"] == 0
    assert all(stage["items"] == 0 for stage in before["stages"].values())

    batches = _run_epoch(loader)
    stats = loader.stats()
    assert set(stats) >= {"stages", "consumer", "samples", "recent_skips", "buffer_pool"}
    stages = stats["stages"]
    assert set(stages) >= {"parse", "read", "decode"}
    for name in ("parse", "read", "decode"):
        assert stages[name]["busy_s"] > 0, name

    refs = [r for s in dataset.samples for r in s.images]
    delivered = [img for b in batches for imgs in b["images"] for img in imgs]
    assert stages["parse"]["items"] == len(dataset.samples)
    assert stages["parse"]["bytes"] == sum(len(s.text.encode()) for s in dataset.samples)
    assert stages["read"]["items"] == len(refs)
    assert stages["read"]["bytes"] == sum((dataset.root / r).stat().st_size for r in refs)
    assert stages["decode"]["items"] == len(delivered) == len(refs)
    assert stages["decode"]["bytes"] == sum(img.shape[0] * img.shape[1] * 3 for img in delivered)
    assert stages["decode"]["bytes"] == sum(dataset.pixels[r].size for r in refs)

    consumer = stats["consumer"]
    assert consumer["batches"] == len(batches) == len(loader)
    assert 0 <= consumer["wait_s"] <= consumer["wall_s"]
    assert 0 <= consumer["wait_ratio"] <= 1
    assert stats["samples"] == {"delivered": len(dataset.samples), "skipped": 0,
                                "truncated": 0, "dropped_overlong": 0}
    assert stats["recent_skips"] == []
    assert stats["buffer_pool"]["acquired"] == len(refs)

    # Counters cover the loader's whole life. Dropping the first epoch's arrays returns their
    # memory to the pool, for the second epoch to reuse.
    n_batches = len(batches)
    del batches, delivered
    gc.collect()
    _run_epoch(loader)
    again = loader.stats()
    assert again["stages"]["decode"]["items"] == 2 * len(refs)
    assert again["consumer"]["batches"] == 2 * n_batches
    assert again["samples"]["delivered"] == 2 * len(dataset.samples)
    assert again["buffer_pool"]["reused"] > 0  # the second epoch reuses pixel memory


def test_wait_ratio_of_a_slow_consumer(dataset: Dataset) -> None:
    # A consumer slower than the engine (50 ms per batch, prefetch 4) finds its batches
    # ready: it waits little. Behavioural, with a generous bound.
    loader = stoker.Loader(dataset.manifest, batch_size=4, num_threads=2, prefetch=4,
                           output="numpy")
    for _ in loader:
        time.sleep(0.05)
    consumer = loader.stats()["consumer"]
    assert consumer["wall_s"] >= 0.05 * (len(loader) - 1)
    assert 0 <= consumer["wait_s"] <= consumer["wall_s"]
    assert consumer["wait_ratio"] < 0.5, consumer


def test_errors_module_is_exported() -> None:
    assert stoker.errors is errors
    assert issubclass(errors.ImageNotFoundError, FileNotFoundError)
    assert issubclass(errors.ManifestError, ValueError)
    assert issubclass(errors.InvalidArgumentError, ValueError)
    assert issubclass(errors.CancelledError, StokerError)
