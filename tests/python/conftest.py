"""Shared pytest set-up for the Python tests."""

from __future__ import annotations

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
