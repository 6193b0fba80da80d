"""Loader throughput with images behind object-store latency: read-ahead at work.

    python benchmarks/bench_loader_remote.py [--latency-ms 35] [--threads 1,2]

Serves the demo dataset's images from nginx (``apt-get install nginx-light
libnginx-mod-http-echo``), each reply held for --latency-ms by the echo module, and
runs the Loader over it as ``s3://bench/...`` (decoded-image batches of 8, prefetch 4)
with N worker threads, next to the same Loader reading the files from local disk.
Without read-ahead a worker waits out every read, so N workers could not pass
N / latency images/s (the "blocking-read bound" printed); the scheduler starts each
admitted batch's reads ahead of the workers instead (src/stoker/pipeline/read_ahead.h).
Also prints the most reads the store had in flight at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import stoker
from stoker.demo_data import generate_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_io import free_port, launch_nginx  # noqa: E402

SERVER = """
  server {{
    listen 127.0.0.1:{port};
    location /bench/ {{ echo_sleep {delay:.3f}; echo_exec /files$uri; }}
    location /files/bench/ {{ internal; alias {data}/; }}
  }}"""


def epoch(loader: stoker.Loader) -> tuple[float, int]:
    start, images = time.perf_counter(), 0
    for batch in loader:
        images += sum(len(sample) for sample in batch["images"])
    return time.perf_counter() - start, images


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("stoker-demo-data"))
    parser.add_argument("--latency-ms", type=float, default=35.0)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    data = generate_dataset(args.data_dir)
    data_dir = data.manifest.parent.resolve()
    for path in [data_dir, *data_dir.rglob("*")]:  # nginx's workers run as another user
        path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
    latency = args.latency_ms / 1000
    with tempfile.TemporaryDirectory() as root:
        port = free_port()
        server = launch_nginx(SERVER.format(port=port, delay=latency, data=data_dir), root,
                              port)
        try:
            print(f"{data.num_conversations} samples, {data.num_images} distinct images, "
                  f"reply latency {args.latency_ms:g} ms, {os.cpu_count()} CPUs")
            print(f"{'threads':>7} {'local images/s':>15} {'remote images/s':>16} "
                  f"{'blocking-read bound':>20} {'remote / bound':>15} {'peak in flight':>15}")
            for threads in [int(t) for t in args.threads.split(",")]:
                common = dict(batch_size=8, num_threads=threads, prefetch=4, output="numpy",
                              index_cache_dir="")
                wall, images = epoch(stoker.Loader(data.manifest, **common))
                local = images / wall
                store = stoker.io.ObjectStore(endpoint_url=f"http://127.0.0.1:{port}",
                                              access_key_id="AKIDBENCH0000000",
                                              secret_access_key="bench-secret",
                                              region="us-east-1")
                loader = stoker.Loader(data.manifest, image_root="s3://bench/",
                                       storage=store, **common)
                wall, remote_images = epoch(loader)
                assert remote_images == images
                remote = images / wall
                bound = threads / latency
                print(f"{threads:>7} {local:>15.0f} {remote:>16.0f} {bound:>20.0f} "
                      f"{remote / bound:>14.1f}x {loader.stats()['io']['peak_in_flight']:>15}")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
