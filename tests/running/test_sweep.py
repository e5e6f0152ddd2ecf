"""`pebench sweep`: real grids of tiny runs, a real failing plugin, a real SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import time

from pebench.running.execution import plan
from pebench.records.types import RunRecord
from pebench.records.store import SCHEMA_VERSION, is_complete
from pebench.running.sweep import seeds, state_of
from tests.pebench_command import pebench_here, records

TINY = ["--set", "training.steps=12", "--set", "split.eval_examples=5", "--set", "training.warmup_steps=2", "--set", "split.validation_examples=5", "--quiet"]


def sweep(*args, pythonpath=(), **popen):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    command = [sys.executable, "-m", "pebench", "sweep", *args]
    if popen:
        return subprocess.Popen(command, env=env, **popen)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def test_a_failed_run_is_recorded_the_sweep_goes_on_and_a_second_sweep_skips_the_grid(tmp_path, exploding_plugin):
    results, site = tmp_path / "results", exploding_plugin
    grid = ["--tasks", "copy", "--encodings", "nope,exploding,sinusoidal", "--seeds", "0", "--results", str(results), *TINY]
    out = sweep(*grid, pythonpath=[site])
    assert out.returncode == 1, out.stderr
    assert "2 runs ok, 1 failed" in out.stdout and "failed: copy/exploding/seed0: RuntimeError: exploded at call 11" in out.stdout
    first = records(results)
    statuses = {path.parent.name: json.loads(text)["status"] for path, text in first.items()}
    assert statuses == {"nope": "ok", "exploding": "failed", "sinusoidal": "ok"}

    again = sweep(*grid, pythonpath=[site])
    assert "0 runs ok, 0 failed, skipped 2 done, 1 failed" in again.stdout and records(results) == first

    retried = sweep(*grid, "--retry-failed", pythonpath=[site])
    assert "0 runs ok, 1 failed, skipped 2 done" in retried.stdout
    after = records(results)
    changed = [path.parent.name for path in first if after[path] != first[path]]
    assert changed == ["exploding"]  # rerun (a new record); the good records untouched


def test_a_killed_sweep_leaves_whole_records_and_the_next_sweep_completes_the_grid(tmp_path):
    results = tmp_path / "results"
    grid = ["--tasks", "copy", "--encodings", "nope,rope", "--seeds", "0,1", "--results", str(results),
            "--set", "training.steps=60", "--set", "split.eval_examples=5", "--set", "split.validation_examples=5", "--quiet"]
    process = sweep(*grid, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list((results / "runs").rglob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)  # mid-grid: the next run has started
    process.wait(timeout=60)
    before = records(results)
    assert 1 <= len(before) < 4
    assert all(is_complete(RunRecord.from_json(json.loads(text))) for text in before.values())

    out = sweep(*grid)
    assert out.returncode == 0, out.stderr
    after = records(results)
    assert len(after) == 4 and all(is_complete(RunRecord.from_json(json.loads(text))) for text in after.values())
    cells = sorted((json.loads(text)["encoding"]["name"], json.loads(text)["seed"]) for text in after.values())
    assert cells == sorted((e, s) for e in ("nope", "rope") for s in (0, 1))  # each once
    assert all(after[path] == text for path, text in before.items())  # finished runs were not redone


def write_json(path, record):
    """A hand-made, partial record, written as it is (write_record would check it against the schema)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_a_record_made_from_another_card_is_stale(tmp_path):
    planned = plan("copy", "rope", 0, ["training.steps=5"], tmp_path)
    assert state_of(planned) == "missing"
    record = {"schema": SCHEMA_VERSION, "status": "ok", "seed": 0, "task": planned.task, "encoding": planned.encoding, "overrides": planned.overrides,
              "buckets": [{"bucket": "b", "lo": 1, "hi": 2, "in_distribution": True}] * len(planned.task["split"]["buckets"]), "scores": {}}
    write_json(planned.path, record)
    assert state_of(planned) == "done"
    write_json(planned.path, {**record, "encoding": {**planned.encoding, "description": "reworded"}, "overrides": ["training.steps = 5"]})
    assert state_of(planned) == "done"  # prose and spacing do not make a record stale
    write_json(planned.path, {**record, "encoding": {**planned.encoding, "params": {"base": 500.0}}})
    assert state_of(planned) == "stale"
    write_json(planned.path, {**record, "status": "failed"})
    assert state_of(planned) == "failed"
    write_json(planned.path, {**record, "schema": 1})
    assert state_of(planned) == "missing"  # a protocol 1 record is run again under protocol 2


