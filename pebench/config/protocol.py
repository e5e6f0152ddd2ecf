"""The benchmark protocol of a task card: length split, buckets, metrics, model, budget.

The first bucket is in-distribution (ID) and must contain the training length range; every
other bucket is out-of-distribution (OOD) and must start above the training maximum. Evaluation
sets are drawn from a generator seeded by the card's ``eval_seed`` and the bucket alone, so they
are identical for every encoding and every training seed. The ID validation set, scored during
training (:mod:`pebench.running.train`), is drawn at the training lengths from its own seed
(``split.validation_seed``); a real-data task takes it from its development set.

This is protocol :data:`pebench.records.versions.PROTOCOL_VERSION` (``docs/protocol.md``): a run
trains until the ID validation score reaches ``training.target`` (or the step cap), its greedy
outputs are scored, and every metric is recorded per length.
"""

from __future__ import annotations

import inspect
import math
import random
import typing
from dataclasses import Field, dataclass, field, fields
from pathlib import Path

from pebench.config.kinds import TaskKind, kind_of
from pebench.core.metrics import METRICS
from pebench.core.registry import TASKS, plugin
from pebench.core.values import check_range, check_type
from pebench.model.architecture import Architecture
from pebench.model.batching import packed_length
from pebench.model.decoding import DecodingConfig
from pebench.model.transformer import ModelConfig
from pebench.tasks.base import Example, LengthBucket, TaskFamily

VALIDATION_EXAMPLES = 200


@dataclass(frozen=True)
class TrainingConfig:
    """Training budget and optimiser (AdamW, linear warm-up, then cosine decay to 10% or constant).

    Args:
        steps: optimiser steps.
        batch_size: examples per step.
        lr: peak learning rate.
        warmup_steps: linear warm-up steps.
        schedule: after the warm-up, ``"cosine"`` (decay to 0.1 lr at ``steps``) or
            ``"constant"`` (lr throughout, as Delétang et al.'s Chomsky-hierarchy training).
        weight_decay: AdamW decoupled weight decay.
        grad_clip: global gradient-norm clip.
        eval_batch_size: examples per evaluation forward pass.
        label_smoothing: cross-entropy label smoothing (Szegedy et al. 2016).
        length_grouped: draw 50 batches at a time, sort them by length and cut them into
            batches of similar lengths (less padding), in shuffled order.
        eval_every: steps between two scorings of the ID validation set.
        target: the ID validation score of the primary metric at which training stops (ID
            competence); None: train for ``steps`` (the step cap) whatever the score.
    """

    steps: int = field(default=1000, metadata={"at_least": 1})  # metadata: the range a task card may set
    batch_size: int = field(default=64, metadata={"at_least": 1})
    lr: float = field(default=1e-3, metadata={"above": 0})
    warmup_steps: int = field(default=100, metadata={"at_least": 0})
    schedule: str = field(default="cosine", metadata={"one_of": ("cosine", "constant")})
    weight_decay: float = field(default=0.01, metadata={"at_least": 0})
    grad_clip: float = field(default=1.0, metadata={"above": 0})
    eval_batch_size: int = field(default=250, metadata={"at_least": 1})
    label_smoothing: float = field(default=0.0, metadata={"at_least": 0, "below": 1})
    length_grouped: bool = False
    eval_every: int = field(default=100, metadata={"at_least": 1})
    target: float | None = field(default=None, metadata={"above": 0})


