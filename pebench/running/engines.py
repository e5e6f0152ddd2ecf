"""Where a sweep's runs execute: in this process one after another (``local``), as Ray tasks
(``ray``), or as a Slurm job array through submitit (``slurm``). pebench schedules nothing
itself: the engine places and runs the cells; the sweep (:mod:`pebench.running.sweep`) plans them, skips
the done ones and counts the outcomes, the same on every engine.

- ``local``: each run as ``pebench run`` does it, its record written when it ends.
- ``ray``: one Ray task per cell (``ray.remote``), asking ``cpus_per_run`` CPUs (the run's torch
  threads) and ``gpus_per_run`` GPUs (fractions allowed: several small runs share one GPU); on a
  local Ray instance by default, or the cluster at ``address``. A task returns its record to the
  driver, which writes it atomically: no shared filesystem is needed. A task whose worker dies is
  recorded failed with the reason (Ray does not retry it), and the sweep goes on.
- ``slurm``: one submitit job array (``submitit.AutoExecutor``) of one job per cell, with the
  partition, time limit, GPUs and CPUs asked for; each job writes its record to the results
  folder, which the cluster's nodes must share, and the driver waits for the array. A job that
  ends without a record (killed, out of time) is recorded failed with submitit's reason.
  ``cluster = "local"`` runs the jobs as local processes, submitit's own way of testing.

Every engine calls ``on_record(index, record)`` for each cell: local and Ray as each finishes,
Slurm in the order the jobs were submitted (the driver waits for each job in turn).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from pebench.records import paths as layout
from pebench.records.store import write_record
from pebench.records.types import RunRecord
from pebench.running import execution
from pebench.running.devices import resolve_device
from pebench.running.execution import Planned
from pebench.tasks.data import data_root

ENGINES = ("local", "ray", "slurm")


@dataclass(frozen=True)
class EngineOptions:
    """How and where to run: the engine, the device name every run resolves on its own machine,
    the resources of a run, and the engine's own settings."""

    engine: str = "local"
    device: str = "auto"
    cpus_per_run: int = 1
    gpus_per_run: float = 0.0
    address: str | None = None  # ray: a cluster's address (default: a local instance)
    partition: str | None = None  # slurm
    time_minutes: int = 60  # slurm: each job's time limit
    cluster: str = "slurm"  # slurm: submitit's cluster ("local" and "debug" test without Slurm)
    save_checkpoints: bool = False

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"--engine must be one of {', '.join(ENGINES)}; got {self.engine!r}")
        if self.cpus_per_run < 1 or self.gpus_per_run < 0 or self.time_minutes < 1:
            raise ValueError(
                f"--cpus-per-run must be >= 1, --gpus-per-run >= 0 and --time >= 1; got {self.cpus_per_run}, {self.gpus_per_run}, {self.time_minutes}"
            )
        if self.engine == "ray" and self.save_checkpoints:
            raise ValueError("--save-checkpoints needs the runs' machines to write to the results folder: use --engine local or slurm")
        if self.engine == "slurm" and self.gpus_per_run != int(self.gpus_per_run):
            raise ValueError(
                f"Slurm allocates whole GPUs: --gpus-per-run must be a whole number with --engine slurm; got {self.gpus_per_run} "
                f"(fractions of a GPU: --engine ray)"
            )


OnRecord = Callable[[int, RunRecord], None]


def run_cells(cells: list[Planned], options: EngineOptions, progress: bool, on_record: OnRecord) -> None:
    """Run ``cells`` on the chosen engine (see the module docstring)."""
    {"local": _local, "ray": _ray, "slurm": _slurm}[options.engine](cells, options, progress, on_record)


def _local(cells: list[Planned], options: EngineOptions, progress: bool, on_record: OnRecord) -> None:
    device = resolve_device(options.device)
    for index, planned in enumerate(cells):
        record = execution.measure(planned, device, progress, options.save_checkpoints)
        write_record(planned.path, record)
        on_record(index, record)


def run_remote_cell(
    task: str,
    encoding: str,
    seed: int,
    overrides: list[str],
    results: str,
    device: str,
    data_dir: Path | None,
    threads: int,
    write: bool,
    save_checkpoint: bool = False,
) -> RunRecord:
    """One cell on an engine's worker: planned again from its names (the cards as this machine
    has them) and the driver's local data folder (``data_dir``; None: the worker's
    ``$PEBENCH_DATA``, else the hub), measured with ``threads`` torch threads, its record returned
    (and written when ``write``, on an engine with a shared results folder)."""
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    planned = execution.plan(task, encoding, seed, overrides, Path(results), data_dir=data_dir)
    record = execution.measure(planned, resolve_device(device), False, save_checkpoint)
    if write:
        write_record(planned.path, record)
    return record


def _arguments(planned: Planned, options: EngineOptions) -> tuple:
    return (
        planned.task["name"],
        planned.encoding["name"],
        planned.seed,
        planned.overrides,
        str(layout.results_of(planned.path)),
        options.device,
        data_root(planned.data_dir),
        options.cpus_per_run,
    )


def _ray(cells: list[Planned], options: EngineOptions, progress: bool, on_record: OnRecord) -> None:
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(
            address=options.address,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}} if options.address is None else None,
        )
    remote = ray.remote(run_remote_cell).options(num_cpus=options.cpus_per_run, num_gpus=options.gpus_per_run, max_retries=0)
    pending = {remote.remote(*_arguments(planned, options), False): index for index, planned in enumerate(cells)}
    try:
        while pending:
            [done], _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(done)
            try:
                record = ray.get(done)
            except ray.exceptions.RayError as error:  # the worker died (killed, out of memory) or Ray failed it
                record = execution.record_failure(cells[index].new_record(), error, f"the Ray worker failed: {_first_line(error)}")
            write_record(cells[index].path, record)
            on_record(index, record)
    finally:
        for reference in pending:
            ray.cancel(reference, force=True)
        if started:
            ray.shutdown()


def _slurm(cells: list[Planned], options: EngineOptions, progress: bool, on_record: OnRecord) -> None:
    import submitit

    folder = layout.slurm_dir(layout.results_of(cells[0].path)) if cells else Path(layout.SLURM)
    executor = submitit.AutoExecutor(folder=folder, cluster=None if options.cluster == "slurm" else options.cluster)
    parameters = {"timeout_min": options.time_minutes, "cpus_per_task": options.cpus_per_run, "name": "pebench"}
    if options.cluster == "slurm":
        parameters.update(slurm_partition=options.partition, slurm_gpus_per_task=int(options.gpus_per_run) or None)
    executor.update_parameters(**{key: value for key, value in parameters.items() if value is not None})
    columns = list(zip(*[(*_arguments(planned, options), True, options.save_checkpoints) for planned in cells]))
    jobs = executor.map_array(run_remote_cell, *columns) if cells else []
    for index, job in enumerate(jobs):
        try:
            record = job.result()
        except Exception as error:  # the job died without a record: submitit says why
            record = execution.record_failure(cells[index].new_record(), error, f"the job {job.job_id} failed: {_first_line(error)}")
            write_record(cells[index].path, record)
        on_record(index, record)


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]
