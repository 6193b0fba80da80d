"""Tokenizer throughput: stoker.text.Tokenizer against Hugging Face `tokenizers`, same
tokenizer.json, same texts, same run, one thread.

    .venv/bin/python benchmarks/bench_text.py [--vocab qwen3|o200k|both] [--mb 50] [--repeat 1]

The corpus (see make_corpus) is half real English prose and code (the Python standard
library's sources) and half generated prose in eleven other scripts (Latin with
accents, Cyrillic, Greek, Arabic, Devanagari, Thai, CJK, Hangul) with Zipf-distributed
words, numbers and long digit runs, emoji, URLs, contractions and runs of whitespace,
cut into documents of about 1 KB. Measured: single calls (``encode`` in a loop) and
``encode_batch``; both sides are pinned to one thread (RAYON_RS_NUM_CPUS=1 for
tokenizers, num_threads=1 for Stoker). Every run checks that the ids are identical
before it prints a figure. When transformers is importable, also times per-sample text
preparation: Stoker's encode_sample against ``apply_chat_template`` + ``__call__`` of a
transformers tokenizer (text only, the same conversation).
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")  # before tokenizers starts its pool

import argparse
import itertools
import lzma
import pathlib
import random
import sysconfig
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


# The generated corpus. Prose in each script is made of words built from syllables of
# that script and drawn with Zipf frequencies (a few words are very common, most are
# rare), so pieces repeat as in real text without the tokenizer's piece cache holding
# the whole corpus. English prose and code are real: docstrings, comments and code of
# the Python standard library installed with the interpreter running the benchmark.
def _chars(text: str) -> list[str]:
    return text.split() if " " in text else list(text)


SYLLABLES = {  # (onsets, nuclei, codas, syllables per word, word separator)
    "german": (_chars("b d f g h k l m n p r s t w z sch st ch"), _chars("a e i o u ä ö ü ei au ie"),
               _chars("n r s t ch ng l"), (1, 4), " "),
    "french": (_chars("b c d f g j l m n p r s t v qu"), _chars("a e i o u é è ou ai on an eu"),
               _chars("s t r x"), (1, 3), " "),
    "spanish": (_chars("b c d f g l m n p r s t v ll ch"), _chars("a e i o u ió ué á"),
                _chars("s n r l"), (1, 4), " "),
    "russian": (_chars("б в г д ж з к л м н п р с т ф х ц ч ш"), _chars("а е и о у ы я ю ё"),
                _chars("й н т с л р"), (1, 4), " "),
    "greek": (_chars("β γ δ θ κ λ μ ν π ρ σ τ φ χ"), _chars("α ε η ι ο υ ω ά έ ί ό"),
              _chars("ς ν"), (1, 4), " "),
    "arabic": (_chars("ب ت ث ج ح خ د ر ز س ش ص ع ف ق ك ل م ن ه و ي"), _chars("ا و ي َ ِ ُ"),
               _chars("ة ن م"), (1, 3), " "),
    "hindi": (_chars("क ख ग घ च ज ट ड त थ द न प ब म य र ल व स ह"), _chars("ा ि ी ु ू े ै ो ौ ं"),
              _chars("न म र"), (1, 3), " "),
    "thai": (_chars("ก ข ค ง จ ช ด ต ท น บ ป พ ม ย ร ล ว ส ห อ"), _chars("า ิ ี ึ ุ ู เ แ ั ่ ้"),
             _chars("ก ง น ม ย ว"), (1, 3), ""),
}
# Scripts without syllables: words of 1-3 characters from a set of common ones.
CHARACTERS = {
    "chinese": ([chr(c) for c in range(0x4E00, 0x4E00 + 3500)], (1, 3), "", "，。！？、"),
    "japanese": ([chr(c) for c in range(0x3041, 0x3094)] * 3 +
                 [chr(c) for c in range(0x4E00, 0x4E00 + 1500)], (2, 5), "", "、。"),
    "korean": ([chr(c) for c in range(0xAC00, 0xAC00 + 11172, 7)], (1, 4), " ", ".?"),
}
EMOJI = [*map(chr, range(0x1F600, 0x1F64F)), "👍🏽", "👩‍💻", "🇫🇷", "❤️", "✨", "🚀"]
GAPS = ["\n\n", "\n", " ", "  ", "\t\t", "\r\n", "\u3000"]


def _stdlib_text(rng: random.Random, megabytes: float) -> list[str]:
    """Chunks of about 1 KB of the standard library's Python sources, in random order."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "site-packages", "dist-packages"}
    files = sorted(p for p in root.rglob("*.py") if not skip.intersection(p.parts))
    rng.shuffle(files)
    chunks, size = [], 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for at in range(0, len(text), 1000):
            chunks.append(text[at:at + 1000])
            size += len(chunks[-1].encode())
        if size >= megabytes * 1e6:
            break
    return chunks


