"""A real S3-protocol endpoint for the IO tests: moto in server mode on a free loopback
port, with a bucket of seeded random objects created through boto3."""

from __future__ import annotations

import hashlib
import random
import socket
from dataclasses import dataclass, field

BUCKET = "stoker-test"
ACCESS_KEY = "AKIDSTOKERTEST00001"
SECRET_KEY = "stoker-test-secret-key"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class S3Server:
    port: int
    server: object
    client: object
    objects: dict[str, bytes] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def put(self, key: str, data: bytes, bucket: str = BUCKET) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
        if bucket == BUCKET:
            self.objects[key] = data


def start_s3(num_objects: int = 60, seed: int = 7) -> S3Server:
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    client.create_bucket(Bucket=BUCKET)
    s3 = S3Server(port=port, server=server, client=client)
    rng = random.Random(seed)
    for i in range(num_objects):
        size = rng.choice([0, 1, 100, 5000, 64 * 1024, 300 * 1024]) + rng.randrange(50)
        s3.put(f"objects/{i:04d}.bin", rng.randbytes(size))
    s3.put("dir/a b+ü&=.bin", b"odd key bytes")
    return s3


def store_options(s3: S3Server, **overrides) -> dict:
    options = dict(
        endpoint_url=s3.endpoint,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        region=REGION,
        backoff_base=0.001,
        throttle_backoff_base=0.001,
        max_backoff=0.01,
    )
    options.update(overrides)
    return options
