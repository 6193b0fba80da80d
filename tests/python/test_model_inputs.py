"""Loader batches of model inputs (stoker.ModelInputs): every tensor equals what the
separately verified pieces give for each sample (stoker.vision.preprocess, bit-exact
with Hugging Face's image processors, and stoker.encode_sample's text path, checked
against transformers' goldens), padded as a right-padding collator pads; plus
truncation, dropping, failures in either phase, and resume."""

from __future__ import annotations

import io
import json
import pathlib
import random

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker.text import IGNORE_INDEX, Tokenizer, encode_sample

VISION_START = 151652
IMAGE_PAD = 151655


def _image(rng: random.Random, path: pathlib.Path, width: int, height: int, fmt: str,
           mode: str = "RGB") -> None:
    data = np.random.default_rng(rng.randrange(1 << 30)).integers(
        0, 256, (height, width, len(mode)), dtype=np.uint8)
    image = Image.fromarray(data, mode)
    if fmt == "JPEG":
        image.save(path, fmt, quality=rng.choice([75, 90]))
    else:
        image.save(path, fmt)


def _make_corpus(root: pathlib.Path, n: int = 24, seed: int = 7) -> pathlib.Path:
    """Messages and LLaVA samples with 0-3 images each, of odd sizes (up- and
    down-scaled), JPEG and PNG (RGB and RGBA)."""
    rng = random.Random(seed)
    images = root / "images"
    images.mkdir()
    lines = []
    for i in range(n):
        refs = []
        for k in range(rng.choice([0, 1, 1, 2, 3])):
            fmt, mode = rng.choice([("JPEG", "RGB"), ("PNG", "RGB"), ("PNG", "RGBA")])
            name = f"{i}_{k}.{'jpg' if fmt == 'JPEG' else 'png'}"
            _image(rng, images / name, rng.randrange(9, 160), rng.randrange(9, 120), fmt, mode)
            refs.append(f"images/{name}")
        answer = " ".join(rng.choice(["red", "blue", "a cat", "数字", "42", "🙂"])
                          for _ in range(rng.randrange(1, 30)))
        if i % 3 == 2 and len(refs) <= 1:
            value = ("<image>\n" if refs else "") + f"What is in picture {i}?"
            sample = {"conversations": [{"from": "human", "value": value},
                                        {"from": "gpt", "value": answer}]}
            if refs:
                sample["image"] = refs[0]
        else:
            content = [{"type": "image", "image": r} for r in refs]
            content.append({"type": "text", "text": f"Describe sample {i}."})
            sample = {"messages": [{"role": "user", "content": content},
                                   {"role": "assistant", "content": answer}]}
        lines.append(json.dumps(sample, ensure_ascii=False))
    manifest = root / "train.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> pathlib.Path:
    return _make_corpus(tmp_path_factory.mktemp("model_inputs"))


@pytest.fixture(scope="module")
def qwen(tokenizer_files) -> Tokenizer:
    return Tokenizer.from_file(tokenizer_files["qwen3"])


def _images_of(sample: dict) -> list[str]:
    if "messages" in sample:
        return [item["image"] for m in sample["messages"] if isinstance(m["content"], list)
                for item in m["content"] if item.get("type") == "image"]
    image = sample.get("image")
    return [] if image is None else [image]


def _reference(sample: dict, root: pathlib.Path, qwen: Tokenizer, model: str,
               backend: str, max_length: int | None = None) -> dict:
    """One sample's inputs from the independently tested pieces."""
    refs = _images_of(sample)
    if refs:
        vision = stoker.vision.preprocess([str(root / r) for r in refs], model, backend=backend)
    else:
        vision = {"pixel_values": np.zeros((0, 0), np.float32),
                  "image_grid_thw": np.zeros((0, 3), np.int64)}
    grids = vision["image_grid_thw"].tolist()
    text = encode_sample(sample, model=model, tokenizer=qwen, image_grids=grids,
                         max_length=max_length)
    kept = len(text["images"])
    rows = int(sum(t * h * w for t, h, w in grids[:kept]))
    return {**text, "pixel_values": vision["pixel_values"][:rows],
            "image_grid_thw": vision["image_grid_thw"][:kept]}


