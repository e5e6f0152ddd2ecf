"""Batched greedy decoding and beam search with cached keys and values.

Both decode token by token through :meth:`Transformer.decode`, which keeps every layer's keys
and values (already position-encoded) in a cache, so each step costs one token's forward pass.
Greedy decoding serves both architectures: an encoder-decoder's decoder starts from BOS; a
decoder-only model continues its prompt (``BOS source SEP``). Prompts of different lengths are
decoded in one batch, right-padded: the shortest common prefix is read in one call, then every
step feeds each row its next prompt token while it is still in its prompt (prompt forcing) and
its own last prediction after, so that every row's positions are its own 0, 1, 2, ... The
positions of the longest sequence each row can reach (its prompt and its output cap) are drawn
once, before the first step (:meth:`Transformer.decode`), for each example at its own length
where the encoding draws per example, seeded by the example's source (randomized positions).

The output length is capped per example (the caller's ``max_lengths``: by default
``ceil(max_length_a * source_length + max_length_b)`` tokens, EOS included, fairseq's
``max_len_a``/``max_len_b``, the source length counting the end marker the model reads after the
source, EOS in an encoder, SEP in a decoder-only prompt; :meth:`pebench.config.protocol.Protocol.output_cap`
raises it to the longest gold output of a generated task). Outputs are token ids without BOS, up
to and including the first EOS; an output without EOS hit the cap. Beam search (encoder-decoder only) scores finished hypotheses by log-probability /
length^length_penalty, the length counting EOS when one was produced (fairseq's normalisation;
Wu et al. 2016, arXiv:1609.08144, eq. 14 use (5 + length)^alpha / 6^alpha instead).
Shapes: b batch, k beam, s sequence, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from pebench.model.batching import BOS, EOS
from pebench.model.transformer import PAD, KVCache, Memory, Transformer

STRATEGIES = ("greedy", "beam")


@dataclass(frozen=True)
class DecodingConfig:
    """How outputs are generated.

    Args:
        strategy: ``"greedy"`` or ``"beam"`` (beam: encoder-decoder only).
        beam_size: hypotheses kept per example (beam search), at least 1.
        length_penalty: alpha of the length normalisation (beam search), at least 0.
        max_length_a, max_length_b: output cap ``ceil(a * source_length + b)`` tokens, EOS
            included; both at least 0, and the cap at least 1.
    Raises:
        ValueError: for an unknown strategy (the ranges are checked by the task card's
            validation, :mod:`pebench.config.protocol`).
    """

    strategy: str = "greedy"
    beam_size: int = field(default=4, metadata={"at_least": 1})  # metadata: the range a task card may set
    length_penalty: float = field(default=1.0, metadata={"at_least": 0})
    max_length_a: float = field(default=1.5, metadata={"at_least": 0})
    max_length_b: float = field(default=10.0, metadata={"at_least": 0})

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"decoding.strategy must be one of {STRATEGIES}; got {self.strategy!r}")

    def max_output_length(self, source_length: int) -> int:
        """The output cap for a source of ``source_length`` tokens (end marker included)."""
        return max(1, math.ceil(self.max_length_a * source_length + self.max_length_b))


def _reorder(cache: KVCache, index: Tensor) -> None:
    for entry in cache.values():
        entry["k"], entry["v"] = entry["k"].index_select(0, index), entry["v"].index_select(0, index)
        if entry["state"] is not None:  # an encoding's key state (pebench.PositionalEncoding.key_state)
            entry["state"] = entry["state"].index_select(0, index)
        if entry["pos"].dim() == 2:  # per-example positions
            entry["pos"] = entry["pos"].index_select(0, index)


def _through_eos(row: list[int]) -> list[int]:
    """Tokens up to and including the first EOS (all of them without one)."""
    return row[: row.index(EOS) + 1] if EOS in row else row


@torch.no_grad()
def greedy(
    model: Transformer,
    prompts: Tensor,
    prompt_lengths: Tensor,
    max_lengths: Tensor,
    memory: Memory | None = None,
    identity: Tensor | None = None,
    structure: Tensor | None = None,
) -> list[list[int]]:
    """Greedy continuations of ``prompts`` ``[b, P]`` (right-padded; row i's prompt is its first
    ``prompt_lengths[i]`` tokens), each at most ``max_lengths[i]`` tokens, stopping at EOS.
    ``memory``: the encoder's output for an encoder-decoder (prompts are then the BOS column);
    ``identity``: rows identifying each example (default the prompts; an encoder-decoder
    passes its source), :meth:`PositionalEncoding.batch_positions`; ``structure``: the
    structural positions ``[b, P + max(max_lengths)]`` of every token each row can read, for an
    encoding that needs them (:func:`pebench.model.batching.structure_rows`).

    Returns:
        per row, the generated ids up to and including the first EOS.
    """
    b, device = prompts.shape[0], prompts.device
    reach = prompt_lengths + max_lengths  # the most tokens each row can read
    total = int(reach.max())
    pos = model.batch_positions(reach, total, prompts if identity is None else identity, "decoder", structure)  # one draw per decoded sequence
    tokens = torch.full((b, total), PAD, dtype=torch.long, device=device)
    tokens[:, : prompts.shape[1]] = prompts
    first = int(prompt_lengths.min())
    cache: KVCache = {}
    logits = model.decode(tokens[:, :first], pos[..., :first], cache, memory)[:, -1]  # [b, V]
    count = torch.zeros(b, dtype=torch.long, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)
    for step in range(first, total):
        predicted = logits.argmax(-1)  # the token at position `step`
        writing = (step >= prompt_lengths) & ~done
        tokens[:, step] = torch.where(writing, predicted, tokens[:, step])
        count += writing
        done |= writing & ((predicted == EOS) | (count >= max_lengths))
        if done.all():
            break
        logits = model.decode(tokens[:, step : step + 1], pos[..., step : step + 1], cache, memory)[:, -1]
    starts, counts = prompt_lengths.tolist(), count.tolist()
    return [row[p : p + n] for row, p, n in zip(tokens.tolist(), starts, counts)]


@torch.no_grad()
def beam_search(model: Transformer, source: Tensor, max_lengths: Tensor, beam_size: int, length_penalty: float) -> list[list[int]]:
    """Beam-search outputs of an encoder-decoder for ``source`` ``[b, s_s]``: ids up to and
    including EOS.

    Every step extends each live hypothesis by every token and keeps the ``beam_size`` best
    per example; a hypothesis that ends with EOS (or reaches its example's max length) is
    moved to the finished list and its beam slot closed. An example stops when it has
    ``beam_size`` finished hypotheses or no live ones.
    """
    b, k, device = source.shape[0], beam_size, source.device
    memory = model.encode(source).select(torch.arange(b, device=device).repeat_interleave(k))
    pos = model.encoding.batch_positions(max_lengths, int(max_lengths.max()), source, "decoder")
    if pos.dim() == 2:  # per example: its k hypotheses share its positions
        pos = pos.repeat_interleave(k, 0)
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live hypothesis at first
    tokens = torch.full((b * k, 1), BOS, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    cache: KVCache = {}
    for step in range(int(max_lengths.max())):
        log_probs = model.decode(tokens[:, -1:], pos[..., step : step + 1], cache, memory)[:, -1].log_softmax(-1)  # [b*k, V]
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
                output = _through_eos(tokens[i * k + j, 1:].tolist())
                finished[i].append((scores[i, j].item() / max(1, len(output)) ** length_penalty, output))
        scores = scores.masked_fill(ending, float("-inf"))
        complete = torch.tensor([len(f) >= k for f in finished], device=device)
        scores = scores.masked_fill(complete[:, None], float("-inf"))
        if torch.isinf(scores).all():
            break
    return [max(f)[1] if f else [] for f in finished]


def generate(model: Transformer, source: Tensor, config: DecodingConfig, max_lengths: Tensor | None = None) -> list[list[int]]:
    """An encoder-decoder's outputs for ``source`` ``[b, s_s]`` (right-padded) under ``config``,
    each at most ``max_lengths`` ``[b]`` tokens (default: ``config``'s cap of its source)."""
    if max_lengths is None:
        max_lengths = torch.tensor([config.max_output_length(int(n)) for n in (source != PAD).sum(1)], device=source.device)
    if config.strategy == "beam":
        return beam_search(model, source, max_lengths, config.beam_size, config.length_penalty)
    bos = torch.full((source.shape[0], 1), BOS, dtype=torch.long, device=source.device)
    return greedy(model, bos, torch.ones_like(max_lengths), max_lengths, model.encode(source), source)


def continue_prompts(
    model: Transformer, prompts: Tensor, prompt_lengths: Tensor, config: DecodingConfig, max_lengths: Tensor | None = None, structure: Tensor | None = None
) -> list[list[int]]:
    """A decoder-only model's greedy outputs after ``prompts`` ``[b, P]`` (``BOS source SEP``,
    right-padded), each at most ``max_lengths`` ``[b]`` tokens (default: ``config``'s cap of the
    source length, SEP counted as its end marker); ``structure`` as :func:`greedy`'s."""
    if max_lengths is None:
        max_lengths = torch.tensor([config.max_output_length(int(n) - 1) for n in prompt_lengths], device=prompts.device)
    return greedy(model, prompts, prompt_lengths, max_lengths, structure=structure)
