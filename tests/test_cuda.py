"""On a CUDA device (skipped without one: CI has none). Every encoding computes on the GPU what
it computes on the CPU, for the same weights and batch: to float round-off in fp32 and to
bf16's precision under the bf16 autocast that training and evaluation use there; and attention
runs on SDPA's fused kernels wherever the encoding leaves it to SDPA."""

import copy

import pytest
import torch
from torch import nn

from pebench.bench import Bench, Settings, Shape, contenders

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
CUDA = torch.device("cuda")
SETTINGS = Settings(device=torch.device("cpu"), tokens_per_batch=2048, peer=False)
CONTENDERS = {c.name: c for c in contenders(SETTINGS)}
# Randomized positions are drawn by the device's own random generator: another sample on the GPU.
SAME_ON_EVERY_DEVICE = [name for name in CONTENDERS if not name.startswith("randomized")]
SHAPES = [Shape("decoder", 64), Shape("encoder_decoder", 32)]


def logits_and_gradients(model: nn.Module, bench: Bench, device: torch.device, bf16: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A training step's logits and every parameter's gradient (flattened), on the CPU in fp32."""
    model.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(*(x.to(device) for x in bench.inputs))
    nn.functional.cross_entropy(logits.float().flatten(0, 1), bench.tokens[:, 1:].to(device).flatten()).backward()
    gradients = torch.cat([p.grad.float().flatten().cpu() for p in model.parameters() if p.grad is not None])
    return logits.float().cpu(), gradients


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    return ((value - reference).norm() / reference.norm()).item()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", SAME_ON_EVERY_DEVICE)
def test_every_encoding_computes_on_the_gpu_what_it_computes_on_the_cpu(name, shape):
    # Measured on an H200 (torch 2.11): fp32 within 3e-6, bf16 within 1.3e-2 (FLOATER's gradients;
    # the others 2e-3 to 4e-3). An encoding that drops its positions on the GPU is off by O(1).
    bench = Bench(CONTENDERS[name], shape, SETTINGS, torch.Generator().manual_seed(0))
    bench.model.train()
    gpu_model = copy.deepcopy(bench.model).to(CUDA)
    cpu_logits, cpu_gradients = logits_and_gradients(bench.model, bench, torch.device("cpu"), bf16=False)
    for bf16, tolerance in ((False, 1e-4), (True, 3e-2)):
        logits, gradients = logits_and_gradients(gpu_model, bench, CUDA, bf16)
        assert relative_error(logits, cpu_logits) < tolerance, f"{name} logits, bf16={bf16}"
        assert relative_error(gradients, cpu_gradients) < tolerance, f"{name} gradients, bf16={bf16}"


FUSED = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention")


@pytest.mark.parametrize("name", list(CONTENDERS))
def test_attention_runs_on_fused_kernels_unless_the_encoding_owns_it(name):
    # Shaw's relative encoding computes attention itself (it needs the weights); every other
    # encoding hands q, k, v and any bias to SDPA, which must pick a fused kernel, in training
    # (a bias that needs a gradient: the memory-efficient kernel) and in evaluation.
    bench = Bench(CONTENDERS[name], Shape("decoder", 256), Settings(device=CUDA, tokens_per_batch=8192, peer=False), torch.Generator().manual_seed(0))
    for call in (bench.train_step, bench.eval_forward):
        call()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            call()
        ops = {event.key for event in profile.key_averages()}
        if name == "relative":
            assert "aten::softmax" in ops and not ops & set(FUSED)
        else:
            assert ops & set(FUSED) and "aten::softmax" not in ops, sorted(op for op in ops if "attention" in op or "softmax" in op)