def _check_batch(batch: dict, references: list[dict], pad_id: int) -> None:
    n = len(references)
    length = max(len(r["input_ids"]) for r in references)
    assert batch["input_ids"].shape == (n, length)
    assert batch["position_ids"].shape == (3, n, length)
    for b, ref in enumerate(references):
        k = len(ref["input_ids"])
        np.testing.assert_array_equal(batch["input_ids"][b, :k], ref["input_ids"])
        assert (batch["input_ids"][b, k:] == pad_id).all()
        np.testing.assert_array_equal(batch["labels"][b, :k], ref["labels"])
        assert (batch["labels"][b, k:] == IGNORE_INDEX).all()
        assert (batch["attention_mask"][b, :k] == 1).all()
        assert (batch["attention_mask"][b, k:] == 0).all()
        np.testing.assert_array_equal(batch["position_ids"][:, b, :k], ref["position_ids"])
        assert (batch["position_ids"][:, b, k:] == 1).all()
    grids = [g for r in references for g in r["image_grid_thw"].tolist()]
    assert batch["image_grid_thw"].tolist() == grids
    pixels = [r["pixel_values"] for r in references if len(r["pixel_values"])]
    expected = np.concatenate(pixels) if pixels else np.zeros((0,), np.float32)
    assert batch["pixel_values"].dtype == np.float32
    assert batch["pixel_values"].shape[0] == expected.shape[0]
    # Bit-exact: compare the raw float bits.
    assert np.array_equal(batch["pixel_values"].reshape(-1).view(np.uint32),
                          expected.reshape(-1).view(np.uint32))
    # One image run per grid, and its pads match the grid.
    ids = batch["input_ids"]
    assert int((ids == VISION_START).sum()) == len(grids)
    assert int((ids == IMAGE_PAD).sum()) == sum(t * h * w // 4 for t, h, w in grids)


def _checked_epoch(loader: stoker.Loader, samples: dict[str, dict], root: pathlib.Path,
                   qwen: Tokenizer, model: str = "qwen2-vl") -> list[str]:
    """Runs an epoch checking every batch against the reference (default backend);
    returns the delivered sample keys in order."""
    delivered = []
    for batch in loader:
        refs = [_reference(samples[k], root, qwen, model, "torchvision")
                for k in batch["sample_keys"]]
        _check_batch(batch, refs, qwen.pad_token_id)
        delivered += batch["sample_keys"]
    return delivered


def _lines(manifest: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]


def _by_key(manifest: pathlib.Path) -> dict[str, dict]:
    return {f"{manifest}:{i}": s for i, s in enumerate(_lines(manifest), start=1)}


@pytest.mark.parametrize("model,backend", [("qwen2-vl", "torchvision"),
                                           ("qwen2.5-vl", "pillow"),
                                           ("qwen3-vl", "torchvision")])
def test_batches_equal_the_verified_pieces(corpus, qwen, model, backend):
    inputs = stoker.ModelInputs(model, tokenizer=qwen, backend=backend)
    samples = _by_key(corpus)
    loader = stoker.Loader(corpus, batch_size=5, num_threads=2, output="numpy",
                           model_inputs=inputs, shuffle=True, seed=3)
    seen = 0
    for batch in loader:
        refs = [_reference(samples[key], corpus.parent, qwen, model, backend)
                for key in batch["sample_keys"]]
        _check_batch(batch, refs, qwen.pad_token_id)
        seen += len(refs)
    assert seen == len(samples)
    stats = loader.stats()
    assert stats["stages"]["vision"]["items"] == sum(
        len(_images_of(s)) for s in samples.values())
    assert stats["stages"]["text"]["items"] == len(samples)
    assert stats["samples"]["truncated"] == 0


def test_torch_output_and_encode_match(corpus, qwen):
    torch = pytest.importorskip("torch")
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen)
    samples = _by_key(corpus)
    batch = next(iter(stoker.Loader(corpus, batch_size=4, model_inputs=inputs,
                                    output="torch")))
    assert isinstance(batch["pixel_values"], torch.Tensor)
    assert batch["input_ids"].dtype == torch.int64
    for b, key in enumerate(batch["sample_keys"]):
        one = inputs.encode(samples[key], image_root=corpus.parent)
        k = len(one["input_ids"])
        assert batch["input_ids"][b, :k].tolist() == one["input_ids"].tolist()
    # encode_sample without grids computes the pixels through the same code.
    key = next(k for k, s in samples.items() if len(_images_of(s)) >= 2)
    full = encode_sample(samples[key], tokenizer=qwen, image_root=corpus.parent)
    ref = _reference(samples[key], corpus.parent, qwen, "qwen2-vl", "torchvision")
    assert full["input_ids"].tolist() == ref["input_ids"].tolist()
    assert np.array_equal(full["pixel_values"], ref["pixel_values"])
    assert full["image_grid_thw"].tolist() == ref["image_grid_thw"].tolist()


