"""Batched greedy decoding and beam search with cached keys and values.

Both decode an encoder-decoder model token by token through :meth:`Transformer.decode`, which
keeps every layer's keys and values (already position-encoded) in a cache, so each step costs
one token's forward pass. The output length is capped per example at
``ceil(max_length_a * source_length + max_length_b)`` (fairseq's ``max_len_a``/``max_len_b``).
Beam search scores finished hypotheses by log-probability / length^length_penalty, the length
counting EOS when one was produced (fairseq's normalisation; Wu et al. 2016, arXiv:1609.08144,
eq. 14 use (5 + length)^alpha / 6^alpha instead).
Shapes: b batch, k beam, s sequence, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .batching import BOS, EOS
from .model import PAD, KVCache, Transformer


@dataclass(frozen=True)
class DecodingConfig:
    """How outputs are generated.

    Args:
        strategy: ``"greedy"`` or ``"beam"``.
        beam_size: hypotheses kept per example (beam search).
        length_penalty: alpha of the length normalisation (beam search).
        max_length_a, max_length_b: output cap ``ceil(a * source_length + b)`` tokens.
    """

    strategy: str = "greedy"
    beam_size: int = 4
    length_penalty: float = 1.0
    max_length_a: float = 1.5
    max_length_b: float = 10.0

    def __post_init__(self):
        if self.strategy not in ("greedy", "beam"):
            raise ValueError(f"decoding.strategy must be 'greedy' or 'beam'; got {self.strategy!r}")

    def max_output_length(self, source_length: int) -> int:
        return math.ceil(self.max_length_a * source_length + self.max_length_b)


def _reorder(cache: KVCache, index: Tensor) -> None:
    for entry in cache.values():
        entry["k"], entry["v"] = entry["k"].index_select(0, index), entry["v"].index_select(0, index)


def _strip(row: list[int]) -> list[int]:
    """Tokens up to (not including) the first EOS or padding."""
    for i, token in enumerate(row):
        if token in (EOS, PAD):
            return row[:i]
    return row


@torch.no_grad()
def greedy(model: Transformer, source: Tensor, max_lengths: Tensor) -> list[list[int]]:
    """Greedy outputs (token ids, without BOS/EOS) for ``source`` ``[b, s_s]``; max_lengths ``[b]``."""
    memory = model.encode(source)
    b = source.shape[0]
    tokens = torch.full((b, 1), BOS, dtype=torch.long, device=source.device)
    done = torch.zeros(b, dtype=torch.bool, device=source.device)
    cache: KVCache = {}
    for step in range(int(max_lengths.max())):
        logits = model.decode(tokens[:, -1:], step, cache, memory)[:, -1]  # [b, V]
        next_token = logits.argmax(-1).masked_fill(done, PAD)
        tokens = torch.cat((tokens, next_token[:, None]), dim=1)
        done |= (next_token == EOS) | (step + 1 >= max_lengths)
        if done.all():
            break
    return [_strip(row) for row in tokens[:, 1:].tolist()]


@torch.no_grad()
def beam_search(model: Transformer, source: Tensor, max_lengths: Tensor, beam_size: int, length_penalty: float) -> list[list[int]]:
    """Beam-search outputs (token ids, without BOS/EOS) for ``source`` ``[b, s_s]``.

    Every step extends each live hypothesis by every token and keeps the ``beam_size`` best
    per example; a hypothesis that ends with EOS (or reaches its example's max length) is
    moved to the finished list and its beam slot closed. An example stops when it has
    ``beam_size`` finished hypotheses or no live ones.
    """
    b, k, device = source.shape[0], beam_size, source.device
    memory = model.encode(source).select(torch.arange(b, device=device).repeat_interleave(k))
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live hypothesis at first
    tokens = torch.full((b * k, 1), BOS, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    cache: KVCache = {}
    for step in range(int(max_lengths.max())):
        log_probs = model.decode(tokens[:, -1:], step, cache, memory)[:, -1].log_softmax(-1)  # [b*k, V]
        vocab = log_probs.shape[-1]
        candidates = (scores.view(b * k, 1) + log_probs).view(b, k * vocab)
        scores, flat = candidates.topk(k, dim=-1)  # [b, k]
        origin, token = flat // vocab, flat % vocab
        rows = (torch.arange(b, device=device)[:, None] * k + origin).view(-1)
        tokens = torch.cat((tokens.index_select(0, rows), token.view(-1, 1)), dim=1)
        _reorder(cache, rows)
        ending = (token == EOS) | (step + 1 >= max_lengths)[:, None]
        for i, j in ending.logical_and(scores > float("-inf")).nonzero().tolist():
            if len(finished[i]) < k:
                output = _strip(tokens[i * k + j, 1:].tolist())
                length = len(output) + int(token[i, j] == EOS)
                finished[i].append((scores[i, j].item() / max(1, length) ** length_penalty, output))
        scores = scores.masked_fill(ending, float("-inf"))
        complete = torch.tensor([len(f) >= k for f in finished], device=device)
        scores = scores.masked_fill(complete[:, None], float("-inf"))
        if torch.isinf(scores).all():
            break
    return [max(f)[1] if f else [] for f in finished]


def generate(model: Transformer, source: Tensor, config: DecodingConfig) -> list[list[int]]:
    """Outputs for ``source`` ``[b, s_s]`` (right-padded) under ``config``."""
    source_lengths = (source != PAD).sum(1)
    max_lengths = torch.tensor([config.max_output_length(int(n)) for n in source_lengths], device=source.device)
    if config.strategy == "beam":
        return beam_search(model, source, max_lengths, config.beam_size, config.length_penalty)
    return greedy(model, source, max_lengths)
