"""stoker.io against a real S3-protocol server (moto, server mode, loopback)."""

from __future__ import annotations

import datetime
import hashlib
import hmac

import pytest

import stoker
from stoker import errors
from fault_proxy import FaultProxy
from s3_server import ACCESS_KEY, BUCKET, REGION, SECRET_KEY, sha, start_s3, store_options

AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
           "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
           "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")


@pytest.fixture(scope="module")
def s3():
    server = start_s3()
    yield server
    server.server.stop()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    # Nothing from the developer's machine: no AWS variables, no ~/.aws files.
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_path_style_whole_objects(s3):
    store = stoker.io.ObjectStore(**store_options(s3))
    for key, data in s3.objects.items():
        assert store.read(f"s3://{BUCKET}/{key}") == data, key
    stats = store.stats()
    assert stats["reads_ok"] == len(s3.objects)
    assert stats["retries"] == 0
    assert stats["bytes"] == sum(len(d) for d in s3.objects.values())
    assert sum(stats["ttfb_ms_histogram"]) == stats["requests"]


def test_read_many_concurrent_in_order(s3):
    store = stoker.io.ObjectStore(**store_options(s3, max_in_flight=8))
    keys = sorted(s3.objects)
    got = store.read_many([f"s3://{BUCKET}/{k}" for k in keys])
    assert [sha(g) for g in got] == [sha(s3.objects[k]) for k in keys]
    assert store.stats()["in_flight"] == 0
    assert store.stats()["bytes_in_flight"] == 0


def test_iter_read_streams_in_order_within_its_window(s3):
    store = stoker.io.ObjectStore(**store_options(s3, max_in_flight=8))
    keys = sorted(s3.objects)
    uris = [f"s3://{BUCKET}/{k}" for k in keys]
    first = None
    for i, (key, view) in enumerate(zip(keys, store.iter_read(uris, window=3))):
        assert isinstance(view, memoryview) and view.readonly
        assert view == s3.objects[key] and bytes(view) == s3.objects[key], key
        if i == 0:
            first = view  # held while every other body is read and dropped
    # Nothing runs ahead of the window; a body still referenced is never reused.
    assert store.stats()["peak_in_flight"] <= 3
    assert first == s3.objects[keys[0]]
    # Buffers given back by dropped views serve the next reads with the right bytes.
    again = [sha(v) for v in store.iter_read(uris)]
    assert again == [sha(s3.objects[k]) for k in keys]
    assert store.stats()["in_flight"] == 0 and store.stats()["bytes_in_flight"] == 0


def test_iter_read_failures_raise_in_order_or_take_their_place(s3):
    store = stoker.io.ObjectStore(**store_options(s3, max_attempts=1))
    keys = sorted(s3.objects)[:5]
    uris = [f"s3://{BUCKET}/{k}" for k in keys]
    uris.insert(2, f"s3://{BUCKET}/objects/missing.bin")
    stream = store.iter_read(uris)
    assert bytes(next(stream)) == s3.objects[keys[0]]
    assert bytes(next(stream)) == s3.objects[keys[1]]
    with pytest.raises(errors.ImageNotFoundError, match="missing.bin"):
        next(stream)
    with pytest.raises(StopIteration):  # a failure ends the iteration
        next(stream)
    got = list(store.iter_read(uris, return_errors=True))
    assert isinstance(got[2], errors.ImageNotFoundError)
    assert [bytes(g) for i, g in enumerate(got) if i != 2] == [s3.objects[k] for k in keys]
    with pytest.raises(ValueError, match="window"):
        store.iter_read(uris, window=0)


def test_iter_read_dropped_midway_leaves_the_store_usable(s3):
    store = stoker.io.ObjectStore(**store_options(s3, max_in_flight=4))
    keys = sorted(s3.objects)
    uris = [f"s3://{BUCKET}/{k}" for k in keys]
    stream = store.iter_read(uris, window=16)
    assert bytes(next(stream)) == s3.objects[keys[0]]
    del stream  # 15 reads still in flight land in the abandoned iterator's slots
    assert store.read(uris[-1]) == s3.objects[keys[-1]]
    # A view outlives the store that read it.
    view = next(store.iter_read(uris[:1]))
    del store
    assert view == s3.objects[keys[0]]


def test_ranges(s3):
    store = stoker.io.ObjectStore(**store_options(s3))
    key = next(k for k, d in s3.objects.items() if len(d) > 100_000)
    data = s3.objects[key]
    uri = f"s3://{BUCKET}/{key}"
    assert store.read(uri, offset=0, length=10) == data[:10]
    assert store.read(uri, offset=1000, length=5000) == data[1000:6000]
    assert store.read(uri, offset=len(data) - 7) == data[-7:]
    assert store.read(uri, offset=len(data) - 7, length=100) == data[-7:]
    with pytest.raises(errors.InvalidArgumentError, match="range not satisfiable"):
        store.read(uri, offset=len(data) + 10)


def test_virtual_hosted_addressing(s3):
    with FaultProxy(s3.port) as proxy:
        host = "s3.stoker.test"
        store = stoker.io.ObjectStore(**store_options(
            s3, endpoint_url=f"http://{host}:{proxy.port}", addressing="virtual",
            resolve=[f"{BUCKET}.{host}:{proxy.port}:127.0.0.1"]))
        key = "objects/0003.bin"
        assert store.read(f"s3://{BUCKET}/{key}") == s3.objects[key]
        seen = proxy.headers_seen[-1]
        assert seen["host"] == f"{BUCKET}.{host}:{proxy.port}"
        assert proxy.requests == {f"/{key}": 1}  # no bucket in the path


