"""stoker.encode_sample against goldens made by the reference Python stack
(scripts/make_text_goldens.py: transformers' apply_chat_template, fast tokenizer and
get_rope_index), plus the label rule spelled out on named tokens."""

from __future__ import annotations

import gzip
import json
import pathlib

import numpy as np
import pytest

import stoker
from stoker.text import IGNORE_INDEX, Tokenizer, encode_sample, pack_position_ids

GOLDENS = pathlib.Path(__file__).parent / "goldens" / "text" / "conversations.json.gz"
CASES = json.loads(gzip.decompress(GOLDENS.read_bytes()))


@pytest.fixture(scope="module")
def qwen(tokenizer_files):
    return Tokenizer.from_file(tokenizer_files["qwen3"])


def _case_id(case):
    opts = ",".join(f"{k}={v}" for k, v in case["options"].items()) or "default"
    return f"{case['family']}-{opts}"


def test_goldens_cover_every_family_and_option():
    assert {c["family"] for c in CASES} == {"qwen2-vl", "qwen2.5-vl", "qwen3-vl"}
    assert len(CASES) > 150


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_reference(case, qwen):
    opts = dict(case["options"])
    out = encode_sample(case["sample"], model=case["family"], tokenizer=qwen,
                        image_grids=case["image_grids"], **opts)
    assert out["text"] == case["text"]
    assert out["input_ids"].tolist() == case["input_ids"]
    assert out["labels"].tolist() == case["labels"]
    assert out["position_ids"].tolist() == case["position_ids"]
    assert out["attention_mask"].tolist() == [1] * len(case["input_ids"])
    assert out["input_ids"].dtype == np.int64 and out["position_ids"].shape == (3, len(
        case["input_ids"]))


def _trained_text(qwen, out):
    return [qwen.decode([int(i)]) for i, l in zip(out["input_ids"], out["labels"])
            if l != IGNORE_INDEX]


def test_trained_tokens_by_name(qwen):
    sample = {"messages": [
        {"role": "user", "content": [{"type": "image", "image": "a.jpg"},
                                     {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Sure?"},
        {"role": "assistant", "content": "Yes."}]}
    out = encode_sample(sample, tokenizer=qwen, image_grids=[(1, 4, 4)])
    # Content, <|im_end|> and the newline of each assistant turn; nothing else.
    assert _trained_text(qwen, out) == ["A", " cat", ".", "<|im_end|>", "\n",
                                        "Yes", ".", "<|im_end|>", "\n"]
    last = encode_sample(sample, tokenizer=qwen, image_grids=[(1, 4, 4)],
                         label_mode="last_assistant")
    assert _trained_text(qwen, last) == ["Yes", ".", "<|im_end|>", "\n"]
    no_nl = encode_sample(sample, tokenizer=qwen, image_grids=[(1, 4, 4)],
                          train_trailing_newline=False)
    assert _trained_text(qwen, no_nl) == ["A", " cat", ".", "<|im_end|>", "Yes", ".",
                                          "<|im_end|>"]
    everything = encode_sample(sample, tokenizer=qwen, image_grids=[(1, 4, 4)],
                               label_mode="all")
    assert everything["labels"].tolist() == everything["input_ids"].tolist()
    # Image pads are never trained in assistant mode, and there are 16/4 of them.
    pads = out["input_ids"] == 151655
    assert pads.sum() == 4 and (out["labels"][pads] == IGNORE_INDEX).all()


def test_qwen3_empty_think_is_trained(qwen):
    sample = {"messages": [{"role": "user", "content": "Hi"},
                           {"role": "assistant", "content": "Hello."}]}
    out = encode_sample(sample, model="qwen3-vl", tokenizer=qwen, qwen3_empty_think=True)
    assert _trained_text(qwen, out)[:4] == ["<think>", "\n\n", "</think>", "\n\n"]
    assert out["text"].startswith("<|im_start|>user\nHi<|im_end|>\n")


def test_spec_rope_example(qwen):
    # §14.1 worked example: 26 tokens, 4 image tokens with grid (1, 4, 4).
    sample = {"messages": [{"role": "user", "content": [
        {"type": "image", "image": "a.jpg"}, {"type": "text", "text": "What is this?"}]}]}
    out = encode_sample(sample, model="qwen2.5-vl", tokenizer=qwen, image_grids=[[1, 4, 4]])
    assert out["input_ids"].tolist() == [
        151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
        151652, 151655, 151655, 151655, 151655, 151653, 3838, 374, 419, 30, 151645, 198]
    t, h, w = out["position_ids"].tolist()
    assert t[14:] == [14, 15, 15, 15, 15, 17, 18, 19, 20, 21, 22, 23]
    assert h[15:19] == [15, 15, 16, 16] and w[15:19] == [15, 16, 15, 16]
    assert out["rope_delta"] == -2


@pytest.mark.parametrize("sample, grids, message", [
    ({"messages": [{"role": "wizard", "content": "x"}]}, [], "unknown role 'wizard'"),
    ({"messages": []}, [], "empty conversation"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, [],
     "'text' must be a string"),
    ({"messages": [{"role": "user", "content": "look <|image_pad|>"}]}, [], "<|image_pad|>"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"}]}]}, [],
     "1 images but 0 image grids"),
    ({"image": ["a.jpg"], "conversations": [{"from": "human", "value": "no tag"}]}, [[1, 2, 2]],
     "0 <image> tags for 1 images"),
    ({"image": "a.jpg", "conversations": [{"from": "robot", "value": "<image>"}]}, [[1, 2, 2]],
     "unknown speaker 'robot'"),
    ({"conversations": []}, [], "empty conversation"),
    ({"text": "hello"}, [], "neither a 'messages' list"),
])
def test_bad_samples_are_named(qwen, sample, grids, message):
    with pytest.raises(stoker.errors.StokerError, match=pytest.importorskip("re").escape(message)):
        encode_sample(sample, tokenizer=qwen, image_grids=grids)


def test_qwen3_refuses_images_it_would_drop(qwen):
    sample = {"messages": [{"role": "user", "content": "Draw"},
                           {"role": "assistant", "content": [{"type": "image", "image": "c.png"}]}]}
    with pytest.raises(ValueError, match="drops images"):
        encode_sample(sample, model="qwen3-vl", tokenizer=qwen, image_grids=[[1, 2, 2]])


def test_max_length(qwen):
    sample = {"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"},
                                                         {"type": "text", "text": "Hi"}]},
                           {"role": "assistant", "content": "A long answer " * 20}]}
    full = encode_sample(sample, tokenizer=qwen, image_grids=[[1, 4, 4]])
    cut = encode_sample(sample, tokenizer=qwen, image_grids=[[1, 4, 4]], max_length=40)
    assert cut["input_ids"].tolist() == full["input_ids"][:40].tolist()
    assert cut["position_ids"].tolist() == full["position_ids"][:, :40].tolist()
    assert cut["truncated"] and cut["images"] == ["a.jpg"]
    # A cut inside the image's <|vision_start|> pads <|vision_end|> run moves before it:
    # the image is left out whole.
    start = full["input_ids"].tolist().index(151652)
    for max_length in (start + 1, start + 3, start + 5):  # the run is 6 tokens
        short = encode_sample(sample, tokenizer=qwen, image_grids=[[1, 4, 4]],
                              max_length=max_length)
        assert short["input_ids"].tolist() == full["input_ids"][:start].tolist()
        assert short["truncated"] and short["images"] == []
        assert short["position_ids"].tolist() == full["position_ids"][:, :start].tolist()


