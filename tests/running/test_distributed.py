"""One run across processes with torchrun (gloo on the CPU): the same gradients as one process on
the same global batch, and a CLI run that rank 0 records."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from tests.helpers import relative_error
from tests.pebench_command import TINY

PROBE = Path(__file__).with_name("ddp_probe.py")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def torchrun(*args):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *args],
                          capture_output=True, text=True, env=ENV, timeout=600)


def test_two_processes_train_the_weights_one_process_trains_on_the_global_batch(tmp_path):
    one = subprocess.run([sys.executable, str(PROBE), str(tmp_path / "one.pt")], capture_output=True, text=True, env=ENV, timeout=600)
    assert one.returncode == 0, one.stderr
    two = torchrun(str(PROBE), str(tmp_path / "two.pt"))
    assert two.returncode == 0, two.stderr
    alone, together = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert alone.keys() == together.keys()
    moved = [name for name in alone if relative_error(together[name], alone[name]) > 1e-5]
    assert not moved, f"weights differ after 4 steps: {moved}"


def test_a_torchrun_cli_run_writes_one_record_naming_the_world(tmp_path):
    out = torchrun("-m", "pebench", "run", "--encoding", "alibi", "--task", "copy", "--results", str(tmp_path), *TINY)
    assert out.returncode == 0, out.stderr
    [path] = list((tmp_path / "runs").rglob("*.json"))
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["environment"]["world_size"] == 2 and record["environment"]["backend"] == "gloo"
    assert out.stdout.count("record:") == 1  # rank 0 alone reports
