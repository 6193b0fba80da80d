"""stoker.io retries, resumes and timeouts, with faults injected between the client and
a real S3-protocol server. Request counts are what the proxy (the server side) saw."""

from __future__ import annotations

import time

import pytest

import stoker
from stoker import errors
from fault_proxy import FaultProxy
from s3_server import BUCKET, sha, start_s3, store_options

BIG = "objects/big.bin"


@pytest.fixture(scope="module")
def s3():
    server = start_s3(num_objects=120, seed=11)
    import random
    server.put(BIG, random.Random(5).randbytes(400_000))
    yield server
    server.server.stop()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# Every test runs against both HTTP clients: plain http:// normally goes through
# Stoker's own HTTP/1.1 client ("auto"), and "curl" sends it through libcurl, which
# https:// always uses. Their retries, resumes and timeouts must not differ.
_client = "auto"


@pytest.fixture(autouse=True, params=["auto", "curl"])
def http_client(request):
    global _client
    _client = request.param
    yield request.param
    _client = "auto"


def options(s3, **overrides):
    overrides.setdefault("http_client", _client)
    return store_options(s3, **overrides)


def through(proxy, s3, **overrides):
    return stoker.io.ObjectStore(**options(
        s3, endpoint_url=f"http://127.0.0.1:{proxy.port}", **overrides))


def test_midbody_reset_resumes_with_range_and_if_match(s3):
    with FaultProxy(s3.port, script=["reset"], reset_after=100_000) as proxy:
        store = through(proxy, s3)
        assert store.read(f"s3://{BUCKET}/{BIG}") == s3.objects[BIG]
        assert proxy.requests[f"/{BUCKET}/{BIG}"] == 2
        first, second = proxy.headers_seen
        assert "range" not in first and "if-match" not in first
        assert second["range"] == "bytes=100000-"
        etag = s3.client.head_object(Bucket=BUCKET, Key=BIG)["ETag"]
        assert second["if-match"] == etag
        stats = store.stats()
        assert stats["resumed"] == 1 and stats["retries"] == 1


def test_ranged_read_resumes_inside_its_range(s3):
    with FaultProxy(s3.port, script=["reset"], reset_after=5000) as proxy:
        store = through(proxy, s3)
        data = s3.objects[BIG]
        assert store.read(f"s3://{BUCKET}/{BIG}", offset=1000, length=50_000) == data[1000:51000]
        assert proxy.headers_seen[1]["range"] == "bytes=6000-50999"


def test_object_replaced_mid_read_fails_instead_of_splicing(s3):
    key = "objects/replaced.bin"
    s3.put(key, b"A" * 200_000)

    def replace(fault, path):
        s3.put(key, b"B" * 200_000)

    with FaultProxy(s3.port, script=["reset"], reset_after=50_000, on_fault=replace) as proxy:
        store = through(proxy, s3)
        with pytest.raises(errors.StorageError, match="object changed while it was read"):
            store.read(f"s3://{BUCKET}/{key}")
        assert proxy.requests[f"/{BUCKET}/{key}"] == 2  # no third try: a data error


@pytest.mark.parametrize("fault,reason", [
    ("slowdown", "http_503_SlowDown"),
    ("error500", "http_500_InternalError"),
    ("throttled403", "http_403_RequestThrottled"),
    ("drop", "empty_reply"),
])
def test_transient_faults_are_retried(s3, fault, reason):
    key = "objects/0005.bin"
    with FaultProxy(s3.port, script=[fault, fault]) as proxy:
        store = through(proxy, s3)
        assert store.read(f"s3://{BUCKET}/{key}") == s3.objects[key]
        assert proxy.requests[f"/{BUCKET}/{key}"] == 3
        assert store.stats()["retries_by_reason"] == {reason: 2}


def test_max_attempts_honoured_and_throttle_is_not_not_found(s3):
    key = "objects/0006.bin"
    with FaultProxy(s3.port, script=["slowdown"] * 20) as proxy:
        store = through(proxy, s3, max_attempts=4)
        with pytest.raises(errors.StoreUnavailableError) as e:
            store.read(f"s3://{BUCKET}/{key}")
        assert not isinstance(e.value, FileNotFoundError)
        assert "throttled" in str(e.value) and "max attempts reached" in str(e.value)
        assert proxy.requests[f"/{BUCKET}/{key}"] == 4


