"""A seeded, fault-injecting HTTP/1.1 proxy for the object-storage tests.

It sits between the client under test and a real endpoint (moto) and, per request,
either forwards it untouched or injects one fault:

* ``latency``   : waits ``latency_s`` before forwarding;
* ``bandwidth`` : forwards, then sends the reply in small chunks at ``bandwidth_bps``;
* ``reset``     : forwards, sends the headers and ``reset_after`` body bytes, then resets
  the connection (RST, not FIN);
* ``hang``      : reads the request and never answers (until the client gives up);
* ``slowdown``  : answers 503 SlowDown without forwarding;
* ``error500``  : answers 500 InternalError without forwarding;
* ``forbidden`` : answers 403 AccessDenied; ``throttled403``: 403 RequestThrottled;
* ``drop``      : forwards, reads the whole reply, then closes without sending it (the
  server did the work, the client lost the reply).

Faults are drawn from a ``random.Random(seed)``, or taken in order from ``script`` (a
list of fault names or ``None`` for "forward"), at most ``max_faults_per_path`` times per
path so that a soak stays below the client's retry limit. ``on_fault(fault, path)`` runs
when a fault fires (after the upstream answered, for faults that forward), e.g. to
replace the object between a cut-off reply and the client's resumed request. Every request is counted per
path and per fault; the tests assert on those counts, which is what the server saw.
"""

from __future__ import annotations

import collections
import http.client
import random
import socket
import struct
import threading
import time
from collections.abc import Callable

FAULTS = ("latency", "bandwidth", "reset", "hang", "slowdown", "error500", "drop")

_SLOWDOWN = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
             b"<Message>Please reduce your request rate.</Message></Error>")
_DENIED = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code>"
           b"<Message>Access Denied</Message></Error>")
_THROTTLED = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>RequestThrottled"
              b"</Code><Message>Request throttled</Message></Error>")
_INTERNAL = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code>"
             b"<Message>We encountered an internal error.</Message></Error>")


class FaultProxy:
    def __init__(
        self,
        upstream_port: int,
        *,
        seed: int = 0,
        fault_rate: float = 0.0,
        faults: tuple[str, ...] = FAULTS,
        script: list[str | None] | None = None,
        max_faults_per_path: int | None = None,
        latency_s: float = 0.05,
        bandwidth_bps: int = 200_000,
        reset_after: int = 1000,
        on_fault: Callable[[str, str], None] | None = None,
    ) -> None:
        self.upstream_port = upstream_port
        self.rng = random.Random(seed)
        self.fault_rate = fault_rate
        self.faults = faults
        self.script = list(script) if script is not None else None
        self.max_faults_per_path = max_faults_per_path
        self.latency_s = latency_s
        self.bandwidth_bps = bandwidth_bps
        self.reset_after = reset_after
        self.on_fault = on_fault
        self.lock = threading.Lock()
        self.requests: collections.Counter[str] = collections.Counter()  # per path
        self.injected: collections.Counter[str] = collections.Counter()  # per fault
        self.faults_by_path: collections.Counter[str] = collections.Counter()
        self.connections = 0
        self.active = 0  # requests being answered now
        self.max_active = 0
        self.headers_seen: list[dict[str, str]] = []
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(512)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _choose(self, path: str) -> str | None:
        with self.lock:
            self.requests[path] += 1
            if self.script is not None:
                fault = self.script.pop(0) if self.script else None
            elif self.rng.random() < self.fault_rate:
                fault = self.rng.choice(self.faults)
            else:
                fault = None
            if fault is not None and self.max_faults_per_path is not None:
                if self.faults_by_path[path] >= self.max_faults_per_path:
                    fault = None
            if fault is not None:
                self.faults_by_path[path] += 1
                self.injected[fault] += 1
            return fault

    def _notify(self, fault: str, path: str) -> None:
        if self.on_fault is not None:
            self.on_fault(fault, path)

    @staticmethod
    def _read_request(f) -> tuple[str, str, list[tuple[str, str]]] | None:
        line = f.readline()
        if not line:
            return None
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers = []
        while True:
            h = f.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        return method, target, headers

    def _forward(self, method: str, target: str, headers: list[tuple[str, str]]):
        up = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            up.putheader(name, value)
        up.endheaders()
        resp = up.getresponse()
        body = resp.read()
        up.close()
        head = f"HTTP/1.1 {resp.status} {resp.reason}\r\n"
        for name, value in resp.getheaders():
            if name.lower() in ("transfer-encoding", "connection", "content-length"):
                continue
            head += f"{name}: {value}\r\n"
        head += f"Content-Length: {len(body)}\r\n\r\n"
        return head.encode("latin-1"), body

    @staticmethod
    def _error(status: int, reason: str, body: bytes) -> bytes:
        return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    @staticmethod
    def _reset(conn: socket.socket) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    def _serve(self, conn: socket.socket) -> None:
        f = conn.makefile("rb")
        try:
            while not self._stop.is_set():
                req = self._read_request(f)
                if req is None:
                    return
                method, target, headers = req
                with self.lock:
                    self.headers_seen.append({k.lower(): v for k, v in headers})
                path = target.split("?", 1)[0]
                with self.lock:
                    self.active += 1
                    self.max_active = max(self.max_active, self.active)
                try:
                    if not self._answer(conn, method, target, headers, path):
                        return
                finally:
                    with self.lock:
                        self.active -= 1
        except OSError:
            return
        finally:
            try:
                f.close()
                conn.close()
            except OSError:
                pass

    def _answer(self, conn, method, target, headers, path) -> bool:
        """Answers one request; False when the connection is finished with."""
        fault = self._choose(path)
        if fault in ("hang", "slowdown", "forbidden", "throttled403", "error500"):
            self._notify(fault, path)
        if fault == "hang":
            self._stop.wait(60)
            return False
        if fault == "slowdown":
            conn.sendall(self._error(503, "Slow Down", _SLOWDOWN))
            return True
        if fault == "forbidden":
            conn.sendall(self._error(403, "Forbidden", _DENIED))
            return True
        if fault == "throttled403":
            conn.sendall(self._error(403, "Forbidden", _THROTTLED))
            return True
        if fault == "error500":
            conn.sendall(self._error(500, "Internal Server Error", _INTERNAL))
            return True
        if fault == "latency":
            time.sleep(self.latency_s)
        head, body = self._forward(method, target, headers)
        if fault is not None:
            self._notify(fault, path)  # after the server answered
        if fault == "drop":
            conn.close()
            return False
        if fault == "reset":
            conn.sendall(head + body[: self.reset_after])
            time.sleep(0.05)  # let the bytes leave before the RST
            self._reset(conn)
            return False
        if fault == "bandwidth":
            conn.sendall(head)
            chunk = max(1, self.bandwidth_bps // 50)
            for i in range(0, len(body), chunk):
                conn.sendall(body[i : i + chunk])
                time.sleep(0.02)
            return True
        conn.sendall(head + body)
        return True
