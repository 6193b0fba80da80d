"""Writes the text goldens: conversations rendered, expanded, tokenized, labelled and
given mRoPE position ids by the reference Python stack.

Run it in a separate environment (NOT the project's .venv; any folder outside the
repository), e.g.:

    python3 -m venv ../text-ref-venv
    ../text-ref-venv/bin/pip install transformers tokenizers jinja2 numpy torch==2.13.0
    ../text-ref-venv/bin/python scripts/make_text_goldens.py

What is the reference here:
* chat templates: transformers' ``apply_chat_template`` (sandboxed Jinja2,
  trim_blocks/lstrip_blocks) with Jinja templates that follow the Qwen2-VL and
  Qwen3-VL template rules (the checkpoints' own files are not available offline);
* placeholder expansion: the processors' rule (each ``<|image_pad|>`` in order becomes
  t*h*w/4 pads), done here in a few lines because the processors need torchvision;
* tokenization: transformers' fast tokenizer built from the vendored tokenizer.json;
* labels: the canonical rule (assistant content + ``<|im_end|>`` + ``\\n``; vision
  blocks masked wherever they are), from the tokenizer's character offsets on the
  expanded text;
* position ids: transformers' own ``get_rope_index`` of each family's model class,
  called with a minimal config (no weights).
"""

from __future__ import annotations

import copy
import gzip
import json
import lzma
import pathlib
import re
import tempfile
import types

import torch
from transformers import PreTrainedTokenizerFast
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "python" / "goldens" / "text" / "conversations.json.gz"

IMAGE_PAD = "<|image_pad|>"
IMAGE_PAD_ID = 151655
MERGE = 2

# Shared item rendering: an image item is one with type "image" or an "image" /
# "image_url" key; a text item renders its text.
_ITEMS = (
    "{%- for item in m.content -%}"
    "{%- if item.type == 'image' or 'image' in item or 'image_url' in item -%}"
    "{%- set ns.images = ns.images + 1 -%}"
    "{%- if add_vision_id -%}{{- 'Picture ' + ns.images|string + ': ' -}}{%- endif -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in item -%}{{- item.text -}}{%- endif -%}"
    "{%- endfor -%}")

QWEN2_VL_TEMPLATE = (
    "{%- set ns = namespace(images=0) -%}"
    "{%- if messages[0].role != 'system' -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m.role + '\\n' -}}"
    "{%- if m.content is string -%}{{- m.content -}}{%- else -%}" + _ITEMS + "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")

QWEN3_VL_TEMPLATE = (
    "{%- set ns = namespace(images=0) -%}"
    "{%- if messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].content is string -%}{{- messages[0].content -}}{%- else -%}"
    "{%- for item in messages[0].content -%}{%- if 'text' in item -%}{{- item.text -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}"
    "{{- '<|im_start|>user\\n' -}}"
    "{%- if m.content is string -%}{{- m.content -}}{%- else -%}" + _ITEMS + "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if m.content is string -%}{{- m.content -}}{%- else -%}"
    "{%- for item in m.content -%}{%- if 'text' in item -%}{{- item.text -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")

TEMPLATES = {"qwen2-vl": QWEN2_VL_TEMPLATE, "qwen2.5-vl": QWEN2_VL_TEMPLATE,
             "qwen3-vl": QWEN3_VL_TEMPLATE}
MODEL_CLASSES = {"qwen2-vl": Qwen2VLModel, "qwen2.5-vl": Qwen2_5_VLModel,
                 "qwen3-vl": Qwen3VLModel}


def img(name):
    return {"type": "image", "image": name}


def txt(text):
    return {"type": "text", "text": text}


