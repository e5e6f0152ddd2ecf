"""Packing examples into model inputs and teacher-forced labels.

Token ids: 0 padding, 1 BOS, 2 SEP, 3 EOS, then the task's symbols from 4 on.
- decoder-only: ``BOS source SEP target EOS``; the model reads all but the last token and is
  trained to predict ``target EOS`` (labels elsewhere are IGNORE).
- encoder-decoder: the encoder reads ``source EOS``, the decoder reads ``BOS target`` and
  predicts ``target EOS``.
- encoder-only (Delétang et al. 2023): the model reads ``source`` and one placeholder (the SEP
  id) per output slot, and predicts at the placeholders ``target``, then EOS where the example
  has more slots than target tokens (a task with an end token), the slots after EOS not scored
  (IGNORE), as the authors mask what follows the termination token.
Padding is on the right. Structural positions (:mod:`pebench.tasks.base`) follow the tokens:
the example's own for its source symbols, k for the k-th output token, 0 elsewhere.
Shapes: b batch, s sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pebench.model.architecture import Architecture
from pebench.model.transformer import PAD
from pebench.tasks.base import Example

BOS, SEP, EOS = 1, 2, 3
PLACEHOLDER = SEP  # an encoder-only model's output slot
FIRST_SYMBOL = 4
IGNORE = -100
LANGUAGE_MODEL = "language_model"  # the pack format of a token stream's windows; every other format is an Architecture
STRUCTURED = (Architecture.DECODER, Architecture.ENCODER)  # what structural positions serve: one stack reads source and outputs


@dataclass
class Batch:
    """tokens ``[b, s_t]``, labels ``[b, s_t]`` (IGNORE where not scored), source ``[b, s_s]``
    or None (decoder-only), identity ``[b, s_i]``: what identifies each example whatever batch
    it is in (a decoder-only model's prompt ``BOS source SEP``, as :func:`prompts` makes it; the
    source otherwise; a language model's window), which seeds an encoding's evaluation draws
    (:meth:`pebench.PositionalEncoding.batch_positions`); ``structure`` ``[b, s_t]``: the
    structural position of each token of ``tokens``, for a task that has them (else None)."""

    tokens: Tensor
    labels: Tensor
    source: Tensor | None
    identity: Tensor
    structure: Tensor | None = None

    def to(self, device) -> Batch:
        source = self.source.to(device) if self.source is not None else None
        structure = self.structure.to(device) if self.structure is not None else None
        return Batch(self.tokens.to(device), self.labels.to(device), source, self.identity.to(device), structure)

    @property
    def num_tokens(self) -> int:
        """Non-padding input tokens (decoder plus encoder)."""
        count = int((self.tokens != PAD).sum())
        return count + (int((self.source != PAD).sum()) if self.source is not None else 0)

    @property
    def num_positions(self) -> int:
        """Every input position, padding included: ``[b, s_t]`` plus ``[b, s_s]`` where there is a
        source (:attr:`num_tokens` of them are not padding)."""
        return self.tokens.numel() + (self.source.numel() if self.source is not None else 0)

    @property
    def num_targets(self) -> int:
        return int((self.labels != IGNORE).sum())


def _symbols(ids) -> list[int]:
    return [i + FIRST_SYMBOL for i in ids]


def _pad(rows: list[list[int]], value: int) -> Tensor:
    width = max(len(row) for row in rows)
    return torch.tensor([row + [value] * (width - len(row)) for row in rows], dtype=torch.long)


def pack(examples: list[Example], architecture: Architecture | str) -> Batch:
    """Input tensors and labels for ``examples`` under ``architecture``, or :data:`LANGUAGE_MODEL`:
    windows of text, the model reading all but the last token and predicting each next one."""
    if architecture == LANGUAGE_MODEL:
        windows = [_symbols(e.source) for e in examples]
        tokens = _pad([w[:-1] for w in windows], PAD)
        return Batch(tokens, _pad([w[1:] for w in windows], IGNORE), None, tokens)
    if architecture == Architecture.DECODER:
        full = [[BOS, *_symbols(e.source), SEP, *_symbols(e.target), EOS] for e in examples]
        prompt = [len(e.source) + 1 for e in examples]  # labels before SEP's successor are not scored
        labels = [[IGNORE] * p + row[p + 1 :] for row, p in zip(full, prompt)]
        structure = structure_rows(examples, [len(e.target) for e in examples], architecture)
        return Batch(_pad([row[:-1] for row in full], PAD), _pad(labels, IGNORE), None, prompts(examples)[0], structure)
    if architecture == Architecture.ENCODER:
        rows = [[*_symbols(e.source), *[PLACEHOLDER] * e.slots] for e in examples]
        labels = [[IGNORE] * len(e.source) + _slot_labels(e) for e in examples]
        structure = structure_rows(examples, [e.slots for e in examples], architecture)
        return Batch(_pad(rows, PAD), _pad(labels, IGNORE), None, _pad([_symbols(e.source) for e in examples], PAD), structure)
    targets = [_symbols(e.target) for e in examples]
    source = _pad([[*_symbols(e.source), EOS] for e in examples], PAD)
    return Batch(_pad([[BOS, *t] for t in targets], PAD), _pad([[*t, EOS] for t in targets], IGNORE), source, source)


def prompts(examples: list[Example]) -> tuple[Tensor, Tensor]:
    """Decoder-only prompts ``BOS source SEP``, right-padded: ``[b, P]`` and their lengths ``[b]``."""
    rows = [[BOS, *_symbols(e.source), SEP] for e in examples]
    return _pad(rows, PAD), torch.tensor([len(row) for row in rows])


def structure_rows(examples: list[Example], outputs: list[int], architecture: Architecture, width: int | None = None) -> Tensor | None:
    """The structural positions of each example's tokens as the model reads them, with
    ``outputs[i]`` output tokens after example i's source (its target in teacher forcing; as many
    as it may generate in decoding): decoder-only ``0 (BOS), structure, 0 (SEP), 1, 2, ...``,
    encoder-only ``structure, 1, 2, ...`` at its slots. Right-padded with 0 to ``width`` (default:
    the longest row). Returns ``[b, s]`` long, or None when the examples carry no structure.

    Raises:
        ValueError: for an encoder-decoder (structural positions serve one stack), or when some
            examples carry a structure and others do not.
    """
    present = [e.structure is not None for e in examples]
    if not any(present):
        return None
    if not all(present):
        raise ValueError("some examples of the batch carry structural positions and others do not; a task gives them to all its examples or none")
    if architecture not in STRUCTURED:
        raise ValueError(f"structural positions serve decoder-only and encoder-only models; got architecture '{architecture}'")
    prompt = (lambda e: [0, *e.structure, 0]) if architecture == Architecture.DECODER else (lambda e: list(e.structure))
    rows = [prompt(e) + list(range(1, n + 1)) for e, n in zip(examples, outputs)]
    width = width or max(map(len, rows))
    return torch.tensor([row + [0] * (width - len(row)) for row in rows], dtype=torch.long)


def target_tokens(example: Example, architecture: Architecture = Architecture.DECODER) -> list[int]:
    """The tokens a model must output for ``example``: its target, then EOS; one-pass
    (encoder-only) outputs end with EOS only where the example has slots for it."""
    if architecture == Architecture.ENCODER and example.slots == len(example.target):
        return _symbols(example.target)
    return [*_symbols(example.target), EOS]


def _slot_labels(example: Example) -> list[int]:
    """The labels of an encoder-only example's slots: the target tokens, IGNORE after them."""
    scored = target_tokens(example, Architecture.ENCODER)
    return scored + [IGNORE] * (example.slots - len(scored))


def packed_length(example: Example, architecture: Architecture) -> int:
    """The longest sequence (either stack) the model reads for ``example``."""
    if architecture == Architecture.DECODER:
        return len(example.source) + len(example.target) + 2
    if architecture == Architecture.ENCODER:
        return len(example.source) + example.slots
    return max(len(example.source), len(example.target)) + 1
