"""Sweeps on existing engines: Ray tasks on a local instance (2 CPUs) and a submitit job array on
its local executor; resuming after the driver is killed; a worker that dies."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pebench.records.store import is_complete
from pebench.records.types import RunRecord
from tests.pebench_command import records
from tests.plugin_packages import plugin_package

TINY = ["--set", "training.steps=12", "--set", "split.eval_examples=5", "--set", "training.warmup_steps=2", "--set", "split.validation_examples=5",
        "--set", "training.eval_every=6", "--quiet"]
GRID = ["--tasks", "copy", "--encodings", "nope,rope", "--seeds", "0-1"]


def sweep(*args, pythonpath=(), **popen):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath)), "OMP_NUM_THREADS": "1", "RAY_DEDUP_LOGS": "0"}
    command = [sys.executable, "-m", "pebench", "sweep", *args]
    if popen:
        return subprocess.Popen(command, env=env, **popen)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


def killing_plugin(folder: Path) -> Path:
    """A real plugin whose process kills itself in the middle of training (SIGKILL: the Ray
    worker dies, no exception reaches Python)."""
    return plugin_package(folder, "killing", "Killing", "os.kill(os.getpid(), signal.SIGKILL)")


def complete_and_once(results: Path) -> list[tuple[str, int]]:
    found = records(results)
    assert all(is_complete(RunRecord.from_json(json.loads(text))) for text in found.values())
    return sorted((json.loads(text)["encoding"]["name"], json.loads(text)["seed"]) for text in found.values())


def test_a_ray_sweep_resumes_after_its_driver_is_killed(tmp_path):
    results = tmp_path / "results"
    grid = [*GRID, "--results", str(results), "--engine", "ray", "--cpus-per-run", "1", *TINY]
    driver = sweep(*grid, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not list((results / "runs").rglob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    driver.send_signal(signal.SIGKILL)  # records are written by the driver as each task returns
    driver.wait(timeout=60)
    before = records(results)
    assert 1 <= len(before) <= 4 and all(is_complete(RunRecord.from_json(json.loads(text))) for text in before.values())
    out = sweep(*grid)
    assert out.returncode == 0, out.stderr
    assert complete_and_once(results) == [("nope", 0), ("nope", 1), ("rope", 0), ("rope", 1)]
    assert all(records(results)[path] == text for path, text in before.items())  # finished cells were not run again


def test_a_ray_worker_that_dies_is_recorded_failed_and_the_rest_complete(tmp_path):
    results = tmp_path / "results"
    out = sweep("--tasks", "copy", "--encodings", "nope,killing,rope", "--seeds", "0", "--results", str(results), "--engine", "ray", *TINY,
                pythonpath=[killing_plugin(tmp_path / "site")])
    assert out.returncode == 1, out.stderr
    assert "2 runs ok, 1 failed" in out.stdout and "failed: copy/killing/seed0:" in out.stdout and "the Ray worker failed" in out.stdout
    statuses = {path.parent.name: json.loads(text)["status"] for path, text in records(results).items()}
    assert statuses == {"nope": "ok", "killing": "failed", "rope": "ok"}


def test_the_same_grid_as_a_submitit_job_array(tmp_path):
    results = tmp_path / "results"
    out = sweep(*GRID, "--results", str(results), "--engine", "slurm", "--slurm-cluster", "local", *TINY)
    assert out.returncode == 0, out.stderr
    assert "4 runs ok, 0 failed" in out.stdout
    assert complete_and_once(results) == [("nope", 0), ("nope", 1), ("rope", 0), ("rope", 1)]
    assert list((results / "slurm").glob("*_0_log.out"))  # submitit's own job folder
    again = sweep(*GRID, "--results", str(results), "--engine", "slurm", "--slurm-cluster", "local", *TINY)
    assert "0 runs ok, 0 failed, skipped 4 done" in again.stdout
