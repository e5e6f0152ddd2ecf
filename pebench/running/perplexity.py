"""Perplexity of a language model on a held-out text at a given context length, both ways Press
et al. 2022 ("Train Short, Test Long", arXiv:2108.12409, sec. 2 and 4.2) evaluate:

- *nonoverlapping*: the text is cut into disjoint windows of N tokens; in each, token j is
  predicted from the j tokens before it in its window, so every token is scored once, early
  tokens of a window with little context;
- *sliding window*: windows of N tokens start every S tokens (S, the stride, the card's
  ``params.stride``); the first window scores all its tokens, each later one only the tokens not
  scored yet, its last S, so every token is scored once, with at least N - S tokens of context
  (Hugging Face's strided perplexity). With S = N the two are the same evaluation.

Of a text t_0..t_T the targets are t_1..t_T (t_0 has no context). Metrics: *perplexity*
exp(mean NLL) and *bits per token* mean NLL / ln 2 (bits per character at character level), for
each way (``sliding_`` for the second); and the mean NLL by position within the nonoverlapping
windows, in at most :data:`POSITION_BINS` equal bins.
Shapes: b windows, N window length, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from pebench.model.batching import FIRST_SYMBOL
from pebench.model.transformer import Transformer
from pebench.running.devices import autocast

POSITION_BINS = 64


def windows(total: int, length: int, stride: int) -> list[tuple[int, int, int]]:
    """The windows of a text of ``total`` tokens: (first input token, number of inputs, first
    scored input position) each, so that the targets t_1..t_{total-1} are each scored once.

    Raises:
        ValueError: for a stride longer than the window (tokens between windows unscored).
    """
    if not 1 <= stride <= length:
        raise ValueError(f"the stride must lie in 1..{length} (the window); got {stride}")
    found, scored_until, start = [], 0, 0  # targets t_1..t_scored_until are scored
    while scored_until < total - 1:
        inputs = min(length, total - 1 - start)
        first_scored = scored_until - start  # input position i predicts target t_{start + i + 1}
        found.append((start, inputs, first_scored))
        scored_until = start + inputs
        start += stride
    return found


@torch.no_grad()
def token_losses(model: Transformer, tokens: list[int], length: int, stride: int, batch_tokens: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The NLL (nats) of every target t_1..t_T ``[T]`` and the input position it was predicted at
    ``[T]``, scoring ``tokens`` (symbol ids) in windows of ``length`` moved by ``stride`` (the
    tokens the model reads: :func:`tokens_read`)."""
    model.eval()
    text = torch.tensor(tokens, dtype=torch.long)
    losses, positions = torch.empty(len(tokens) - 1), torch.empty(len(tokens) - 1, dtype=torch.long)
    plan = windows(len(tokens), length, stride)
    size = max(1, batch_tokens // length)
    for first in range(0, len(plan), size):
        group = plan[first : first + size]
        inputs = max(n for _, n, _ in group)
        batch = torch.zeros(len(group), inputs, dtype=torch.long)
        for row, (start, n, _) in enumerate(group):
            batch[row, :n] = text[start : start + n] + FIRST_SYMBOL
        identity = torch.tensor([[start + 1] for start, _, _ in group])  # a window is known by where it starts (never 0: padding)
        with autocast(device):
            logits = model(batch.to(device), identity=identity.to(device)).float()  # [b, N, V]
        log_probs = nn.functional.log_softmax(logits, dim=-1).cpu()
        for row, (start, n, scored_from) in enumerate(group):
            targets = text[start + 1 : start + n + 1] + FIRST_SYMBOL
            nll = -log_probs[row, :n].gather(1, targets[:, None])[:, 0]  # [n]
            losses[start + scored_from : start + n] = nll[scored_from:]
            positions[start + scored_from : start + n] = torch.arange(scored_from, n)
    return losses, positions


def tokens_read(total: int, length: int, stride: int) -> int:
    """Input tokens a scoring of ``total`` tokens in windows of ``length`` moved by ``stride``
    reads: ``total - 1`` without overlap, about ``length / stride`` times that with it."""
    return sum(inputs for _, inputs, _ in windows(total, length, stride))


def scores(losses: torch.Tensor, prefix: str = "") -> dict[str, float]:
    """Perplexity and bits per token of per-token NLLs (nats).

    Raises:
        ValueError: for an empty text.
    """
    if not len(losses):
        raise ValueError("no token to score: the evaluation text needs at least two tokens")
    mean = float(losses.double().mean())
    return {f"{prefix}perplexity": round(math.exp(mean), 5), f"{prefix}bits_per_token": round(mean / math.log(2), 5)}


def by_position(losses: torch.Tensor, positions: torch.Tensor, length: int) -> list[dict]:
    """Mean NLL by input position, in at most :data:`POSITION_BINS` equal bins of positions:
    ``[{"from": first position, "to": last, "loss": mean NLL}]``."""
    width = max(1, math.ceil(length / POSITION_BINS))
    bins = positions // width
    found = []
    for index in range(math.ceil(length / width)):
        chosen = losses[bins == index]
        if len(chosen):
            found.append({"from": index * width, "to": min(length, (index + 1) * width) - 1, "loss": round(float(chosen.mean()), 5)})
    return found


def score_length(model: Transformer, tokens: list[int], length: int, stride: int, batch_tokens: int, device: torch.device) -> tuple[dict, list[dict], int]:
    """Both evaluations at ``length`` (see the module docstring): the metrics, the loss by
    position of the nonoverlapping one, and the input tokens both read."""
    losses, positions = token_losses(model, tokens, length, length, batch_tokens, device)
    overlapping = stride < length  # else the same windows: scored once
    sliding = token_losses(model, tokens, length, stride, batch_tokens, device)[0] if overlapping else losses
    read = tokens_read(len(tokens), length, length) + (tokens_read(len(tokens), length, stride) if overlapping else 0)
    metrics = {**scores(losses), **scores(sliding, "sliding_")}
    return metrics, by_position(losses, positions, length), read
