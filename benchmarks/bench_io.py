"""Object-store fetch throughput: stoker.io against boto3, same server, same run.

    python benchmarks/bench_io.py [--objects 10000] [--levels 16,64,256]
        [--boto-threads 32,128] [--latency-ms 20,50] [--server asyncio|nginx]
        [--server-procs 2]

The object server serves --objects objects of 50-500 KB under /bucket/key and waits
20-50 ms before each reply, as a remote store would:

* ``--server asyncio`` (default): a Python asyncio server (HTTP/1.1 keep-alive,
  SO_REUSEPORT over --server-procs processes), a seeded latency per object;
* ``--server nginx``: nginx (``apt-get install nginx-light libnginx-mod-http-echo``)
  serving files with sendfile, the wait made by the echo module's ``echo_sleep``: ten
  latencies evenly spread over the range, picked by the key's last digit. Objects are
  256 distinct files of seeded sizes, named by symlinks. Much faster than the Python
  server, so the client, not the server, is what is measured.

Stoker reads every object through s3:// (SigV4-signed, path style) at each in-flight
level: with iter_read (the streaming API: zero-copy views, consumed and dropped one by
one, as a data pipeline consumes them) and with read_many (lists of bytes, 2000
objects per call), both through Stoker's own HTTP/1.1 client (what plain http:// uses),
and with iter_read through libcurl (``http_client="curl"``, what https:// uses).
boto3 does get_object().read() from a thread pool of each size. ``floor`` is
benchmarks/cpp/http_floor.cc (compiled here when a C++ compiler is present): a minimal
epoll client that throws every body away into one hot buffer, the least CPU any client
can spend at that rate on this machine. Prints objects/s, CPU seconds of the client
process per 1000 objects, the Little's-law bound (in-flight / mean latency), the
server's own ceiling (Stoker iter_read at 256 in flight with no injected latency) and
the ratios. Byte counts are checked on every side. Every client is measured with its
connections open: Stoker and boto3 first read two objects per connection untimed, and
the floor connects before its clock starts.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import resource
import socket
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

BUCKET = "bench"
POOL_BYTES = 8 << 20
WARMUP_PER_CONNECTION = 2  # objects read untimed per connection before the clock


def object_plan(n: int, min_kb: int, max_kb: int, seed: int) -> list[tuple[int, int]]:
    """(offset into the shared pool, size) for each object: sizes uniform in range."""
    rng = random.Random(seed)
    plan = []
    for _ in range(n):
        size = rng.randrange(min_kb * 1000, max_kb * 1000 + 1)
        plan.append((rng.randrange(0, POOL_BYTES - size), size))
    return plan


def serve(sock: socket.socket, plan, lat_lo: float, lat_hi: float, seed: int) -> None:
    pool = memoryview(random.Random(seed).randbytes(POOL_BYTES))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rng = random.Random()
        # asyncio only disables Nagle on sockets whose proto is IPPROTO_TCP, which ours
        # (made with proto 0, then passed in) is not: without this, the body write
        # waits for the client's delayed ACK of the header write, +40 ms per reply.
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                index = int(path.rsplit("/", 1)[1].split(".")[0])
                if not path.startswith("/nolat/"):  # the ceiling run skips the wait
                    rng.seed(index)
                    await asyncio.sleep(rng.uniform(lat_lo, lat_hi))
                offset, size = plan[index]
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"ETag: \"%d\"\r\nContent-Length: %d\r\n\r\n" % (index, size))
                writer.write(pool[offset:offset + size])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_server(args, plan) -> tuple[int, list[mp.Process]]:
    port = None
    procs = []
    for _ in range(args.server_procs):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port or 0))
        port = sock.getsockname()[1]
        sock.listen(1024)
        p = mp.Process(target=serve, args=(sock, plan, args.lat_lo, args.lat_hi, args.seed),
                       daemon=True)
        p.start()
        sock.close()
        procs.append(p)
    time.sleep(0.5)
    return port, procs


# What every benchmark's nginx shares: the echo module, sendfile, keep-alive without a
# request limit, no access log. `{http}` is the rest of the http block (servers, maps).
NGINX_CONF = """
load_module {module};
worker_processes {workers};
pid {root}/nginx.pid;
error_log {root}/error.log;
daemon off;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  sendfile on;
  tcp_nodelay on;
  keepalive_requests 1000000;
{http}
}}
"""
NGINX_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


def launch_nginx(http: str, root: str, port: int, workers: int = 1):
    """Writes root/nginx.conf (NGINX_CONF with `http` as the rest of its http block),
    starts nginx in the foreground and waits until it accepts on `port`; returns the
    process. Exits with the install hint when nginx or its echo module is missing."""
    import shutil
    import subprocess

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx) or not os.path.exists(NGINX_MODULE):
        sys.exit("needs nginx and its echo module: "
                 "apt-get install nginx-light libnginx-mod-http-echo")
    os.chmod(root, 0o755)  # nginx's workers run as another user
    path = os.path.join(root, "nginx.conf")
    with open(path, "w") as f:
        f.write(NGINX_CONF.format(module=NGINX_MODULE, workers=workers, root=root, http=http))
    proc = subprocess.Popen([nginx, "-c", path, "-p", root], stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"nginx failed: {proc.stderr.read().decode()}")
            time.sleep(0.05)
    proc.terminate()
    sys.exit(f"nginx did not accept on port {port}")


def start_nginx(args, root: str) -> tuple[int, int, list]:
    """Starts nginx over `root`; returns (port, expected total bytes, [process])."""
    rng = random.Random(args.seed)
    objects = os.path.join(root, "objects")
    os.makedirs(objects, mode=0o755)
    sizes = [rng.randrange(args.min_kb * 1000, args.max_kb * 1000 + 1) for _ in range(256)]
    for i, size in enumerate(sizes):
        with open(os.path.join(objects, f"file{i}"), "wb") as f:
            f.write(rng.randbytes(size))
    for i in range(args.objects):
        os.symlink(f"file{i % 256}", os.path.join(objects, f"{i:06d}.bin"))
    step = (args.lat_hi - args.lat_lo) / 9
    # echo_sleep takes whole milliseconds.
    delays = " ".join(f"~{d}\\.bin$ {args.lat_lo + d * step:.3f};" for d in range(10))
    port = free_port()
    http = f"""
  map $uri $delay {{ {delays} }}
  server {{
    listen 127.0.0.1:{port};
    location /{BUCKET}/ {{ echo_sleep $delay; echo_exec /files$uri; }}
    location /files/{BUCKET}/ {{ internal; alias {root}/objects/; }}
    location /nolat/ {{ alias {root}/objects/; }}
  }}"""
    proc = launch_nginx(http, root, port, workers=args.server_procs)
    return port, sum(sizes[i % 256] for i in range(args.objects)), [proc]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_stoker(endpoint: str, keys: list[str], level: int, bucket: str = BUCKET,
               api: str = "iter_read", client: str = "auto") -> tuple[float, float, int]:
    """Reads every key through `api`: ``iter_read`` streams zero-copy views (each
    dropped after its length is taken, so buffers are reused); ``read_many`` returns
    lists of bytes, in chunks of 2000 to bound the client's memory."""
    import stoker

    store = stoker.io.ObjectStore(endpoint_url=endpoint, access_key_id="AKIDBENCH0000000",
                                  secret_access_key="bench-secret", region="us-east-1",
                                  max_in_flight=level, max_bytes_in_flight=1 << 30,
                                  http_client=client)
    uris = [f"s3://{bucket}/{k}" for k in keys]
    # Untimed first: the connections open and the body buffers are allocated, as a
    # loader's are in its first seconds (the floor connects before its clock too).
    for view in store.iter_read(uris[:WARMUP_PER_CONNECTION * level]):
        del view
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    total = 0
    if api == "iter_read":
        total = sum(len(view) for view in store.iter_read(uris))
    else:
        for i in range(0, len(uris), 2000):
            total += sum(len(b) for b in store.read_many(uris[i:i + 2000]))
    return time.perf_counter() - t0, cpu_seconds() - cpu0, total


