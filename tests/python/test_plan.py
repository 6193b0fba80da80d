"""Plan: weighted sources, rank sharding, and exact, elastic checkpoint/resume.

The central check is the breakpoint matrix: stop a run after k batches, save its state,
restore it in a fresh loader (or a fresh process), and require the rest of the stream to
equal the uninterrupted run's, batch for batch, by content hash.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker

SOURCE_SIZES = {"alpha": 23, "beta": 17, "gamma": 11}
WEIGHTS = {"alpha": 3.0, "beta": 2.0, "gamma": 1.0}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three small manifests; every third sample has a tiny PNG whose pixels encode it."""
    root = tmp_path_factory.mktemp("plan-data")
    for name, size in SOURCE_SIZES.items():
        with open(root / f"{name}.jsonl", "w") as f:
            for i in range(size):
                content: list[dict] = [{"type": "text", "text": f"{name} sample {i}"}]
                if i % 3 == 0:
                    rel = f"img/{name}_{i}.png"
                    (root / "img").mkdir(exist_ok=True)
                    pixels = np.full((4, 5, 3), (i * 7) % 256, dtype=np.uint8)
                    pixels[0, 0] = [len(name), i % 256, 0]
                    Image.fromarray(pixels).save(root / rel)
                    content.insert(0, {"type": "image", "image": rel})
                f.write(json.dumps({"messages": [{"role": "user", "content": content}]}) + "\n")
    return root


def make_loader(data: Path, *, n_sources: int = 3, shuffle: bool = True, world: int = 1,
                rank: int = 0, global_batch: int = 8, threads: int = 2, prefetch: int = 2,
                **kwargs) -> stoker.Loader:
    names = list(SOURCE_SIZES)[:n_sources]
    sources = [stoker.Source(str(data / f"{n}.jsonl"), weight=WEIGHTS[n]) for n in names]
    kwargs.setdefault("epoch_policy", "samples")
    if kwargs["epoch_policy"] == "samples":
        kwargs.setdefault("samples_per_epoch", 61)  # 7 full global batches of 8 + 5
    return stoker.Loader(sources, batch_size=global_batch // world, world_size=world,
                         rank=rank, shuffle=shuffle, seed=1234, num_threads=threads,
                         prefetch=prefetch, output="numpy", **kwargs)


def batch_hash(batch: dict) -> str:
    h = hashlib.sha256()
    for key, text, images in zip(batch["sample_keys"], batch["samples"], batch["images"]):
        h.update(key.encode())
        h.update(text.encode())
        for img in images:
            h.update(np.ascontiguousarray(img).tobytes())
    return h.hexdigest()[:16]


def take(it, n: int) -> list[tuple[int, int, str]]:
    out = []
    for _ in range(n):
        b = next(it)
        out.append((b["epoch"], b["batch_index"], batch_hash(b)))
    return out


def stream(loader: stoker.Loader, epochs: int = 2) -> list[tuple[int, int, str]]:
    out = []
    for _ in range(epochs):
        out += [(b["epoch"], b["batch_index"], batch_hash(b)) for b in loader]
    return out


# --- The global order ------------------------------------------------------------------------


def test_order_is_independent_of_threads_and_prefetch(data: Path) -> None:
    reference = stream(make_loader(data, threads=1, prefetch=0))
    for threads, prefetch in [(4, 8), (2, 1), (3, 0)]:
        assert stream(make_loader(data, threads=threads, prefetch=prefetch)) == reference


def test_shuffle_seed_and_epoch_change_the_order(data: Path) -> None:
    a = make_loader(data, n_sources=1, epoch_policy="first_exhausted")
    e0, e1 = [k for b in a for k in b["sample_keys"]], [k for b in a for k in b["sample_keys"]]
    assert sorted(e0) == sorted(e1) and len(set(e0)) == SOURCE_SIZES["alpha"]
    assert e0 != e1, "each epoch has its own permutation"
    unshuffled = make_loader(data, n_sources=1, shuffle=False, epoch_policy="first_exhausted")
    keys = [k for b in unshuffled for k in b["sample_keys"]]
    assert keys == [f"{data / 'alpha.jsonl'}:{i + 1}" for i in range(SOURCE_SIZES["alpha"])]


def test_ranks_split_every_global_batch_and_get_equal_counts(data: Path) -> None:
    single = make_loader(data, world=1)
    ranks = [make_loader(data, world=4, rank=r) for r in range(4)]
    assert all(len(r) == len(ranks[0]) for r in ranks)
    for epoch in range(2):
        for k in range(len(single)):
            union = [key for r in ranks for key in r.plan_keys(epoch, k)]
            assert union == single.plan_keys(epoch, k), (epoch, k)
    # The partial last global batch (61 = 7 * 8 + 5) is shared 2/1/1/1.
    assert [len(r.plan_keys(0, 7)) for r in ranks] == [2, 1, 1, 1]


