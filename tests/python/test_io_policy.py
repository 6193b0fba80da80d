"""stoker.io's URI security policy, TLS verification, local confinement, and secrets."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import logging
import os
import pickle
import ssl
import threading

import pytest

import stoker
from stoker import errors
from fault_proxy import FaultProxy
from s3_server import BUCKET, start_s3, store_options


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"hello over http"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"v1"')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve(tls_context=None):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    if tls_context is not None:
        server.socket = tls_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def http_server():
    server = _serve()
    yield server.server_address[1]
    server.shutdown()


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stoker test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_self_signed_refused_by_default_accepted_with_ca_file(tmp_path):
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = _serve(context)
    url = f"https://127.0.0.1:{server.server_address[1]}/object"
    try:
        strict = stoker.io.ObjectStore(allow_private_addresses=True, max_attempts=3)
        with pytest.raises(errors.StorageError, match="TLS certificate verification failed"):
            strict.read(url)
        assert strict.stats()["requests"] == 1  # a verification failure is not retried
        trusting = stoker.io.ObjectStore(allow_private_addresses=True, ca_file=str(cert))
        assert trusting.read(url) == b"hello over http"
    finally:
        server.shutdown()


@pytest.mark.parametrize("uri,rule", [
    ("http://169.254.169.254/latest/meta-data/", "link-local address"),
    ("http://[::1]/", "loopback address"),
    ("http://0x7f.1/", "loopback address"),
    ("http://2130706433/", "loopback address"),
    ("http://[fe80::1]/x", "link-local address"),
    ("http://10.1.2.3/x", "private address"),
    ("http://localhost/x", "loopback address"),
    ("gopher://example.com/x", "scheme"),
    ("file:///etc/passwd", "outside image root"),
    ("../../etc/passwd", "'..' escape"),
])
def test_policy_refusals_name_the_rule(tmp_path, uri, rule):
    store = stoker.io.ObjectStore(image_root=str(tmp_path))
    with pytest.raises(errors.InvalidArgumentError) as e:
        store.read(uri)
    assert f"(rule: {rule})" in str(e.value)
    assert store.stats()["requests"] == 0  # refused before any connection


def test_dns_name_resolving_to_loopback_refused_at_connect(http_server):
    name = "innocent.stoker.test"
    store = stoker.io.ObjectStore(resolve=[f"{name}:{http_server}:127.0.0.1"])
    with pytest.raises(errors.InvalidArgumentError, match=r"\(rule: loopback address\)"):
        store.read(f"http://{name}:{http_server}/x")
    opted_in = stoker.io.ObjectStore(resolve=[f"{name}:{http_server}:127.0.0.1"],
                                     allow_private_addresses=True)
    assert opted_in.read(f"http://{name}:{http_server}/x") == b"hello over http"


def test_redirect_to_forbidden_host_refused(http_server):
    store = stoker.io.ObjectStore(allow_private_addresses=True)
    with pytest.raises(errors.InvalidArgumentError, match=r"\(rule: redirects\)"):
        store.read(f"http://127.0.0.1:{http_server}/redirect")


def test_allow_lists(http_server):
    store = stoker.io.ObjectStore(allowed_schemes=["s3"], allowed_hosts=["good-bucket"])
    with pytest.raises(errors.InvalidArgumentError, match=r"\(rule: scheme\)"):
        store.read(f"http://127.0.0.1:{http_server}/x")
    with pytest.raises(errors.InvalidArgumentError, match=r"\(rule: host allow-list\)"):
        store.read("s3://other-bucket/x")


def test_local_reads_confined_to_image_root(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    (root / "in.jpg").write_bytes(b"inside")
    (tmp_path / "secret.txt").write_bytes(b"outside")
    os.symlink(tmp_path / "secret.txt", root / "escape.jpg")
    store = stoker.io.ObjectStore(image_root=str(root))
    assert store.read("in.jpg") == b"inside"
    assert store.read(f"file://{root}/in.jpg", offset=2, length=3) == b"sid"
    assert store.read_many(["in.jpg", "in.jpg"]) == [b"inside", b"inside"]
    with pytest.raises(errors.InvalidArgumentError, match=r"\(rule: symlink escape\)"):
        store.read("escape.jpg")
    with pytest.raises(errors.ImageNotFoundError):
        store.read("missing.jpg")
    no_root = stoker.io.ObjectStore()
    with pytest.raises(errors.InvalidArgumentError, match=r"\(rule: local root\)"):
        no_root.read("in.jpg")


def test_canary_secret_never_leaks(monkeypatch, tmp_path, caplog):
    canary = "CANARY-c4n4ry-S3CR3T-0123456789"
    token = "CANARY-T0K3N-9876543210"
    s3 = start_s3(num_objects=1)
    try:
        caplog.set_level(logging.DEBUG)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCANARYTEST0001")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", canary)
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
        monkeypatch.setenv("HOME", str(tmp_path))
        texts = []
        with FaultProxy(s3.port, script=["slowdown"] * 10) as proxy:
            store = stoker.io.ObjectStore(endpoint_url=f"http://127.0.0.1:{proxy.port}",
                                          max_attempts=2, throttle_backoff_base=0.001)
            texts += [repr(store), str(store.stats())]
            for uri in (f"s3://{BUCKET}/objects/0000.bin", f"s3://{BUCKET}/nope",
                        "http://169.254.169.254/", f"s3://{BUCKET}/x?X-Amz-Signature={canary}"):
                try:
                    store.read(uri)
                except errors.StokerError as e:
                    texts += [str(e), repr(e), repr(e.args), str(pickle.loads(pickle.dumps(e)))]
            results = store.read_many([f"s3://{BUCKET}/nope"], return_errors=True)
            texts += [repr(r) for r in results]
            texts += [repr(store), str(store.stats())]
        texts += [r.getMessage() for r in caplog.records]
        assert len(texts) > 10
        for text in texts:
            assert canary not in text and token not in text, text
        assert not any(canary in str(v) for v in vars(store).values())
    finally:
        s3.server.stop()
