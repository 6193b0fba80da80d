"""Loader throughput: stoker.Loader against the usual Python path, same data, same run.

    .venv/bin/python benchmarks/bench_loader.py [--data-dir stoker-demo-data] [--workers N]

The peer is what VLM fine-tuning scripts do today: a torch.utils.data.Dataset that
parses the JSON line and opens each image with PIL (convert("RGB"), as HF's processors
do), fed through torch.utils.data.DataLoader with N worker processes, which pickle the
decoded images back to the main process. Stoker runs N native threads. Both deliver the
same decoded images as torch uint8 tensors, in manifest order, with no trainer attached
(pure data throughput). Uses the demo dataset (generated on first use).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

import stoker
from stoker.demo_data import generate_dataset
from stoker.loader import default_num_threads


class PillowManifestDataset(Dataset):
    def __init__(self, manifest: Path, image_root: Path) -> None:
        self.lines = [line for line in manifest.read_text().splitlines() if line.strip()]
        self.image_root = image_root

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int):
        sample = json.loads(self.lines[index])
        images = []
        for message in sample["messages"]:
            content = message["content"]
            if isinstance(content, str):
                continue
            for item in content:
                if item["type"] == "image":
                    with Image.open(self.image_root / item["image"]) as im:
                        rgb = im if im.mode == "RGB" else im.convert("RGB")
                        images.append(torch.from_numpy(np.array(rgb)))
        return self.lines[index], images


def collate(items):
    return {"samples": [s for s, _ in items], "images": [imgs for _, imgs in items]}


def run_torch(dataset: Dataset, batch_size: int, workers: int) -> tuple[float, int]:
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                        collate_fn=collate, prefetch_factor=4 if workers else None,
                        persistent_workers=False)
    start = time.perf_counter()
    n = sum(len(batch["samples"]) for batch in loader)
    return time.perf_counter() - start, n


def run_stoker(manifest: Path, image_root: Path, batch_size: int, threads: int
               ) -> tuple[float, int]:
    start = time.perf_counter()
    with stoker.Loader(manifest, image_root=image_root, batch_size=batch_size,
                       num_threads=threads, prefetch=4, output="torch") as loader:
        n = sum(len(batch["sample_keys"]) for batch in loader)
    return time.perf_counter() - start, n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("stoker-demo-data"))
    parser.add_argument("--workers", type=int, default=default_num_threads())
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    data = generate_dataset(args.data_dir, progress=False)
    dataset = PillowManifestDataset(data.manifest, data.image_root)
    t_torch = min(run_torch(dataset, args.batch_size, args.workers)[0]
                  for _ in range(args.repeat))
    t_stoker = min(run_stoker(data.manifest, data.image_root, args.batch_size,
                              args.workers)[0] for _ in range(args.repeat))
    n = len(dataset)
    print(f"{n} samples, batch {args.batch_size}, {args.workers} workers/threads, "
          f"best of {args.repeat}")
    print(f"  PIL + torch DataLoader : {n / t_torch:8.1f} samples/s")
    print(f"  stoker.Loader          : {n / t_stoker:8.1f} samples/s")
    print(f"  ratio                  : {t_torch / t_stoker:8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