def test_truncation_never_splits_an_image(corpus, qwen, tmp_path):
    samples = _by_key(corpus)
    max_length = 40
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen, max_length=max_length)
    loader = stoker.Loader(corpus, batch_size=4, num_threads=2, output="numpy",
                           model_inputs=inputs)
    truncated = 0
    for batch in loader:
        refs = [_reference(samples[k], corpus.parent, qwen, "qwen2-vl", "torchvision",
                           max_length) for k in batch["sample_keys"]]
        assert batch["input_ids"].shape[1] <= max_length
        _check_batch(batch, refs, qwen.pad_token_id)
        truncated += sum(bool(r["truncated"]) for r in refs)
    assert truncated > 0
    assert loader.stats()["samples"]["truncated"] == truncated
    # A sample whose first image starts before the limit but ends after it keeps the
    # text before the image and drops the image.
    _image(random.Random(1), tmp_path / "big.png", 300, 300, "PNG")  # 121 tokens
    sample = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Look:"}, {"type": "image", "image": "big.png"}]},
        {"role": "assistant", "content": "Fine."}]}
    out = inputs.encode(sample, image_root=tmp_path)
    assert out["truncated"] and out["images"] == []
    assert VISION_START not in out["input_ids"].tolist()
    assert out["pixel_values"].shape[0] == 0


def test_overlong_drop_replaces_samples(corpus, qwen):
    samples = _by_key(corpus)
    max_length = 60
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen, max_length=max_length,
                                overlong="drop")
    loader = stoker.Loader(corpus, batch_size=4, output="numpy", model_inputs=inputs)
    delivered, keys = 0, set()
    for batch in loader:
        assert batch["input_ids"].shape[0] == 4 or batch is not None
        assert batch["input_ids"].shape[1] <= max_length
        refs = [_reference(samples[k], corpus.parent, qwen, "qwen2-vl", "torchvision")
                for k in batch["sample_keys"]]
        _check_batch(batch, refs, qwen.pad_token_id)
        delivered += len(refs)
        keys.update(batch["sample_keys"])
    too_long = {k for k, s in samples.items()
                if len(_reference(s, corpus.parent, qwen, "qwen2-vl", "torchvision")
                       ["input_ids"]) > max_length}
    assert too_long and not (keys & too_long)
    assert delivered == len(samples)
    assert loader.stats()["samples"]["dropped_overlong"] >= len(too_long)

    # Everything too long: a clear error instead of an endless search.
    hopeless = stoker.ModelInputs("qwen2-vl", tokenizer=qwen, max_length=3, overlong="drop")
    with pytest.raises(stoker.errors.LimitExceededError, match="longer than max_length=3"):
        next(iter(stoker.Loader(corpus, batch_size=2, model_inputs=hopeless,
                                max_consecutive_errors=4)))


def _corrupt_corpus(root: pathlib.Path) -> tuple[pathlib.Path, str]:
    """A corpus where one JPEG keeps a valid header but loses half its body: the
    failure shows only when decoding (phase 2), after the batch was laid out."""
    manifest = _make_corpus(root, n=12, seed=11)
    lines = _lines(manifest)
    index, ref = next((i, _images_of(s)[0]) for i, s in enumerate(lines)
                      if _images_of(s) and _images_of(s)[0].endswith(".jpg"))
    path = root / ref
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return manifest, f"{manifest}:{index + 1}"


