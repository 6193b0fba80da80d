"""Stoker's tokenizer against Hugging Face `tokenizers`, live, on a generated corpus.

Both load the same tokenizer.json (Qwen3 vocabulary and o200k); ids must be identical,
decode(encode(s)) must give back the normalized text, and the hand-written Qwen
splitter must give what Oniguruma gives.
"""

from __future__ import annotations

import unicodedata

import pytest

import stoker
from stoker.text import Tokenizer
from text_corpus import make_corpus

tokenizers = pytest.importorskip("tokenizers")

CORPUS = make_corpus()


@pytest.fixture(scope="module", params=["qwen3", "o200k"])
def pair(request, tokenizer_files):
    path = tokenizer_files[request.param] / "tokenizer.json"
    return (request.param, Tokenizer.from_file(path),
            tokenizers.Tokenizer.from_file(str(path)))


def test_corpus_is_large_and_varied():
    assert len(CORPUS) > 5000
    categories = {unicodedata.category(c) for s in CORPUS for c in s}
    assert len(categories) >= 29  # every general category but Cs


def test_ids_identical_on_corpus(pair):
    name, ours, ref = pair
    mismatches = []
    for text in CORPUS:
        want = ref.encode(text, add_special_tokens=False).ids
        got = ours.encode(text)
        if got != want:
            mismatches.append((text, got, want))
    assert not mismatches, f"{name}: {len(mismatches)} mismatches, first: {mismatches[0]!r}"


def test_encode_batch_matches_single_calls(pair):
    _, ours, ref = pair
    want = [e.ids for e in ref.encode_batch(CORPUS, add_special_tokens=False)]
    assert ours.encode_batch(CORPUS) == want
    assert ours.encode_batch(CORPUS, num_threads=1) == want


def test_decode_round_trip(pair):
    name, ours, ref = pair
    for text in CORPUS:
        ids = ours.encode(text)
        expected = unicodedata.normalize("NFC", text) if name == "qwen3" else text
        assert ours.decode(ids) == expected
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == ref.decode(
            ids, skip_special_tokens=True)


def test_decode_replaces_invalid_utf8(pair):
    _, ours, ref = pair
    ids = ours.encode("日本語 ok")
    for cut in range(len(ids)):
        partial = ids[:cut] + ids[cut + 1:]
        assert ours.decode(partial) == ref.decode(partial, skip_special_tokens=False)


def test_vocabulary_queries(pair):
    _, ours, ref = pair
    assert ours.vocab_size == ref.get_vocab_size(with_added_tokens=True)
    for token, id in list(ref.get_vocab(with_added_tokens=True).items())[::997]:
        assert ours.token_to_id(token) == id
        assert ours.id_to_token(id) == ref.id_to_token(id)
    assert ours.token_to_id("no such token \u2603") is None
    assert ours.id_to_token(10**8) is None


def test_lone_surrogates_are_refused_like_the_reference(pair):
    _, ours, ref = pair
    import json
    text = json.loads('"a\\ud800b"')  # a lone surrogate escaped in JSON
    with pytest.raises(TypeError):
        ref.encode(text)
    with pytest.raises(TypeError, match="lone surrogate U\\+D800 at index 1"):
        ours.encode(text)
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        ours.encode_batch(["ok", text])
    with pytest.raises(TypeError, match="expected str, got int"):
        ours.encode(3)


@pytest.mark.parametrize("name", ["qwen3", "o200k"])
def test_oniguruma_and_hand_written_splitter_agree(tokenizer_files, name):
    path = tokenizer_files[name] / "tokenizer.json"
    fast = Tokenizer.from_file(path)
    general = Tokenizer.from_file(path, hand_written_splitter=False)
    assert fast.encode_batch(CORPUS) == general.encode_batch(CORPUS)


def test_spec_vectors(tokenizer_files):
    t = Tokenizer.from_file(tokenizer_files["qwen3"])  # a folder works too
    assert t.encode("Hello world") == [9707, 1879]
    assert t.encode(" Hello world") == [21927, 1879]
    assert t.encode("Describe this image.") == [74785, 419, 2168, 13]
    assert t.encode("<|im_start|>assistant\n") == [151644, 77091, 198]
    assert t.encode("<|im_start|>user\na cat on a skateboard<|im_end|>\n<|im_start|>"
                    "assistant\n<think>\n\n</think>\n\n") == [
        151644, 872, 198, 64, 8251, 389, 264, 97982, 151645, 198, 151644, 77091, 198,
        151667, 271, 151668, 271]
    assert t.encode("x", add_special_tokens=True) == t.encode("x")


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_file(tmp_path / "nope.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "WordPiece", "vocab": {}}}')
    with pytest.raises(ValueError, match="WordPiece"):
        Tokenizer.from_file(bad)


def test_exported_from_package():
    assert stoker.text.Tokenizer is Tokenizer
    assert callable(stoker.encode_sample)


def test_config_tokens(tokenizer_files):
    qwen = Tokenizer.from_file(tokenizer_files["qwen3"])
    assert (qwen.eos_token, qwen.eos_token_id) == ("<|im_end|>", 151645)
    assert (qwen.pad_token, qwen.pad_token_id) == ("<|endoftext|>", 151643)
    assert qwen.bos_token is None
    o200k = Tokenizer.from_file(tokenizer_files["o200k"] / "tokenizer.json")
    assert o200k.eos_token_id == 199999


@pytest.mark.parametrize("name", ["qwen3", "o200k"])
def test_split_special_tokens_matches_reference(tokenizer_files, name, tmp_path):
    path = tokenizer_files[name] / "tokenizer.json"
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    ours = Tokenizer.from_file(path, split_special_tokens=True)
    texts = [t for t in CORPUS if "<" in t][:800]
    assert ours.encode_batch(texts) == [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    # The same switch read from tokenizer_config.json.
    folder = tmp_path / name
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(path.read_bytes())
    (folder / "tokenizer_config.json").write_text('{"split_special_tokens": true}')
    assert Tokenizer.from_file(folder).encode("<|endoftext|>") == ref.encode(
        "<|endoftext|>", add_special_tokens=False).ids
