"""Scoring a model: its outputs for each example, scored per example, per length, per bucket and
per split (ID, OOD), as protocol 2 records them (:mod:`pebench.config.protocol`).

Outputs are generated as a user of the model would get them: greedy decoding with cached keys
and values (:mod:`pebench.model.decoding`), or beam search where the card asks for it; an encoder-only
model's are its one-pass argmax at the output slots (:func:`one_pass`); a language model is
scored on its task's text instead, by perplexity at each evaluation length
(:class:`LanguageModelScorer`, :mod:`pebench.running.perplexity`). Each kind of task
(:mod:`pebench.config.kinds`) has its :class:`Scorer`, chosen by :func:`scorer_for`. Per-example
metrics (:mod:`pebench.core.metrics`) are averaged over the examples of each length, of each bucket,
and, for a split, over its lengths: the *ID score* is the mean over the training lengths' bucket's
lengths and the *OOD score* the mean over every OOD length (Delétang et al. 2023, sec. 4), so a
length counts once however its examples are drawn. Text metrics (BLEU, chrF) are corpus scores:
per length, per bucket, and per split over the split's sentences (the OOD score is the corpus
score of every OOD sentence, each sentence weighing as much wherever it falls).

A bucket that the encoding cannot represent (a learned table too short) is recorded with its
error and no score; a split with such a bucket gets no score (None), and the record names the
buckets left out, since a score over part of a split is comparable with nothing.

Randomness at evaluation (randomized positions) is drawn from torch's generators seeded from the
card's evaluation seed and the bucket (or the validation seed), inside :func:`seeded`, which
forks them: every run sees the same draws, and training's own random stream is left as it was.
"""

from __future__ import annotations

import contextlib
import random
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass

import torch

from pebench.config.protocol import Protocol
from pebench.core.metrics import exact_match, sequence_accuracy, text_scores
from pebench.encodings.base import PositionLimitError
from pebench.model.architecture import Architecture
from pebench.model.batching import EOS, FIRST_SYMBOL, IGNORE, pack, prompts, structure_rows, target_tokens
from pebench.model.decoding import continue_prompts, generate
from pebench.model.transformer import PAD, Transformer
from pebench.records.types import SPLIT_FIELDS, BucketResult, CellScore, LengthScore, Scores, SplitScores
from pebench.running.devices import autocast, sync_device
from pebench.running.perplexity import score_length
from pebench.tasks.base import Example, LengthBucket

SAMPLES = 3  # examples shown per bucket in the record


@contextlib.contextmanager
def seeded(seed: str, device: torch.device):
    """Run the body with torch's generators (CPU, and ``device``'s when CUDA) seeded from the
    text ``seed``, and restore them afterwards."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(random.Random(seed).getrandbits(63))
        yield


@dataclass
class Outputs:
    """A model's outputs for a list of examples, in their order: token ids up to and including
    EOS (``tokens``), the decoding wall seconds, the tokens read and generated, and how many
    outputs stopped at the decoding cap without EOS (``capped``; 0 for one-pass outputs)."""

    tokens: list[list[int]]
    seconds: float
    processed: int
    capped: int = 0


@torch.no_grad()
def predict(model: Transformer, protocol: Protocol, examples: list[Example], device: torch.device) -> Outputs:
    """Decode ``examples`` in batches of similar source length (``training.eval_batch_size``).

    Raises:
        PositionLimitError: if the encoding cannot represent the longest sequence.
    """
    model.eval()
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))
    tokens: list[list[int]] = [[] for _ in examples]
    seconds, processed, capped = 0.0, 0, 0
    size = protocol.training.eval_batch_size
    for start in range(0, len(order), size):
        chunk = order[start : start + size]
        batch = [examples[i] for i in chunk]
        sync_device(device)
        tick = time.perf_counter()
        with autocast(device):
            generated, read = _outputs(model, protocol, batch, device)
        sync_device(device)
        seconds += time.perf_counter() - tick
        processed += read
        if protocol.kind.decoded:
            processed += sum(map(len, generated))
            capped += sum(EOS not in ids and len(ids) >= protocol.output_cap(e) for ids, e in zip(generated, batch))
        for i, ids in zip(chunk, generated):
            tokens[i] = ids
    return Outputs(tokens, seconds, processed, capped)


def _outputs(model: Transformer, protocol: Protocol, batch: list[Example], device: torch.device) -> tuple[list[list[int]], int]:
    """The outputs of one batch, by the architecture's way, and the input tokens read."""
    architecture = protocol.model.architecture
    if architecture == Architecture.ENCODER:
        return one_pass(model, batch, device), sum(len(e.source) + e.slots for e in batch)
    caps = torch.tensor([protocol.output_cap(e) for e in batch], device=device)
    if architecture == Architecture.DECODER:
        prompt, lengths = prompts(batch)
        structure = structure_rows(batch, caps.tolist(), architecture, int((lengths + caps.cpu()).max()))
        structure = structure.to(device) if structure is not None else None
        return continue_prompts(model, prompt.to(device), lengths.to(device), protocol.decoding, caps, structure), int(lengths.sum())
    source = pack(batch, architecture).source.to(device)
    return generate(model, source, protocol.decoding, caps), int((source != PAD).sum())