def test_seed_lists_and_ranges():
    assert seeds("0,1,2") == [0, 1, 2] and seeds("0-2") == [0, 1, 2] and seeds("5") == [5]


def test_bad_sweep_input_exits_2_before_running_anything(tmp_path, capsys):
    out = pebench_here(capsys, "sweep", "--tasks", "copy", "--encodings", "rope,nosuch", "--results", str(tmp_path))
    assert out.returncode == 2 and "unknown encoding 'nosuch'" in out.stderr and not (tmp_path / "runs").exists()
    out = pebench_here(capsys, "sweep", "--tasks", "copy", "--encodings", "rope", "--seeds", "a-b", "--results", str(tmp_path))
    assert out.returncode == 2 and "--seeds expects" in out.stderr


def test_sigterm_stops_the_sweep_without_recording_the_run_in_progress(tmp_path):
    results = tmp_path / "results"
    grid = ["--tasks", "copy", "--encodings", "nope,sinusoidal,rope", "--seeds", "0", "--results", str(results),
            "--set", "training.steps=400", "--set", "split.eval_examples=5", "--set", "split.validation_examples=5", "--quiet"]
    process = sweep(*grid, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list((results / "runs").rglob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # the second run is training
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "run the same command to continue" in stderr
    statuses = [json.loads(text)["status"] for text in records(results).values()]
    assert statuses == ["ok"]  # the interrupted run left no record, failed or otherwise


def test_a_sweep_resolves_each_task_once_and_counts_it_in_every_runs_data_seconds(tmp_path, monkeypatch):
    from pebench.running import execution
    from pebench.running import sweep as sweep_module

    calls = []
    real = execution.resolve

    def counting(card, data_dir=None):
        calls.append(card["name"])
        time.sleep(0.05)  # a corpus load, in miniature
        return real(card, data_dir)

    monkeypatch.setattr(execution, "resolve", counting)
    cells = sweep_module.plan_grid(["copy"], ["nope", "rope"], [0, 1], [], tmp_path)
    assert calls == ["copy"] and len(cells) == 4
    assert len({id(cell.planned.protocol) for cell in cells}) == 1
    assert all(cell.planned.resolve_seconds >= 0.05 for cell in cells)
    _, data_seconds = execution.prepare(cells[0].planned)
    assert data_seconds >= cells[0].planned.resolve_seconds


def test_a_record_of_an_older_plugin_revision_is_stale(tmp_path):
    # Randomized positions are revision 2 (each example its own draw); the committed records of
    # revision 1 (no revision stored) must be run again, the others stay done.
    from pebench.running import execution
    from pebench.core.registry import ENCODINGS, plugins
    from pebench.running.sweep import state_of

    assert plugins(ENCODINGS)["randomized"].revision == 2 and plugins(ENCODINGS)["rope"].revision == 1
    for encoding, revision, expected in (("randomized", None, "stale"), ("randomized", 1, "stale"), ("randomized", 2, "done"),
                                         ("rope", None, "done"), ("rope", 2, "stale")):
        planned = execution.plan("copy", encoding, 0, [], tmp_path)
        bucket = {"bucket": "b", "lo": 1, "hi": 2, "in_distribution": True}
        record = {**planned.new_record().to_json(), "status": "ok", "scores": {}, "buckets": [bucket] * len(planned.task["split"]["buckets"])}
        if revision is None:
            del record["plugin"]["revision"]
        else:
            record["plugin"]["revision"] = revision
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        planned.path.write_text(json.dumps(record))
        assert state_of(planned) == expected, (encoding, revision)