def test_decode_failure_after_planning(tmp_path, qwen):
    manifest, bad_key = _corrupt_corpus(tmp_path)
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen)
    # The header is fine: the sample plans, then fails to decode.
    header_only = stoker.vision.visual_token_count(
        str(tmp_path / _images_of(_by_key(manifest)[bad_key])[0]))
    assert header_only > 0
    with pytest.raises(stoker.errors.CorruptImageError) as info:
        for _ in stoker.Loader(manifest, batch_size=3, model_inputs=inputs, num_threads=2):
            pass
    assert bad_key in str(info.value) and ".jpg" in str(info.value)

    samples = _by_key(manifest)
    loader = stoker.Loader(manifest, batch_size=3, model_inputs=inputs, num_threads=2,
                           on_error="skip", output="numpy")
    delivered = _checked_epoch(loader, samples, tmp_path, qwen)
    assert bad_key not in delivered and len(delivered) == len(samples)
    assert [s["sample_key"] for s in loader.stats()["recent_skips"]] == [bad_key]


def test_phase_one_failures_name_sample_and_image(tmp_path, qwen):
    manifest = _make_corpus(tmp_path, n=6, seed=5)
    lines = _lines(manifest)
    lines[4] = {"messages": [{"role": "user", "content": [
        {"type": "image", "image": "images/missing.png"}, {"type": "text", "text": "?"}]},
        {"role": "assistant", "content": "!"}]}
    manifest.write_text("\n".join(json.dumps(s) for s in lines) + "\n")
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen)
    with pytest.raises(stoker.errors.ImageNotFoundError) as info:
        for _ in stoker.Loader(manifest, batch_size=2, model_inputs=inputs):
            pass
    assert "train.jsonl:5" in str(info.value) and "images/missing.png" in str(info.value)

    # Under skip the sample is replaced in phase 1 and every batch still checks out.
    samples = _by_key(manifest)
    loader = stoker.Loader(manifest, batch_size=2, model_inputs=inputs, on_error="skip",
                           output="numpy")
    delivered = _checked_epoch(loader, samples, tmp_path, qwen)
    bad = f"{manifest}:5"
    assert bad not in delivered and len(delivered) == len(samples)
    assert loader.stats()["samples"]["skipped"] == 1


def test_resume_gives_identical_batches(corpus, qwen):
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen, max_length=200)
    make = lambda: stoker.Loader(corpus, batch_size=3, num_threads=2, shuffle=True, seed=9,
                                 model_inputs=inputs, output="numpy")
    full = [{k: v.copy() if isinstance(v, np.ndarray) else v for k, v in b.items()}
            for b in make()]
    loader = make()
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(json.loads(json.dumps(state)))
    rest = list(resumed)
    assert len(rest) == len(full) - 3
    for a, b in zip(rest, full[3:]):
        assert a["sample_keys"] == b["sample_keys"]
        for name in ("input_ids", "labels", "attention_mask", "position_ids",
                     "pixel_values", "image_grid_thw"):
            assert np.array_equal(a[name], b[name]), name


def test_bad_model_inputs_options(qwen, tmp_path):
    with pytest.raises(ValueError, match="max_length"):
        stoker.ModelInputs("qwen2-vl", tokenizer=qwen, max_length=0)
    with pytest.raises(stoker.errors.InvalidArgumentError, match="overlong"):
        stoker.ModelInputs("qwen2-vl", tokenizer=qwen, overlong="shorten")
    with pytest.raises(ValueError, match="unknown model"):
        stoker.ModelInputs("llava", tokenizer=qwen)
    with pytest.raises(ValueError, match="needs a tokenizer"):
        stoker.ModelInputs("qwen2-vl")
    manifest = _make_corpus(tmp_path, n=2)
    with pytest.raises(TypeError, match="model_inputs"):
        stoker.Loader(manifest, model_inputs="qwen2-vl")
    with pytest.raises(stoker.errors.InvalidArgumentError, match="max_prefetch_bytes"):
        stoker.Loader(manifest, model_inputs=stoker.ModelInputs("qwen2-vl", tokenizer=qwen),
                      max_prefetch_bytes=-1)


def test_tiny_prefetch_byte_budget_still_delivers_everything(corpus, qwen):
    samples = _by_key(corpus)
    inputs = stoker.ModelInputs("qwen2-vl", tokenizer=qwen)
    loader = stoker.Loader(corpus, batch_size=3, num_threads=2, prefetch=6, output="numpy",
                           model_inputs=inputs, max_prefetch_bytes=1)
    seen = _checked_epoch(loader, samples, corpus.parent, qwen)
    assert sorted(seen) == sorted(samples)