def conversations():
    """(sample, grids, families) cases; samples are manifest records."""
    g = [[1, 4, 4], [1, 6, 8], [1, 2, 2], [1, 10, 4], [1, 8, 8]]
    all_families = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl")
    qwen2_only = ("qwen2-vl", "qwen2.5-vl")
    cases = [
        ({"messages": [{"role": "user", "content": "Hello!"},
                       {"role": "assistant", "content": "Hi, how can I help?"}]}, [], all_families),
        ({"messages": [{"role": "user", "content": [img("a.jpg"), txt("What is this?")]},
                       {"role": "assistant", "content": "A cat."}]}, g[:1], all_families),
        ({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [img("a.jpg"), txt("Describe this image.")]},
                       {"role": "assistant", "content": [txt("A red car on a street.")]}]},
         g[1:2], all_families),
        ({"messages": [{"role": "user", "content": [img("a.jpg"), txt("What is this?")]},
                       {"role": "assistant", "content": "A cat."},
                       {"role": "user", "content": [txt("And this?"), img("b.png")]},
                       {"role": "assistant", "content": "A dog."}]}, g[:2], all_families),
        ({"messages": [{"role": "user", "content": [img("a.jpg"), img("b.jpg"), img("c.jpg"),
                                                     txt("Compare the three pictures.")]},
                       {"role": "assistant", "content": "The first is darker; the second "
                                                        "and third are nearly identical."}]},
         g[1:4], all_families),
        ({"messages": [{"role": "system", "content": [txt("You answer in French.")]},
                       {"role": "user", "content": "Quelle heure est-il ?"},
                       {"role": "assistant", "content": "Il est midi."},
                       {"role": "user", "content": [img("x.webp"), txt("Et ça ?")]},
                       {"role": "assistant", "content": "C'est une horloge : 12 h 05."},
                       {"role": "user", "content": "Merci !"},
                       {"role": "assistant", "content": "De rien."}]}, g[4:5], all_families),
        ({"messages": [{"role": "user", "content": "Draw me a cat."},
                       {"role": "assistant", "content": [txt("Here it is: "), img("cat.png"),
                                                         txt(" Do you like it?")]}]},
         g[2:3], qwen2_only),
        ({"messages": [{"role": "user", "content": [txt("Look:"), img("a.jpg")]},
                       {"role": "assistant", "content": "\nIt starts with a newline.\n"},
                       {"role": "user", "content": "  and leading spaces?"},
                       {"role": "assistant", "content": " Yes, one space.  "}]}, g[:1],
         all_families),
        ({"messages": [{"role": "user", "content": [img("a.jpg"), txt("这是什么？请用中文回答。")]},
                       {"role": "assistant", "content": "这是一只猫，它在沙发上睡觉。😺"}]},
         g[3:4], all_families),
        ({"messages": [{"role": "user", "content": "Think first: 12*7?"},
                       {"role": "assistant", "content": "<think>\n12*7 = 84\n</think>\n\n84"}]},
         [], all_families),
        ({"messages": [{"role": "user", "content": "Caf\u0065\u0301 or cafe\u0301? "
                                                   "\u212b\u2126 \r\n\r\n tabs\tand\r\nCRLF"},
                       {"role": "assistant", "content": "Both are caf\u00e9 after NFC.\r\n"}]},
         [], all_families),
        ({"messages": [{"role": "user", "content": [img("a.jpg"), txt("Nom\u0301 ?")]},
                       {"role": "assistant", "content": "\u0301Cafe\u0301 au lai\u0308t, "
                                                        "n\u0303o \u212b."}]}, g[:1],
         all_families),
        ({"image": "img/0001.jpg",
          "conversations": [{"from": "human", "value": "<image>\nWhat is shown here?"},
                            {"from": "gpt", "value": "A lighthouse at dusk."},
                            {"from": "human", "value": "What colour is it?"},
                            {"from": "gpt", "value": "Red and white."}]}, g[1:2], all_families),
        ({"image": ["p1.jpg", "p2.jpg"],
          "conversations": [{"from": "human", "value": "Left <image> right <image> — same?"},
                            {"from": "gpt", "value": "No."}]}, g[:2], all_families),
    ]
    return cases


def to_messages(sample):
    """LLaVA/ShareGPT records become messages: each "<image>" an image item in place."""
    if "messages" in sample:
        return copy.deepcopy(sample["messages"])
    images = sample["image"] if isinstance(sample["image"], list) else [sample["image"]]
    roles = {"human": "user", "gpt": "assistant", "system": "system"}
    messages, k = [], 0
    for turn in sample["conversations"]:
        parts = turn["value"].split("<image>")
        content = []
        for i, part in enumerate(parts):
            if i > 0:
                content.append(img(images[k]))
                k += 1
            if part:
                content.append(txt(part))
        messages.append({"role": roles[turn["from"]], "content": content})
    return messages


