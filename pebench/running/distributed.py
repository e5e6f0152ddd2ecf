"""This process's place in a run: alone, or one rank of a torchrun job across processes (and GPUs):

    torchrun --nproc-per-node 4 -m pebench run --encoding rope --task wmt_long --data-dir DATA

:func:`from_environment` says which (:class:`OneProcess` or :class:`TorchrunJob`); both serve the
same :class:`Distributed` interface, so training, evaluation and the record are written once for
both.

A torchrun job is data parallel (``torch.nn.parallel.DistributedDataParallel``), NCCL on CUDA and
gloo on the CPU. Every rank draws the same global batch from the run's seed and trains on its
share of the examples (rank r takes examples r, r + W, ...); the loss is the sum over the rank's
target tokens divided by the global number of target tokens (summed across ranks), times W
because DDP averages the ranks' gradients: the gradients are those of one process on the whole
global batch. The model is initialised from the run's seed on every rank (DDP also broadcasts
rank 0's weights); after that, ranks other than 0 reseed their random streams (seed + rank), so
dropout and randomized positions differ per rank. Validation and evaluation run on rank 0, which
alone writes the record (naming the world size and backend); the others wait (the collectives'
timeout is raised to :data:`COLLECTIVE_TIMEOUT_HOURS` for that), and stop training at the step
rank 0 stops at, or fail with it when its validation fails.
"""

from __future__ import annotations

import datetime
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from pebench.running.devices import resolve_device

COLLECTIVE_TIMEOUT_HOURS = 12  # torch's defaults (NCCL 10 minutes, gloo 30) would end the job during rank 0's evaluation


class Distributed(ABC):
    """The processes a run trains in: ``world_size`` of them, this one ``rank``."""

    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        """True for rank 0, which validates, evaluates and writes the record."""
        return self.rank == 0

    @abstractmethod
    def shard(self, examples: list) -> list:
        """This rank's share of a global batch."""

    @abstractmethod
    def total(self, *counts: int, device: torch.device) -> list[int]:
        """Each of ``counts`` summed over the ranks."""

    @abstractmethod
    def summed(self, value: torch.Tensor) -> float:
        """A one-element tensor summed over the ranks (each rank's share of a global mean: the mean)."""

    @abstractmethod
    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """``model`` as this run trains it: the module whose backward pass gives the global batch's gradients."""

    @abstractmethod
    def agree(self, value: int, device: torch.device) -> int:
        """Rank 0's ``value`` (a small integer: a decision), on every rank."""

    @abstractmethod
    def describe(self) -> dict:
        """What the record's ``environment`` says of the processes (nothing for one process)."""

    @abstractmethod
    def finish(self) -> None:
        """Wait for every rank, then leave the process group."""


class OneProcess(Distributed):
    """This process alone: the global batch is its own and nothing is exchanged."""

    rank = 0
    world_size = 1

    def shard(self, examples: list) -> list:
        return examples

    def total(self, *counts: int, device: torch.device) -> list[int]:
        return list(counts)

    def summed(self, value: torch.Tensor) -> float:
        return value.item()

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        return model

    def agree(self, value: int, device: torch.device) -> int:
        return value

    def describe(self) -> dict:
        return {}

    def finish(self) -> None:
        pass


ONE_PROCESS = OneProcess()


@dataclass(frozen=True)
class TorchrunJob(Distributed):
    """This process's place in a torchrun job (its process group started)."""

    rank: int
    world_size: int
    local_rank: int
    backend: str

    def shard(self, examples: list) -> list:
        return examples[self.rank :: self.world_size]

    def total(self, *counts: int, device: torch.device) -> list[int]:
        summed = torch.tensor(counts, dtype=torch.long, device=device)
        dist.all_reduce(summed)
        return summed.tolist()

    def summed(self, value: torch.Tensor) -> float:
        summed = value.detach().clone()
        dist.all_reduce(summed)
        return summed.item()

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    def agree(self, value: int, device: torch.device) -> int:
        shared = torch.tensor([int(value)], device=device)
        dist.broadcast(shared, src=0)
        return int(shared.item())

    def describe(self) -> dict:
        return {"world_size": self.world_size, "backend": self.backend}

    def finish(self) -> None:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def from_environment(device_name: str) -> tuple[Distributed, torch.device]:
    """The torchrun job this process belongs to (``WORLD_SIZE`` above 1, the process group
    started: NCCL on CUDA, else gloo) and its device (``cuda:LOCAL_RANK`` there), or
    :data:`ONE_PROCESS` and the device ``device_name`` resolves to.

    Raises:
        ValueError: for a device name this machine cannot serve.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return ONE_PROCESS, resolve_device(device_name)
    device = resolve_device(device_name)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():  # the other ranks wait at a barrier while rank 0 evaluates: hours, on a real task
        dist.init_process_group(backend, timeout=datetime.timedelta(hours=COLLECTIVE_TIMEOUT_HOURS))
    return TorchrunJob(dist.get_rank(), world_size, local_rank, backend), device
