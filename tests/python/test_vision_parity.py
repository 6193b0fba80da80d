"""Bit-exact parity of stoker.vision with Hugging Face's Qwen2-VL image processors.

The goldens (tests/python/goldens/vision, written by scripts/make_vision_goldens.py in
an environment with transformers + torch + torchvision) hold, per corpus image,
configuration and backend, image_grid_thw and the SHA-256 of the float32
pixel_values; a few small images are stored in full. The corpus is regenerated here
from the same seed (tests/python/vision_corpus.py). Every comparison is exact: a
mismatch is a bug, never a tolerance to widen.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker import vision

import vision_corpus as vc  # noqa: E402  (tests/python is on sys.path under pytest)

GOLDENS = Path(__file__).resolve().parent / "goldens/vision"
META = json.loads((GOLDENS / "meta.json").read_text())
DATA = np.load(GOLDENS / "goldens.npz")


def _pillow_pass_order() -> str:
    major, minor = (int(v) for v in META["versions"]["pillow"].split(".")[:2])
    if major >= 13:
        return "pillow13"
    return "pillow12.2" if (major, minor) >= (12, 2) else "legacy"


PASS_ORDER = _pillow_pass_order()


@pytest.fixture(scope="module")
def corpus():
    items = vc.items(META["count"])
    photos = vc.PhotoSource(stoker.codec.decode)
    return items, photos


def _sha(pv: np.ndarray) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(pv).tobytes()).digest()


# (golden config name, model passed to Stoker): Qwen2.5-VL runs the same processor
# class with the same values as Qwen2-VL, so it is held to the Qwen2-VL goldens.
CASES = [(name, model, mn, mx) for name, model, mn, mx in vc.CONFIGS] + [
    ("qwen2-vl", "qwen2.5-vl", None, None)]


@pytest.mark.parametrize("backend", vision.BACKENDS)
@pytest.mark.parametrize("name,model,min_pixels,max_pixels", CASES,
                         ids=[f"{c[1]}-{c[0]}" for c in CASES])
def test_corpus_matches_hugging_face(corpus, backend, name, model, min_pixels, max_pixels):
    items, photos = corpus
    grids = DATA[f"grid/{name}/{backend}"]
    hashes = DATA[f"sha/{name}/{backend}"]
    mismatches = []
    for item, rgb in vc.iter_images(items, photos):
        out = vision.preprocess([rgb], model, backend=backend, min_pixels=min_pixels,
                                max_pixels=max_pixels, pillow_pass_order=PASS_ORDER)
        grid_ok = out["image_grid_thw"][0].tolist() == grids[item.index].tolist()
        if not grid_ok or _sha(out["pixel_values"]) != hashes[item.index].tobytes():
            mismatches.append(item)
    assert not mismatches, f"{len(mismatches)} of {len(items)} differ, first: {mismatches[:5]}"


@pytest.mark.parametrize("backend", vision.BACKENDS)
def test_full_arrays_match(corpus, backend):
    items, photos = corpus
    keys = [k for k in DATA.files if k.startswith(f"full/{backend}/")]
    assert keys
    for key in keys:
        item = items[int(key.rsplit("/", 1)[1])]
        out = vision.preprocess([vc.image(item, photos)], "qwen2-vl", backend=backend,
                                pillow_pass_order=PASS_ORDER)
        want = DATA[key]
        assert out["pixel_values"].shape == want.shape
        # Compare bit patterns: catches -0.0 vs 0.0 too.
        np.testing.assert_array_equal(out["pixel_values"].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("backend", vision.BACKENDS)
def test_encoded_inputs_match(backend):
    """EXIF-rotated JPEGs (exif_transpose) and RGBA PNGs (alpha_to_white), decoded by
    Stoker, against Pillow's exif_transpose / paste-onto-white fed to Hugging Face."""
    for case, options in META["encoded_cases"].items():
        data = DATA[f"encoded/{case}/bytes"].tobytes()
        out = vision.preprocess([data], "qwen2-vl", backend=backend,
                                pillow_pass_order=PASS_ORDER, **options)
        assert out["image_grid_thw"][0].tolist() == \
            DATA[f"encoded/{case}/{backend}/grid"].tolist(), case
        assert _sha(out["pixel_values"]) == DATA[f"encoded/{case}/{backend}/sha"].tobytes(), case


def test_batch_equals_concatenated_singles(corpus):
    items, photos = corpus
    imgs = [vc.image(item, photos) for item in items[:40]]
    batch = vision.preprocess(imgs, "qwen3-vl")
    singles = [vision.preprocess([img], "qwen3-vl") for img in imgs]
    np.testing.assert_array_equal(batch["pixel_values"],
                                  np.concatenate([s["pixel_values"] for s in singles]))
    np.testing.assert_array_equal(batch["image_grid_thw"],
                                  np.concatenate([s["image_grid_thw"] for s in singles]))
