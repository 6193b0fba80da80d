"""``stoker demo``: generate a local dataset and feed a simulated trainer from it.

The demo answers the question a user has before adopting a loader: how long does my
trainer wait for data? It runs the same manifest three times against a trainer whose
step takes a fixed time (simulated with a sleep; no GPU, no model), adding one
optimisation per run, and prints samples/s, the trainer's wait ratio and the busy
time of each engine stage. Batches are Qwen2-VL model inputs (chat template, tokens,
labels, mRoPE position ids and pixel_values, with the Qwen vocabulary bundled with
Stoker); ``--decode-only`` stops at decoded images instead:

1. serial baseline: one thread, no prefetch (work starts when the trainer asks);
2. + prefetch: one thread preparing batches while the trainer steps;
3. + threads: every CPU decoding in parallel, with prefetch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.loader import Loader, default_num_threads


@dataclass
class RunResult:
    label: str
    threads: int
    prefetch: int
    samples: int
    batches: int
    wall_s: float
    stats: dict[str, Any]

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def wait_ratio(self) -> float:
        return float(self.stats["consumer"]["wait_ratio"])


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "demo",
        help="generate a local VLM dataset and show the loader feeding a simulated trainer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data-dir", type=Path, default=Path("stoker-demo-data"),
                   help="where the dataset is generated (reused when already there; "
                        "default: %(default)s)")
    p.add_argument("--conversations", type=int, default=300,
                   help="conversations in the manifest (default: %(default)s)")
    p.add_argument("--images", type=int, default=120,
                   help="distinct images they reference (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=8, help="default: %(default)s")
    p.add_argument("--step-ms", type=float, default=None,
                   help="simulated trainer step time per batch, in ms (default: 200 with "
                        "model inputs, 50 with --decode-only)")
    p.add_argument("--threads", type=int, default=None,
                   help="engine threads for the last run (default: CPUs available)")
    p.add_argument("--prefetch", type=int, default=4, help="default: %(default)s")
    p.add_argument("--seed", type=int, default=0, help="dataset seed (default: %(default)s)")
    p.add_argument("--model", default="qwen2-vl",
                   help="model family of the inputs: qwen2-vl, qwen2.5-vl or qwen3-vl "
                        "(default: %(default)s)")
    p.add_argument("--max-pixels", type=int, default=768 * 768,
                   help="max_pixels of the image processor (default: %(default)s, "
                        "LLaMA-Factory's image_max_pixels; 0: the model's own limit, "
                        "12.8 MP for Qwen2-VL)")
    p.add_argument("--decode-only", action="store_true",
                   help="batches of decoded images instead of model inputs")
    p.set_defaults(run=run)


def _simulate_training(label: str, manifest: Path, image_root: Path, *, batch_size: int,
                       threads: int, prefetch: int, step_s: float,
                       model_inputs: Any) -> RunResult:
    """Iterates one epoch, 'training' for step_s per batch."""
    samples = batches = 0
    loader = Loader(manifest, image_root=image_root, batch_size=batch_size,
                    num_threads=threads, prefetch=prefetch, output="numpy",
                    model_inputs=model_inputs)
    total = len(loader)
    start = time.perf_counter()
    with loader:
        for batch in loader:
            samples += len(batch["sample_keys"])
            batches += 1
            time.sleep(step_s)  # simulated forward/backward/optimizer step
            _progress(f"{label:<28}", batches, total)
        wall = time.perf_counter() - start
        stats = loader.stats()
    _progress_done()
    return RunResult(label, threads, prefetch, samples, batches, wall, stats)


def _progress(label: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = width * done // max(total, 1)
        print(f"\r  {label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
              end="", file=sys.stderr, flush=True)


def _progress_done() -> None:
    if sys.stderr.isatty():
        print("\r" + " " * 79 + "\r", end="", file=sys.stderr, flush=True)


def _stages(results: list[RunResult]) -> list[str]:
    """The stages that did work, in pipeline order."""
    names = list(results[0].stats["stages"])
    return [n for n in names if any(r.stats["stages"][n]["items"] for r in results)]


def _format_table(results: list[RunResult]) -> str:
    stages = _stages(results)
    header = (["run", "threads", "prefetch", "samples/s", "wait ratio", "epoch s"]
              + [f"{s} busy s" for s in stages])
    rows = [header]
    for r in results:
        rows.append([
            r.label, str(r.threads), str(r.prefetch), f"{r.samples_per_s:.1f}",
            f"{r.wait_ratio:.0%}", f"{r.wall_s:.2f}",
        ] + [f"{r.stats['stages'][s]['busy_s']:.2f}" for s in stages])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        from stoker.demo_data import generate_dataset
    except ImportError as e:  # Pillow renders the demo images; the loader never needs it
        print(f"stoker demo needs Pillow to generate its dataset ({e}); "
              "install it with: pip install 'stoker[demo]'", file=sys.stderr)
        return 1

    threads = args.threads or default_num_threads()
    step_s = (args.step_ms if args.step_ms is not None
              else 50.0 if args.decode_only else 200.0) / 1000.0
    print(f"Generating the demo dataset in {args.data_dir} "
          f"({args.conversations} conversations, {args.images} images from real photos)...")
    t0 = time.perf_counter()
    dataset = generate_dataset(args.data_dir, num_conversations=args.conversations,
                               num_images=args.images, seed=args.seed,
                               progress=sys.stderr.isatty())
    print(f"  {dataset.manifest} ready in {time.perf_counter() - t0:.1f} s "
          f"({dataset.total_image_bytes / 1e6:.1f} MB of JPEG/PNG/WebP)\n")
    print(f"Simulated trainer: {step_s * 1000:.0f} ms per step of {args.batch_size} samples "
          f"(a sleep standing in for forward/backward; no GPU is used).")
    model_inputs = None
    if args.decode_only:
        print("Batches: decoded RGB images.\n")
    else:
        from stoker.model_inputs import ModelInputs
        from stoker.text import Tokenizer
        model_inputs = ModelInputs(args.model, tokenizer=Tokenizer.bundled_qwen(),
                                   max_pixels=args.max_pixels or None)
        config = model_inputs.vision_config
        print(f"Batches: {args.model} model inputs (input_ids, labels, attention_mask, "
              f"position_ids, pixel_values, image_grid_thw; images resized into "
              f"[{config.min_pixels}, {config.max_pixels}] pixels).\n")

    configs = [
        ("1. serial baseline", 1, 0),
        ("2. + prefetch", 1, args.prefetch),
        (f"3. + {threads} threads", threads, args.prefetch),
    ]
    results = []
    for label, n_threads, prefetch in configs:
        results.append(_simulate_training(
            label, dataset.manifest, dataset.image_root, batch_size=args.batch_size,
            threads=n_threads, prefetch=prefetch, step_s=step_s, model_inputs=model_inputs))

    print(_format_table(results))
    base, best = results[0], results[-1]
    print()
    print(f"Trainer wait ratio {base.wait_ratio:.0%} -> {best.wait_ratio:.0%}; "
          f"throughput x{best.samples_per_s / max(base.samples_per_s, 1e-9):.2f} "
          f"over the serial baseline.")
    busy = {s: best.stats["stages"][s]["busy_s"] for s in _stages(results)}
    total_busy = sum(busy.values()) or 1.0
    limiting = max(busy, key=busy.get)
    print(f"Limiting stage: {limiting} ({busy[limiting] / total_busy:.0%} of the engine's "
          f"busy time). Busy times are summed over threads.")
    floor = step_s * best.batches
    print(f"The simulated trainer alone needs {floor:.2f} s per epoch; an engine that keeps "
          f"up finishes the epoch in about that time.")
    skipped = sum(r.stats["samples"]["skipped"] for r in results)
    if skipped:
        print(f"warning: {skipped} samples were skipped", file=sys.stderr)
    return 0