@dataclass
class Protocol:
    """A task card, resolved and validated; ``kind``: how it is scored (:mod:`pebench.config.kinds`)."""

    name: str
    task: TaskFamily
    kind: TaskKind
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
    validation_examples: int = VALIDATION_EXAMPLES
    validation_seed: int = 0
    per_length: bool = False

    @property
    def pack_format(self) -> str:
        """How training examples become model inputs (:func:`pebench.model.batching.pack`)."""
        return self.kind.pack_format(self.model.architecture)

    def evaluation_sets(self) -> dict[LengthBucket, list[Example]]:
        """The fixed evaluation examples of every bucket.

        Raises:
            ValueError: if a bucket has no example.
        """
        if not self.kind.on_examples:  # scored on the task's evaluation text instead
            return {bucket: [] for bucket in self.buckets}
        sets = {
            bucket: self.task.evaluation_examples(random.Random(f"{self.eval_seed}:{bucket.label}"), bucket, self.examples_in(bucket))
            for bucket in self.buckets
        }
        empty = [bucket.label for bucket, examples in sets.items() if not examples]
        if empty:
            raise ValueError(f"task '{self.name}': no evaluation example has a length in bucket(s) {', '.join(empty)}; change split.buckets")
        return sets

    def examples_in(self, bucket: LengthBucket) -> int:
        """How many evaluation examples ``bucket`` draws: ``eval_examples``, or that many per
        length with ``per_length`` (0: every example of a fixed evaluation set)."""
        return self.eval_examples * len(bucket.lengths) if self.per_length and self.eval_examples else self.eval_examples

    def validation_set(self) -> list[Example]:
        """The ID validation examples: ``validation_examples`` at the training lengths, drawn
        from ``validation_seed`` (:meth:`Task.validation_examples`).

        Raises:
            ValueError: if there is none.
        """
        if not self.kind.on_examples:  # scored on the task's validation text instead
            return []
        examples = self.task.validation_examples(random.Random(f"{self.validation_seed}:validation"), self.train_lengths, self.validation_examples)
        if not examples:
            raise ValueError(f"task '{self.name}': no validation example has a length in {self.train_lengths.label}")
        return examples

    def longest_training_sequence(self) -> int:
        """The longest sequence (tokens, either stack) a training example can make: the
        encoding's ``train_length`` (:class:`pebench.encodings.base.Geometry`). ``train_lengths``
        is the training length range in the task's unit, of which this is the token count at
        the top."""
        if not self.kind.on_examples:  # a window of the token stream
            return self.train_lengths.hi
        source, target = self.task.longest_tokens(self.train_lengths.hi)
        return packed_length(Example((0,) * source, (0,) * target, self.train_lengths.hi), self.model.architecture)

    def gold_length(self, example: Example) -> int:
        """The longest sequence (tokens, either stack) the model reads for ``example`` when its
        output is the target: the length an encoding plans for (RoPE scaling's factor)."""
        return packed_length(example, self.model.architecture)

    def longest_sequence(self, example: Example) -> int:
        """The longest sequence (tokens, either stack) the model reads for ``example``,
        decoding's length cap included: ``BOS source SEP`` and the capped output in a
        decoder-only model; the source with EOS, or BOS and the capped output, in an
        encoder-decoder; the source and its output slots in an encoder-only model."""
        if not self.kind.decoded:  # one pass: no output cap
            return packed_length(example, Architecture.ENCODER)
        cap = self.output_cap(example)
        if self.model.architecture == Architecture.DECODER:
            return len(example.source) + 2 + cap
        return max(packed_length(example, self.model.architecture), cap + 1)

    def output_cap(self, example: Example) -> int:
        """The most tokens (EOS included) decoding may generate for ``example``: the card's
        ``ceil(max_length_a * (source + 1) + max_length_b)`` (fairseq's cap, the source's end
        marker counted), raised where needed to the longest gold output the task can produce at
        the example's length (:meth:`Task.longest_tokens`, plus EOS), so that a right answer
        always fits. Text tasks (BLEU, chrF) keep the card's cap: free generation, whose capped
        outputs the record counts (:attr:`TaskKind.cap_from_task`)."""
        cap = self.decoding.max_output_length(len(example.source) + 1)
        return max(cap, self.task.longest_tokens(example.length)[1] + 1) if self.kind.cap_from_task else cap

    def check_output_caps(self, sets: dict[str, list[Example]]) -> None:
        """Refuse, before training, a task whose decoding cap is below a gold output. ``sets``:
        examples by the name of their set (a bucket's label, "validation").

        Raises:
            ValueError: naming the task, the set, the example's length, its gold output's
                tokens and the cap, for the first example whose target and EOS do not fit
                (a task whose ``longest_tokens`` understates its outputs).
        """
        if not (self.kind.decoded and self.kind.cap_from_task):  # one pass; free generation
            return
        for name, examples in sets.items():
            for example in examples:
                gold, cap = len(example.target) + 1, self.output_cap(example)
                if gold > cap:
                    raise ValueError(
                        f"task '{self.name}': a gold output at length {example.length} ({name}) has {gold} tokens "
                        f"with EOS, but decoding stops at {cap}; no model could score on it. Raise the cap "
                        f"(--set decoding.max_length_a=... / decoding.max_length_b=...) or make the task's "
                        f"longest_tokens({example.length}) cover its outputs"
                    )


SECTION_KEYS = {
    "split": ("unit", "train", "buckets", "eval_examples", "per_length", "eval_seed", "validation_examples", "validation_seed"),
    "metrics": ("names", "primary"),
    **{name: tuple(f.name for f in fields(cls)) for name, cls in (("model", ModelConfig), ("training", TrainingConfig), ("decoding", DecodingConfig))},
}  # every key a task card may set, by section (a card's [params] are its task family's), and so every key --set may set


def length_bucket(bounds, what: str, spread: bool = True) -> LengthBucket:
    """A card's ``[lo, hi]`` (hi may be TOML's ``inf``), or with ``spread`` ``[lo, hi, step]``
    (every step-th length from lo), as a bucket; ``what`` names it in errors."""
    forms = "[lo, hi] or [lo, hi, step]" if spread else "[lo, hi]"
    if not isinstance(bounds, list) or len(bounds) not in ((2, 3) if spread else (2,)):
        raise ValueError(f"{what} must be {forms} (hi may be inf); got {bounds!r}")
    lo, hi, step = (*bounds, 1)[:3]
    unbounded = hi == math.inf
    if not _is_whole(lo) or not (unbounded or _is_whole(hi)) or not _is_whole(step):
        raise ValueError(f"{what} bounds must be whole numbers (hi may be inf); got {bounds!r}")
    hi = None if unbounded else hi
    if lo < 1 or (hi is not None and hi < lo) or step < 1:
        raise ValueError(f"{what} {bounds} is empty: lengths start at 1 and need lo <= hi (and a step of at least 1)")
    return LengthBucket(lo, hi, step)


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _section(card: dict, name: str, cls):
    known = {f.name for f in fields(cls)}
    unknown = set(card.get(name, {})) - known
    if unknown:
        raise ValueError(f"task card '{card['name']}' [{name}] has unknown keys {sorted(unknown)}; known: {sorted(known)}")
    hints = typing.get_type_hints(cls)
    for spec in fields(cls):
        value = card.get(name, {}).get(spec.name, spec.default)
        check_type(f"{name}.{spec.name}", value, hints[spec.name])
        if value is not None:
            _check_range(f"{name}.{spec.name}", value, spec)
    return cls(**card.get(name, {}))


