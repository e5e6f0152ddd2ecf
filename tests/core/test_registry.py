"""Third-party encodings through entry points: a real package installed with pip."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_packages import plugin_package

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pebench-plugin-example"


def pebench(*args, pythonpath):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-m", "pebench", *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory):
    """The example plugin pip-installed into its own folder (the test environment is untouched)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(EXAMPLE)],
        check=True, capture_output=True, timeout=600,
    )
    assert list(target.glob("pebench_plugin_example-*.dist-info"))
    return target


def broken_plugin(folder: Path) -> Path:
    """A distribution whose entry point names a module that does not exist."""
    info = folder / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pebench.encodings]\nbroken = no_such_module_here:Broken\n")
    return folder


def test_installed_plugin_is_listed_with_its_reference(installed_plugin):
    out = pebench("list", pythonpath=[installed_plugin])
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("learned_slopes"))
    assert "learned per-head slopes" in line and "arXiv:2108.12409" in line


def test_installed_plugin_trains_and_is_recorded(installed_plugin, tmp_path):
    out = pebench("run", "--encoding", "learned_slopes", "--task", "copy", "--results", str(tmp_path), "--quiet",
                  "--set", "training.steps=20", "--set", "split.eval_examples=10", pythonpath=[installed_plugin])
    assert out.returncode == 0, out.stderr
    assert "49-64" in out.stdout
    [record] = (tmp_path / "runs" / "copy" / "learned_slopes").glob("*.json")
    assert '"plugin": "learned_slopes"' in record.read_text()
    assert '"encoding": 16' in record.read_text()  # 4 sites x 4 heads of slopes


def test_broken_plugin_warns_by_name_and_the_rest_keep_working(installed_plugin, tmp_path):
    out = pebench("list", pythonpath=[installed_plugin, broken_plugin(tmp_path)])
    assert out.returncode == 0
    assert "skipping plugin 'broken' (no_such_module_here:Broken)" in out.stderr
    assert "learned_slopes" in out.stdout and "flow" in out.stdout
    out = pebench("run", "--encoding", "broken", "--task", "copy", pythonpath=[broken_plugin(tmp_path / "again")])
    assert out.returncode == 2 and "unknown encoding 'broken'" in out.stderr


def test_a_run_that_fails_is_recorded_as_failed_and_leaves_other_records_alone(tmp_path, exploding_plugin):
    results = tmp_path / "results"
    tiny = ["--results", str(results), "--quiet", "--set", "training.steps=12", "--set", "split.eval_examples=5"]
    assert pebench("run", "--encoding", "nope", "--task", "copy", *tiny, pythonpath=[]).returncode == 0
    [good] = (results / "runs" / "copy" / "nope").glob("*.json")
    before = good.read_text()
    out = pebench("run", "--encoding", "exploding", "--task", "copy", *tiny, pythonpath=[exploding_plugin])
    assert out.returncode == 1 and "exploded at call 11" in out.stderr
    [failed] = (results / "runs" / "copy" / "exploding").glob("*.json")
    record = json.loads(failed.read_text())
    assert record["status"] == "failed" and record["error"]["type"] == "RuntimeError" and "Traceback" in record["error"]["traceback"]
    assert good.read_text() == before and not list(results.rglob("*.tmp"))


def test_the_example_plugins_own_tests_run_the_conformance_kit_and_pass(installed_plugin):
    env = {**os.environ, "PYTHONPATH": str(installed_plugin)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
                         capture_output=True, text=True, env=env, cwd=EXAMPLE, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "15 passed" in out.stdout  # 6 properties x 3 architectures: causality in the decoder only, cached decoding not one-pass


def test_two_packages_registering_one_name_are_refused_naming_both(installed_plugin, tmp_path):
    rival = tmp_path / "rival_plugin-0.1.dist-info"
    rival.mkdir()
    (rival / "METADATA").write_text("Metadata-Version: 2.1\nName: rival-plugin\nVersion: 0.1\n")
    (rival / "entry_points.txt").write_text("[pebench.encodings]\nlearned_slopes = rival_plugin:Slopes\n")
    out = pebench("list", pythonpath=[installed_plugin, tmp_path])
    assert out.returncode == 2, out.stdout
    assert "two installed packages register the plugin 'learned_slopes'" in out.stderr
    assert "pebench-plugin-example" in out.stderr.replace("_", "-") and "rival-plugin" in out.stderr.replace("_", "-")


def test_the_record_names_the_plugins_package_and_every_parameter(installed_plugin, tmp_path):
    out = pebench("run", "--encoding", "learned_slopes", "--task", "copy", "--results", str(tmp_path), "--quiet",
                  "--set", "training.steps=5", "--set", "split.eval_examples=4", "--set", "split.validation_examples=4", pythonpath=[installed_plugin])
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "runs" / "copy" / "learned_slopes").glob("*.json")
    record = json.loads(path.read_text())
    assert record["plugin"]["distribution"].replace("_", "-") == "pebench-plugin-example" and record["plugin"]["version"] == "0.1.0"


def test_an_edited_or_version_bumped_plugin_makes_its_records_stale(tmp_path):
    site = plugin_package(tmp_path / "site", "steady", "Steady", "pass")  # a real package whose hook never fails
    results = tmp_path / "results"
    tiny = ["--results", str(results), "--quiet", "--set", "training.steps=12", "--set", "split.eval_examples=5", "--set", "split.validation_examples=5"]

    def sweep():
        out = pebench("sweep", "--encodings", "steady", "--tasks", "copy", *tiny, pythonpath=[site])
        assert out.returncode == 0, out.stderr
        return out.stderr

    assert "(1 missing)" in sweep()  # an unchanged plugin's record stays done: tests/running/test_sweep.py
    [path] = (results / "runs" / "copy" / "steady").glob("*.json")
    first = json.loads(path.read_text())
    module = site / "steady_plugin.py"
    module.write_text(module.read_text() + "# an edit that changes nothing the version says\n")
    assert "(1 stale)" in sweep()
    edited = json.loads(path.read_text())
    assert edited["plugin"]["source"] != first["plugin"]["source"] and edited["plugin"]["version"] == "0.1"
    assert edited["task_plugin"]["distribution"] == "pebench"
    metadata = site / "steady_plugin-0.1.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 0.1", "Version: 0.2"))
    assert "(1 stale)" in sweep()
    assert json.loads(path.read_text())["plugin"]["version"] == "0.2"