def test_pack_position_ids_restart_per_sample(qwen):
    a = encode_sample({"messages": [{"role": "user", "content": [
        {"type": "image", "image": "a.jpg"}, {"type": "text", "text": "Hi"}]}]},
        tokenizer=qwen, image_grids=[[1, 4, 4]])
    b = encode_sample({"messages": [{"role": "user", "content": "Yo"}]}, tokenizer=qwen)
    packed = pack_position_ids([a["position_ids"], b["position_ids"]])
    la, lb = a["position_ids"].shape[1], b["position_ids"].shape[1]
    assert packed.shape == (4, la + lb)
    assert packed[0].tolist() == list(range(la)) + list(range(lb))
    assert packed[1:, :la].tolist() == a["position_ids"].tolist()
    assert packed[1:, la:].tolist() == b["position_ids"].tolist()


@pytest.mark.parametrize("size, qwen2, qwen3", [
    # The spec's smart_resize vectors (published limits), as (H', W') in pixels.
    ((480, 640), (476, 644), (480, 640)),
    ((1080, 1920), (1092, 1932), (1088, 1920)),
    ((300, 400), (308, 392), (288, 384)),
    ((42, 42), (56, 56), (256, 256)),
    ((70, 70), (56, 56), (256, 256)),
    ((14, 2800), (28, 812), (32, 3648)),
    ((4000, 3000), (4004, 2996), (4000, 3008)),
    ((250, 250), (252, 252), (256, 256)),
    ((126, 98), (112, 112), (320, 256)),
])
def test_image_grid_follows_smart_resize(size, qwen2, qwen3):
    assert stoker.text.image_grid(*size, "qwen2-vl") == (1, qwen2[0] // 14, qwen2[1] // 14)
    assert stoker.text.image_grid(*size, "qwen3-vl") == (1, qwen3[0] // 16, qwen3[1] // 16)


def test_image_sizes_instead_of_grids(qwen):
    sample = {"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"}]}]}
    by_size = encode_sample(sample, tokenizer=qwen, image_sizes=[(480, 640)])
    by_grid = encode_sample(sample, tokenizer=qwen, image_grids=[(1, 34, 46)])
    assert by_size["input_ids"].tolist() == by_grid["input_ids"].tolist()
    assert (by_size["input_ids"] == 151655).sum() == 34 * 46 // 4


def test_lone_surrogates_in_samples_are_manifest_errors(qwen):
    escaped = '{"messages": [{"role": "user", "content": "\\ud800"}]}'
    with pytest.raises(stoker.errors.ManifestError):
        encode_sample(escaped, tokenizer=qwen)
    with pytest.raises(stoker.errors.ManifestError, match="lone surrogate"):
        encode_sample({"messages": [{"role": "user", "content": "\ud800"}]}, tokenizer=qwen)
