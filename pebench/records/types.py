"""The run record as types: what one (task, encoding, seed) run measured, built by the code that
measures it and read back into the same types from disk.

:class:`RunRecord` holds a run's header (cards, seed, code and settings), its status and, for a
successful run, its measured parts: the :class:`TrainingSummary` (with its validation
:class:`CurvePoint` s), one :class:`BucketResult` per length bucket (with its
:class:`LengthScore` s) and the :class:`SplitScores`. Every type is a frozen dataclass: a part is
made once, complete, where it is measured (:func:`pebench.running.train.train`,
:class:`pebench.running.evaluation.Scorer`, :func:`pebench.running.evaluation.evaluate`), never written into
afterwards. Cards, the environment and the stage times stay plain mappings: they are
configuration, not results.

The JSON form is ``to_json()`` / ``from_json()``: field names are the JSON keys (the split
scores' ``ID`` and ``OOD`` aside), a field marked optional is left out when it is None or empty
and one that is :data:`ABSENT` always (the whole-set score of a kind that has none), and
records of schema 1 (protocol 1: no lengths, no scores) and of schema 2 before a field existed
read with that field None. Writing, validating against ``schema.json`` and
loading are :mod:`pebench.records.store`' (the edge); this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

Scores = Mapping[str, float | None]  # metric name -> value


class Absent:
    """The value of a field that a record does not have at all (not even as null): left out of
    the JSON. Falsy."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"  # unpickled (a Ray or Slurm worker's record) as the one module-level ABSENT


ABSENT = Absent()


def optional(key: str | None = None, default: Any = None) -> Any:
    """A field left out of the JSON when None or empty (``key``: its JSON name, when not the field's)."""
    return field(default=default, metadata={"optional": True, **({"key": key} if key else {})})


def named(key: str) -> Any:
    """A field always written, under the JSON name ``key``."""
    return field(default=None, metadata={"key": key})


def to_json(value: Any) -> Any:
    """``value`` as JSON data: a dataclass as an object of its fields (optional ones left out when
    None or empty), tuples as lists; mappings and scalars as they are."""
    if is_dataclass(value):
        out = {}
        for part in fields(value):
            item = getattr(value, part.name)
            if item is ABSENT or (part.metadata.get("optional") and (item is None or item == ())):
                continue
            out[part.metadata.get("key", part.name)] = to_json(item)
        return out
    if isinstance(value, (tuple, list)):
        return [to_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: to_json(item) for key, item in value.items()}
    return value


def flat_from_json(cls: type, data: Mapping) -> Any:
    """An instance of the dataclass ``cls`` whose fields are all required plain values, from the
    JSON object ``data`` of its fields (KeyError for a missing one)."""
    return cls(**{part.name: data[part.name] for part in fields(cls)})


@dataclass(frozen=True)
class CurvePoint:
    """One ID validation during training: the step (1-based), the mean training loss since the
    previous validation (nats per target token) and the validation score of every metric."""

    step: int
    loss: float
    validation: Scores

    @classmethod
    def from_json(cls, data: Mapping) -> CurvePoint:
        return flat_from_json(cls, data)


