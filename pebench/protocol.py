"""The benchmark protocol of a task card: length split, buckets, metrics, model, budget.

The first bucket is in-distribution (ID) and must contain the training length range; every
other bucket is out-of-distribution (OOD) and must start above the training maximum. Evaluation
sets are drawn from a generator seeded by the card's ``eval_seed`` and the bucket alone, so they
are identical for every encoding and every training seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields

from .batching import packed_length
from .decoding import DecodingConfig
from .metrics import TEXT_METRICS
from .model import ModelConfig, require_number
from .registry import TASKS, plugin
from .tasks.base import Example, LengthBucket, Task

TEACHER_FORCED_METRICS = ("exact_match", "token_accuracy")
METRICS = (*TEACHER_FORCED_METRICS, *TEXT_METRICS)


@dataclass(frozen=True)
class TrainingConfig:
    """Training budget and optimiser (AdamW, linear warm-up then cosine decay to 10%).

    Args:
        steps: optimiser steps.
        batch_size: examples per step.
        lr: peak learning rate.
        warmup_steps: linear warm-up steps.
        weight_decay: AdamW decoupled weight decay.
        grad_clip: global gradient-norm clip.
        eval_batch_size: examples per evaluation forward pass.
        label_smoothing: cross-entropy label smoothing (Szegedy et al. 2016).
        length_grouped: draw 50 batches at a time, sort them by length and cut them into
            batches of similar lengths (less padding), in shuffled order.
    """

    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_batch_size: int = 250
    label_smoothing: float = 0.0
    length_grouped: bool = False

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_batch_size"):
            require_number(f"training.{name}", getattr(self, name), minimum=1, integer=True)
        require_number("training.warmup_steps", self.warmup_steps, minimum=0, integer=True)
        for name in ("lr", "grad_clip"):
            require_number(f"training.{name}", getattr(self, name), minimum=0, above=True)
        require_number("training.weight_decay", self.weight_decay, minimum=0)
        require_number("training.label_smoothing", self.label_smoothing, minimum=0, below=1)


@dataclass
class Protocol:
    """A task card, resolved and validated."""

    name: str
    task: Task
    unit: str
    train_lengths: LengthBucket
    buckets: list[LengthBucket]
    eval_examples: int
    eval_seed: int
    metrics: list[str]
    primary: str
    model: ModelConfig
    training: TrainingConfig
    decoding: DecodingConfig

    @property
    def generates(self) -> bool:
        """Whether evaluation decodes outputs (text metrics) rather than teacher-forcing."""
        return _generates(self.metrics)

    def evaluation_sets(self) -> dict[LengthBucket, list[Example]]:
        """The fixed evaluation examples of every bucket.

        Raises:
            ValueError: if a bucket has no example.
        """
        sets = {
            bucket: self.task.evaluation_examples(random.Random(f"{self.eval_seed}:{bucket.label}"), bucket, self.eval_examples)
            for bucket in self.buckets
        }
        empty = [bucket.label for bucket, examples in sets.items() if not examples]
        if empty:
            raise ValueError(f"task '{self.name}': no evaluation example has a length in bucket(s) {', '.join(empty)}; change split.buckets")
        return sets

    def train_length(self) -> int:
        """The longest sequence (tokens, either stack) a training example can make."""
        source, target = self.task.longest_tokens(self.train_lengths.hi)
        return packed_length(Example((0,) * source, (0,) * target, self.train_lengths.hi), self.model.architecture)

    def longest_sequence(self, example: Example) -> int:
        """The longest sequence (tokens, either stack) the model reads for ``example``,
        decoding's length cap included."""
        length = packed_length(example, self.model.architecture)
        if self.generates:
            length = max(length, self.decoding.max_output_length(len(example.source) + 1) + 1)
        return length


def _generates(metric_names) -> bool:
    return any(name in TEXT_METRICS for name in metric_names)


