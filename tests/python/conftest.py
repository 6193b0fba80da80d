"""Shared fixtures: the vendored tokenizer files, decompressed once per session."""

from __future__ import annotations

import lzma
import pathlib
import shutil

import pytest

TOKENIZER_DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "tokenizers"
VOCABULARIES = ("qwen3", "o200k")


@pytest.fixture(scope="session")
def tokenizer_files(tmp_path_factory) -> dict[str, pathlib.Path]:
    """{vocabulary name: folder with tokenizer.json and tokenizer_config.json}."""
    root = tmp_path_factory.mktemp("tokenizers")
    out = {}
    for name in VOCABULARIES:
        folder = root / name
        folder.mkdir()
        with lzma.open(TOKENIZER_DATA / name / "tokenizer.json.xz") as src:
            (folder / "tokenizer.json").write_bytes(src.read())
        shutil.copy(TOKENIZER_DATA / name / "tokenizer_config.json", folder)
        out[name] = folder
    return out
