"""Tokenizer throughput: stoker.text.Tokenizer against Hugging Face `tokenizers`, same
tokenizer.json, same texts, same run, one thread.

    .venv/bin/python benchmarks/bench_text.py [--vocab qwen3|o200k|both] [--mb 4] [--repeat 3]

The corpus is generated multilingual prose (Latin, Cyrillic, Greek, CJK, Arabic,
Devanagari, Thai, emoji, code) cut into documents of about 1 KB. Measured: single
calls (``encode`` in a loop) and ``encode_batch``; both sides are pinned to one thread
(RAYON_RS_NUM_CPUS=1 for tokenizers, num_threads=1 for Stoker). Every run checks that
the ids are identical before it prints a figure. When transformers is importable, also
times per-sample text preparation: Stoker's encode_sample against
``apply_chat_template`` + ``__call__`` of a transformers tokenizer (text only, the
same conversation).
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")  # before tokenizers starts its pool

import argparse
import lzma
import pathlib
import random
import tempfile
import time

import tokenizers

from stoker.text import Tokenizer, encode_sample

ROOT = pathlib.Path(__file__).resolve().parents[1]
SENTENCES = [
    "The quick brown fox jumps over the lazy dog, and then it's gone again.",
    "Ein Beispiel für Größenänderung: Straße, Äpfel, Öl und schöne Grüße.",
    "Le café était très chaud ; où est l'hôtel, s'il vous plaît ?",
    "Быстрая коричневая лиса перепрыгивает через ленивую собаку.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "敏捷的棕色狐狸跳过了懒狗。价格是¥1,234元，数量为56个。",
    "素早い茶色の狐がのろまな犬を飛び越える。今日は2024年です。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘습니다.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "Emoji 😀👍🏽 and numbers 3.14159, 2,718 and 1e-9.",
    "def area(r):\n    return 3.14159 * r ** 2  # circle\n",
    "Visit https://example.com/path?q=1&lang=en for more information.",
]


def make_corpus(megabytes: float, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs, size = [], 0
    while size < megabytes * 1e6:
        doc = " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(6, 14)))
        docs.append(doc)
        size += len(doc.encode())
    return docs


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# The Qwen vocabulary ships with the package; o200k is test data.
VOCABULARY_FILES = {
    "qwen3": ROOT / "python/stoker/_data/tokenizers/qwen3/tokenizer.json.xz",
    "o200k": ROOT / "tests/data/tokenizers/o200k/tokenizer.json.xz",
}


def bench_vocab(name: str, docs: list[str], repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "tokenizer.json"
        with lzma.open(VOCABULARY_FILES[name]) as src:
            path.write_bytes(src.read())
        ours = Tokenizer.from_file(path)
        ref = tokenizers.Tokenizer.from_file(str(path))
    mb = sum(len(d.encode()) for d in docs) / 1e6
    want = [e.ids for e in ref.encode_batch(docs, add_special_tokens=False)]
    assert ours.encode_batch(docs, num_threads=1) == want, "batch ids differ"
    assert [ours.encode(d) for d in docs] == want, "single-call ids differ"
    n_tokens = sum(len(ids) for ids in want)

    rows = [
        ("encode (single calls)",
         best(lambda: [ours.encode(d) for d in docs], repeat),
         best(lambda: [ref.encode(d, add_special_tokens=False) for d in docs], repeat)),
        ("encode_batch",
         best(lambda: ours.encode_batch(docs, num_threads=1), repeat),
         best(lambda: ref.encode_batch(docs, add_special_tokens=False), repeat)),
    ]
    print(f"\n{name}: {len(docs)} documents, {mb:.2f} MB, {n_tokens} tokens, ids identical")
    print(f"{'call':<24}{'stoker MB/s':>14}{'tokenizers MB/s':>18}{'ratio':>8}")
    for label, t_ours, t_ref in rows:
        print(f"{label:<24}{mb / t_ours:>14.2f}{mb / t_ref:>18.2f}{t_ref / t_ours:>8.2f}x")


def engine_text_stage(samples: list[dict], tokenizer: Tokenizer,
                      repeat: int) -> tuple[float, float]:
    """(busy seconds of the loader's parse + text stages, wall seconds of the epoch) for
    `samples` as a manifest, one worker thread, best of `repeat`."""
    import json

    import stoker
    with tempfile.TemporaryDirectory() as tmp:
        manifest = pathlib.Path(tmp) / "chat.jsonl"
        manifest.write_text("".join(json.dumps(s) + "\n" for s in samples))
        inputs = stoker.ModelInputs("qwen2-vl", tokenizer=tokenizer, pad_token_id=151643)
        busy, wall = [], []
        for _ in range(repeat):
            loader = stoker.Loader(manifest, batch_size=64, num_threads=1, prefetch=4,
                                   model_inputs=inputs, output="numpy", index_cache_dir="")
            start = time.perf_counter()
            for _batch in loader:
                pass
            wall.append(time.perf_counter() - start)
            stages = loader.stats()["stages"]
            busy.append(stages["parse"]["busy_s"] + stages["text"]["busy_s"])
            loader.close()
    return min(busy), min(wall)


def bench_samples(repeat: int) -> None:
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        print("\n(per-sample preparation skipped: transformers is not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "tokenizer.json"
        with lzma.open(VOCABULARY_FILES["qwen3"]) as src:
            path.write_bytes(src.read())
        ours = Tokenizer.from_file(path)
        ref = PreTrainedTokenizerFast(tokenizer_file=str(path))
    template = (
        "{%- if messages[0].role != 'system' -%}{{- '<|im_start|>system\\nYou are a helpful "
        "assistant.<|im_end|>\\n' -}}{%- endif -%}{%- for m in messages -%}"
        "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}{%- endfor -%}")
    rng = random.Random(1)
    samples = [{"messages": [
        {"role": "user", "content": " ".join(rng.choice(SENTENCES) for _ in range(3))},
        {"role": "assistant", "content": " ".join(rng.choice(SENTENCES) for _ in range(6))}]}
        for _ in range(2000)]
    for s in samples[:50]:
        text = ref.apply_chat_template(s["messages"], chat_template=template, tokenize=False)
        assert encode_sample(s, tokenizer=ours)["input_ids"].tolist() == ref(
            text, add_special_tokens=False)["input_ids"]
    t_ours = best(lambda: [encode_sample(s, tokenizer=ours) for s in samples], repeat)
    t_ref = best(lambda: [ref(ref.apply_chat_template(s["messages"], chat_template=template,
                                                      tokenize=False),
                              add_special_tokens=False) for s in samples], repeat)
    t_engine, t_loader = engine_text_stage(samples, ours, repeat)
    print(f"\nper-sample text preparation, {len(samples)} chat samples (text only):")
    print(f"  stoker.encode_sample (ids + labels + position ids): "
          f"{len(samples) / t_ours:,.0f} samples/s   ratio {t_ref / t_ours:.2f}x")
    print(f"  stoker loader, 1 thread, parse + text stages (what the engine spends per "
          f"sample): {len(samples) / t_engine:,.0f} samples/s   ratio {t_ref / t_engine:.2f}x")
    print(f"  stoker loader, 1 thread, whole epoch incl. padded batches of 64 handed to "
          f"Python: {len(samples) / t_loader:,.0f} samples/s   ratio {t_ref / t_loader:.2f}x")
    print(f"  transformers apply_chat_template + tokenize (ids only): "
          f"{len(samples) / t_ref:,.0f} samples/s   ratio {t_ref / t_ours:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="both", choices=["qwen3", "o200k", "both"])
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    docs = make_corpus(args.mb)
    for name in (["qwen3", "o200k"] if args.vocab == "both" else [args.vocab]):
        bench_vocab(name, docs, args.repeat)
    bench_samples(args.repeat)


if __name__ == "__main__":
    main()
