"""Shared pytest set-up: manifest indexes in a session temp dir, and the vendored
tokenizer files decompressed once per session."""

from __future__ import annotations

import lzma
import pathlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def stoker_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Points $STOKER_CACHE_DIR at a session temporary directory, so that loaders built
    without ``index_cache_dir`` keep their manifest indexes there and never in the home
    directory. Autouse and session-scoped: set before any other fixture builds a loader."""
    root = tmp_path_factory.mktemp("stoker-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STOKER_CACHE_DIR", str(root))
        yield root


_ROOT = pathlib.Path(__file__).resolve().parents[2]
# The Qwen vocabulary ships with the package; o200k is test data only.
TOKENIZER_DATA = {"qwen3": _ROOT / "python" / "stoker" / "_data" / "tokenizers" / "qwen3",
                  "o200k": _ROOT / "tests" / "data" / "tokenizers" / "o200k"}
VOCABULARIES = ("qwen3", "o200k")


@pytest.fixture(scope="session")
def tokenizer_files(tmp_path_factory) -> dict[str, pathlib.Path]:
    """{vocabulary name: folder with tokenizer.json and tokenizer_config.json}."""
    root = tmp_path_factory.mktemp("tokenizers")
    out = {}
    for name in VOCABULARIES:
        folder = root / name
        folder.mkdir()
        with lzma.open(TOKENIZER_DATA[name] / "tokenizer.json.xz") as src:
            (folder / "tokenizer.json").write_bytes(src.read())
        shutil.copy(TOKENIZER_DATA[name] / "tokenizer_config.json", folder)
        out[name] = folder
    return out
