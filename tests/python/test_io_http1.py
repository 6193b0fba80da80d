"""Stoker's own HTTP/1.1 client (plain http://): framing, connection reuse, name
resolution and the replies a real server may send, against a raw socket server that
answers with exactly the bytes each test scripts. The same reads through libcurl
(``http_client="curl"``) give the same results."""

from __future__ import annotations

import socket
import threading
import time

import pytest

import stoker
from stoker import errors
from fault_proxy import FaultProxy
from s3_server import BUCKET, start_s3, store_options


class RawServer:
    """Accepts connections on 127.0.0.1 and answers each request with
    ``reply(path, request_number)``: bytes to send, or None to close the connection
    without answering. ``close_after`` closes a connection after that many replies.
    Records the request heads it read and how many connections it accepted."""

    def __init__(self, reply, close_after: int | None = None):
        self.reply = reply
        self.close_after = close_after
        self.heads: list[bytes] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        served = 0
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                with self.lock:
                    self.heads.append(head)
                    number = len(self.heads)
                path = head.split(b" ")[1].decode("latin-1")
                answer = self.reply(path, number)
                if answer is None:
                    return
                try:
                    conn.sendall(answer)
                except OSError:
                    return
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    return

    def close(self):
        self.sock.close()


def ok(body: bytes, extra: str = "") -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def store(client: str = "auto", **options) -> stoker.io.ObjectStore:
    options.setdefault("allow_private_addresses", True)
    options.setdefault("backoff_base", 0.001)
    options.setdefault("max_backoff", 0.01)
    return stoker.io.ObjectStore(http_client=client, **options)


CLIENTS = pytest.mark.parametrize("client", ["auto", "curl"])


@CLIENTS
def test_chunked_body_with_extensions_and_trailer(client):
    payload = bytes(range(256)) * 300
    pieces = [payload[:1], payload[1:5000], payload[5000:]]
    wire = b"".join(f"{len(p):x};ext=1\r\n".encode() + p + b"\r\n" for p in pieces)
    reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + wire +
             b"0\r\nX-Checksum: abc\r\n\r\n")
    server = RawServer(lambda path, n: reply)
    s = store(client)
    assert s.read(server.url("/a")) == payload
    assert s.read(server.url("/b")) == payload
    assert server.connections == 1  # the connection survived the first chunked body


@CLIENTS
def test_http10_body_runs_to_the_close(client):
    body = b"x" * 100_000
    server = RawServer(lambda path, n: b"HTTP/1.0 200 OK\r\n\r\n" + body, close_after=1)
    s = store(client)
    assert s.read(server.url("/a")) == body
    assert s.read(server.url("/b")) == body
    assert server.connections == 2


@CLIENTS
def test_interim_100_continue_is_skipped(client):
    server = RawServer(lambda path, n: b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"final"))
    assert store(client).read(server.url("/a")) == b"final"


@CLIENTS
def test_body_cut_short_is_retried_and_then_fails_clearly(client):
    server = RawServer(lambda path, n: b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nabc",
                       close_after=1)
    s = store(client, max_attempts=3)
    with pytest.raises(errors.StoreUnavailableError, match="max attempts reached"):
        s.read(server.url("/a"))
    assert len(server.heads) == 3
    assert s.stats()["retries"] == 2


