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

The training wall time splits three ways (:class:`TimeSplit`): drawing and packing the training
batches (``batch_seconds``), the steps (``step_seconds``: each step from counting its packed
batch's tokens through its loss read back, every step, warm-up included) and validation
(``validation_seconds``). Each is timed apart, not one taken as the rest of the others, so their
sum falling short of ``wall_seconds`` by more than timer noise shows time spent elsewhere. No
timer adds a device synchronisation: the step already ends on one (the loss is read back).
``padding_share`` is the padding tokens of the padded training batches over all their tokens
(decoder tokens, plus the encoder's source where there is one), counted on the CPU before each
batch moves to the device; in a torchrun job, of the global batches (every rank's shard, each
padded to its own longest example), summed with the step's token counts.
"""

from __future__ import annotations

import contextlib
import math
import platform
import random
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import nn
from tqdm import tqdm

from pebench.config.protocol import Protocol, TrainingConfig
from pebench.core.registry import build_encoding
from pebench.encodings.base import StructureError
from pebench.model.batching import FIRST_SYMBOL, IGNORE, STRUCTURED, Batch, pack
from pebench.model.transformer import Transformer
from pebench.records.types import CurvePoint, TrainingSummary
from pebench.running.devices import autocast, environment, sync_device
from pebench.running.distributed import ONE_PROCESS, Distributed
from pebench.running.evaluation import evaluate, validate
from pebench.tasks.base import Example, LengthBucket

TIMING_WARMUP_STEPS = 10
GROUPED_BATCHES = 50


Log = Callable[[str, float, int], None]  # log(tag, value, step): a TensorBoard writer's add_scalar
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


def build_optimizer(model: nn.Module, config: TrainingConfig) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (Loshchilov & Hutter 2019; betas 0.9, 0.98) at the card's peak learning rate and
    weight decay, and its schedule (:func:`_learning_rate_factor`), stepped once per step."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _learning_rate_factor(s, config.warmup_steps, config.steps, config.schedule))
    return optimizer, schedule


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


def training_step(
    model: nn.Module,
    batch: Batch,
    total_targets: int,
    world_size: int,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    config: TrainingConfig,
) -> torch.Tensor:
    """One optimiser step on ``batch``, part of a global batch of ``total_targets`` target
    tokens over ``world_size`` processes: forward, loss (:func:`_loss`), backward, gradient-norm
    clipping at ``training.grad_clip``, optimizer and schedule steps. Returns the loss."""
    loss = _loss(model, batch, config.label_smoothing, total_targets if world_size > 1 else None)  # one process holds the whole batch: its mean
    optimizer.zero_grad(set_to_none=True)
    (loss * world_size).backward()  # DDP averages the ranks' gradients
    nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    schedule.step()
    return loss


def finite(value: float, what: str) -> float:
    """``value``, or NonFiniteError naming ``what`` when it is NaN or infinite."""
    if not math.isfinite(value):
        raise NonFiniteError(f"{what} is {value}: the run diverged (lower training.lr, or check the encoding's parameters)")
    return value


class Throughput:
    """Training throughput: non-padding input tokens per second of the steps after the first
    ``warmup`` (steps counted from 0), the device synchronised around each step."""

    def __init__(self, warmup: int, device: torch.device):
        self.warmup, self.device = warmup, device
        self.tokens, self.seconds = 0, 0.0

    @contextlib.contextmanager
    def step(self, step: int, tokens: int):
        """Time the body as step ``step``, of ``tokens`` tokens (the global batch's)."""
        sync_device(self.device)
        tick = time.perf_counter()
        yield
        sync_device(self.device)
        if step >= self.warmup:
            self.tokens += tokens
            self.seconds += time.perf_counter() - tick

    @property
    def tokens_per_second(self) -> float | None:
        """None for a run too short to time."""
        return round(self.tokens / self.seconds, 1) if self.seconds else None


class TimeSplit:
    """Where the training loop's wall time goes: ``batch_seconds`` drawing and packing batches,
    ``step_seconds`` in the steps (see the module docstring), each added to by :meth:`timing`
    around the loop's parts; ``positions`` and ``tokens``: the input positions of the training
    batches, all and the non-padding ones, summed over the steps."""

    def __init__(self):
        self.batch_seconds = self.step_seconds = 0.0
        self.positions = self.tokens = 0

    @contextlib.contextmanager
    def timing(self, part: str):
        """Add the wall seconds of the ``with`` block to ``part`` (``"batch_seconds"`` or ``"step_seconds"``)."""
        tick = time.perf_counter()
        yield
        setattr(self, part, getattr(self, part) + time.perf_counter() - tick)

    @property
    def padding_share(self) -> float | None:
        """Padding positions over all input positions of the training batches; None before any step."""
        return round((self.positions - self.tokens) / self.positions, 4) if self.positions else None


class Validation:
    """The ID validation during training: due every ``training.eval_every`` steps and at the
    step cap; each scoring adds a point to the curve (the step, the mean training loss since
    the point before, the scores), and decides: STOP when the primary metric reached
    ``training.target``, GO_ON when not (or without a target), FAIL when scoring raised or a
    score is not finite (the error kept in ``failure``). ``log(tag, value, step)`` receives the
    scores, ``show(**fields)`` the latest loss and primary score (a progress bar's postfix);
    ``seconds``: the wall seconds spent validating."""

    def __init__(self, protocol: Protocol, examples: list[Example], device: torch.device, log: Log | None, show: Callable[..., object]):
        self.protocol, self.examples, self.device, self.log, self.show = protocol, examples, device, log, show
        self.curve: list[CurvePoint] = []
        self.seconds = 0.0
        self.failure: Exception | None = None

    def due(self, step: int) -> bool:
        """True when validation follows step ``step`` (counted from 1)."""
        return step % self.protocol.training.eval_every == 0 or step == self.protocol.training.steps

    def decide(self, model: nn.Module, step: int, losses: list[float]) -> int:
        """Score ``model`` after step ``step`` (``losses``: every step's so far) and decide;
        leaves the model in training mode."""
        tick = time.perf_counter()
        try:
            scores = validate(model, self.protocol, self.examples, self.device)
            for name, value in scores.items():
                if value is not None:
                    finite(value, f"the validation {name} at step {step}")
        except Exception as error:  # in a torchrun job, told to every rank first, so that none waits on rank 0
            self.failure = error
        model.train()
        self.seconds += time.perf_counter() - tick
        if self.failure is not None:
            return FAIL
        window = losses[(self.curve[-1].step if self.curve else 0) :]
        self.curve.append(CurvePoint(step, round(sum(window) / len(window), 5), scores))
        for name, value in scores.items():
            if self.log is not None and value is not None:
                self.log(f"validation/{name}", value, step)
        primary, target = scores[self.protocol.primary], self.protocol.training.target
        self.show(loss=f"{self.curve[-1].loss:.3f}", validation=primary)
        return STOP if target is not None and primary is not None and primary >= target else GO_ON


def train(
    model: Transformer,
    protocol: Protocol,
    seed: int,
    device: torch.device,
    validation_set: list[Example],
    progress: bool = True,
    distributed: Distributed = ONE_PROCESS,
    log: Log | None = None,
) -> TrainingSummary:
    """Train ``model`` on the protocol's training lengths until the ID validation target or the
    step cap; data-parallel across a torchrun job when ``distributed`` is one (rank 0
    validates, every rank stops where it stops: :mod:`pebench.running.distributed`). Returns
    the record's training summary: steps run, the cap, the target, ``steps_to_target``, the
    curve (:class:`Validation`), wall seconds (validation included, and apart, as are the
    steps' and the batches': :class:`TimeSplit`), tokens/s (:class:`Throughput`), the padding
    share of the training batches, final loss (the mean of the last 5% of steps' losses) and peak
    memory. ``log(tag, value, step)`` receives every step's loss and every validation score (a
    TensorBoard writer's ``add_scalar``).

    Raises:
        NonFiniteError: when the loss or a validation score is not finite.
    """
    config = protocol.training
    batches = training_batches(protocol, random.Random(seed))
    optimizer, schedule = build_optimizer(model, config)
    model.train()
    trained = distributed.wrap(model, device)
    throughput = Throughput(min(TIMING_WARMUP_STEPS, config.steps // 2), device)
    start = time.perf_counter()
    bar = tqdm(range(config.steps), desc=f"train {protocol.name}", disable=None if progress else True, leave=False)  # None: off when stderr is not a terminal
    validation = Validation(protocol, validation_set, device, log, bar.set_postfix)
    split = TimeSplit()
    losses, steps_to_target = [], None
    for step in bar:
        with split.timing("batch_seconds"):
            packed = pack(distributed.shard(next(batches)), protocol.pack_format)
        with split.timing("step_seconds"):
            counts = packed.num_targets, packed.num_tokens, packed.num_positions  # on the CPU: no device sync
            batch = packed.to(device)
            targets, tokens, positions = distributed.total(*counts, device=device)
            split.positions, split.tokens = split.positions + positions, split.tokens + tokens
            with throughput.step(step, tokens):
                loss = training_step(trained, batch, targets, distributed.world_size, optimizer, schedule, config)
            losses.append(finite(distributed.summed(loss), f"the training loss at step {step + 1}"))
            if log is not None:
                log("train/loss", losses[-1], step + 1)
        if not validation.due(step + 1):
            continue
        decision = distributed.agree(validation.decide(model, step + 1, losses) if distributed.is_main else GO_ON, device)
        if decision == FAIL:
            raise validation.failure if validation.failure is not None else RuntimeError(f"rank 0's validation failed at step {step + 1} (its record says why)")
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
        validation_seconds=round(validation.seconds, 2),
        step_seconds=round(split.step_seconds, 2),
        batch_seconds=round(split.batch_seconds, 2),
        tokens_per_second=throughput.tokens_per_second,
        padding_share=split.padding_share,
        final_loss=round(sum(tail) / len(tail), 5),
        curve=tuple(validation.curve),
        **_peak_memory(device),
    )


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
    distributed: Distributed = ONE_PROCESS,
    log: Log | None = None,
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
    if not distributed.is_main:
        torch.manual_seed(seed + distributed.rank)  # each rank's own dropout and random positions; rank 0 keeps the run's stream
    training = train(model, protocol, seed, device, setup.validation, progress, distributed, log)
    if not distributed.is_main:
        return {"training": training}  # rank 0 evaluates and writes the record
    tick = time.perf_counter()
    buckets, scores = evaluate(model, protocol, setup.sets, device)
    for result in buckets:
        for name, value in (result.metrics or {}).items():
            if value is not None:
                finite(value, f"{name} on bucket {result.bucket}")
    return {
        "environment": {**environment(device), **distributed.describe()},
        "parameters": model.parameter_counts(),
        "model": asdict(protocol.model),
        "training": training,
        "stages": {"train_seconds": training.wall_seconds, "eval_seconds": round(time.perf_counter() - tick, 2)},
        "sequence_lengths": setup.sequence_lengths,
        "data": protocol.task.data,
        "buckets": buckets,
        "scores": scores,
    }
