"""One run: build the model, train on the short lengths until ID competence, evaluate every
length bucket.

Training stops when the ID validation score of the card's primary metric reaches
``training.target`` (scored every ``training.eval_every`` steps and at the step cap), or at the
step cap ``training.steps``; the record keeps the validation curve, ``steps_to_target`` (None
when the target was not reached, or the card sets none) and the step it stopped at. The OOD
buckets are scored on the model as it stopped (:mod:`pebench.running.evaluation`).

A training loss or a score that is not finite (NaN, inf) stops the run with
:class:`NonFiniteError`, naming the step or bucket and the value, which the run's record stores
as its failure: no score is kept from a diverged model.

Throughput is non-padding input tokens per second: training over the steps after the first
``TIMING_WARMUP_STEPS`` (or half the steps of a shorter run), validation excluded.
"""

from __future__ import annotations

import math
import platform
import random
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from pebench.config.protocol import Protocol
from pebench.core.registry import build_encoding
from pebench.encodings.base import StructureError
from pebench.model.batching import FIRST_SYMBOL, IGNORE, STRUCTURED, Batch, pack
from pebench.model.transformer import Transformer
from pebench.records.types import CurvePoint, TrainingSummary
from pebench.running.devices import autocast, environment, sync_device
from pebench.running.distributed import Distributed
from pebench.running.evaluation import evaluate, validate
from pebench.tasks.base import Example, LengthBucket

TIMING_WARMUP_STEPS = 10
GROUPED_BATCHES = 50


GO_ON, STOP, FAIL = 0, 1, 2  # what a validation decides, on every rank of a torchrun job


class NonFiniteError(ArithmeticError):
    """A loss or score that is not a finite number: the run has diverged."""


def build_model(protocol: Protocol, encoding_card: dict, max_length: int, train_length: int | None = None) -> Transformer:
    """The task's model with the card's encoding, sized for sequences up to ``max_length``
    (``train_length``: the longest training sequence).

    Raises:
        StructureError: if the encoding needs structural positions and the task has none, or
            the model is an encoder-decoder (structural positions serve one stack).
    """
    geometry = protocol.model.geometry(max_length, train_length)
    encoding = build_encoding(encoding_card, geometry)
    if encoding.needs_structure and not (protocol.task.structural and protocol.model.architecture in STRUCTURED):
        lacks = (
            f"its model is '{protocol.model.architecture}', and they serve decoder-only and encoder-only models"
            if protocol.task.structural
            else "it supplies none (a task gives them per token, e.g. each digit's significance)"
        )
        raise StructureError(
            f"encoding '{encoding_card.get('name', encoding_card['plugin'])}' needs the structural positions of its task's tokens, "
            f"but task '{protocol.name}' cannot give them: {lacks}. Use it on a task that does (long_addition does), "
            "or another encoding on this task"
        )
    return Transformer(protocol.model, FIRST_SYMBOL + len(protocol.task.symbols), encoding)