def test_weights_hold_within_one_sample_over_every_window(tmp_path: Path) -> None:
    sizes = {"a": 40_000, "b": 30_000, "c": 30_000}
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    for name, n in sizes.items():
        with open(tmp_path / f"{name}.jsonl", "w") as f:
            f.write(f'{{"messages": [{{"role": "user", "content": "{name}"}}]}}\n' * n)
    loader = stoker.Loader([stoker.Source(str(tmp_path / f"{n}.jsonl"), weight=w, name=n)
                            for n, w in weights.items()], batch_size=500, shuffle=True,
                           epoch_policy="samples", samples_per_epoch=100_000)
    draws = []
    for k in range(len(loader)):
        draws += [Path(key.rsplit(":", 1)[0]).stem for key in loader.plan_keys(0, k)]
    assert len(draws) == 100_000
    counts = {n: 0 for n in sizes}
    for t, name in enumerate(draws, 1):
        counts[name] += 1
        for n, w in weights.items():
            assert abs(counts[n] - t * w) <= 1.0, (t, n, counts[n])
    # So every window of any length is within two of its ideal count; windows of 300:
    for start in range(0, 100_000 - 300, 997):
        window = Counter(draws[start:start + 300])
        for n, w in weights.items():
            assert abs(window[n] - 300 * w) < 2, (start, n, window[n])


def test_repeat_policy_gives_exact_counts(data: Path) -> None:
    sources = [stoker.Source(str(data / "alpha.jsonl"), repeat=3),
               stoker.Source(str(data / "beta.jsonl"), repeat=1),
               stoker.Source(str(data / "gamma.jsonl"), repeat=2)]
    loader = stoker.Loader(sources, batch_size=4, shuffle=True, epoch_policy="repeat",
                           output="numpy")
    counts = Counter(k for b in loader for k in b["sample_keys"])
    for name, repeat in [("alpha", 3), ("beta", 1), ("gamma", 2)]:
        keys = [f"{data / (name + '.jsonl')}:{i + 1}" for i in range(SOURCE_SIZES[name])]
        assert all(counts[k] == repeat for k in keys), name
    assert sum(counts.values()) == 3 * 23 + 17 + 2 * 11


def test_first_exhausted_policy_ends_with_the_first_empty_source(data: Path) -> None:
    loader = make_loader(data, epoch_policy="first_exhausted", global_batch=1)
    keys = [k for b in loader for k in b["sample_keys"]]
    per_source = Counter(Path(k.rsplit(":", 1)[0]).stem for k in keys)
    # Weights 3:2:1 over 23/17/11 samples: alpha (23 at weight 3) runs out first.
    assert per_source["alpha"] == 23 and per_source["beta"] < 17 and per_source["gamma"] < 11
    assert Path(keys[-1].rsplit(":", 1)[0]).stem == "alpha"


# --- The breakpoint matrix -------------------------------------------------------------------


