"""On a CUDA device (skipped without one: CI has none). Every encoding computes on the GPU what
it computes on the CPU, for the same weights and batch: to float round-off in fp32 and to
bf16's precision under the bf16 autocast that training and evaluation use there; and attention
runs on SDPA's fused kernels wherever the encoding leaves it to SDPA."""

import copy

import pytest
import torch
from torch import nn

from pebench.bench.throughput import Bench, Settings, Shape, contenders
from tests.helpers import relative_error

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
CUDA = torch.device("cuda")
SETTINGS = Settings(device=torch.device("cpu"), tokens_per_batch=2048, peer=False)
CONTENDERS = {c.name: c for c in contenders(SETTINGS)}
# Randomized positions are drawn by the device's own random generator: another sample on the GPU.
SAME_ON_EVERY_DEVICE = [name for name in CONTENDERS if not name.startswith("randomized")]
SHAPES = [Shape("decoder", 64), Shape("encoder_decoder", 32)]


def logits_and_gradients(model: nn.Module, bench: Bench, device: torch.device, bf16: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A training step's logits ``[b, s, V]`` and each parameter's gradient (by name), on the
    CPU in fp32."""
    model.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(*(x.to(device) for x in bench.inputs))
    nn.functional.cross_entropy(logits.float().flatten(0, 1), bench.tokens[:, 1:].to(device).flatten()).backward()
    return logits.float().cpu(), {name: p.grad.float().cpu() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", SAME_ON_EVERY_DEVICE)
def test_every_encoding_computes_on_the_gpu_what_it_computes_on_the_cpu(name, shape):
    # Measured on an H200 (torch 2.11), over all gradients together: fp32 within 3e-6, bf16 within
    # 1.3e-2 (FLOATER; the others 2e-3 to 4e-3). An encoding that loses its positions on the GPU is
    # off by O(1). In fp32 each parameter is compared on its own, so that the encoding's own
    # parameters (T5's table, FLOATER's ODE) are not hidden among the embedding's and the layers'.
    bench = Bench(CONTENDERS[name], shape, SETTINGS, torch.Generator().manual_seed(0))
    bench.model.train()
    gpu_model = copy.deepcopy(bench.model).to(CUDA)
    cpu_logits, cpu_gradients = logits_and_gradients(bench.model, bench, torch.device("cpu"), bf16=False)
    logits, gradients = logits_and_gradients(gpu_model, bench, CUDA, bf16=False)
    assert relative_error(logits, cpu_logits) < 1e-4
    assert gradients.keys() == cpu_gradients.keys()
    for parameter, gradient in gradients.items():
        assert relative_error(gradient, cpu_gradients[parameter]) < 1e-3, parameter
    logits, gradients = logits_and_gradients(gpu_model, bench, CUDA, bf16=True)
    assert relative_error(logits, cpu_logits) < 3e-2
    assert relative_error(torch.cat([g.flatten() for g in gradients.values()]), torch.cat([g.flatten() for g in cpu_gradients.values()])) < 3e-2


FUSED = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention")
UNFUSED = "aten::_scaled_dot_product_attention_math"  # SDPA's fallback: the weights written out


@pytest.mark.parametrize("name", list(CONTENDERS))
def test_attention_runs_on_fused_kernels_unless_the_encoding_owns_it(name):
    # Shaw's relative encoding computes attention itself (it needs the weights); every other
    # encoding hands q, k, v and any bias to SDPA, which must pick a fused kernel and never its
    # math fallback, in training and in evaluation (the decoder; on an H200 with torch 2.11 it
    # picked cuDNN's, and the memory-efficient kernel for a bias that needs a gradient).
    bench = Bench(CONTENDERS[name], Shape("decoder", 256), Settings(device=CUDA, tokens_per_batch=8192, peer=False), torch.Generator().manual_seed(0))
    for call in (bench.train_step, bench.eval_forward):
        call()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            call()
        ops = {event.key for event in profile.key_averages()}
        if name == "relative":
            assert "aten::softmax" in ops and not ops & set(FUSED)
        else:
            assert ops & set(FUSED) and UNFUSED not in ops and "aten::softmax" not in ops, sorted(op for op in ops if "attention" in op or "softmax" in op)


def test_floaters_training_solve_runs_as_a_cuda_graph_equal_to_the_eager_solve():
    # The training grid (fixed for the run) is captured once, forward and backward, and replayed:
    # its knots and gradients equal the eager loop's on the same device, to float round-off.
    from pebench.encodings.flow import Flow
    from pebench.model.transformer import ModelConfig

    torch.manual_seed(0)
    encoding = Flow(ModelConfig(d_model=64, n_heads=4, n_layers=2).geometry(256, 256), step_size=0.4).to(CUDA).train()
    results = []
    for graphed in (True, False):
        encoding.zero_grad(set_to_none=True)
        if graphed:
            encoding.prepare(256, CUDA)
            assert next(iter(encoding._graphed.values())) is not None, "capture failed: the solve ran eagerly"
            knots = encoding._graphed[(encoding.grid_points(256), encoding.initial.device)](encoding.initial)
        else:
            knots = encoding.integrate(encoding.initial, 0, encoding.grid_points(256) - 1)
        knots.square().sum().backward()
        results.append((knots.detach().cpu(), [p.grad.detach().cpu() for p in encoding.parameters()]))
    (graph_knots, graph_grads), (eager_knots, eager_grads) = results
    assert relative_error(graph_knots, eager_knots) < 1e-6
    assert all(relative_error(g, e) < 1e-5 for g, e in zip(graph_grads, eager_grads, strict=True))