def _learning_rate_factor(step: int, warmup: int, total: int, schedule: str = "cosine") -> float:
    """Linear warm-up to 1, then cosine decay to 0.1 at ``total`` (``schedule="cosine"``) or 1
    throughout (``"constant"``)."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, progress)))


def _loss(model: nn.Module, batch: Batch, label_smoothing: float, total_targets: int | None = None) -> torch.Tensor:
    """Mean cross-entropy over the batch's target tokens; with ``total_targets`` (a data-parallel
    run: :mod:`pebench.running.distributed`), the sum divided by that global count instead."""
    with autocast(batch.tokens.device):
        logits = model(batch.tokens, batch.source, structure=batch.structure)
    reduction = "mean" if total_targets is None else "sum"
    loss = nn.functional.cross_entropy(
        logits.float().flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE, label_smoothing=label_smoothing, reduction=reduction
    )
    return loss if total_targets is None else loss / total_targets


def training_batches(protocol: Protocol, rng: random.Random) -> Iterator[list[Example]]:
    """Endless batches of training examples; with ``length_grouped``, batches of similar
    lengths cut from sorted pools of ``GROUPED_BATCHES`` batches, in shuffled order."""
    size = protocol.training.batch_size
    examples = protocol.task.training_examples(rng, protocol.train_lengths)
    while True:
        if not protocol.training.length_grouped:
            yield [next(examples) for _ in range(size)]
            continue
        pool = sorted((next(examples) for _ in range(GROUPED_BATCHES * size)), key=lambda e: (e.length, len(e.target)))
        batches = [pool[i : i + size] for i in range(0, len(pool), size)]
        rng.shuffle(batches)
        yield from batches


def finite(value: float, what: str) -> float:
    """``value``, or NonFiniteError naming ``what`` when it is NaN or infinite."""
    if not math.isfinite(value):
        raise NonFiniteError(f"{what} is {value}: the run diverged (lower training.lr, or check the encoding's parameters)")
    return value


def train(
    model: Transformer,
    protocol: Protocol,
    seed: int,
    device: torch.device,
    validation: list[Example],
    progress: bool = True,
    distributed: Distributed | None = None,
    log: Callable[[str, float, int], None] | None = None,
) -> TrainingSummary:
    """Train ``model`` on the protocol's training lengths until the ID validation target or the
    step cap; with ``distributed``, data-parallel across a torchrun job (rank 0 validates, every
    rank stops where it stops: :mod:`pebench.running.distributed`). Returns the record's training
    summary: steps run, the cap, the target, ``steps_to_target``, the curve (per validation: the
    step, the mean training loss since the one before, the validation scores), wall seconds
    (validation included, and apart), tokens/s, final loss and peak memory. ``log(tag, value,
    step)`` receives every step's loss and every validation score (a TensorBoard writer's
    ``add_scalar``).

    Raises:
        NonFiniteError: when the loss or a validation score is not finite.
    """
    config = protocol.training
    batches = training_batches(protocol, random.Random(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _learning_rate_factor(s, config.warmup_steps, config.steps, config.schedule))
    model.train()
    trained = model if distributed is None else DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    validating = distributed is None or distributed.is_main
    losses, curve, timed_tokens, timed_seconds, validation_seconds = [], [], 0, 0.0, 0.0
    steps_to_target = None
    warmup = min(TIMING_WARMUP_STEPS, config.steps // 2)
    start = time.perf_counter()
    bar = tqdm(range(config.steps), desc=f"train {protocol.name}", disable=None if progress else True, leave=False)  # None: off when stderr is not a terminal
    for step in bar:
        examples = next(batches)
        batch = pack(examples if distributed is None else distributed.shard(examples), protocol.pack_format).to(device)
        targets, tokens = (None, batch.num_tokens) if distributed is None else distributed.total(batch.num_targets, batch.num_tokens, device=device)
        sync_device(device)
        tick = time.perf_counter()
        loss = _loss(trained, batch, config.label_smoothing, targets)
        optimizer.zero_grad(set_to_none=True)
        (loss if distributed is None else loss * distributed.world_size).backward()  # DDP averages the ranks' gradients
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        schedule.step()
        sync_device(device)
        if step >= warmup:
            timed_tokens += tokens
            timed_seconds += time.perf_counter() - tick
        losses.append(finite(_global_loss(loss, distributed), f"the training loss at step {step + 1}"))
        if log is not None:
            log("train/loss", losses[-1], step + 1)
        if (step + 1) % config.eval_every and step + 1 < config.steps:
            continue
        reached, failure = False, None
        if validating:
            tick = time.perf_counter()
            try:
                scores = validate(model, protocol, validation, device)
                for name, value in scores.items():
                    if value is not None:
                        finite(value, f"the validation {name} at step {step + 1}")
            except Exception as error:  # in a torchrun job, told to every rank first, so that none waits on rank 0
                failure = error
            model.train()
            validation_seconds += time.perf_counter() - tick
            if failure is None:
                window = losses[(curve[-1].step if curve else 0) :]
                curve.append(CurvePoint(step + 1, round(sum(window) / len(window), 5), scores))
                for name, value in scores.items():
                    if log is not None and value is not None:
                        log(f"validation/{name}", value, step + 1)
                bar.set_postfix(loss=f"{curve[-1].loss:.3f}", validation=scores[protocol.primary])
                reached = config.target is not None and scores[protocol.primary] is not None and scores[protocol.primary] >= config.target
        decision = STOP if reached else FAIL if failure is not None else GO_ON
        if distributed is not None:
            decision = distributed.agree(decision, device)
        if decision == FAIL:
            raise failure if failure is not None else RuntimeError(f"rank 0's validation failed at step {step + 1} (its record says why)")
        if decision == STOP:
            steps_to_target = step + 1
            break
    tail = losses[-max(1, len(losses) // 20) :]
    return TrainingSummary(
        steps=len(losses),
        step_cap=config.steps,
        target=config.target,
        steps_to_target=steps_to_target,
        wall_seconds=round(time.perf_counter() - start, 2),
        validation_seconds=round(validation_seconds, 2),
        tokens_per_second=round(timed_tokens / timed_seconds, 1) if timed_seconds else None,
        final_loss=round(sum(tail) / len(tail), 5),
        curve=tuple(curve),
        **_peak_memory(device),
    )


def _global_loss(loss: torch.Tensor, distributed: Distributed | None) -> float:
    """The step's mean loss over the whole (global) batch."""
    if distributed is None:
        return loss.item()
    summed = loss.detach().clone()
    torch.distributed.all_reduce(summed)  # each rank's share of the global mean
    return summed.item()