def one_pass(model: Transformer, examples: list[Example], device: torch.device) -> list[list[int]]:
    """An encoder-only model's outputs: the argmax at each example's slots, as many as its
    target tokens (the slots after an end token are not scored)."""
    batch = pack(examples, Architecture.ENCODER).to(device)
    predicted = model(batch.tokens, identity=batch.identity, structure=batch.structure).argmax(-1).tolist()
    return [row[len(e.source) : len(e.source) + len(target_tokens(e, Architecture.ENCODER))] for row, e in zip(predicted, examples)]


@torch.no_grad()
def teacher_forced_accuracy(model: Transformer, protocol: Protocol, examples: list[Example], device: torch.device) -> list[float]:
    """Per example, the fraction of its target tokens (EOS included) that are the argmax given
    the gold prefix."""
    model.eval()
    size, accuracies = protocol.training.eval_batch_size, []
    for start in range(0, len(examples), size):
        batch = pack(examples[start : start + size], protocol.model.architecture).to(device)
        with autocast(device):
            predictions = model(batch.tokens, batch.source, batch.identity, batch.structure).argmax(-1)
        scored = batch.labels != IGNORE
        hits = ((predictions == batch.labels) & scored).sum(1)
        accuracies += (hits / scored.sum(1)).tolist()
    return accuracies


def example_metrics(protocol: Protocol, examples: list[Example], outputs: Outputs, forced: list[float] | None) -> list[dict[str, float]]:
    """The card's per-example metrics of each example."""
    rows = []
    for i, (example, output) in enumerate(zip(examples, outputs.tokens)):
        target = target_tokens(example, protocol.model.architecture)
        values = {"sequence_accuracy": sequence_accuracy(output, target), "exact_match": exact_match(output, target)}
        if forced is not None:
            values["teacher_forced_accuracy"] = forced[i]
        rows.append({name: values[name] for name in protocol.metrics})
    return rows


def _mean_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    return {name: sum(row[name] for row in rows) / len(rows) for name in rows[0]}


def _groups(examples: list[Example], key) -> dict:
    """The indices of ``examples`` by ``key(example)`` (its length, its grid cell), in the keys'
    order; examples whose key is None are left out."""
    groups = defaultdict(list)
    for i, example in enumerate(examples):
        if (value := key(example)) is not None:
            groups[value].append(i)
    return dict(sorted(groups.items()))


class Scorer(ABC):
    """Scores a model on one protocol's evaluation sets, the way its kind of task is scored
    (:mod:`pebench.config.kinds`); :func:`scorer_for` picks the subclass. ``splits``: the splits a
    run's ``scores`` hold beyond ID and OOD; ``signatures``: sacrebleu's signature of each text
    metric once one has been scored (empty otherwise)."""

    splits: tuple[str, ...] = ()

    def __init__(self, protocol: Protocol):
        self.protocol = protocol
        self.signatures: dict[str, str] = {}

    @abstractmethod
    def bucket(self, model: Transformer, bucket: LengthBucket, index: int, examples: list[Example], device: torch.device) -> tuple[BucketResult, list]:
        """The result of one bucket (``index`` 0: the ID bucket), and what was scored of each of
        its examples (empty when the encoding cannot represent the bucket, or when the kind
        scores a text, not examples)."""

    @abstractmethod
    def validation(self, model: Transformer, examples: list[Example], device: torch.device) -> Scores:
        """The ID validation score of every metric of the card."""

    def split_score(self, lengths: list[LengthScore], examples: list[Example], scored: list) -> Scores:
        """The score of a split made of the per-length scores ``lengths`` (its examples and what
        was scored of them given flat): the mean over its lengths (Delétang et al. 2023, sec. 4)."""
        return {name: round(sum(length.metrics[name] for length in lengths) / len(lengths), 5) for name in self.protocol.metrics}

    def _head(self, model: Transformer, bucket: LengthBucket, index: int, longest: int, n: int) -> dict:
        """A bucket result's head (its fields); lets the encoding plan for the ``longest``
        sequence first (e.g. switch RoPE scaling on) and records the plan when there is one."""
        state = model.encoding.plan(longest)
        return {"bucket": bucket.label, "lo": bucket.lo, "hi": bucket.hi, "in_distribution": index == 0, "encoding_state": state or None, "n": n}


