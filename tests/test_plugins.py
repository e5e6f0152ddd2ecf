"""Third-party encodings through entry points: a real package installed with pip."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pebench-plugin-example"


def pebench(*args, pythonpath):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-m", "pebench.cli", *args], capture_output=True, text=True, env=env, timeout=600)


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
    assert '"encoding": 8' in record.read_text()  # 2 sites x 4 heads of slopes


def test_broken_plugin_warns_by_name_and_the_rest_keep_working(installed_plugin, tmp_path):
    out = pebench("list", pythonpath=[installed_plugin, broken_plugin(tmp_path)])
    assert out.returncode == 0
    assert "skipping plugin 'broken' (no_such_module_here:Broken)" in out.stderr
    assert "learned_slopes" in out.stdout and "flow" in out.stdout
    out = pebench("run", "--encoding", "broken", "--task", "copy", pythonpath=[broken_plugin(tmp_path / "again")])
    assert out.returncode == 2 and "unknown encoding 'broken'" in out.stderr
