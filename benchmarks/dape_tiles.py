"""DAPE's attention in blocks sized by its MLP's hidden features per (query, key) pair against
blocks sized by the scores alone (h values per pair, as CoPE's and T5's), side by side in one
process: a causal training step (forward and backward) and an evaluation forward, time (median
of interleaved rounds) and peak memory (pebench.bench.throughput's measure). ``DAPE.attend`` uses the first
in evaluation and the second in training, from these figures.

    python benchmarks/dape_tiles.py                  # the decoder cards' shapes: b=32, s=256, d_h=16; b=8, s=1,024
    python benchmarks/dape_tiles.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import torch

import pebench.encodings.dape as dape_module
from pebench.encodings.attention import causal_mask
from pebench.bench.throughput import peak_memory_mb
from pebench.encodings.base import Site
from pebench.model.transformer import ModelConfig

SITE = Site("decoder", 0, "self")


def sized_by(pair_values: int | None):
    """tiled_attention with blocks sized for ``pair_values`` values per (query, key) pair, whatever
    DAPE.attend asks."""
    tiled = dape_module.tiled_attention
    return lambda *args, **asked: tiled(*args, pair_values=pair_values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    torch.manual_seed(0)
    for label, (b, s, d_model, train) in {"train b=32 s=256": (32, 256, 64, True), "eval b=8 s=1024": (8, 1024, 128, False)}.items():
        dape = dape_module.DAPE(ModelConfig(d_model=d_model, n_heads=4, n_layers=1).geometry(s))
        sizings = {"by the MLP": dape.mlp_width, "by the scores": None}  # the MLP's hidden features per pair, wider than 4 heads
        q, k, v = (torch.randn(b, 4, s, d_model // 4, requires_grad=train) for _ in range(3))
        pos, allowed = torch.arange(s), causal_mask(s, q.device)

        def step() -> None:
            if train:
                dape.attend(q, k, v, pos, pos, allowed, SITE, causal=True).sum().backward()
            else:
                with torch.no_grad():
                    dape.attend(q, k, v, pos, pos, allowed, SITE, causal=True)

        times = {name: [] for name in sizings}
        memory = {}
        for name, sizing in sizings.items():
            with mock.patch.object(dape_module, "tiled_attention", sized_by(sizing)):
                memory[name] = peak_memory_mb(step, q.device)
        for _ in range(args.rounds):
            for name, sizing in sizings.items():
                with mock.patch.object(dape_module, "tiled_attention", sized_by(sizing)):
                    start = time.perf_counter()
                    step()
                    times[name].append(time.perf_counter() - start)
        base = statistics.median(times["by the scores"])
        for name in sizings:
            median = statistics.median(times[name])
            print(f"{label:18s} {name:26s} {median * 1e3:8.1f} ms  x{median / base:.2f}  peak {memory[name]:8.1f} MiB  (threads {torch.get_num_threads()})")


if __name__ == "__main__":
    main()