class ExampleScorer(Scorer):
    """Scores examples with per-example metrics, averaged over a length's examples: outputs
    decoded token by token (greedy, or beam search) or an encoder-only model's one-pass outputs
    at its slots (:func:`predict` follows the architecture)."""

    def outputs(self, model: Transformer, examples: list[Example], device: torch.device) -> tuple[Outputs, list]:
        """The model's outputs, and what is scored of each example (its metrics, a dict)."""
        outputs = predict(model, self.protocol, examples, device)
        forced = teacher_forced_accuracy(model, self.protocol, examples, device) if "teacher_forced_accuracy" in self.protocol.metrics else None
        return outputs, example_metrics(self.protocol, examples, outputs, forced)

    def pooled(self, examples: list[Example], scored: list) -> Scores:
        """One score per metric over ``examples``: the mean over examples."""
        return {name: round(value, 5) for name, value in _mean_rows(scored).items()}

    def text(self, ids: list[int]) -> str:
        """Token ids as the record shows them: symbols, an EOS as ``<eos>``."""
        symbols = [i - FIRST_SYMBOL for i in ids if i >= FIRST_SYMBOL]
        return " ".join([self.protocol.task.symbols[i] for i in symbols] + ["<eos>"] * (EOS in ids))

    def per_length(self, examples: list[Example], scored: list) -> tuple[LengthScore, ...]:
        """The scores of each length: its number of examples and their scores."""
        return tuple(LengthScore(length, n, scores) for length, n, scores in self._grouped(examples, scored, lambda e: e.length))

    def per_cell(self, examples: list[Example], scored: list) -> tuple[CellScore, ...]:
        """The scores of each grid cell, for a task whose examples have one (else none)."""
        return tuple(CellScore(cell, n, scores) for cell, n, scores in self._grouped(examples, scored, lambda e: e.cell))

    def _grouped(self, examples: list[Example], scored: list, key) -> list[tuple]:
        """(key, examples, pooled scores) of each group of ``examples`` by ``key`` (:func:`_groups`)."""
        return [
            (value, len(indices), self.pooled([examples[i] for i in indices], [scored[i] for i in indices]))
            for value, indices in _groups(examples, key).items()
        ]

    def bucket(self, model: Transformer, bucket: LengthBucket, index: int, examples: list[Example], device: torch.device) -> tuple[BucketResult, list]:
        """Plans for the bucket's longest target-length sequence (not the output cap); counts
        the outputs that stopped at the decoding cap, where there is one."""
        head = self._head(model, bucket, index, max(self.protocol.gold_length(e) for e in examples), len(examples))
        try:
            with seeded(f"{self.protocol.eval_seed}:{bucket.label}", device):
                outputs, scored = self.outputs(model, examples, device)
        except PositionLimitError as error:
            return BucketResult(**head, error=str(error)), []
        result = BucketResult(
            **head,
            metrics=self.pooled(examples, scored),
            eval_tokens_per_second=round(outputs.processed / outputs.seconds, 1),
            lengths=self.per_length(examples, scored),
            samples=self._samples(examples, outputs),
            capped=outputs.capped if self.protocol.kind.decoded else None,  # outputs that stopped at the decoding cap, without EOS
            cells=self.per_cell(examples, scored),
        )
        return result, scored

    def validation(self, model: Transformer, examples: list[Example], device: torch.device) -> Scores:
        """The validation set scored as a split (mean over its lengths, or its corpus score);
        randomness seeded from the validation seed."""
        model.encoding.plan(max(self.protocol.gold_length(e) for e in examples))
        with seeded(f"{self.protocol.validation_seed}:validation", device):
            _, scored = self.outputs(model, examples, device)
        return self.split_score(list(self.per_length(examples, scored)), examples, scored)

    def _samples(self, examples: list[Example], outputs: Outputs) -> tuple[dict, ...]:
        """The first few examples as text: source, target (the reference, for text tasks) and
        the model's output."""

        def target(e: Example) -> str:
            return e.reference or self.text(target_tokens(e, self.protocol.model.architecture))

        return tuple(
            {"source": self.text([i + FIRST_SYMBOL for i in e.source]), "target": target(e), "output": self.text(o)}
            for e, o in list(zip(examples, outputs.tokens))[:SAMPLES]
        )


class TextScorer(ExampleScorer):
    """Decoded outputs, detokenized and scored as a corpus (BLEU, chrF): per length, per bucket
    and per split over the split's sentences, each sentence weighing as much wherever it falls;
    ``all``: the corpus score of the whole evaluation set."""

    splits = ("all",)

    def outputs(self, model: Transformer, examples: list[Example], device: torch.device) -> tuple[Outputs, list]:
        """The model's outputs, and each one detokenized."""
        outputs = predict(model, self.protocol, examples, device)
        return outputs, [self.text(ids) for ids in outputs.tokens]

    def text(self, ids: list[int]) -> str:
        return self.protocol.task.detokenize([i - FIRST_SYMBOL for i in ids if i >= FIRST_SYMBOL])

    def pooled(self, examples: list[Example], scored: list) -> Scores:
        """The corpus score of each text metric over ``examples``' outputs."""
        scores, self.signatures = text_scores(scored, [e.reference for e in examples], self.protocol.metrics)
        return scores

    def split_score(self, lengths: list[LengthScore], examples: list[Example], scored: list) -> Scores:
        """The corpus score over all the split's sentences."""
        return self.pooled(examples, scored)


