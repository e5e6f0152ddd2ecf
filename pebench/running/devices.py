"""The device a run computes on: choosing it, its autocast, and waiting for its queued work."""

from __future__ import annotations

import platform

import torch


def resolve_device(device: str) -> torch.device:
    """``"auto"`` is CUDA when available, else CPU; any other name as torch reads it.

    Raises:
        ValueError: for a name torch does not know, or a CUDA device this machine lacks (so that
            a run stops before training, not after it).
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"--device {device!r} is not a device name (auto, cpu, cuda, cuda:N): {error}") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: this machine has no CUDA device (torch {torch.__version__}); use --device cpu or auto")
    if chosen.type == "cuda" and chosen.index is not None and chosen.index >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0")
    return chosen


def autocast(device: torch.device) -> torch.autocast:
    """bf16 autocast on CUDA, for training and evaluation alike; a no-op on other devices."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def sync_device(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that wall-clock timings are honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def environment(device: torch.device) -> dict:
    """What a run's numbers depend on besides the code: torch, Python, the device, the CPU
    threads, the platform (the record's ``environment``)."""
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
    }