def expand(text, grids):
    """The processors' placeholder expansion."""
    index = 0
    while IMAGE_PAD in text:
        t, h, w = grids[index]
        text = text.replace(IMAGE_PAD, "<|placeholder|>" * (t * h * w // (MERGE * MERGE)), 1)
        index += 1
    assert index == len(grids), "grid count mismatch"
    return text.replace("<|placeholder|>", IMAGE_PAD)


def trained_spans(text, mode):
    """Character spans trained by the canonical rule, on the expanded text."""
    header, end = "<|im_start|>assistant\n", "<|im_end|>"
    spans = []
    for m in re.finditer(re.escape(header), text):
        start = m.end()
        stop = text.find(end, start)
        if stop < 0:
            continue  # a generation prompt, not a turn
        spans.append((start, stop + len(end) + 1))
    if mode == "last_assistant":
        spans = spans[-1:]
    return spans


def vision_spans(text, add_vision_id):
    """Vision blocks (with their "Picture k: " label): never trained, in any turn."""
    prefix = r"(?:Picture \d+: )?" if add_vision_id else ""
    block = prefix + re.escape("<|vision_start|>") + ".*?" + re.escape("<|vision_end|>")
    return [m.span() for m in re.finditer(block, text, flags=re.S)]


def labels_for(ids, offsets, text, mode, add_vision_id):
    if mode == "all":
        return list(ids)
    spans = trained_spans(text, mode)
    masked = vision_spans(text, add_vision_id)

    def trained(start):
        return (any(a <= start < b for a, b in spans)
                and not any(a <= start < b for a, b in masked))

    return [i if trained(o[0]) else -100 for i, o in zip(ids, offsets)]


def rope(family, ids, grids):
    cls = MODEL_CLASSES[family]
    vision = types.SimpleNamespace(spatial_merge_size=MERGE, tokens_per_second=2,
                                   temporal_patch_size=2)
    config = types.SimpleNamespace(vision_config=vision, image_token_id=IMAGE_PAD_ID,
                                   video_token_id=151656, vision_start_token_id=151652)
    fake = types.SimpleNamespace(config=config)
    fake.get_vision_position_ids = lambda *a, **k: cls.get_vision_position_ids(fake, *a, **k)
    input_ids = torch.tensor([ids], dtype=torch.long)
    types_row = (input_ids == IMAGE_PAD_ID).int()
    grid_tensor = torch.tensor(grids, dtype=torch.long) if grids else None
    if grid_tensor is None:
        # get_rope_index expects vision; a text-only sequence uses plain positions.
        n = len(ids)
        return [list(range(n))] * 3
    positions, _ = cls.get_rope_index(fake, input_ids, types_row, image_grid_thw=grid_tensor)
    return positions[:, 0, :].tolist()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "tokenizer.json"
        with lzma.open(ROOT / "python/stoker/_data/tokenizers/qwen3/tokenizer.json.xz") as src:
            path.write_bytes(src.read())
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(path))
        out = []
        for sample, grids, families in conversations():
            for family in families:
                for options in ({}, {"add_vision_id": True}, {"label_mode": "last_assistant"},
                                {"label_mode": "all"}, {"add_generation_prompt": True},
                                {"qwen3_empty_think": True}):
                    if "qwen3_empty_think" in options and family != "qwen3-vl":
                        continue
                    messages = to_messages(sample)
                    if options.get("qwen3_empty_think"):
                        for m in messages:
                            if m["role"] != "assistant":
                                continue
                            texts = ([m["content"]] if isinstance(m["content"], str)
                                     else [i.get("text", "") for i in m["content"]])
                            if not any("<think>" in t or "</think>" in t for t in texts):
                                think = "<think>\n\n</think>\n\n"
                                if isinstance(m["content"], str):
                                    m["content"] = think + m["content"]
                                else:
                                    m["content"] = [txt(think)] + m["content"]
                    rendered = tokenizer.apply_chat_template(
                        messages, chat_template=TEMPLATES[family], tokenize=False,
                        add_generation_prompt=options.get("add_generation_prompt", False),
                        add_vision_id=options.get("add_vision_id", False))
                    text = expand(rendered, grids)
                    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
                    ids = enc["input_ids"]
                    mode = options.get("label_mode", "assistant")
                    out.append({
                        "family": family, "options": options, "sample": sample,
                        "image_grids": grids, "text": text, "input_ids": ids,
                        "labels": labels_for(ids, enc["offset_mapping"], text, mode,
                                             options.get("add_vision_id", False)),
                        "position_ids": rope(family, ids, grids),
                    })
    OUT.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
    OUT.write_bytes(gzip.compress(data, 9, mtime=0))
    print(f"{len(out)} cases, {OUT.stat().st_size} bytes -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