class LanguageModelScorer(Scorer):
    """A language model, scored on its task's text by perplexity at each evaluation length (a
    bucket [N, N]): both evaluations of :mod:`pebench.running.perplexity`."""

    def bucket(self, model: Transformer, bucket: LengthBucket, index: int, examples: list[Example], device: torch.device) -> tuple[BucketResult, list]:
        """The loss by position, evaluation tokens/s (tokens read, both evaluations); no score
        (with the error) where the encoding cannot represent N."""
        length = bucket.hi
        tokens = self.protocol.task.evaluation_ids
        head = self._head(model, bucket, index, length, len(tokens) - 1)  # every target scored once, in each evaluation
        tick = time.perf_counter()
        try:
            with seeded(f"{self.protocol.eval_seed}:{bucket.label}", device):
                metrics, positions, read = score_length(model, tokens, length, min(self.protocol.task.stride, length), self._batch_tokens(), device)
        except PositionLimitError as error:
            return BucketResult(**head, error=str(error)), []
        sync_device(device)
        seconds = time.perf_counter() - tick
        result = BucketResult(
            **head,
            metrics=metrics,
            eval_tokens_per_second=round(read / seconds, 1),
            lengths=(LengthScore(length, head["n"], metrics),),
            loss_by_position=tuple(positions),
        )
        return result, []

    def validation(self, model: Transformer, examples: list[Example], device: torch.device) -> Scores:
        """Perplexity on the task's validation text at the training length."""
        length = self.protocol.longest_training_sequence()
        model.encoding.plan(length)
        with seeded(f"{self.protocol.validation_seed}:validation", device):
            return score_length(model, self.protocol.task.validation_ids, length, length, self._batch_tokens(), device)[0]

    def _batch_tokens(self) -> int:
        """Tokens per evaluation forward pass: eval_batch_size training windows."""
        return self.protocol.training.eval_batch_size * self.protocol.longest_training_sequence()


SCORERS: dict[str, type[Scorer]] = {"generated": ExampleScorer, "one_pass": ExampleScorer, "text": TextScorer, "language_model": LanguageModelScorer}


def scorer_for(protocol: Protocol) -> Scorer:
    """The scorer of the protocol's kind of task (:attr:`Protocol.kind`)."""
    return SCORERS[protocol.kind.name](protocol)


def evaluate(
    model: Transformer, protocol: Protocol, sets: dict[LengthBucket, list[Example]], device: torch.device
) -> tuple[tuple[BucketResult, ...], SplitScores]:
    """Every bucket's result, and the run's split scores: ID and OOD (and, for text metrics,
    ``all``: the whole evaluation set), each None when a bucket of it could not be scored;
    ``unscored``: the labels of such buckets; for text metrics that were scored, ``signatures``:
    sacrebleu's signature of each."""
    scorer = scorer_for(protocol)
    results, scored_by_bucket = [], []
    for index, (bucket, examples) in enumerate(sets.items()):
        result, scored = scorer.bucket(model, bucket, index, examples, device)
        results.append(result)
        scored_by_bucket.append(scored)
    examples_by_bucket = list(sets.values())
    splits = {"ID": [0], "OOD": list(range(1, len(results))), **{split: list(range(len(results))) for split in scorer.splits}}
    scores = {}
    for split, indices in splits.items():
        if not indices or any(results[i].metrics is None for i in indices):
            scores[SPLIT_FIELDS[split]] = None
            continue
        lengths = [length for i in indices for length in results[i].lengths]
        flat_examples = [e for i in indices for e in examples_by_bucket[i]]
        flat_scores = [s for i in indices for s in scored_by_bucket[i]]
        scores[SPLIT_FIELDS[split]] = scorer.split_score(lengths, flat_examples, flat_scores)
    unscored = tuple(result.bucket for result in results if result.metrics is None)
    return tuple(results), SplitScores(unscored=unscored, signatures=scorer.signatures or None, **scores)


def validate(model: Transformer, protocol: Protocol, examples: list[Example], device: torch.device) -> Scores:
    """The ID validation score of every metric of the card (mean over the validation lengths,
    or the corpus score; a language model's perplexity on its validation text at the training
    length), with its randomness seeded from the validation seed."""
    return scorer_for(protocol).validation(model, examples, device)
