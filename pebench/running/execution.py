"""One run from card names to a written record: what ``pebench run`` does, and ``pebench sweep``
for each cell of its grid.

Two stages, so that bad input is told apart from a failed run:
1. :func:`plan` reads and checks the cards and overrides (cheap; raises on bad input, writes
   nothing);
2. :func:`execute` builds the evaluation sets and the model, trains, evaluates and writes the
   record atomically: ``status = "ok"``, or ``"failed"`` with the error and its traceback.
   Ctrl-C (KeyboardInterrupt) is not caught: it writes nothing, so no partial record exists.
"""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from pebench.config.cards import encoding_card, task_card, with_plugin_defaults
from pebench.config.overrides import apply_overrides, changed_settings
from pebench.config.protocol import SECTION_KEYS, Protocol, resolve
from pebench.core.registry import ENCODINGS, TASKS, PluginConflictError, UnknownNameError, origin, plugin, same_code
from pebench.records import paths as layout
from pebench.records.paths import record_path
from pebench.records.store import card_identity, git_commit, json_safe, new_record, write_record
from pebench.records.types import RunRecord
from pebench.running import checkpoints
from pebench.running.distributed import ONE_PROCESS, Distributed
from pebench.running.train import RunSetup, run, set_up
from pebench.tasks.data import DataNotFoundError

BAD_INPUT = (UnknownNameError, PluginConflictError, ValueError, TypeError, RuntimeError, DataNotFoundError)


@dataclass
class Planned:
    """A checked run: its resolved cards (the encoding's parameters completed by the plugin's
    defaults), seed, overrides as given and the settings they changed, protocol, record path,
    the wall seconds resolving the task took (a real-data task loads and tokenizes its corpus
    there) and the local data folder it was given (None: ``$PEBENCH_DATA``, else the hub)."""

    task: dict
    encoding: dict
    seed: int
    overrides: list[str]
    settings: dict
    protocol: Protocol
    path: Path
    resolve_seconds: float = 0.0
    data_dir: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.task['name']}/{self.encoding['name']}/seed{self.seed}"

    def matches(self, record: RunRecord) -> bool:
        """True when ``record`` was made from these resolved cards (the plugin's defaults
        included, so a changed default makes the record stale) by the current code of its
        encoding and task plugins (:func:`pebench.core.registry.same_code`: pebench's own by their
        ``revision``, a record without one being revision 1; another distribution's by its
        version and source hash too). Descriptions and references are prose and do not count,
        nor does the spelling of the overrides."""
        return (
            card_identity(record.task) == card_identity(self.task)
            and card_identity(record.encoding) == card_identity(self.encoding)
            and same_code(record.plugin, self.encoding_code())
            and same_code(record.task_plugin, origin(TASKS, self.task["family"]))
        )

    def encoding_code(self) -> dict:
        """The encoding plugin's :func:`pebench.core.registry.origin` and ``revision``."""
        return {**origin(ENCODINGS, self.encoding["plugin"]), "revision": plugin(ENCODINGS, self.encoding["plugin"]).revision}

    def new_record(self) -> RunRecord:
        """The header of this run's record."""
        return new_record(self.task, self.encoding, self.seed, self.overrides, self.settings, self.encoding_code(), origin(TASKS, self.task["family"]))


def plan(
    task_name: str, encoding_name: str, seed: int, overrides: list[str], results: Path, resolved: dict | None = None, data_dir: Path | None = None
) -> Planned:
    """Resolve the cards with ``overrides`` applied, a real-data task reading ``data_dir`` (the
    local data folder; None: ``$PEBENCH_DATA``, else the hub). ``resolved`` (a dict the caller
    keeps) shares each resolved task between the cells of a sweep, so a corpus is loaded once,
    not per cell.

    Raises:
        UnknownNameError: an unknown task or encoding (the message lists the known ones).
        ValueError, TypeError: a negative seed, a malformed override or an impossible protocol
            (says why).
    """
    if seed < 0:
        raise ValueError(f"the seed must be a whole number >= 0 (the record is named seed<k>.json); got {seed}")
    git_commit()  # read now, while the checkout still holds the code this process loaded
    task, encoding = task_card(task_name), encoding_card(encoding_name)
    cards = (task_card(task_name), with_plugin_defaults(encoding))
    apply_overrides(task, encoding, overrides, SECTION_KEYS)
    encoding = with_plugin_defaults(encoding)
    settings = changed_settings(task, encoding, *cards)
    resolved = {} if resolved is None else resolved
    key = json.dumps(json_safe(task), sort_keys=True)
    if key not in resolved:
        tick = time.perf_counter()
        resolved[key] = (resolve(task, data_dir), time.perf_counter() - tick)
    protocol, seconds = resolved[key]
    path = record_path(results, task["name"], encoding["name"], seed, settings)
    return Planned(task, encoding, seed, list(overrides), settings, protocol, path, seconds, data_dir)