@dataclass(frozen=True, kw_only=True)
class TrainingSummary:
    """What training measured (:func:`pebench.running.train.train`): steps run and the cap, the ID
    target and ``steps_to_target`` (None when not reached, or without a target), wall seconds
    (validation included, and apart; so are the steps' own, ``step_seconds``, and drawing and
    packing the batches, ``batch_seconds``), training tokens/s (None for a run too short to
    time), the padding share of the training batches (padding tokens over all their tokens, 0
    to 1), final loss (mean of the last 5% of steps' losses), the validation curve and peak
    memory (MiB; ``memory_kind`` says which measure). Records made before a part was measured
    read with it None."""

    steps: int
    step_cap: int | None = optional()
    target: float | None
    steps_to_target: int | None
    wall_seconds: float
    validation_seconds: float | None = optional()
    step_seconds: float | None = optional()
    batch_seconds: float | None = optional()
    tokens_per_second: float | None = None
    padding_share: float | None = optional()
    final_loss: float
    curve: tuple[CurvePoint, ...] = ()
    peak_memory_mb: float | None = optional()
    memory_kind: str | None = optional()

    @property
    def learned(self) -> bool | None:
        """Whether training reached the ID target; None without a target."""
        return None if self.target is None else self.steps_to_target is not None

    @classmethod
    def from_json(cls, data: Mapping) -> TrainingSummary:
        return cls(
            steps=data["steps"],
            target=data.get("target"),
            steps_to_target=data.get("steps_to_target"),
            wall_seconds=data["wall_seconds"],
            final_loss=data["final_loss"],
            step_cap=data.get("step_cap"),
            validation_seconds=data.get("validation_seconds"),
            step_seconds=data.get("step_seconds"),
            batch_seconds=data.get("batch_seconds"),
            tokens_per_second=data.get("tokens_per_second"),
            padding_share=data.get("padding_share"),
            curve=tuple(CurvePoint.from_json(point) for point in data.get("curve", [])),
            peak_memory_mb=data.get("peak_memory_mb"),
            memory_kind=data.get("memory_kind"),
        )


@dataclass(frozen=True)
class LengthScore:
    """The scores of one evaluation length (the task's unit): its example count and the mean of
    each per-example metric over them (a text metric's corpus score; a language model's
    perplexity and bits per token at that window length)."""

    length: int
    n: int
    metrics: Scores

    @classmethod
    def from_json(cls, data: Mapping) -> LengthScore:
        return flat_from_json(cls, data)


@dataclass(frozen=True)
class CellScore:
    """The scores of one cell of a grid of two lengths (``cell``: the digits of each operand of
    an addition): its example count and the mean of each per-example metric over them."""

    cell: tuple[int, int]
    n: int
    metrics: Scores

    @classmethod
    def from_json(cls, data: Mapping) -> CellScore:
        return cls(tuple(data["cell"]), data["n"], data["metrics"])


@dataclass(frozen=True, kw_only=True)
class BucketResult:
    """One length bucket [lo, hi] scored: whether it is the ID bucket, the plan the encoding made
    for it (``encoding_state``, where it makes one), the examples (or, for a language model, the
    targets) scored, each metric's score over the bucket (None, with ``error``, when the encoding
    cannot represent it), evaluation tokens/s, the per-length scores, a few sample outputs, the
    outputs that stopped at the decoding cap without EOS (``capped``; decoded kinds only), a
    language model's loss by position (pieces ``{"from", "to", "loss"}``) and, for a task that
    places its examples on a grid of two lengths, the scores of each cell (``cells``)."""

    bucket: str
    lo: int
    hi: int | float | str | None
    in_distribution: bool
    encoding_state: Mapping | None = optional()
    n: int = 0
    metrics: Scores | None = None
    eval_tokens_per_second: float | None = None
    error: str | None = optional()
    lengths: tuple[LengthScore, ...] = optional(default=())
    samples: tuple[Mapping[str, str], ...] = optional(default=())
    capped: int | None = optional()
    loss_by_position: tuple[Mapping[str, float], ...] = optional(default=())
    cells: tuple[CellScore, ...] = optional(default=())

    @classmethod
    def from_json(cls, data: Mapping) -> BucketResult:
        return cls(
            bucket=data["bucket"],
            lo=data["lo"],
            hi=data["hi"],
            in_distribution=data["in_distribution"],
            encoding_state=data.get("encoding_state"),
            n=data.get("n", 0),
            metrics=data.get("metrics"),
            eval_tokens_per_second=data.get("eval_tokens_per_second"),
            error=data.get("error"),
            lengths=tuple(LengthScore.from_json(entry) for entry in data.get("lengths", [])),
            samples=tuple(data.get("samples", [])),
            capped=data.get("capped"),
            loss_by_position=tuple(data.get("loss_by_position", [])),
            cells=tuple(CellScore.from_json(entry) for entry in data.get("cells", [])),
        )


