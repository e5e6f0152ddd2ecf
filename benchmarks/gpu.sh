#!/usr/bin/env bash
# The throughput table on a CUDA GPU: the same contenders and shapes as on CPU, under bf16
# autocast, with 8x the tokens per batch so that the GPU is busy. Writes results/throughput-gpu/.
# python -m pytest tests/running/test_devices.py checks the GPU path's numbers against the CPU's.
#   bash benchmarks/gpu.sh              # 2 min 20 s on one H200 (torch 2.11)
#   bash benchmarks/gpu.sh --quick      # a smoke test
set -euo pipefail
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this script measures the GPU path')"
pebench bench --device cuda --tokens 65536 --out results/throughput-gpu "$@"