def _peak_memory(device: torch.device) -> dict:
    if device.type == "cuda":
        return {"peak_memory_mb": round(torch.cuda.max_memory_allocated(device) / 2**20, 1), "memory_kind": "cuda_max_allocated"}
    scale = 1 if platform.system() == "Darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return {"peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20, 1), "memory_kind": "process_peak_rss"}


@dataclass
class RunSetup:
    """What a run builds before training: the evaluation sets, the ID validation set and the model."""

    sets: dict[LengthBucket, list[Example]]
    validation: list[Example]
    model: Transformer
    sequence_lengths: dict[str, int]


def set_up(protocol: Protocol, encoding_card: dict, seed: int) -> RunSetup:
    """Draw the evaluation and validation sets and build the seeded model (on CPU). Everything
    a bad card can break fails here, before any training.

    Raises:
        ValueError: an empty bucket or validation set, a decoding cap below a gold output, or
        a bad encoding param; TypeError: a
        param of the wrong type; PositionLimitError: an encoding that cannot represent the
        training lengths or the validation set's outputs.
    """
    torch.manual_seed(seed)
    sets = protocol.evaluation_sets()
    validation = protocol.validation_set()
    protocol.check_output_caps({**{f"bucket {bucket.label}": examples for bucket, examples in sets.items()}, "validation": validation})
    train_length = protocol.longest_training_sequence()
    if not protocol.kind.on_examples:  # windows of every evaluation length; the validation text at the training length
        longest, validated = max(bucket.hi for bucket in protocol.buckets), train_length
    else:
        longest = max(protocol.longest_sequence(e) for examples in (*sets.values(), validation) for e in examples)
        validated = max(protocol.longest_sequence(e) for e in validation)
    lengths = {"train": train_length, "max": max(train_length, longest)}
    model = build_model(protocol, encoding_card, lengths["max"], lengths["train"])
    model.encoding.check_length(max(train_length, validated))
    return RunSetup(sets, validation, model, lengths)


def run(
    protocol: Protocol,
    setup: RunSetup,
    seed: int,
    device: torch.device,
    progress: bool = True,
    distributed: Distributed | None = None,
    log: Callable[[str, float, int], None] | None = None,
) -> dict:
    """Train and evaluate one (task, encoding, seed) from its :func:`set_up`. Returns the
    record's measured parts (fields of :class:`pebench.records.types.RunRecord`): ``environment``, ``parameters``, ``model``, ``training``,
    ``buckets``, ``scores`` (ID and OOD, :func:`pebench.running.evaluation.evaluate`), ``stages`` (wall
    seconds of training and evaluation), ``sequence_lengths`` (the longest training sequence
    and the longest sequence the model reads) and ``data`` (where real data came from).

    Raises:
        NonFiniteError: for a diverged training loss, or a score that is not finite.
    """
    model = setup.model.to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if distributed is not None and not distributed.is_main:
        torch.manual_seed(seed + distributed.rank)  # each rank's own dropout and random positions; rank 0 keeps the run's stream
    training = train(model, protocol, seed, device, setup.validation, progress, distributed, log)
    if distributed is not None and not distributed.is_main:
        return {"training": training}  # rank 0 evaluates and writes the record
    tick = time.perf_counter()
    buckets, scores = evaluate(model, protocol, setup.sets, device)
    for result in buckets:
        for name, value in (result.metrics or {}).items():
            if value is not None:
                finite(value, f"{name} on bucket {result.bucket}")
    return {
        "environment": {**environment(device), **(distributed.describe() if distributed is not None else {})},
        "parameters": model.parameter_counts(),
        "model": asdict(protocol.model),
        "training": training,
        "stages": {"train_seconds": training.wall_seconds, "eval_seconds": round(time.perf_counter() - tick, 2)},
        "sequence_lengths": setup.sequence_lengths,
        "data": protocol.task.data,
        "buckets": buckets,
        "scores": scores,
    }
