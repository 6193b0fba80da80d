"""Object storage IO: one reader for local paths, ``s3://bucket/key`` and ``http(s)://``.

>>> store = stoker.io.ObjectStore(endpoint_url="http://127.0.0.1:9000", max_in_flight=64)
>>> data = store.read("s3://bucket/images/cat.jpg")
>>> head = store.read("s3://bucket/train.jsonl", offset=0, length=1 << 20)
>>> blobs = store.read_many(["s3://bucket/a.jpg", "https://cdn.example.com/b.jpg"])

Remote reads run on a native IO thread (libcurl, many requests in flight over reused
connections); Python's GIL is released while they run. Failures raise the exceptions of
:mod:`stoker.errors`: a missing object :class:`~stoker.errors.ImageNotFoundError`, a 403
:class:`~stoker.errors.AccessDeniedError`, throttling or an outage that outlasted the
retries :class:`~stoker.errors.StoreUnavailableError`, a URI refused by the security
policy :class:`~stoker.errors.InvalidArgumentError` (the message names the rule).

S3 settings not given here come from the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``)
and then from the shared credentials and config files. Secrets are never kept on the
Python object nor shown by ``repr`` or :meth:`ObjectStore.stats`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

from stoker import _stoker
from stoker.errors import StorageError

__all__ = ["ObjectStore"]

#: Bytes per ranged GET when a manifest is staged.
STAGE_CHUNK_BYTES = 8 << 20


class ObjectStore:
    """Reads whole objects or byte ranges from local paths, S3 and HTTP(S).

    Security policy (for URIs that come from manifests; the configured S3 endpoint is
    trusted): ``allowed_schemes`` (default all of ``local``, ``file``, ``s3``, ``http``,
    ``https``), ``allowed_hosts`` (http(s) hosts and S3 buckets; exact names or
    ``"*.suffix"``), ``allow_private_addresses`` (off: loopback, link-local and private
    addresses are refused, checked on the resolved address at connect time),
    ``image_root`` (local paths must stay inside it; without it local paths are refused).
    Redirects are never followed. TLS certificates are verified unless
    ``verify_tls=False``; ``ca_file`` trusts a private CA.

    Retries: ``max_attempts`` per read; full-jitter exponential backoff from
    ``backoff_base`` (transient errors) or ``throttle_backoff_base`` (throttling) seconds,
    capped at ``max_backoff``; a ``retry_budget`` of tokens shared by all reads so that an
    outage fails fast. Timeouts (seconds): ``connect_timeout``, ``stall_timeout`` (no
    byte received), ``total_timeout`` (one attempt).

    HTTP: plain ``http://`` (S3-compatible stores on a cluster network, say) goes
    through Stoker's own HTTP/1.1 client, which spends about half the CPU per byte of
    libcurl's; ``https://`` always uses libcurl (TLS, HTTP/2). ``http_client="curl"``
    sends plain HTTP through libcurl too.
    """

    def stage(self, uri: str, folder: str | os.PathLike[str]) -> str:
        """Copies the object at ``uri`` into ``folder`` by ranged reads and returns the
        local path. The copy is named after the URI, size and ETag, so it is reused
        while the object is unchanged and fetched anew when it changes (objects whose
        server gives no ETag are fetched every time). The loader stages object-store
        manifests this way, then indexes and memory-maps the local copy."""
        import hashlib
        import tempfile

        os.makedirs(folder, exist_ok=True)
        first, size, etag = self._native.read_with_info(uri, 0, STAGE_CHUNK_BYTES)
        if size < 0:
            size = len(first) if len(first) < STAGE_CHUNK_BYTES else -1
        digest = hashlib.sha256(f"{uri}\0{size}\0{etag}".encode()).hexdigest()[:24]
        name = os.path.basename(uri.rstrip("/")) or "object"
        target = os.path.join(os.fspath(folder), f"{digest}-{name}")
        if etag and size >= 0 and os.path.exists(target) and os.path.getsize(target) == size:
            return target
        fd, partial = tempfile.mkstemp(dir=folder, prefix=".staging-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(first)
                offset, chunk = len(first), first
                while (size < 0 and len(chunk) == STAGE_CHUNK_BYTES) or 0 <= offset < size:
                    chunk, _, now = self._native.read_with_info(uri, offset, STAGE_CHUNK_BYTES)
                    if etag and now and now != etag:
                        raise StorageError(f"{uri} changed while it was being read "
                                           f"(ETag {etag} became {now})")
                    if not chunk:
                        break
                    out.write(chunk)
                    offset += len(chunk)
            if size >= 0 and os.path.getsize(partial) != size:
                raise StorageError(f"{uri}: read {os.path.getsize(partial)} bytes of {size}")
            os.replace(partial, target)  # atomic: concurrent loaders never see half
        except BaseException:
            os.unlink(partial)
            raise
        return target

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        addressing: str = "auto",
        anonymous: bool = False,
        credentials_file: str | None = None,
        config_file: str | None = None,
        image_root: str | None = None,
        allowed_schemes: Sequence[str] | None = None,
        allowed_hosts: Sequence[str] | None = None,
        allow_private_addresses: bool = False,
        max_in_flight: int = 64,
        max_bytes_in_flight: int = 256 << 20,
        max_attempts: int = 5,
        backoff_base: float = 0.05,
        throttle_backoff_base: float = 1.0,
        max_backoff: float = 20.0,
        retry_budget: int = 500,
        connect_timeout: float = 5.0,
        stall_timeout: float = 10.0,
        total_timeout: float = 120.0,
        max_object_bytes: int = 1 << 30,
        verify_tls: bool = True,
        ca_file: str | None = None,
        resolve: Sequence[str] | None = None,
        seed: int = 0,
        http_client: str = "auto",
    ) -> None:
        options = {
            "endpoint_url": endpoint_url,
            "region": region,
            "profile": profile,
            "access_key_id": access_key_id,
            "secret_access_key": secret_access_key,
            "session_token": session_token,
            "addressing": addressing,
            "anonymous": anonymous,
            "credentials_file": credentials_file,
            "config_file": config_file,
            "image_root": image_root,
            "allowed_schemes": list(allowed_schemes) if allowed_schemes is not None else None,
            "allowed_hosts": list(allowed_hosts) if allowed_hosts is not None else None,
            "allow_private_addresses": allow_private_addresses,
            "max_in_flight": max_in_flight,
            "max_bytes_in_flight": max_bytes_in_flight,
            "max_attempts": max_attempts,
            "backoff_base": backoff_base,
            "throttle_backoff_base": throttle_backoff_base,
            "max_backoff": max_backoff,
            "retry_budget": retry_budget,
            "connect_timeout": connect_timeout,
            "stall_timeout": stall_timeout,
            "total_timeout": total_timeout,
            "max_object_bytes": max_object_bytes,
            "verify_tls": verify_tls,
            "ca_file": ca_file,
            "resolve": list(resolve) if resolve is not None else None,
            "seed": seed,
            "http_client": http_client,
        }
        # The secrets live only in the native object from here on.
        self._native = _stoker._ObjectStore(options)

    def read(self, uri: str, offset: int | None = None, length: int | None = None) -> bytes:
        """The object at ``uri``, or ``length`` bytes of it from ``offset``."""
        return self._native.read(uri, 0 if offset is None else offset,
                                 -1 if length is None else length)

    def read_many(self, uris: Sequence[str], *, return_errors: bool = False) -> list:
        """Reads every URI concurrently (up to ``max_in_flight`` at once); results in
        order. A failure raises, or with ``return_errors=True`` its exception object
        takes the place of the bytes."""
        return self._native.read_many(list(uris), return_errors)

    def iter_read(self, uris: Iterable[str], *, window: int | None = None,
                  return_errors: bool = False) -> Iterator:
        """Reads ``uris`` concurrently and yields each body in order, as soon as it and
        those before it have arrived: the streaming form of ``read_many``, with memory
        bounded by ``window`` bodies (default twice ``max_in_flight``) however many URIs
        there are.

        Each body is a read-only ``memoryview`` over the received buffer, not a copy
        (``bytes(view)`` makes one); when the last reference to it goes, its buffer is
        reused by a later read. A failure raises and ends the iteration, or with
        ``return_errors=True`` its exception object takes the body's place. Like a
        generator, the stream is advanced by one thread at a time: ``next()`` from a
        second thread while one waits raises ``ValueError``."""
        if window is not None and window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        return self._native.iter_read(list(uris), 0 if window is None else int(window),
                                      return_errors)

    def stats(self) -> dict:
        """Counters: reads, HTTP requests, bytes, retries (by reason), errors (by
        reason), ``connections`` opened (requests beyond them reused one), in-flight
        gauges (``in_flight`` now, ``peak_in_flight`` the most at once), and
        time-to-first-byte / total latency histograms (counts per
        ``latency_bounds_ms`` bucket, the last one open-ended)."""
        return self._native.stats()

    def __repr__(self) -> str:
        return repr(self._native)