def _breakpoints(n: int) -> list[int]:
    return sorted({0, 1, n // 2, n - 1, n})


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n_sources", [1, 3])
@pytest.mark.parametrize("world", [1, 4])
@pytest.mark.parametrize("threads,prefetch", [(1, 0), (4, 8), (1, 8), (4, 0)])
def test_breakpoint_matrix(data: Path, shuffle: bool, n_sources: int, world: int,
                           threads: int, prefetch: int) -> None:
    for rank in range(world):
        def fresh() -> stoker.Loader:
            return make_loader(data, n_sources=n_sources, shuffle=shuffle, world=world,
                               rank=rank, threads=threads, prefetch=prefetch)

        reference = stream(fresh(), epochs=2)
        per_epoch = len(reference) // 2
        for k in _breakpoints(per_epoch):
            first = fresh()
            it = iter(first)
            head = take(it, k)
            state = json.loads(json.dumps(first.state_dict()))  # as it would be stored
            first.close()
            resumed = fresh()
            resumed.load_state_dict(state)
            rest = [(b["epoch"], b["batch_index"], batch_hash(b)) for b in resumed]
            rest += [(b["epoch"], b["batch_index"], batch_hash(b)) for b in resumed]
            assert head + rest[:len(reference) - k] == reference, (rank, k)


def test_ten_successive_breaks_in_one_epoch(data: Path) -> None:
    reference = stream(make_loader(data, threads=3, prefetch=4), epochs=1)
    got: list = []
    state = None
    while len(got) < len(reference):
        loader = make_loader(data, threads=3, prefetch=4)
        if state is not None:
            loader.load_state_dict(state)
        it = iter(loader)
        got += take(it, 1)
        state = loader.state_dict()
        loader.close()
    assert got == reference and len(reference) >= 8


def test_save_while_the_prefetch_queue_is_full(data: Path) -> None:
    import time

    reference = stream(make_loader(data), epochs=1)
    loader = make_loader(data, threads=4, prefetch=8)
    it = iter(loader)
    head = take(it, 2)
    time.sleep(0.3)  # let the prefetch queue fill up
    state = loader.state_dict()
    assert state["next_batch"] == 2, "prefetched batches are not part of the state"
    head += take(it, 1)  # keeps going after the save
    resumed = make_loader(data)
    resumed.load_state_dict(state)
    rest = [(b["epoch"], b["batch_index"], batch_hash(b)) for b in resumed]
    assert head[:2] + rest == reference


def test_save_across_an_epoch_boundary(data: Path) -> None:
    reference = stream(make_loader(data), epochs=3)
    loader = make_loader(data)
    first = stream(loader, epochs=1)
    state = loader.state_dict()  # saved after the whole epoch was received
    resumed = make_loader(data)
    resumed.load_state_dict(state)
    assert first + stream(resumed, epochs=2) == reference


def test_resume_in_a_fresh_process_after_sigkill(data: Path, tmp_path: Path) -> None:
    """A trainer saves its state after every batch and is killed with SIGKILL; a new
    process restores the last saved state and continues exactly."""
    state_file = tmp_path / "state.json"
    seen_file = tmp_path / "seen.txt"
    script = textwrap.dedent(f"""
        import hashlib, json, os, sys, time
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_plan import make_loader, batch_hash
        from pathlib import Path
        loader = make_loader(Path({str(data)!r}), threads=2, prefetch=4)
        state_file, seen_file = Path({str(state_file)!r}), Path({str(seen_file)!r})
        if state_file.exists():
            loader.load_state_dict(json.loads(state_file.read_text()))
        for batch in loader:
            with open(seen_file, "a") as f:
                f.write(f"{{batch['epoch']}} {{batch['batch_index']}} {{batch_hash(batch)}}\\n")
            tmp = state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(loader.state_dict()))
            os.replace(tmp, state_file)
            if os.environ.get("STALL_AT") == str(batch["batch_index"]):
                print("ready", flush=True)
                time.sleep(60)
    """)
    env = dict(os.environ, STALL_AT="3")
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    env.pop("STALL_AT")
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    seen = [tuple(line.split()) for line in seen_file.read_text().splitlines()]
    reference = [(str(e), str(k), h) for e, k, h in stream(make_loader(data), epochs=1)]
    assert seen == reference


# --- Elastic resume ----------------------------------------------------------------------------


@pytest.mark.parametrize("new_world", [2, 8])
def test_elastic_resume_keeps_the_global_stream(data: Path, new_world: int) -> None:
    global_batch = 16
    old = [make_loader(data, world=4, rank=r, global_batch=global_batch, samples_per_epoch=90)
           for r in range(4)]
    k = 2
    states = []
    for loader in old:
        it = iter(loader)
        take(it, k)
        states.append(loader.state_dict())
    assert len({(s["epoch"], s["next_batch"]) for s in states}) == 1
    new = [make_loader(data, world=new_world, rank=r, global_batch=global_batch,
                       samples_per_epoch=90) for r in range(new_world)]
    for r, loader in enumerate(new):
        loader.load_state_dict(states[r % 4])  # any rank's state restores any rank
    single = make_loader(data, world=1, global_batch=global_batch, samples_per_epoch=90)
    expected = [single.plan_keys(0, b) for b in range(len(single))]
    per_rank = [[b["sample_keys"] for b in loader] for loader in new]
    assert all(len(p) == len(expected) - k for p in per_rank)
    for i, b in enumerate(range(k, len(expected))):
        union = [key for rank_batches in per_rank for key in rank_batches[i]]
        assert union == expected[b], b


def test_a_different_global_batch_size_is_refused(data: Path) -> None:
    loader = make_loader(data, world=4, global_batch=16)
    state = loader.state_dict()
    with pytest.raises(ValueError, match="global_batch_size: saved 16, now 12"):
        make_loader(data, world=3, global_batch=12).load_state_dict(state)


# --- Bad state dicts ---------------------------------------------------------------------------


def test_bad_state_dicts_are_refused_with_a_reason(data: Path, tmp_path: Path) -> None:
    loader = make_loader(data)
    good = loader.state_dict()
    cases = [
        ("not a dict", TypeError, "must be a dict"),
        ({**good, "version": 99}, ValueError, "unsupported state version 99"),
        ({**good, "format": "torchdata"}, ValueError, "not a stoker.Loader state dict"),
        ({k: v for k, v in good.items() if k != "next_batch"}, ValueError, "missing"),
        ({**good, "next_batch": 10_000}, ValueError, "outside epoch 0"),
        ({**good, "next_batch": -1}, ValueError, "outside epoch 0"),
        ({**good, "epoch": "x"}, ValueError, "bad position"),
        ({**good, "config_digest": "0" * 32}, ValueError, "edited or corrupted"),
    ]
    for state, exc, message in cases:
        with pytest.raises(exc, match=message):
            make_loader(data).load_state_dict(state)
    # Changed sources: other weights, another seed, fewer sources.
    with pytest.raises(ValueError, match=r"sources\[0\]\.weight: saved 3\.0, now 1\.0"):
        other = stoker.Loader([stoker.Source(str(data / f"{n}.jsonl"), weight=1.0)
                               for n in SOURCE_SIZES], batch_size=8, shuffle=True, seed=1234,
                              epoch_policy="samples", samples_per_epoch=61)
        other.load_state_dict(good)
    with pytest.raises(ValueError, match="seed: saved 1234, now 1"):
        stoker.Loader([stoker.Source(str(data / f"{n}.jsonl"), weight=WEIGHTS[n])
                       for n in SOURCE_SIZES], batch_size=8, shuffle=True, seed=1,
                      epoch_policy="samples", samples_per_epoch=61).load_state_dict(good)
    with pytest.raises(ValueError, match="cannot resume"):
        make_loader(data, n_sources=1).load_state_dict(good)
    # A state that went through a file truncated mid-way is not JSON at all.
    path = tmp_path / "state.json"
    path.write_text(json.dumps(good)[:40])
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_text())


def test_changed_manifest_is_refused(data: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text((data / "beta.jsonl").read_text())
    state = stoker.Loader(str(manifest), batch_size=2).state_dict()
    with open(manifest, "a") as f:
        f.write((data / "gamma.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match=r"sources\[0\]\.files"):
        stoker.Loader(str(manifest), batch_size=2).load_state_dict(state)


# --- Sources and the index -------------------------------------------------------------------


def test_glob_source_reads_files_in_sorted_order(data: Path, tmp_path: Path) -> None:
    for i, name in enumerate(["b", "a", "c"]):
        (tmp_path / f"shard-{name}.jsonl").write_text(
            "".join(json.dumps({"messages": [{"role": "user", "content": f"{name}{j}"}]}) + "\n"
                    for j in range(i + 2)))
    loader = stoker.Loader(stoker.Source(str(tmp_path / "shard-*.jsonl"), name="shards"),
                           batch_size=100)
    keys = loader.plan_keys(0, 0)
    assert [Path(k.rsplit(":", 1)[0]).name for k in keys] == (
        ["shard-a.jsonl"] * 3 + ["shard-b.jsonl"] * 2 + ["shard-c.jsonl"] * 4)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        stoker.Loader(stoker.Source(str(tmp_path / "nothing-*.jsonl")))


def test_source_arguments_are_validated(data: Path) -> None:
    with pytest.raises(ValueError, match="weight must be a positive"):
        stoker.Source("x.jsonl", weight=0)
    with pytest.raises(ValueError, match="repeat must be an integer"):
        stoker.Source("x.jsonl", repeat=0)
    with pytest.raises(ValueError, match="names must be unique"):
        stoker.Loader([str(data / "alpha.jsonl"), str(data / "alpha.jsonl")])
    with pytest.raises(ValueError, match="rank must be in"):
        stoker.Loader(str(data / "alpha.jsonl"), rank=4, world_size=4)
    with pytest.raises(ValueError, match="needs samples_per_epoch"):
        stoker.Loader(str(data / "alpha.jsonl"), epoch_policy="samples")
    with pytest.raises(ValueError, match="epoch_policy must be"):
        stoker.Loader(str(data / "alpha.jsonl"), epoch_policy="forever")


def test_index_is_cached_and_reused(data: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = stoker.Loader(str(data / "alpha.jsonl"), index_cache_dir=cache)
    assert [f for f in os.listdir(cache) if f.endswith(".stkidx")]
    second = stoker.Loader(str(data / "alpha.jsonl"), index_cache_dir=cache)
    assert second._engine.source_info()[0]["files"][0][3] is True  # from the cache
    assert first.plan_keys(0, 0) == second.plan_keys(0, 0)


def test_index_command(data: Path, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "stoker", "index", "--cache-dir", str(tmp_path / "c")]
    out = subprocess.run(cli + [str(data / "*.jsonl")], capture_output=True, text=True,
                         check=True).stdout
    assert "23 samples" in out and "(built)" in out and "MB/s" in out
    again = subprocess.run(cli + [str(data / "alpha.jsonl")], capture_output=True, text=True,
                           check=True).stdout
    assert "(cached)" in again
    bad = subprocess.run(cli + [str(tmp_path / "missing.jsonl")], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "missing.jsonl" in bad.stderr and "error" in bad.stderr