def prepare(planned: Planned) -> tuple[RunSetup, float]:
    """Build the evaluation sets and the seeded model; return them and the record's
    ``data_seconds``: the wall seconds of this and of resolving the task (loading its data).

    Raises:
        the errors of :data:`BAD_INPUT`: a bad encoding param, missing data, an encoding that
        cannot represent the training lengths.
    """
    tick = time.perf_counter()
    setup = set_up(planned.protocol, planned.encoding, planned.seed)
    return setup, planned.resolve_seconds + time.perf_counter() - tick


def measure(
    planned: Planned,
    device: torch.device,
    progress: bool,
    save_checkpoint: bool = False,
    prepared: tuple[RunSetup, float] | None = None,
    distributed: Distributed = ONE_PROCESS,
    log_to: str | None = None,
) -> RunRecord:
    """The run's record, ``ok`` or ``failed`` with its error (a set-up that fails too: missing
    data, a plugin that raises), not yet written: the set-up (:func:`prepare`, unless ``prepared``
    gives it), training and evaluation. With ``save_checkpoint``, a successful run's weights are
    kept (:mod:`pebench.running.checkpoints`). Ctrl-C (KeyboardInterrupt) is not caught."""
    record = planned.new_record()
    try:
        setup, data_seconds = prepared or prepare(planned)
        with training_log(planned, log_to if distributed.is_main else None) as log:
            measured = run(planned.protocol, setup, planned.seed, device, progress, distributed, log)
        measured["stages"] = {"data_seconds": round(data_seconds, 2), **measured.get("stages", {})}
        if save_checkpoint and distributed.is_main:
            measured["checkpoint"] = checkpoints.save(setup.model, planned.path)
        return record.with_measurements(**measured)
    except Exception as error:  # recorded, so a sweep can go on
        return record_failure(record, error)


def execute(
    planned: Planned,
    setup: RunSetup,
    device: torch.device,
    progress: bool,
    data_seconds: float,
    save_checkpoint: bool = False,
    distributed: Distributed = ONE_PROCESS,
    log_to: str | None = None,
) -> RunRecord:
    """Train and evaluate (:func:`measure`), then write the record (``ok`` or ``failed``; in a
    torchrun job, rank 0 alone); return it."""
    record = measure(planned, device, progress, save_checkpoint, (setup, data_seconds), distributed, log_to)
    if distributed.is_main:
        write_record(planned.path, record)
    return record


LOGGERS = ("tensorboard",)


@contextlib.contextmanager
def training_log(planned: Planned, logger: str | None):
    """``log(tag, value, step)`` for :func:`pebench.running.train.train`: None without a logger; with
    ``"tensorboard"``, a ``torch.utils.tensorboard.SummaryWriter`` writing under
    ``<results>/tensorboard/<task>/<encoding>/<record name>`` (``tensorboard --logdir`` shows it).

    Raises:
        ValueError: for an unknown logger, or TensorBoard not installed (``pip install tensorboard``).
    """
    if logger is None:
        yield None
        return
    if logger not in LOGGERS:
        raise ValueError(f"--log must be one of {', '.join(LOGGERS)}; got {logger!r}")
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise ValueError(f"--log tensorboard needs TensorBoard: pip install tensorboard ({error})") from None
    writer = SummaryWriter(str(layout.tensorboard_dir(planned.path)))
    try:
        yield writer.add_scalar
    finally:
        writer.close()


def record_failure(record: RunRecord, error: BaseException, message: str | None = None) -> RunRecord:
    """``record`` failed with ``error``'s type, message (or ``message``) and traceback."""
    return record.failed({"type": type(error).__name__, "message": str(error) if message is None else message, "traceback": traceback.format_exc()})
