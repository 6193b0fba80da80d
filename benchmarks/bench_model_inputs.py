"""Model-input batches: stoker.Loader(model_inputs=...) against the Hugging Face path,
same data, same run.

    python benchmarks/bench_model_inputs.py [--data-dir stoker-demo-data] [--workers N]
        [--model qwen2-vl] [--max-pixels 589824] [--batch-size 8] [--repeat 2]

The peer is what Qwen-VL fine-tuning scripts do today: a torch Dataset whose
__getitem__ parses the JSON line, opens each image with PIL (convert("RGB")), renders
the chat template and runs transformers' Qwen2-VL processor (``Qwen2VLProcessor`` with
``Qwen2VLImageProcessorFast``, what ``AutoProcessor`` gives when torchvision is
installed) for input_ids and pixel_values, then masks labels to the assistant turns
with a Python loop; a collate_fn pads and concatenates; torch's DataLoader runs it in N
worker processes. Stoker runs N native threads and also computes mRoPE position_ids
(the peer leaves them to the model's forward). Both produce the same input_ids and
pixel_values (checked on the first samples before timing). No trainer is attached:
this is pure data throughput, the rate a GPU could be fed at.

Needs transformers, torch and torchvision (the reference environment described in
scripts/make_vision_goldens.py) with stoker importable; uses the demo dataset
(generated on first use) and the Qwen vocabulary bundled with Stoker.
"""

from __future__ import annotations

import argparse
import importlib.util
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
from stoker.text import IGNORE_INDEX, Tokenizer

ROOT = Path(__file__).resolve().parents[1]
IM_START, IM_END = 151644, 151645


def _templates() -> dict[str, str]:
    """The chat templates the text goldens are recorded with (one copy, in that script)."""
    spec = importlib.util.spec_from_file_location("goldens",
                                                  ROOT / "scripts" / "make_text_goldens.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TEMPLATES


def make_processor(model: str, tokenizer_dir: str, max_pixels: int):
    from transformers import PreTrainedTokenizerFast, Qwen2VLImageProcessorFast, Qwen2VLProcessor
    from transformers import Qwen2VLVideoProcessor

    tok = PreTrainedTokenizerFast(tokenizer_file=f"{tokenizer_dir}/tokenizer.json",
                                  pad_token="<|endoftext|>", eos_token="<|im_end|>")
    config = stoker.vision.resolve_config(model, max_pixels=max_pixels)
    image_processor = Qwen2VLImageProcessorFast(
        min_pixels=config.min_pixels, max_pixels=config.max_pixels,
        patch_size=config.patch_size, merge_size=config.merge_size,
        image_mean=list(config.image_mean), image_std=list(config.image_std))
    return Qwen2VLProcessor(image_processor=image_processor, tokenizer=tok,
                            video_processor=Qwen2VLVideoProcessor(),
                            chat_template=_templates()[model])


class HFDataset(Dataset):
    def __init__(self, manifest: Path, image_root: Path, processor) -> None:
        self.lines = [line for line in manifest.read_text().splitlines() if line.strip()]
        self.image_root = image_root
        self.processor = processor

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        sample = json.loads(self.lines[index])
        messages, images = [], []
        for m in sample["messages"]:
            content = m["content"]
            if isinstance(content, list):
                items = []
                for item in content:
                    if item["type"] == "image":
                        with Image.open(self.image_root / item["image"]) as im:
                            images.append(im.convert("RGB"))
                        items.append({"type": "image"})
                    else:
                        items.append(item)
                content = items
            messages.append({"role": m["role"], "content": content})
        text = self.processor.apply_chat_template(messages, tokenize=False)
        out = self.processor(text=[text], images=images or None, return_tensors="pt")
        ids = out["input_ids"][0]
        # Labels: assistant content + <|im_end|> + "\n", everything else -100.
        labels = torch.full_like(ids, IGNORE_INDEX)
        values = ids.tolist()
        i = 0
        while i < len(values):
            if values[i] == IM_START and i + 2 < len(values) and \
                    self.processor.tokenizer.decode(values[i + 1]) == "assistant":
                start = i + 3  # after "<|im_start|>assistant\n"
                end = values.index(IM_END, start)
                labels[start:end + 2] = ids[start:end + 2]
                i = end
            i += 1
        return {"input_ids": ids, "labels": labels, "pixel_values": out.get("pixel_values"),
                "image_grid_thw": out.get("image_grid_thw")}


def collate(items: list[dict]) -> dict[str, torch.Tensor]:
    length = max(len(x["input_ids"]) for x in items)
    ids = torch.full((len(items), length), 151643, dtype=torch.int64)
    labels = torch.full((len(items), length), IGNORE_INDEX, dtype=torch.int64)
    mask = torch.zeros((len(items), length), dtype=torch.int64)
    for b, x in enumerate(items):
        n = len(x["input_ids"])
        ids[b, :n], labels[b, :n], mask[b, :n] = x["input_ids"], x["labels"], 1
    pixels = [x["pixel_values"] for x in items if x["pixel_values"] is not None]
    grids = [x["image_grid_thw"] for x in items if x["image_grid_thw"] is not None]
    return {"input_ids": ids, "labels": labels, "attention_mask": mask,
            "pixel_values": torch.cat(pixels) if pixels else None,
            "image_grid_thw": torch.cat(grids) if grids else None}


def run_hf(dataset: Dataset, batch_size: int, workers: int) -> float:
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                        collate_fn=collate, prefetch_factor=4 if workers else None)
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def run_stoker(manifest: Path, image_root: Path, inputs: stoker.ModelInputs,
               batch_size: int, threads: int) -> tuple[float, dict]:
    start = time.perf_counter()
    with stoker.Loader(manifest, image_root=image_root, batch_size=batch_size,
                       num_threads=threads, prefetch=4, output="torch",
                       model_inputs=inputs) as loader:
        for _ in loader:
            pass
        stats = loader.stats()
    return time.perf_counter() - start, stats


