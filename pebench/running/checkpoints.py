"""Trained weights kept with a run, and a saved model scored again (``pebench evaluate``).

``pebench run --save-checkpoint`` saves the trained model's ``state_dict`` beside the records, at
``<results>/checkpoints/<task>/<encoding>/seed<k>[-<hash>].pt`` (the record's path with ``runs``
made ``checkpoints``), written atomically, and names it in the record (``checkpoint``, relative to
the results folder). Sweeps keep none unless asked (``--save-checkpoints``).

``pebench evaluate RECORD --set ...`` rebuilds that run's model (its resolved cards, and the
sequence lengths its encoding was sized for: a learned table keeps its size, so a longer bucket is
recorded as not representable, never silently extended; a larger output cap, ``decoding.
max_length_*``, can reach past it too), loads the weights, and scores new
lengths (``split.buckets``, ``split.eval_examples``, ``split.eval_seed``) or another decoding
(``decoding.*``) exactly as a run scores them. Settings that would change the trained model are
refused. The new record is a configuration of its own (its settings name the change), keeps the
source run's ``training`` part, and says where it came from (``evaluated_from``).
"""

from __future__ import annotations

import copy
import io
import json
import time
from pathlib import Path

import torch

from pebench.config.cards import encoding_card, task_card, with_plugin_defaults
from pebench.config.overrides import apply_overrides, changed_settings
from pebench.config.protocol import SECTION_KEYS, resolve
from pebench.core.registry import ENCODINGS, origin
from pebench.records import paths as layout
from pebench.records.paths import record_path
from pebench.records.store import SCHEMA_VERSION, new_record, record_problem, write_atomically, write_record
from pebench.records.types import RunRecord
from pebench.running.devices import environment
from pebench.running.evaluation import evaluate
from pebench.running.train import build_model

EVALUATION_KEYS = ("split.buckets", "split.eval_examples", "split.eval_seed")  # and every decoding.* key


def save(model: torch.nn.Module, record: Path) -> str:
    """Write ``model``'s weights for the run recorded at ``record``, atomically; return the
    checkpoint's path relative to the results folder (as the record stores it)."""
    path = layout.checkpoint_path(record)
    weights = io.BytesIO()
    torch.save({name: value.detach().cpu() for name, value in model.state_dict().items()}, weights)
    write_atomically(path, weights.getvalue())
    return str(path.relative_to(layout.results_of(record)))


def _source(path: Path) -> RunRecord:
    """The record at ``path``, checked: a successful protocol 2 run with a checkpoint on disk.

    Raises:
        ValueError: saying what is missing and what to do.
    """
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the record {path}: {error}") from None
    problem = record_problem(record)
    if problem or record.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"{path} is not a successful protocol 2 run record{': ' + problem if problem else ''}")
    source = RunRecord.from_json(record)
    if source.checkpoint is None:
        raise ValueError(f"{path} has no checkpoint: train it again with `pebench run ... --save-checkpoint`")
    results = layout.results_of(path)
    if not (results / source.checkpoint).is_file():
        raise ValueError(f"the checkpoint {source.checkpoint} of {path} is missing under {results}")
    return source


def plan_evaluation(path: Path, overrides: list[str], results: Path) -> tuple[RunRecord, dict, dict, Path]:
    """The source record, the task card of the new scoring, its settings and its record path.

    Raises:
        ValueError: for a record that cannot be scored again, no override, or an override of a
            setting that would change the trained model.
    """
    source = _source(path)
    if not overrides:
        raise ValueError(f"pebench evaluate scores a saved model at other settings: give --set for {', '.join(EVALUATION_KEYS)} or decoding.*")
    for override in overrides:
        key = override.partition("=")[0].strip()
        if key not in EVALUATION_KEYS and not key.startswith("decoding."):
            raise ValueError(
                f"--set {key} would change the trained model; pebench evaluate changes only {', '.join(EVALUATION_KEYS)} "
                f"and decoding.* (to change {key}, train anew with pebench run)"
            )
    task = copy.deepcopy(dict(source.task))
    apply_overrides(task, {"params": {}}, overrides, SECTION_KEYS)
    cards = (task_card(task["name"]), with_plugin_defaults(encoding_card(source.encoding["name"])))
    settings = changed_settings(task, source.encoding, *cards)
    return source, task, settings, record_path(results, task["name"], source.encoding["name"], source.seed, settings)


def rescore(path: Path, overrides: list[str], results: Path, device: torch.device, data_dir: Path | None = None) -> tuple[RunRecord, Path]:
    """Score the saved model of the run recorded at ``path`` with ``overrides`` applied (see the
    module docstring), a real-data task reading ``data_dir`` (the local data folder; None:
    ``$PEBENCH_DATA``, else the hub); write and return the new record and its path.

    Raises:
        ValueError: from :func:`plan_evaluation`, or for a task card the protocol refuses.
    """
    source, task, settings, target = plan_evaluation(Path(path), overrides, results)
    if target.resolve() == Path(path).resolve():
        raise ValueError(f"these settings are the source run's own: its record {path} already holds their scores")
    tick = time.perf_counter()
    protocol = resolve(task, data_dir)
    lengths = source.sequence_lengths
    model = build_model(protocol, source.encoding, lengths["max"], lengths["train"])
    model.load_state_dict(torch.load(layout.results_of(path) / source.checkpoint, map_location="cpu", weights_only=True))
    model.to(device)
    data_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    buckets, scores = evaluate(model, protocol, protocol.evaluation_sets(), device)
    record = new_record(task, source.encoding, source.seed, overrides, settings, origin(ENCODINGS, source.encoding["plugin"])).with_measurements(
        environment=environment(device),
        parameters=model.parameter_counts(),
        model=source.model,
        training=source.training,
        sequence_lengths=lengths,
        data=protocol.task.data,
        buckets=buckets,
        scores=scores,
        stages={"data_seconds": round(data_seconds, 2), "eval_seconds": round(time.perf_counter() - tick, 2)},
        evaluated_from={"record": str(path), "checkpoint": source.checkpoint, "git_commit": source.git_commit},
    )
    write_record(target, record)
    return record, target