def make_corpus(megabytes: float, seed: int = 0) -> list[str]:
    """About `megabytes` of documents of ~1 KB: half real English and code (see above),
    half generated prose in eleven other scripts with numbers, digit runs, emoji,
    URLs, contractions and runs of spaces, tabs and newlines."""
    rng = random.Random(seed)
    ranks = range(5000)
    cumulative = list(itertools.accumulate(1.0 / (r + 2) for r in ranks))  # Zipf-like
    vocabularies: dict[str, tuple[list[str], str, str]] = {}
    for name, (onsets, nuclei, codas, (lo, hi), sep) in SYLLABLES.items():
        words = set()
        while len(words) < len(ranks):
            words.add("".join(rng.choice(onsets) + rng.choice(nuclei) +
                              (rng.choice(codas) if rng.random() < 0.3 else "")
                              for _ in range(rng.randint(lo, hi))))
        vocabularies[name] = (sorted(words), sep, "" if name == "thai" else ".!?;:")
    for name, (chars, (lo, hi), sep, stops) in CHARACTERS.items():
        words = {"".join(rng.choices(chars, k=rng.randint(lo, hi))) for _ in range(len(ranks))}
        vocabularies[name] = (sorted(words), sep, stops)

    def number() -> str:
        kind = rng.random()
        if kind < 0.4:
            return str(rng.randint(0, 10 ** rng.randint(1, 6)))
        if kind < 0.6:
            return f"{rng.uniform(0, 1000):.{rng.randint(1, 5)}f}"
        if kind < 0.8:
            return f"{rng.randint(1000, 10 ** 9):,}"
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(8, 40)))

    def paragraph() -> str:
        words, sep, stops = vocabularies[rng.choice(list(vocabularies))]
        sentences = []
        for _ in range(rng.randint(1, 4)):
            sentence = rng.choices(words, cum_weights=cumulative[:len(words)],
                                   k=rng.randint(4, 18))
            for _ in range(rng.randint(0, 2)):
                sentence.insert(rng.randrange(len(sentence) + 1), number())
            if rng.random() < 0.15:
                sentence.insert(rng.randrange(len(sentence) + 1), rng.choice(EMOJI))
            if rng.random() < 0.1:
                sentence.insert(rng.randrange(len(sentence) + 1),
                                f"https://example.com/{rng.choice(words)}?id={rng.randint(1, 99999)}")
            if rng.random() < 0.1 and sep == " ":
                sentence[0] += rng.choice(["'s", "'re", "'ll", "'T", "'VE"])
            sentences.append(sep.join(sentence) + (rng.choice(stops) if stops else ""))
        gap = rng.choice(GAPS + ["\n" + " " * rng.randint(2, 24), " " * rng.randint(8, 64)])
        return sep.join(sentences) + gap

    docs = _stdlib_text(rng, megabytes / 2)
    size = sum(len(d.encode()) for d in docs)
    while size < megabytes * 1e6:
        doc, doc_bytes, target = [], 0, rng.randint(600, 1600)
        while doc_bytes < target:
            doc.append(paragraph())
            doc_bytes += len(doc[-1].encode())
        docs.append("".join(doc))
        size += doc_bytes
    rng.shuffle(docs)
    return docs


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def paired(ours, theirs, repeat: int) -> tuple[float, float, list[float]]:
    """Best seconds of `ours` and of `theirs`, timed in alternation (ours, theirs, ours,
    ...) so that both see the same machine: on a shared VM the load drifts over the
    minutes one side takes. Also each round's ratio (theirs / ours)."""
    t_ours, t_theirs = [], []
    for _ in range(repeat):
        for fn, times in ((ours, t_ours), (theirs, t_theirs)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return min(t_ours), min(t_theirs), [b / a for a, b in zip(t_ours, t_theirs)]


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
         *paired(lambda: [ours.encode(d) for d in docs],
                 lambda: [ref.encode(d, add_special_tokens=False) for d in docs], repeat)),
        ("encode_batch",
         *paired(lambda: ours.encode_batch(docs, num_threads=1),
                 lambda: ref.encode_batch(docs, add_special_tokens=False), repeat)),
    ]
    print(f"\n{name}: {len(docs)} documents, {mb:.2f} MB, {n_tokens} tokens, ids identical")
    print(f"{'call':<24}{'stoker MB/s':>14}{'tokenizers MB/s':>18}{'ratio':>8}"
          "  each round")
    for label, t_ours, t_ref, rounds in rows:
        each = " ".join(f"{r:.1f}x" for r in rounds)
        print(f"{label:<24}{mb / t_ours:>14.2f}{mb / t_ref:>18.2f}{t_ref / t_ours:>8.2f}x"
              f"  {each}")


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
    parser.add_argument("--mb", type=float, default=50.0, help="corpus size in MB")
    parser.add_argument("--repeat", type=int, default=1, help="best of this many runs")
    args = parser.parse_args()
    docs = make_corpus(args.mb)
    for name in (["qwen3", "o200k"] if args.vocab == "both" else [args.vocab]):
        bench_vocab(name, docs, args.repeat)
    bench_samples(args.repeat)


if __name__ == "__main__":
    main()
