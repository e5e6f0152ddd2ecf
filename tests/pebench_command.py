"""The `pebench` command as the tests run it: in a new interpreter (:func:`pebench`) or in this
one (:func:`pebench_here`), on the tiny budget of :data:`TINY`; and the records it wrote
(:func:`records`)."""

import subprocess
import sys

import torch

from pebench.cli import main

TINY = ["--set", "training.steps=30", "--set", "split.eval_examples=20", "--set", "training.warmup_steps=5", "--set", "split.validation_examples=16",
        "--set", "training.eval_every=10", "--quiet"]


def pebench(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "pebench", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def pebench_here(capsys, *args) -> subprocess.CompletedProcess:
    """``pebench ARGS`` called in this process: for the checks that stop before any training,
    without the seconds of a new interpreter importing torch. The same result as :func:`pebench`
    (``returncode``, ``stdout``, ``stderr``); the flag ``main`` sets for the process is put back."""
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as stop:  # argparse's errors
        code = stop.code
    finally:
        torch.set_flush_denormal(False)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["pebench", *args], code, out.out, out.err)


def records(results):
    return {path: path.read_text() for path in sorted((results / "runs").rglob("*.json"))}