def test_stalled_body_times_out_and_retries_on_new_connection(s3):
    key = "objects/0007.bin"
    with FaultProxy(s3.port, script=["hang"]) as proxy:
        store = through(proxy, s3, stall_timeout=1.0)
        start = time.monotonic()
        assert store.read(f"s3://{BUCKET}/{key}") == s3.objects[key]
        assert time.monotonic() - start < 5
        assert store.stats()["retries_by_reason"] == {"timeout": 1}
        assert proxy.connections == 2  # the retry did not reuse the hung connection
        assert store.stats()["connections"] == 2


def test_total_timeout_fires_on_slow_drip(s3):
    with FaultProxy(s3.port, script=["bandwidth"] * 5, bandwidth_bps=20_000) as proxy:
        store = through(proxy, s3, total_timeout=0.5, max_attempts=2)
        start = time.monotonic()
        with pytest.raises(errors.StoreUnavailableError, match="timeout"):
            store.read(f"s3://{BUCKET}/{BIG}")
        assert time.monotonic() - start < 5
        assert proxy.requests[f"/{BUCKET}/{BIG}"] == 2


def test_seeded_soak_matches_clean_run(s3):
    keys = sorted(k for k in s3.objects if k.startswith("objects/0"))
    uris = [f"s3://{BUCKET}/{k}" for k in keys]
    clean = stoker.io.ObjectStore(**options(s3)).read_many(uris)
    seed = 20261129
    faults = ("latency", "reset", "slowdown", "error500", "drop", "throttled403")
    with FaultProxy(s3.port, seed=seed, fault_rate=0.4, faults=faults,
                    max_faults_per_path=3, reset_after=2000) as proxy:
        store = through(proxy, s3, max_attempts=5, max_in_flight=16)
        faulty = store.read_many(uris)
        assert [sha(d) for d in faulty] == [sha(d) for d in clean], f"seed {seed}"
        stats = store.stats()
        # Each fault that fails a request costs one retry, except a reset that came
        # after the whole (small) body had arrived, and a dropped reply on a reused
        # connection, which either client re-sends once on a fresh one.
        failing = sum(proxy.injected[f] for f in faults if f != "latency")
        lenient = proxy.injected["reset"] + proxy.injected["drop"]
        assert failing - lenient <= stats["retries"] <= failing
        assert stats["retries"] > 20
        assert stats["resumed"] > 0
        assert stats["reads_ok"] == len(uris) and stats["reads_failed"] == 0


def test_outage_above_budget_fails_fast_with_clear_error(s3):
    keys = sorted(k for k in s3.objects if k.startswith("objects/0"))[:60]
    with FaultProxy(s3.port, fault_rate=1.0, faults=("error500",)) as proxy:
        store = through(proxy, s3, max_attempts=10, retry_budget=140, max_in_flight=8)
        start = time.monotonic()
        results = store.read_many([f"s3://{BUCKET}/{k}" for k in keys], return_errors=True)
        assert time.monotonic() - start < 10
        assert all(isinstance(r, errors.StoreUnavailableError) for r in results)
        assert any("retry budget exhausted" in str(r) for r in results)
        stats = store.stats()
        assert stats["retries"] == 10  # 140 tokens / 14 per transient retry
        # Without the budget, 60 reads x 10 attempts; with it, one request each + 10.
        assert sum(proxy.requests.values()) == len(keys) + 10


def test_connect_timeout_on_a_full_accept_queue(s3):
    # A listener that never accepts, its one-slot backlog taken: the kernel drops
    # further SYNs, so connecting hangs like a blackholed host until the timeout.
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        f = socket.socket()
        f.setblocking(False)
        f.connect_ex(("127.0.0.1", port))
        fillers.append(f)
    time.sleep(0.2)
    try:
        store = stoker.io.ObjectStore(**options(
            s3, endpoint_url=f"http://127.0.0.1:{port}", connect_timeout=0.3, max_attempts=2))
        start = time.monotonic()
        with pytest.raises(errors.StoreUnavailableError, match="max attempts reached"):
            store.read(f"s3://{BUCKET}/objects/0001.bin")
        assert time.monotonic() - start < 3
        assert store.stats()["retries_by_reason"] == {"timeout": 1}
    finally:
        for f in fillers:
            f.close()
        listener.close()
