"""``stoker.Source``: one dataset in a weighted mix, and how sources are resolved."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """One dataset of a training mix: one or more JSONL manifests read as one.

    Args:
        uri: a manifest path, or a glob (``"data/shard-*.jsonl"``) whose matches are
            read in sorted order, or an object-store URI (``s3://bucket/train.jsonl``,
            read through the loader's ``storage``).
        weight: share of the global stream relative to the other sources (any
            positive number; ``Source(a, 3), Source(b, 1)`` draws 75% from ``a``).
        name: the name used in stats and state dicts (default: the file name).
        image_root: where this source's relative image paths resolve (default: the
            loader's ``image_root``, else the first manifest's directory).
        repeat: with ``epoch_policy="repeat"``, how many times each sample of this
            source appears per epoch.
    """

    uri: str
    weight: float = 1.0
    name: str | None = None
    image_root: str | None = None
    repeat: int = 1
    paths: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.uri, (str, os.PathLike)):
            raise TypeError(f"Source uri must be a path or glob, got {type(self.uri).__name__}")
        uri = os.fspath(self.uri)
        object.__setattr__(self, "uri", uri)
        if not (isinstance(self.weight, (int, float)) and self.weight > 0
                and self.weight == self.weight and self.weight != float("inf")):
            raise ValueError(f"Source {uri!r}: weight must be a positive finite number, "
                             f"got {self.weight!r}")
        if not isinstance(self.repeat, int) or self.repeat < 1:
            raise ValueError(f"Source {uri!r}: repeat must be an integer >= 1, "
                             f"got {self.repeat!r}")
        if self.name is None:
            object.__setattr__(self, "name", os.path.basename(uri))

    def resolve(self) -> Source:
        """Returns a copy with the glob expanded into ``paths`` (sorted)."""
        if "://" in self.uri:  # an object-store URI: read through the loader's storage
            if glob.has_magic(self.uri):
                raise ValueError(f"source {self.name!r}: globs are not supported for "
                                 f"object-store URIs ({self.uri!r}); list the manifests")
            paths: tuple[str, ...] = (self.uri,)
        elif glob.has_magic(self.uri):
            paths = tuple(sorted(glob.glob(self.uri)))
            if not paths:
                from stoker.errors import ImageNotFoundError

                raise ImageNotFoundError(f"source {self.name!r}: no file matches {self.uri!r}")
        else:
            paths = (self.uri,)
        return Source(self.uri, self.weight, self.name, self.image_root, self.repeat, paths)


def as_sources(spec: object) -> list[Source]:
    """Accepts a path, a Source, or a list of them; returns resolved Sources."""
    items = spec if isinstance(spec, (list, tuple)) else [spec]
    if not items:
        raise ValueError("no sources given")
    sources = []
    for item in items:
        if isinstance(item, Source):
            sources.append(item)
        elif isinstance(item, (str, os.PathLike)):
            sources.append(Source(os.fspath(item)))
        else:
            raise TypeError(f"expected a path or stoker.Source, got {type(item).__name__}")
    names = [s.name for s in sources]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"source names must be unique; repeated: {duplicates} "
                         "(pass name= to tell them apart)")
    return [s.resolve() for s in sources]


def integer_weights(sources: list[Source]) -> list[int]:
    """Scales float weights to integers for the engine's exact interleave (2^30 for
    the largest: ratios are kept to about one part in a billion)."""
    top = max(s.weight for s in sources)
    return [max(1, round(s.weight / top * (1 << 30))) for s in sources]


__all__ = ["Source", "as_sources", "integer_weights"]
