"""The command line: `stoker demo` end to end on a tiny generated dataset."""

from __future__ import annotations

import subprocess
import sys

import stoker


def _demo(tmp_path, *extra: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "stoker", "demo", "--data-dir", str(tmp_path / "data"),
         "--conversations", "16", "--images", "6", "--batch-size", "4", "--step-ms", "1",
         *extra],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_demo_with_model_inputs(tmp_path):
    out = _demo(tmp_path)
    assert "qwen2-vl model inputs" in out
    for column in ("wait ratio", "vision busy s", "text busy s", "1. serial baseline",
                   "2. + prefetch"):
        assert column in out, column
    assert "Trainer wait ratio" in out and "Limiting stage" in out


def test_demo_decode_only_reuses_the_dataset(tmp_path):
    _demo(tmp_path)
    out = _demo(tmp_path, "--decode-only")
    assert "decoded RGB images" in out and "decode busy s" in out
    assert "vision busy s" not in out


def test_bundled_qwen_tokenizer_matches_the_vendored_file(tokenizer_files):
    bundled = stoker.text.Tokenizer.bundled_qwen()
    reference = stoker.text.Tokenizer.from_file(tokenizer_files["qwen3"])
    text = "Hello, 世界! <|im_start|>user\n  12345 🙂"
    assert bundled.encode(text) == reference.encode(text)
    assert bundled.pad_token_id == reference.pad_token_id == 151643