def _check_range(key: str, value, spec: Field) -> None:
    """Raise ValueError naming ``key`` unless ``value`` lies in the range of the field's metadata
    (``at_least``, ``above``, ``below``: :func:`pebench.core.values.check_range`) or among its ``one_of``."""
    bounds = spec.metadata
    if "one_of" in bounds and value not in bounds["one_of"]:
        raise ValueError(f"{key} must be one of {', '.join(bounds['one_of'])}; got {value!r}")
    kind = "an integer" if isinstance(spec.default, int) and not isinstance(spec.default, bool) else "a number"
    check_range(key, value, kind=kind, **{name: bounds[name] for name in ("at_least", "above", "below") if name in bounds})


def resolve(card: dict, data_dir: Path | None = None) -> Protocol:
    """Validate a task card and build its task, giving ``data_dir`` (the local data folder; None:
    ``$PEBENCH_DATA``, else the hub) to a family that reads one (:class:`pebench.tasks.base.TaskFamily`).

    Raises:
        ValueError: for an impossible length split (saying why), unknown metrics or keys.
        UnknownNameError: for a task family that no plugin provides.
    """
    split = card["split"]
    train = length_bucket(split["train"], "split.train", spread=False)
    if train.hi is None:
        raise ValueError("split.train needs a finite upper bound: training lengths define what is in distribution")
    buckets = [length_bucket(b, f"split.buckets[{i}]") for i, b in enumerate(split["buckets"])]
    if not buckets:
        raise ValueError("split.buckets is empty: give at least the in-distribution bucket")
    first = buckets[0]
    if train.lo < first.lo or (first.hi is not None and (train.hi is None or train.hi > first.hi)):
        raise ValueError(
            f"the training lengths {train.label} must lie inside the first (in-distribution) bucket {first.label}; make split.buckets[0] cover split.train"
        )
    for previous, bucket in zip(buckets, buckets[1:]):
        if previous.hi is None or bucket.lo <= previous.hi:
            raise ValueError(f"length buckets must be ascending and disjoint: {previous.label} then {bucket.label}")
    metrics = card["metrics"]
    unknown = set(metrics["names"]) - set(METRICS)
    if unknown or metrics["primary"] not in metrics["names"]:
        raise ValueError(f"metrics must come from {tuple(METRICS)} and include the primary; got {metrics}")
    for key in ("eval_examples", "eval_seed", "validation_examples", "validation_seed"):
        check_type(f"split.{key}", split.get(key, 0), int)
    check_type("split.per_length", split.get("per_length", False), bool)
    if split["eval_examples"] < 0:
        raise ValueError(f"split.eval_examples must be at least 1 (or 0: every example of a fixed evaluation set); got {split['eval_examples']}")
    if split.get("validation_examples", VALIDATION_EXAMPLES) < 1:
        raise ValueError(f"split.validation_examples must be at least 1; got {split['validation_examples']}")
    model = _section(card, "model", ModelConfig)
    decoding = _section(card, "decoding", DecodingConfig)
    if decoding.strategy == "beam" and model.architecture != Architecture.ENCODER_DECODER:
        raise ValueError(f'decoding.strategy = "beam" decodes an encoder-decoder; this task\'s model is \'{model.architecture}\': use "greedy"')
    family = plugin(TASKS, card["family"])
    reads_data = "data_dir" in inspect.signature(family).parameters
    task = family(**card.get("params", {}), **({"data_dir": data_dir} if reads_data else {}))
    kind = kind_of(card["family"], task, list(metrics["names"]), model.architecture)
    return Protocol(
        name=card["name"],
        task=task,
        kind=kind,
        unit=split.get("unit", "tokens"),
        train_lengths=train,
        buckets=buckets,
        eval_examples=int(split["eval_examples"]),
        eval_seed=int(split["eval_seed"]),
        metrics=list(metrics["names"]),
        primary=metrics["primary"],
        model=model,
        training=_section(card, "training", TrainingConfig),
        decoding=decoding,
        validation_examples=split.get("validation_examples", VALIDATION_EXAMPLES),
        validation_seed=split.get("validation_seed", int(split["eval_seed"]) + 1),
        per_length=split.get("per_length", False),
    )
