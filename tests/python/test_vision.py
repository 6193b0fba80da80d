"""stoker.vision: the API, configuration plumbing and error handling.

Bit-exact parity with Hugging Face is checked in test_vision_parity.py against
recorded goldens; these tests need nothing but NumPy and Pillow.
"""

from __future__ import annotations

import io
import json
import warnings

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker import errors, vision


def _png(arr: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr, mode).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(arr: np.ndarray, orientation: int | None = None) -> bytes:
    buf = io.BytesIO()
    kwargs = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kwargs["exif"] = exif
    Image.fromarray(arr).save(buf, format="JPEG", quality=95, **kwargs)
    return buf.getvalue()


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("model,row,factor", [("qwen2-vl", 1176, 28), ("qwen2.5-vl", 1176, 28),
                                              ("qwen3-vl", 1536, 32)])
def test_shapes_follow_smart_resize(model, row, factor):
    img = RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    out = vision.preprocess([img, img[:100, :70]], model)
    h, w = vision.smart_resize(480, 640, model)
    h2, w2 = vision.smart_resize(100, 70, model)
    assert out["pixel_values"].dtype == np.float32
    assert out["image_grid_thw"].dtype == np.int64
    p = factor // 2
    assert out["image_grid_thw"].tolist() == [[1, h // p, w // p], [1, h2 // p, w2 // p]]
    assert out["pixel_values"].shape == ((h * w + h2 * w2) // (p * p), row)


def test_smart_resize_reference_vectors():
    assert vision.smart_resize(1080, 1920, "qwen2-vl") == (1092, 1932)
    assert vision.smart_resize(70, 70, "qwen2-vl") == (56, 56)
    assert vision.smart_resize(4000, 3000, "qwen3-vl") == (4000, 3008)
    assert vision.smart_resize(10, 10, "qwen2-vl", min_pixels=0, max_pixels=10**7,
                               rule="qwen-vl-utils") == (28, 28)


def test_inputs_bytes_paths_and_arrays_agree(tmp_path):
    img = RNG.integers(0, 256, (61, 83, 3), dtype=np.uint8)
    data = _png(img)
    path = tmp_path / "a.png"
    path.write_bytes(data)
    outs = [vision.preprocess([x], "qwen2-vl", backend=b)
            for b in vision.BACKENDS for x in (img, data, str(path), path, bytearray(data))]
    for b in range(2):
        group = outs[b * 5:(b + 1) * 5]
        for o in group[1:]:
            np.testing.assert_array_equal(o["pixel_values"], group[0]["pixel_values"])
    # The two backends differ (resize rounding and normalisation numerics).
    assert not np.array_equal(outs[0]["pixel_values"], outs[5]["pixel_values"])


def test_out_buffer_receives_the_same_rows():
    imgs = [RNG.integers(0, 256, (61, 83, 3), dtype=np.uint8), _jpeg(
        RNG.integers(0, 256, (700, 900, 3), dtype=np.uint8))]  # > 4 MiB: streamed
    for backend in vision.BACKENDS:
        want = vision.preprocess(imgs, backend=backend)
        rows = want["pixel_values"].shape[0]
        buf = np.full((rows + 5, 1176), 7.0, dtype=np.float32)
        got = vision.preprocess(imgs, backend=backend, out=buf)
        np.testing.assert_array_equal(got["pixel_values"], want["pixel_values"])
        np.testing.assert_array_equal(got["image_grid_thw"], want["image_grid_thw"])
        assert np.shares_memory(got["pixel_values"], buf)
        assert (buf[rows:] == 7.0).all()  # rows past the images are left alone
    with pytest.raises(errors.InvalidArgumentError, match="rows"):
        vision.preprocess(imgs, out=np.empty((3, 1176), dtype=np.float32))
    for bad in (np.empty((9999, 1176), dtype=np.float64), np.empty((9999, 1000), np.float32),
                np.empty((1176, 9999), np.float32).T):
        with pytest.raises(errors.InvalidArgumentError, match="out must be"):
            vision.preprocess(imgs, out=bad)
    read_only = np.empty((9999, 1176), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(errors.InvalidArgumentError, match="out must be"):
        vision.preprocess(imgs, out=read_only)


def test_non_contiguous_array_is_accepted():
    img = RNG.integers(0, 256, (60, 90, 3), dtype=np.uint8)
    view = img[:, ::2]
    a = vision.preprocess([view])["pixel_values"]
    b = vision.preprocess([np.ascontiguousarray(view)])["pixel_values"]
    np.testing.assert_array_equal(a, b)


def test_visual_token_count_reads_the_header_only(tmp_path):
    img = RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    data = _jpeg(img)
    assert vision.visual_token_count(data) == (476 // 28) * (644 // 28)
    assert vision.visual_token_count(img, "qwen3-vl") == (480 // 32) * (640 // 32)
    # Only the header is needed: a file cut after its header still counts.
    assert vision.visual_token_count(data[:600]) == (476 // 28) * (644 // 28)
    out = vision.preprocess([data])
    assert out["pixel_values"].shape[0] // 4 == vision.visual_token_count(data)


def test_checkpoint_config_wins(tmp_path):
    cfg = {"min_pixels": 3136, "max_pixels": 200704, "patch_size": 14, "merge_size": 2,
           "temporal_patch_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(cfg))
    c = vision.resolve_config("qwen2-vl", checkpoint=tmp_path)
    assert (c.min_pixels, c.max_pixels, c.image_mean) == (3136, 200704, (0.5, 0.5, 0.5))
    assert vision.smart_resize(1080, 1920, "qwen2-vl", checkpoint=tmp_path) == (336, 588)
    # Qwen3-VL's hub file stores the limits in `size` only.
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"patch_size": 16, "size": {"shortest_edge": 1024, "longest_edge": 4096}}))
    c = vision.resolve_config("qwen3-vl", checkpoint=tmp_path)
    assert (c.patch_size, c.min_pixels, c.max_pixels) == (16, 1024, 4096)


def test_call_time_limits_follow_transformers_plumbing():
    # Qwen2-VL: a lone max_pixels overrides just the maximum.
    c = vision.resolve_config("qwen2-vl", max_pixels=100000)
    assert (c.min_pixels, c.max_pixels) == (3136, 100000)
    # Qwen3-VL has no top-level keys: a lone override is ignored (with a warning), both apply.
    with pytest.warns(UserWarning, match="ignored"):
        c = vision.resolve_config("qwen3-vl", max_pixels=100000)
    assert c.max_pixels == 16777216
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = vision.resolve_config("qwen3-vl", min_pixels=1024, max_pixels=100000)
    assert (c.min_pixels, c.max_pixels) == (1024, 100000)


def test_exif_transpose_matches_pil():
    from PIL import ImageOps
    img = RNG.integers(0, 256, (40, 64, 3), dtype=np.uint8)
    for orientation in range(1, 9):
        data = _jpeg(img, orientation)
        with Image.open(io.BytesIO(data)) as im:
            ref = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
        got = vision.preprocess([data], exif_transpose=True)
        want = vision.preprocess([np.ascontiguousarray(ref)])
        np.testing.assert_array_equal(got["image_grid_thw"], want["image_grid_thw"])
        np.testing.assert_array_equal(got["pixel_values"], want["pixel_values"])
        assert vision.visual_token_count(data, exif_transpose=True) == \
            want["pixel_values"].shape[0] // 4
        # Off by default: the stored orientation is ignored.
        plain = vision.preprocess([data])
        with Image.open(io.BytesIO(data)) as im:
            stored = np.asarray(im.convert("RGB"))
        np.testing.assert_array_equal(plain["pixel_values"],
                                      vision.preprocess([stored])["pixel_values"])


def test_alpha_to_white_composites_rgba_only():
    rgba = RNG.integers(0, 256, (30, 50, 4), dtype=np.uint8)
    rgba[:, :10, 3] = 0
    rgba[:, 10:20, 3] = 255
    data = _png(rgba, "RGBA")
    with Image.open(io.BytesIO(data)) as im:
        canvas = Image.new("RGB", im.size, (255, 255, 255))
        canvas.paste(im, mask=im.split()[3])
        white = np.asarray(canvas)
        dropped = np.asarray(im.convert("RGB"))
    np.testing.assert_array_equal(vision.preprocess([data], alpha_to_white=True)["pixel_values"],
                                  vision.preprocess([white])["pixel_values"])
    np.testing.assert_array_equal(vision.preprocess([data])["pixel_values"],
                                  vision.preprocess([dropped])["pixel_values"])
    # LA is not composited (qwen-vl-utils converts it like Pillow does).
    la = RNG.integers(0, 256, (30, 50, 2), dtype=np.uint8)
    la_data = _png(la, "LA")
    np.testing.assert_array_equal(
        vision.preprocess([la_data], alpha_to_white=True)["pixel_values"],
        vision.preprocess([la_data])["pixel_values"])


def test_errors_name_the_image_and_come_before_work(tmp_path):
    good = _png(RNG.integers(0, 256, (20, 20, 3), dtype=np.uint8))
    with pytest.raises(errors.CorruptImageError, match="image 1"):
        vision.preprocess([good, good[:60]])
    with pytest.raises(errors.UnsupportedImageError, match="image 0"):
        vision.preprocess([b"GIF89a......"])
    with pytest.raises(errors.LimitExceededError, match="max_image_pixels"):
        vision.preprocess([good], max_image_pixels=100)
    with pytest.raises(errors.InvalidArgumentError, match="aspect ratio"):
        vision.preprocess([np.zeros((1, 201, 3), np.uint8)])
    with pytest.raises(errors.InvalidArgumentError, match="zero-sized"):
        vision.preprocess([np.zeros((0, 5, 3), np.uint8)])
    path = tmp_path / "cut.png"
    path.write_bytes(good[:60])
    with pytest.raises(errors.CorruptImageError, match="cut.png"):
        vision.preprocess([path])
    with pytest.raises(TypeError):
        vision.preprocess([np.zeros((5, 5, 4), np.uint8)])
    with pytest.raises(ValueError):
        vision.preprocess([good], "llava")
    # A header declaring a huge image is refused from the header alone.
    huge = bytearray(good)
    huge[16:24] = (100000).to_bytes(4, "big") * 2
    with pytest.raises(errors.LimitExceededError):
        vision.preprocess([bytes(huge)])


def test_exported_from_package():
    assert stoker.vision is vision


def test_native_binding_keeps_converted_inputs_alive():
    # The native call converts a strided array into a temporary contiguous copy; the
    # copy must live until the pixels are read.
    img = RNG.integers(0, 256, (60, 90, 3), dtype=np.uint8)
    processor = vision._processor(vision.resolve_config("qwen2-vl"), "torchvision", "hf",
                                  "pillow13", 10**8)
    views = [img[:, ::2], img[::-1, 1::2]]
    pixel_values, _ = processor.preprocess(views, ["a", "b"], False, False)
    want = vision.preprocess([np.ascontiguousarray(v) for v in views])["pixel_values"]
    np.testing.assert_array_equal(pixel_values, want)
