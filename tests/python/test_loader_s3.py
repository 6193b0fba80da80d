"""The Loader reading its images through stoker.io from a real S3-protocol server
(moto on loopback): batches identical to those read from local disk, for decoded-image
batches and for model inputs; io counters in stats(); URIs without a store refused."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import stoker
from fault_proxy import FaultProxy
from s3_server import BUCKET, start_s3, store_options
from test_model_inputs import _images_of, _lines, _make_corpus

AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
           "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
           "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """(server, local corpus manifest, a copy of the manifest whose images are s3://
    URIs, the prefix under which the images were uploaded)."""
    s3 = start_s3(num_objects=0)
    root = tmp_path_factory.mktemp("s3_corpus")
    manifest = _make_corpus(root, n=18, seed=21)
    for path in sorted((root / "images").iterdir()):
        s3.put(f"data/images/{path.name}", path.read_bytes())
    # The same samples, naming their images by absolute URI.
    uri_lines = []
    for sample in _lines(manifest):
        text = json.dumps(sample)
        for ref in _images_of(sample):
            text = text.replace(json.dumps(ref), json.dumps(f"s3://{BUCKET}/data/{ref}"))
        uri_lines.append(text)
    uri_manifest = root / "uris.jsonl"
    uri_manifest.write_text("\n".join(uri_lines) + "\n")
    yield s3, manifest, uri_manifest
    s3.server.stop()


def _arrays(batch: dict) -> dict:
    out = {}
    for key, value in batch.items():
        if key in ("sample_keys", "samples"):
            continue
        if key == "images":
            out[key] = [[np.array(im) for im in sample] for sample in value]
        elif isinstance(value, np.ndarray):
            out[key] = value.copy()
        else:
            out[key] = value
    return out


def _epoch(loader: stoker.Loader) -> list[dict]:
    return [_arrays(b) for b in loader]


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            if key == "images":
                for p, q in zip(x[key], y[key]):
                    assert len(p) == len(q)
                    assert all(np.array_equal(i, j) for i, j in zip(p, q))
            elif isinstance(x[key], np.ndarray):
                assert np.array_equal(x[key], y[key]), key
            else:
                assert x[key] == y[key], key


@pytest.mark.parametrize("with_model_inputs", [False, True])
def test_batches_from_s3_equal_local(remote, tokenizer_files, with_model_inputs):
    s3, manifest, uri_manifest = remote
    inputs = None
    if with_model_inputs:
        inputs = stoker.ModelInputs("qwen2-vl", tokenizer=stoker.text.Tokenizer.from_file(
            tokenizer_files["qwen3"]))
    common = dict(batch_size=4, num_threads=2, shuffle=True, seed=5, output="numpy",
                  model_inputs=inputs)
    local = _epoch(stoker.Loader(manifest, **common))

    # Relative references resolved against an s3:// image root ...
    store = stoker.io.ObjectStore(**store_options(s3))
    via_root = stoker.Loader(manifest, image_root=f"s3://{BUCKET}/data/", storage=store,
                             **common)
    _same(_epoch(via_root), local)
    io = via_root.stats()["io"]
    n_images = sum(len(_images_of(s)) for s in _lines(manifest))
    assert io["reads_ok"] == n_images and io["reads_failed"] == 0
    assert io["bytes"] == sum(p.stat().st_size for p in (manifest.parent / "images").iterdir())
    # ... and absolute URIs in the manifest.
    _same(_epoch(stoker.Loader(uri_manifest, storage=store, **common)), local)


def test_reads_run_ahead_of_a_single_worker(remote):
    """One CPU worker, yet the images of the admitted batches are read concurrently:
    the scheduler starts their reads ahead of the worker. Every request is delayed by
    a proxy; both sides see reads overlap."""
    s3, manifest, _ = remote
    n_images = sum(len(_images_of(s)) for s in _lines(manifest))
    with FaultProxy(s3.port, fault_rate=1.0, faults=("latency",), latency_s=0.1) as proxy:
        store = stoker.io.ObjectStore(**store_options(
            s3, endpoint_url=f"http://127.0.0.1:{proxy.port}"))
        loader = stoker.Loader(manifest, image_root=f"s3://{BUCKET}/data/", storage=store,
                               batch_size=4, num_threads=1, prefetch=2, output="numpy")
        assert sum(len(b["sample_keys"]) for b in loader) == 18
        assert proxy.max_active > 1
    io = loader.stats()["io"]
    assert io["reads_ok"] == n_images and io["reads_failed"] == 0  # each image read once
    assert io["peak_in_flight"] > 1


def test_missing_object_names_sample_and_uri(remote, tmp_path):
    s3, manifest, _ = remote
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [
        {"role": "user", "content": [{"type": "image", "image": "images/nope.jpg"},
                                     {"type": "text", "text": "?"}]},
        {"role": "assistant", "content": "!"}]}) + "\n")
    store = stoker.io.ObjectStore(**store_options(s3))
    loader = stoker.Loader(bad, image_root=f"s3://{BUCKET}/data/", storage=store)
    with pytest.raises(stoker.errors.ImageNotFoundError) as info:
        next(iter(loader))
    message = str(info.value)
    assert "bad.jsonl:1" in message and "images/nope.jpg" in message


def test_uris_without_a_store_are_refused_with_the_remedy(remote):
    _, _, uri_manifest = remote
    with pytest.raises(stoker.errors.InvalidArgumentError, match="storage=stoker.io.ObjectStore"):
        next(iter(stoker.Loader(uri_manifest)))
    with pytest.raises(TypeError, match="storage"):
        stoker.Loader(uri_manifest, storage="s3")


def test_store_policy_confines_local_paths(remote, tmp_path):
    s3, manifest, _ = remote
    # A store whose image_root is elsewhere refuses the corpus's local files.
    store = stoker.io.ObjectStore(**store_options(s3, image_root=str(tmp_path)))
    with pytest.raises(stoker.errors.InvalidArgumentError, match="rule"):
        for _ in stoker.Loader(manifest, storage=store):
            pass
    # Rooted at the corpus, the same local reads go through.
    store = stoker.io.ObjectStore(**store_options(s3, image_root=str(manifest.parent)))
    assert sum(len(b["sample_keys"]) for b in stoker.Loader(manifest, storage=store)) == 18


def test_manifest_in_s3_staged_by_ranges_equals_local(remote, tmp_path, monkeypatch):
    s3, manifest, _ = remote
    s3.put("data/train.jsonl", manifest.read_bytes())
    uri = f"s3://{BUCKET}/data/train.jsonl"
    monkeypatch.setattr(stoker.io, "STAGE_CHUNK_BYTES", 1000)  # many ranged reads
    cache = tmp_path / "cache" / "index"
    common = dict(batch_size=4, num_threads=2, shuffle=True, seed=3, output="numpy",
                  index_cache_dir=cache)
    local = stoker.Loader(manifest, **common)
    store = stoker.io.ObjectStore(**store_options(s3))
    remote_loader = stoker.Loader(uri, storage=store, **common)
    size = manifest.stat().st_size
    assert store.stats()["reads_ok"] == -(-size // 1000)  # one read per range
    staged = list((tmp_path / "cache" / "manifests").iterdir())
    assert [p.read_bytes() for p in staged] == [manifest.read_bytes()]
    # Images default to the manifest's prefix; keys name the URI.
    batches = list(remote_loader)
    assert all(k.startswith(uri + ":") for b in batches for k in b["sample_keys"])
    _same([_arrays(b) for b in batches], _epoch(local))
    # A state saved by the local run resumes the remote one: same order digest.
    local.load_state_dict(remote_loader.state_dict())

    # Unchanged object: the staged copy is reused (one ranged read to learn the ETag).
    again = stoker.io.ObjectStore(**store_options(s3))
    stoker.Loader(uri, storage=again, **common)
    assert again.stats()["reads_ok"] == 1
    # Changed object: fetched anew.
    s3.put("data/train.jsonl", manifest.read_bytes() + b"\n")
    changed = stoker.io.ObjectStore(**store_options(s3))
    stoker.Loader(uri, storage=changed, **common)
    assert changed.stats()["reads_ok"] > 1


def test_remote_manifest_errors(remote, tmp_path):
    s3, _, _ = remote
    with pytest.raises(ValueError, match="storage=stoker.io.ObjectStore"):
        stoker.Loader(f"s3://{BUCKET}/data/train.jsonl")
    store = stoker.io.ObjectStore(**store_options(s3))
    with pytest.raises(stoker.errors.ImageNotFoundError, match="missing.jsonl"):
        stoker.Loader(f"s3://{BUCKET}/data/missing.jsonl", storage=store,
                      index_cache_dir=tmp_path / "index")
    with pytest.raises(ValueError, match="globs"):
        stoker.Loader(f"s3://{BUCKET}/data/*.jsonl", storage=store)
