"""Generated text for tokenizer parity tests.

The corpus is built to reach every branch of byte-level BPE pre-tokenization: a
sample of every Unicode general category, combining marks and NFC-sensitive
sequences, every White_Space character, contractions in all cases, digit runs of
several scripts, added tokens glued to text, and multilingual prose, mixed at random.
Deterministic for a given seed.
"""

from __future__ import annotations

import random
import unicodedata

# Code points grouped by general category (Cs excluded: not encodable as UTF-8).
def _by_category() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        groups.setdefault(unicodedata.category(chr(cp)), []).append(chr(cp))
    return groups


WHITESPACE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680",
              *[chr(c) for c in range(0x2000, 0x200B)], "\u2028", "\u2029", "\u202f",
              "\u205f", "\u3000", "\u180e", "\u200b", "\ufeff", "\r\n"]

CONTRACTION_WORDS = ["don't", "DON'T", "Don'T", "it's", "IT'S", "it'S", "we're", "WE'RE",
                     "we'Re", "I've", "I'VE", "I'm", "I'M", "we'll", "WE'LL", "we'Ll",
                     "he'd", "HE'D", "'s", "'S", "'\u017f", "x'\u017fy", "'ll", "'LL",
                     "''s", "' s", "o'clock", "rock'n'roll", "'t'", "'re'", "'dd"]

DIGITS = ["0", "7", "42", "123", "2024", "1234567890", "3.14159", "1,234,567",
          "\u0661\u0662\u0663", "\uff11\uff12\uff13", "\u00b2\u00b3", "\u2160\u2161",
          "\u00bd", "\u0967\u0968", "12ab34", "a1b2c3", "9" * 20]

NFC_SENSITIVE = [
    "e\u0301", "E\u0301", "a\u0308", "o\u0302\u0301", "\u1100\u1161\u11a8",
    "\u1112\u1161\u11ab", "\u212b", "\u2126", "\u0041\u030a", "q\u0323\u0307",
    "q\u0307\u0323", "\u1e0b\u0323", "\u0958", "\u2000", "\u0344", "\u00c5",
    "\u0301", "\u0301\u0301", "a\u0300\u0301\u0302\u0303", "\u0915\u093c",
    "\u30ab\u3099", "\u304b\u3099", "\uff76\uff9e", "\u0627\u0653",
]

ADDED_GLUE = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|image_pad|>",
    "<|vision_end|>", "<think>", "</think>", "<tool_call>", "<|endofprompt|>",
    "<|im_start", "<|im_end|", "<|", "|>", "<think", "<<|im_end|>>",
    "<|im_start|>user\n", "x<|im_end|>y", "<|im_start|><|im_start|>",
]

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Ein Beispiel für Größenänderung: Straße, Äpfel, Öl.",
    "Le café était très chaud ; où est l'hôtel ?",
    "Быстрая коричневая лиса перепрыгивает через ленивую собаку.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "敏捷的棕色狐狸跳过了懒狗。价格是¥1,234元！",
    "素早い茶色の狐がのろまな犬を飛び越える。カタカナ、ひらがな。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘습니다.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "השועל החום המהיר קופץ מעל הכלב העצלן.",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "Nhanh chóng con cáo nâu nhảy qua con chó lười.",
    "emoji 😀👍🏽👨‍👩‍👧 flags 🇫🇷🇯🇵 and ZWJ",
    "def f(x):\n    return x ** 2  # square\n\n\tprint(f(3))\r\n",
    "   leading spaces and trailing   ",
    "line one\n\nline two\r\n\r\nline three\n   \n",
    "URL https://example.com/a/b?c=d&e=f#g and e-mail a.b@c.de",
    "MixedCASE camelCase snake_case kebab-case SCREAMING_CASE",
    "Ω≈ç√∫˜µ≤≥÷ åß∂ƒ©˙∆˚¬ œ∑´®†¥¨ˆøπ",
]


def make_corpus(seed: int = 1234, size: int = 3000) -> list[str]:
    rng = random.Random(seed)
    groups = _by_category()
    category_samples = {cat: rng.sample(chars, min(40, len(chars)))
                        for cat, chars in sorted(groups.items())}
    atoms: list[str] = []
    for chars in category_samples.values():
        atoms.extend(chars)
    atoms += WHITESPACE + CONTRACTION_WORDS + DIGITS + NFC_SENSITIVE + ADDED_GLUE
    atoms += ["a", "b", "Z", "hello", "World", " ", "  ", "!", "?!", "...", "-", "_", "\"",
              "(", ")", "/", "\\"]
    corpus: list[str] = []
    # Every atom alone, after a space and between letters.
    for atom in atoms:
        corpus += [atom, " " + atom, "x" + atom + "y", atom + "\n"]
    corpus += PROSE
    for _ in range(size):
        n = rng.randint(1, 30)
        parts = []
        for _ in range(n):
            r = rng.random()
            if r < 0.15:
                parts.append(rng.choice(PROSE))
            elif r < 0.3:
                parts.append(rng.choice(WHITESPACE))
            else:
                parts.append(rng.choice(atoms))
        corpus.append("".join(parts))
    # Long inputs: one with every category sample, one long run of one character.
    corpus.append("".join(atoms))
    corpus.append("a" * 5000)
    corpus.append(" " * 300 + "x")
    corpus.append("")
    return corpus