@pytest.mark.parametrize("reply,cause", [
    (b"HTTP/1.1 2x0 OK\r\n\r\n", "malformed HTTP response"),
    (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "malformed HTTP response"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n", "larger than 64 KiB"),
])
def test_malformed_replies_fail_with_the_cause(reply, cause):
    server = RawServer(lambda path, n: reply, close_after=1)
    with pytest.raises(errors.StorageError, match=cause) as e:
        store(max_attempts=2).read(server.url("/obj"))
    assert "/obj" in str(e.value)  # names the object


def test_keep_alive_reuses_one_connection_and_encodes_the_target():
    server = RawServer(lambda path, n: ok(path.encode()))
    s = store()
    for i in range(20):
        assert s.read(server.url(f"/k{i}")) == f"/k{i}".encode()
    assert server.connections == 1
    assert s.stats()["connections"] == 1 and s.stats()["requests"] == 20
    assert s.read(server.url("/a b/ü")) == b"/a%20b/%C3%BC"


def test_idle_connection_closed_by_the_server_is_replaced_without_a_retry():
    # The server closes every connection after one reply, without saying so: the next
    # read finds its kept connection dead (already, or when it sends) and opens another.
    server = RawServer(lambda path, n: ok(b"v"), close_after=1)
    s = store()
    for _ in range(10):
        assert s.read(server.url("/k")) == b"v"
        time.sleep(0.01)
    assert s.stats()["retries"] == 0
    assert server.connections == s.stats()["connections"] == 10


def test_reply_lost_on_a_reused_connection_is_sent_again_once():
    # Request 2 arrives on the kept connection and the server closes it unanswered (it
    # timed the connection out as the request came): one re-send on a new connection,
    # not a retry. On a new connection the same loss is a retry.
    lost = {2, 4, 5}
    server = RawServer(lambda path, n: None if n in lost else ok(b"v"))
    s = store()
    assert s.read(server.url("/a")) == b"v"
    assert s.read(server.url("/b")) == b"v"
    assert s.stats()["retries"] == 0
    assert server.connections == 2
    assert s.read(server.url("/c")) == b"v"  # 4 lost on a reused one, 5 on a fresh one
    assert s.stats()["retries_by_reason"] == {"empty_reply": 1}


def test_etag_with_a_control_character_is_not_sent_back():
    # A cut-off body normally resumes with Range + If-Match: <ETag>. An ETag with a CR
    # in it would end that header early, so the read starts over instead.
    body = b"z" * 5000
    replies = {1: b'HTTP/1.1 200 OK\r\nETag: "a\rb"\r\nContent-Length: 5000\r\n\r\n' + body[:100]}
    server = RawServer(lambda path, n: replies.get(n, ok(body)), close_after=1)
    assert store().read(server.url("/obj")) == body
    second = server.heads[1].lower()
    assert b"if-match" not in second and b"range" not in second


def test_host_with_characters_no_host_has_is_refused():
    with pytest.raises(errors.StorageError, match="host name"):
        store().read("http://a\r\nx-injected:1/x")


def test_host_names_are_resolved_off_the_io_thread():
    server = RawServer(lambda path, n: ok(b"named"))
    s = store()
    # localhost may come back as ::1 first, where nothing listens: the next address.
    assert s.read(server.url("/a", host="localhost")) == b"named"
    assert s.read_many([server.url(f"/{i}", host="localhost") for i in range(8)]) == [b"named"] * 8
    with pytest.raises(errors.StoreUnavailableError, match="resolve|timed out"):
        store(max_attempts=1, connect_timeout=2).read("http://no-such-host.invalid/x")


def test_own_client_and_curl_read_the_same_from_s3():
    s3 = start_s3(num_objects=40, seed=3)
    try:
        uris = [f"s3://{BUCKET}/{k}" for k in sorted(s3.objects)]
        with FaultProxy(s3.port) as proxy:
            own = stoker.io.ObjectStore(**store_options(
                s3, endpoint_url=f"http://127.0.0.1:{proxy.port}", max_in_flight=8))
            got = own.read_many(uris)
            ranged = [own.read(u, offset=3, length=100) for u in uris[:5]]
            assert proxy.connections <= 8  # kept alive across the reads
        curl = stoker.io.ObjectStore(**store_options(s3, http_client="curl"))
        assert got == curl.read_many(uris) == [s3.objects[k] for k in sorted(s3.objects)]
        assert ranged == [curl.read(u, offset=3, length=100) for u in uris[:5]]
        assert "http_client=auto" in repr(own) and "http_client=curl" in repr(curl)
    finally:
        s3.server.stop()


def test_benchmark_floor_client_builds_and_reads(tmp_path):
    # benchmarks/bench_io.py compiles and runs this client as its CPU floor; keep it
    # working.
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    bench = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
    sys.path.insert(0, bench)
    try:
        import bench_io
    finally:
        sys.path.remove(bench)
    server = RawServer(lambda path, n: ok(path.encode() * 100))
    binary = bench_io.build_floor(str(tmp_path))
    wall, cpu, total = bench_io.run_floor(binary, server.port, 30, 4)
    assert total == sum(len(f"/bench/{i:06d}.bin") * 100 for i in range(30))
    assert wall > 0 and cpu >= 0


def test_http_client_option_is_checked():
    with pytest.raises(errors.InvalidArgumentError, match="http_client"):
        stoker.io.ObjectStore(http_client="nghttp2")


def test_iter_read_refuses_a_second_thread_while_one_waits():
    # next() waits without the GIL; another thread advancing the same stream meanwhile
    # would take the same slot. It is refused, as a running generator refuses.
    release = threading.Event()

    def reply(path, n):
        release.wait(10)
        return ok(path.encode())

    server = RawServer(reply)
    stream = store().iter_read([server.url("/a"), server.url("/b")])
    got = []
    waiter = threading.Thread(target=lambda: got.append(bytes(next(stream))))
    waiter.start()
    deadline = time.monotonic() + 10
    while not server.heads and time.monotonic() < deadline:  # it is inside next()
        time.sleep(0.01)
    try:
        with pytest.raises(ValueError, match="already being advanced"):
            next(stream)
    finally:
        release.set()
        waiter.join(10)
    assert got == [b"/a"]
    assert bytes(next(stream)) == b"/b"
