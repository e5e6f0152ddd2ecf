"""Trains a tiny copy model for a few steps, data-parallel under torchrun or in one process, and
saves the weights: tests/running/test_distributed.py compares the two. Not a test module itself.

    python tests/running/ddp_probe.py OUT.pt                       # one process, the whole batch
    torchrun --nproc-per-node 2 tests/running/ddp_probe.py OUT.pt  # two gloo processes, a half each
"""

import sys

import torch

from pebench.running.distributed import from_environment
from pebench.running.execution import plan, prepare
from pebench.running.train import train

OVERRIDES = ["training.steps=4", "training.eval_every=100", "training.batch_size=16", "training.warmup_steps=1", "split.eval_examples=4",
             "split.validation_examples=4"]

if __name__ == "__main__":
    torch.set_num_threads(1)
    distributed, device = from_environment("cpu")
    planned = plan("copy", "rope", 0, OVERRIDES, "unused")
    setup, _ = prepare(planned)
    train(setup.model, planned.protocol, 0, device, setup.validation, progress=False, distributed=distributed)
    if distributed.is_main:
        torch.save(setup.model.state_dict(), sys.argv[1])
    distributed.finish()