def build_floor(folder: str) -> str | None:
    """Compiles benchmarks/cpp/http_floor.cc into `folder`; None without a compiler."""
    import shutil
    import subprocess

    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        return None
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp", "http_floor.cc")
    binary = os.path.join(folder, "http_floor")
    subprocess.run([compiler, "-O2", "-o", binary, source], check=True)
    return binary


def run_floor(binary: str, port: int, objects: int, level: int) -> tuple[float, float, int]:
    import subprocess

    out = subprocess.run([binary, str(port), BUCKET, str(objects), str(level)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[1]), float(out[2]), int(out[0])


def run_boto3(endpoint: str, keys: list[str], threads: int) -> tuple[float, float, int]:
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="AKIDBENCH0000000",
                          aws_secret_access_key="bench-secret", region_name="us-east-1",
                          config=Config(max_pool_connections=threads,
                                        s3={"addressing_style": "path"}))

    def get(key: str) -> int:
        return len(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())

    with ThreadPoolExecutor(threads) as pool:
        # Untimed first, as for Stoker: every thread's connection opens.
        sum(pool.map(get, keys[:WARMUP_PER_CONNECTION * threads]))
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        total = sum(pool.map(get, keys))
    return time.perf_counter() - t0, cpu_seconds() - cpu0, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--min-kb", type=int, default=50)
    parser.add_argument("--max-kb", type=int, default=500)
    parser.add_argument("--latency-ms", default="20,50")
    parser.add_argument("--levels", default="16,64,256")
    parser.add_argument("--boto-threads", default="32,128")
    parser.add_argument("--server", default="asyncio", choices=["asyncio", "nginx"])
    parser.add_argument("--server-procs", type=int, default=2,
                        help="asyncio processes or nginx workers")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    lo, hi = (float(x) / 1000 for x in args.latency_ms.split(","))
    args.lat_lo, args.lat_hi = lo, hi
    mean_latency = (lo + hi) / 2

    keys = [f"{i:06d}.bin" for i in range(args.objects)]
    tmp = tempfile.TemporaryDirectory()
    if args.server == "nginx":
        port, expected, procs = start_nginx(args, tmp.name)
        server = f"nginx, {args.server_procs} workers"
    else:
        plan = object_plan(args.objects, args.min_kb, args.max_kb, args.seed)
        expected = sum(size for _, size in plan)
        port, procs = start_server(args, plan)
        server = f"{args.server_procs} asyncio processes"
    endpoint = f"http://127.0.0.1:{port}"
    print(f"{args.objects} objects, {expected / 1e9:.2f} GB, latency {args.latency_ms} ms, "
          f"server {server}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    rows = []
    try:
        # What the server sustains: no injected latency, many requests in flight.
        wall, _, total = run_stoker(endpoint, keys, 256, bucket="nolat")
        assert total == expected, (total, expected)
        ceiling = args.objects / wall
        print(f"server ceiling (no injected latency, 256 in flight): {ceiling:.0f} objects/s")
        levels = [int(x) for x in args.levels.split(",")]
        for api, client in (("iter_read", "auto"), ("read_many", "auto"), ("iter_read", "curl")):
            for level in levels:
                wall, cpu, total = run_stoker(endpoint, keys, level, api=api, client=client)
                assert total == expected, (total, expected)
                name = f"stoker {api}{' (libcurl)' if client == 'curl' else ''}, {level}"
                rows.append((name, level / mean_latency, wall, cpu))
        floor = build_floor(tmp.name)
        if floor is not None:
            for level in levels:
                wall, cpu, total = run_floor(floor, port, args.objects, level)
                assert total == expected, (total, expected)
                rows.append((f"floor, {level}", level / mean_latency, wall, cpu))
        for threads in [int(x) for x in args.boto_threads.split(",")]:
            wall, cpu, total = run_boto3(endpoint, keys, threads)
            assert total == expected, (total, expected)
            rows.append((f"boto3, {threads} threads", threads / mean_latency, wall, cpu))
    finally:
        for p in procs:
            p.terminate()
            p.wait() if hasattr(p, "communicate") else p.join()
        tmp.cleanup()
    print()
    print(f"{'client':<31} {'objects/s':>10} {'bound/s':>9} {'% bound':>8} "
          f"{'% min(bound, ceiling)':>22} {'MB/s':>8} {'CPU s/1000 obj':>15} {'cores':>6}")
    for name, bound, wall, cpu in rows:
        rate = args.objects / wall
        print(f"{name:<31} {rate:>10.0f} {bound:>9.0f} {100 * rate / bound:>7.0f}% "
              f"{100 * rate / min(bound, ceiling):>21.0f}% {expected / wall / 1e6:>8.0f} "
              f"{1000 * cpu / args.objects:>15.3f} {cpu / wall:>6.2f}")
    by_name = {name: args.objects / wall for name, _, wall, _ in rows}
    print()
    for s in [r[0] for r in rows if r[0].startswith("stoker")]:
        for b in [r[0] for r in rows if r[0].startswith("boto3")]:
            print(f"{s} / {b}: {by_name[s] / by_name[b]:.1f}x")
    cpu_per = {name: cpu / args.objects * 1000 for name, _, _, cpu in rows}
    for level in levels:
        own, curl = f"stoker iter_read, {level}", f"stoker iter_read (libcurl), {level}"
        floor_name = f"floor, {level}"
        line = (f"CPU per object at {level} in flight: own client {cpu_per[own]:.3f} ms, "
                f"libcurl {cpu_per[curl]:.3f} ms ({cpu_per[curl] / cpu_per[own]:.2f}x)")
        if floor_name in cpu_per:
            line += f", floor {cpu_per[floor_name]:.3f} ms"
        print(line)


if __name__ == "__main__":
    main()