def test_odd_key_encoding(s3):
    store = stoker.io.ObjectStore(**store_options(s3))
    assert store.read(f"s3://{BUCKET}/dir/a b+ü&=.bin") == b"odd key bytes"


def test_missing_key_bucket_and_forbidden_are_distinct(s3):
    with FaultProxy(s3.port, script=[None, None, "forbidden"]) as proxy:
        store = stoker.io.ObjectStore(**store_options(s3, endpoint_url=f"http://127.0.0.1:{proxy.port}"))
        with pytest.raises(errors.ImageNotFoundError, match="no such object.*NoSuchKey") as e:
            store.read(f"s3://{BUCKET}/nope.bin")
        assert f"s3://{BUCKET}/nope.bin" in str(e.value)
        with pytest.raises(errors.ImageNotFoundError, match="bucket does not exist.*NoSuchBucket"):
            store.read("s3://no-such-bucket/x.bin")
        with pytest.raises(errors.AccessDeniedError, match="missing or forbidden.*AccessDenied"):
            store.read(f"s3://{BUCKET}/objects/0001.bin")
        # Permanent errors: one request each, no retry.
        assert sum(proxy.requests.values()) == 3
        assert store.stats()["retries"] == 0


def _signed_headers(headers: dict[str, str]) -> tuple[str, str, str]:
    auth = headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 ")
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    return parts["Credential"], parts["SignedHeaders"], parts["Signature"]


def _expected_signature(headers, method, path, signed, secret, scope):
    # SigV4 computed independently here, from AWS's published algorithm.
    canonical_headers = "".join(f"{h}:{' '.join(headers[h].split())}\n" for h in signed.split(";"))
    canonical = "\n".join([method, path, "", canonical_headers, signed,
                           headers["x-amz-content-sha256"]])
    amz_date = headers["x-amz-date"]
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    date, region, service, _ = scope.split("/")
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_sigv4_signature_and_session_token_from_env(s3, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV0000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-session-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    with FaultProxy(s3.port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
        store = stoker.io.ObjectStore(backoff_base=0.001)
        key = "dir/a b+ü&=.bin"
        assert store.read(f"s3://{BUCKET}/{key}", offset=2, length=3) == b"d k"
        h = proxy.headers_seen[-1]
        credential, signed, signature = _signed_headers(h)
        key_id, scope = credential.split("/", 1)
        assert key_id == "AKIDFROMENV0000001"
        assert scope.split("/")[1:] == ["eu-central-1", "s3", "aws4_request"]
        assert h["x-amz-security-token"] == "env-session-token"
        assert "x-amz-security-token" in signed.split(";")
        assert "host" in signed.split(";")
        path = "/" + BUCKET + "/dir/a%20b%2B%C3%BC%26%3D.bin"
        assert signature == _expected_signature(h, "GET", path, signed, "env-secret", scope)
        assert datetime.datetime.strptime(h["x-amz-date"], "%Y%m%dT%H%M%SZ")


def test_credentials_region_endpoint_from_profile_files(s3, monkeypatch, tmp_path):
    with FaultProxy(s3.port) as proxy:
        (tmp_path / "credentials").write_text(
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = x\n"
            "[team]\naws_access_key_id = AKIDTEAMPROFILE01\n"
            "aws_secret_access_key = team-secret\n")
        (tmp_path / "config").write_text(
            f"[profile team]\nregion = ap-south-1\nendpoint_url = http://127.0.0.1:{proxy.port}\n")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
        monkeypatch.setenv("AWS_PROFILE", "team")
        store = stoker.io.ObjectStore()
        assert store.read(f"s3://{BUCKET}/objects/0002.bin") == s3.objects["objects/0002.bin"]
        h = proxy.headers_seen[-1]
        credential, signed, signature = _signed_headers(h)
        key_id, scope = credential.split("/", 1)
        assert key_id == "AKIDTEAMPROFILE01"
        assert scope.split("/")[1] == "ap-south-1"
        assert signature == _expected_signature(h, "GET", f"/{BUCKET}/objects/0002.bin",
                                                signed, "team-secret", scope)
        assert "profile 'team'" in repr(store)
        with pytest.raises(errors.InvalidArgumentError, match="profile 'ghost' not found"):
            stoker.io.ObjectStore(profile="ghost")


def test_unknown_option_and_bad_values():
    with pytest.raises(errors.InvalidArgumentError, match="addressing"):
        stoker.io.ObjectStore(addressing="sideways")
    with pytest.raises(errors.InvalidArgumentError, match="max_in_flight"):
        stoker.io.ObjectStore(max_in_flight=0)


def test_in_flight_bound_and_connection_reuse(s3):
    keys = sorted(s3.objects)[:40]
    with FaultProxy(s3.port, fault_rate=1.0, faults=("latency",), latency_s=0.05) as proxy:
        store = stoker.io.ObjectStore(**store_options(
            s3, endpoint_url=f"http://127.0.0.1:{proxy.port}", max_in_flight=4))
        got = store.read_many([f"s3://{BUCKET}/{k}" for k in keys])
        assert got == [s3.objects[k] for k in keys]
        assert 2 <= proxy.max_active <= 4  # concurrent, never above the bound
        assert proxy.connections <= 4  # keep-alive: 40 requests over <= 4 connections
        for k in keys[:5]:  # sequential reads reuse one of them
            store.read(f"s3://{BUCKET}/{k}")
        assert proxy.connections <= 4