def check_parity(dataset: HFDataset, inputs: stoker.ModelInputs, image_root: Path,
                 n: int = 12) -> None:
    for i in range(n):
        ref = dataset[i]
        ours = inputs.encode(dataset.lines[i], image_root=image_root)
        assert ours["input_ids"].tolist() == ref["input_ids"].tolist(), f"input_ids of {i}"
        assert ours["labels"].tolist() == ref["labels"].tolist(), f"labels of {i}"
        if ref["pixel_values"] is not None:
            assert np.array_equal(ours["pixel_values"], ref["pixel_values"].numpy()), \
                f"pixel_values of {i}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("stoker-demo-data"))
    parser.add_argument("--workers", type=int, default=default_num_threads())
    parser.add_argument("--model", default="qwen2-vl", choices=["qwen2-vl", "qwen2.5-vl"])
    parser.add_argument("--max-pixels", type=int, default=768 * 768)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    data = generate_dataset(args.data_dir, progress=False)
    tokenizer = Tokenizer.bundled_qwen()
    processor = make_processor(args.model, tokenizer._path, args.max_pixels)
    inputs = stoker.ModelInputs(args.model, tokenizer=tokenizer, max_pixels=args.max_pixels)
    dataset = HFDataset(data.manifest, data.image_root, processor)
    check_parity(dataset, inputs, data.image_root)

    t_hf = min(run_hf(dataset, args.batch_size, args.workers) for _ in range(args.repeat))
    runs = [run_stoker(data.manifest, data.image_root, inputs, args.batch_size, args.workers)
            for _ in range(args.repeat)]
    t_stoker, stats = min(runs, key=lambda r: r[0])
    n = len(dataset)
    print(f"{n} samples of the demo dataset, {args.model}, max_pixels {args.max_pixels}, "
          f"batch {args.batch_size}, {args.workers} workers/threads, best of {args.repeat}; "
          f"input_ids, labels and pixel_values checked equal on the first samples")
    print(f"  HF processor + PIL + DataLoader : {n / t_hf:8.1f} samples/s  ({t_hf:.2f} s)")
    print(f"  stoker.Loader(model_inputs)     : {n / t_stoker:8.1f} samples/s  ({t_stoker:.2f} s)")
    print(f"  ratio                           : {t_hf / t_stoker:8.2f}x")
    busy = {name: s["busy_s"] for name, s in stats["stages"].items() if s["items"]}
    print("  stoker busy seconds by stage (summed over threads): "
          + ", ".join(f"{k} {v:.2f}" for k, v in busy.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