def length_bucket(bounds, what: str) -> LengthBucket:
    """A card's ``[lo, hi]`` (hi may be TOML's ``inf``) as a bucket; ``what`` names it in errors."""
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise ValueError(f"{what} must be [lo, hi] (hi may be inf); got {bounds!r}")
    lo, hi = bounds
    hi = None if isinstance(hi, float) and math.isinf(hi) else int(hi)
    if int(lo) < 1 or (hi is not None and hi < lo):
        raise ValueError(f"{what} {bounds} is empty: lengths start at 1 and need lo <= hi")
    return LengthBucket(int(lo), hi)


def _section(card: dict, name: str, cls):
    known = {f.name for f in fields(cls)}
    unknown = set(card.get(name, {})) - known
    if unknown:
        raise ValueError(f"task card '{card['name']}' [{name}] has unknown keys {sorted(unknown)}; known: {sorted(known)}")
    for field in fields(cls):
        value = card.get(name, {}).get(field.name, field.default)
        expected = (int, float) if isinstance(field.default, float) else type(field.default)
        if isinstance(value, bool) != isinstance(field.default, bool) or not isinstance(value, expected):
            raise ValueError(f"{name}.{field.name} must be of type {type(field.default).__name__}; got {value!r}")
    return cls(**card.get(name, {}))


def resolve(card: dict) -> Protocol:
    """Validate a task card and build its task.

    Raises:
        ValueError: for an impossible length split (saying why), unknown metrics or keys.
        UnknownNameError: for a task family that no plugin provides.
    """
    split = card["split"]
    train = length_bucket(split["train"], "split.train")
    if train.hi is None:
        raise ValueError("split.train needs a finite upper bound: training lengths define what is in distribution")
    buckets = [length_bucket(b, f"split.buckets[{i}]") for i, b in enumerate(split["buckets"])]
    if not buckets:
        raise ValueError("split.buckets is empty: give at least the in-distribution bucket")
    first = buckets[0]
    if train.lo < first.lo or (first.hi is not None and (train.hi is None or train.hi > first.hi)):
        raise ValueError(
            f"the training lengths {train.label} must lie inside the first (in-distribution) bucket "
            f"{first.label}; make split.buckets[0] cover split.train"
        )
    for previous, bucket in zip(buckets, buckets[1:]):
        if previous.hi is None or bucket.lo <= previous.hi:
            raise ValueError(f"length buckets must be ascending and disjoint: {previous.label} then {bucket.label}")
    metrics = card["metrics"]
    unknown = set(metrics["names"]) - set(METRICS)
    if unknown or metrics["primary"] not in metrics["names"]:
        raise ValueError(f"metrics must come from {METRICS} and include the primary; got {metrics}")
    if split["eval_examples"] < 0:
        raise ValueError(f"split.eval_examples must be at least 1 (or 0: every example of a fixed evaluation set); got {split['eval_examples']}")
    model = _section(card, "model", ModelConfig)
    generates = _generates(metrics["names"])
    if generates and model.architecture != "encoder_decoder":
        raise ValueError(f"text metrics ({', '.join(TEXT_METRICS)}) decode with an encoder-decoder; set model.architecture = \"encoder_decoder\"")
    task = plugin(TASKS, card["family"])(**card.get("params", {}))
    if generates and type(task).detokenize is Task.detokenize:
        raise ValueError(f"task family '{card['family']}' produces no text, so it cannot be scored with {', '.join(TEXT_METRICS)}")
    return Protocol(
        name=card["name"],
        task=task,
        unit=split.get("unit", "tokens"),
        train_lengths=train,
        buckets=buckets,
        eval_examples=int(split["eval_examples"]),
        eval_seed=int(split["eval_seed"]),
        metrics=list(metrics["names"]),
        primary=metrics["primary"],
        model=model,
        training=_section(card, "training", TrainingConfig),
        decoding=_section(card, "decoding", DecodingConfig),
    )