SPLIT_FIELDS = {"ID": "id", "OOD": "ood", "all": "all"}  # a split's name -> its SplitScores field


@dataclass(frozen=True, kw_only=True)
class SplitScores:
    """A run's split scores (:func:`pebench.running.evaluation.evaluate`): ``id`` (JSON ``ID``) and
    ``ood`` (``OOD``), each None when a bucket of the split could not be scored; ``all`` (the
    whole evaluation set) for text metrics, None likewise, :data:`ABSENT` for the other kinds;
    ``unscored``: the labels of the buckets without a score; ``signatures``: sacrebleu's
    signature of each text metric that was scored."""

    unscored: tuple[str, ...] = ()
    id: Scores | None = named("ID")
    ood: Scores | None = named("OOD")
    all: Scores | None | Absent = field(default=ABSENT, metadata={"key": "all"})
    signatures: Mapping[str, str] | None = optional()

    def split(self, name: str) -> Scores | None | Absent:
        """The scores of the split ``name`` ("ID", "OOD" or "all")."""
        return getattr(self, SPLIT_FIELDS[name])

    @classmethod
    def from_json(cls, data: Mapping) -> SplitScores:
        everything = data["all"] if "all" in data else ABSENT
        return cls(unscored=tuple(data.get("unscored", [])), id=data.get("ID"), ood=data.get("OOD"), all=everything, signatures=data.get("signatures"))


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One run: the header :func:`pebench.records.store.new_record` makes before it starts, its
    ``status`` (``running``, ``ok`` or ``failed`` with ``error``: type, message, traceback) and,
    when ``ok``, what it measured; a scoring of a saved model names its source
    (``evaluated_from``), a run that kept its weights their file (``checkpoint``)."""

    schema: int
    protocol: int = 1
    pebench_version: str | None = optional()
    git_commit: str | None = None
    created: str | None = optional()
    task: Mapping
    encoding: Mapping
    plugin: Mapping | None = optional()
    overrides: tuple[str, ...] = ()
    settings: Mapping | None = optional()
    config: str | None = optional()
    seed: int
    status: str
    task_plugin: Mapping | None = optional()
    environment: Mapping | None = optional()
    parameters: Mapping | None = optional()
    model: Mapping | None = optional()
    training: TrainingSummary | None = optional()
    stages: Mapping[str, float] | None = optional()
    sequence_lengths: Mapping[str, int] | None = optional()
    data: Mapping | None = optional()
    buckets: tuple[BucketResult, ...] = optional(default=())
    scores: SplitScores | None = optional()
    checkpoint: str | None = optional()
    evaluated_from: Mapping | None = optional()
    error: Mapping[str, str] | None = optional()

    def to_json(self) -> dict:
        """The record as JSON data (see the module docstring)."""
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping) -> RunRecord:
        """The record of JSON ``data`` (of schema 1 or 2).

        Raises:
            KeyError, TypeError: for data that is not a record (a required key missing, a part of
            the wrong type); :func:`pebench.records.store.record_problem` says what is wrong first.
        """
        known = {part.name for part in fields(cls)}
        parsed = {key: value for key, value in data.items() if key in known}
        parsed["overrides"] = tuple(data.get("overrides", []))
        if data.get("training") is not None:
            parsed["training"] = TrainingSummary.from_json(data["training"])
        parsed["buckets"] = tuple(BucketResult.from_json(bucket) for bucket in data.get("buckets", []))
        if data.get("scores") is not None:
            parsed["scores"] = SplitScores.from_json(data["scores"])
        return cls(**parsed)

    def with_measurements(self, **measured) -> RunRecord:
        """This record, ``ok``, with its measured parts (the fields of this class) filled in."""
        return replace(self, status="ok", **measured)

    def failed(self, error: Mapping[str, str]) -> RunRecord:
        """This record marked ``failed`` with ``error`` (type, message, traceback)."""
        return replace(self, status="failed", error=error)

    @property
    def label(self) -> str:
        """``task/encoding/seed<k>``, the names of the cards."""
        return f"{self.task['name']}/{self.encoding['name']}/seed{self.seed}"
