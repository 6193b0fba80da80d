"""Stoker's exception hierarchy.

Every error raised by the engine is a :class:`StokerError`. Each subclass also
derives from the built-in exception a Python user would expect (a missing image is a
``FileNotFoundError``, a malformed manifest line a ``ValueError``), so existing
``except`` clauses keep working. Errors about one sample carry its key
(``"<manifest>:<line>"``) in :attr:`StokerError.sample_key`.
"""

from __future__ import annotations


class StokerError(Exception):
    """Base class of every error raised by Stoker."""

    #: The engine's status code name, e.g. ``"CorruptImage"``.
    code: str = "Internal"

    def __init__(self, message: str, *, sample_key: str | None = None) -> None:
        super().__init__(message)
        #: ``"<manifest>:<line>"`` of the sample that failed, when there is one.
        self.sample_key = sample_key


class InvalidArgumentError(StokerError, ValueError):
    """An option passed to Stoker is out of range or malformed."""

    code = "InvalidArgument"


class ManifestError(StokerError, ValueError):
    """A manifest line is not valid JSON or not a valid sample."""

    code = "ManifestError"


class ImageNotFoundError(StokerError, FileNotFoundError):
    """A file named by the manifest (or the manifest itself) does not exist."""

    code = "NotFound"


class StorageError(StokerError, OSError):
    """Reading a file failed for a reason other than its absence."""

    code = "IOError"


class AccessDeniedError(StorageError, PermissionError):
    """The object store refused access (HTTP 403). S3 answers 403 rather than 404 for
    an absent key when the caller may not list the bucket, so this means "missing or
    forbidden"."""

    code = "PermissionDenied"


class StoreUnavailableError(StorageError):
    """The object store kept throttling (503 SlowDown and the like) or failing with
    transient errors until the retry attempts or the shared retry budget ran out. Never
    a "not found": the object may well exist."""

    code = "Unavailable"


class DecodeError(StokerError, ValueError):
    """An image could not be decoded."""


class CorruptImageError(DecodeError):
    """An image's bytes are damaged or truncated."""

    code = "CorruptImage"


class UnsupportedImageError(DecodeError):
    """An image is in a format (or uses a feature) that Stoker does not decode."""

    code = "UnsupportedImage"


class LimitExceededError(StokerError):
    """A configured limit was exceeded: ``max_image_pixels``, or
    ``max_consecutive_errors`` under ``on_error="skip"``."""

    code = "LimitExceeded"


class CancelledError(StokerError):
    """The work was stopped (the loader or its epoch was closed)."""

    code = "Cancelled"


_BY_CODE: dict[str, type[StokerError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        ManifestError,
        ImageNotFoundError,
        StorageError,
        AccessDeniedError,
        StoreUnavailableError,
        CorruptImageError,
        UnsupportedImageError,
        LimitExceededError,
        CancelledError,
    )
}


def _make_error(code: str, message: str, sample_key: str = "") -> StokerError:
    """Builds the exception for an engine status (called by the native module)."""
    cls = _BY_CODE.get(code, StokerError)
    return cls(message, sample_key=sample_key or None)


__all__ = [
    "StokerError",
    "InvalidArgumentError",
    "ManifestError",
    "ImageNotFoundError",
    "StorageError",
    "AccessDeniedError",
    "StoreUnavailableError",
    "DecodeError",
    "CorruptImageError",
    "UnsupportedImageError",
    "LimitExceededError",
    "CancelledError",
]
