"""FoX (Lin et al. 2025): the decay bias against values worked out by hand from eq. 6, the
paper's property that forget gates of 1 are NoPE, and the conformance kit."""

import math

import pytest
import torch

import pebench.testing
from pebench.encodings.base import Site
from pebench.encodings.fox import FoX, causal_forgetting_attention, decay_bias
from pebench.encodings.nope import NoPE
from pebench.model.transformer import ModelConfig, Transformer

LOG_GATES = torch.tensor([0.5, 0.25, 0.8]).log()[None, None]  # [1, 1, 3]: f_0, f_1, f_2


def test_causal_decay_sums_the_log_gates_after_the_key_up_to_the_query():
    # D_10 = log f_1 = log 0.25; D_20 = log f_1 + log f_2 = log 0.2; D_21 = log f_2 = log 0.8; D_ii = 0.
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    bias = decay_bias(LOG_GATES, causal, causal=True)[0, 0]
    assert bias[causal].tolist() == pytest.approx([0.0, math.log(0.25), 0.0, math.log(0.2), math.log(0.8), 0.0], abs=1e-6)


def test_an_encoder_decays_by_the_gates_between_either_way():
    # D_02 = log f_1 + log f_2 = D_20; D_01 = log f_1 = D_10; D_12 = log f_2 = D_21.
    bias = decay_bias(LOG_GATES, torch.ones(3, 3, dtype=torch.bool), causal=False)[0, 0]
    assert torch.allclose(bias, bias.T) and bias[0, 2].item() == pytest.approx(math.log(0.2), abs=1e-6)
    assert bias[0, 1].item() == pytest.approx(math.log(0.25), abs=1e-6) and bias[1, 2].item() == pytest.approx(math.log(0.8), abs=1e-6)


def test_an_encoders_padding_mask_gives_every_query_its_own_decay():
    # The encoder's mask is [b, 1, 1, s] (padding only): row i must still decay from token i.
    full = decay_bias(LOG_GATES, torch.ones(3, 3, dtype=torch.bool), causal=False)
    assert torch.allclose(decay_bias(LOG_GATES, torch.ones(1, 1, 1, 3, dtype=torch.bool), causal=False), full)
    assert full[0, 0, 2, 0].item() == pytest.approx(math.log(0.2), abs=1e-6) and full[0, 0, 0, 2].item() == pytest.approx(math.log(0.2), abs=1e-6)


def test_padding_forgets_nothing():
    # Key 1 is padding for every query: row 2's decay to key 0 is log f_2 alone.
    allowed = torch.tensor([[True, False, False], [True, False, False], [True, False, True]])
    assert decay_bias(LOG_GATES, allowed, causal=True)[0, 0, 2, 0].item() == pytest.approx(math.log(0.8), abs=1e-6)


def test_the_fused_causal_pass_equals_the_written_out_decay():
    # D_ij = C_i - C_j folded into a key bias: same outputs and gradients as softmax(qk/sqrt(d) + D) v.
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 8, generator=generator, dtype=torch.float64, requires_grad=True) for _ in range(3))
    log_gates = torch.nn.functional.logsigmoid(torch.randn(2, 3, 40, generator=generator, dtype=torch.float64)).requires_grad_()
    causal = torch.ones(40, 40, dtype=torch.bool).tril()
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(8) + decay_bias(log_gates, causal, causal=True)
    expected = logits.masked_fill(~causal, float("-inf")).softmax(-1) @ v
    fused = causal_forgetting_attention(q, k, v, log_gates)
    assert torch.allclose(fused, expected, atol=1e-10)
    weights = torch.randn(expected.shape, generator=generator, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad((fused * weights).sum(), (q, k, v, log_gates)), torch.autograd.grad((expected * weights).sum(), (q, k, v, log_gates)), strict=True):
        assert torch.allclose(a, b, atol=1e-10)


def test_half_precision_writes_the_bias_out(monkeypatch):
    # In bf16, under autocast or in a model cast to it, -C_j would round at 2^-8 |C_j|: the
    # causal pass must not fold it; in float32 it does.
    from pebench.encodings import fox as module

    folded = []
    monkeypatch.setattr(module, "causal_forgetting_attention", lambda *args: folded.append(True))
    fox = FoX(ModelConfig(d_model=8, n_heads=2, n_layers=1).geometry(8))
    q, k, v = torch.randn(3, 1, 2, 5, 4).unbind(0)
    causal, site = torch.ones(5, 5, dtype=torch.bool).tril()[None, None], Site("decoder", 0, "self")
    state = fox.key_state(torch.randn(1, 5, 8), torch.arange(5), site)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fox.attend(q, k, v, torch.arange(5), torch.arange(5), causal, site, causal=True, key_state=state)
    assert not folded and out.shape == (1, 2, 5, 4)
    half = fox.attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), torch.arange(5), torch.arange(5), causal, site, causal=True, key_state=state)
    assert not folded and half.dtype == torch.bfloat16
    fox.attend(q, k, v, torch.arange(5), torch.arange(5), causal, site, causal=True, key_state=state)
    assert folded == [True]


def test_forget_gates_of_one_are_nope():
    config = ModelConfig(architecture="decoder", d_model=16, n_heads=2, n_layers=2, d_ff=32)
    torch.manual_seed(0)
    nope = Transformer(config, 20, NoPE(config.geometry(32))).eval()
    fox = Transformer(config, 20, FoX(config.geometry(32))).eval()
    fox.load_state_dict(nope.state_dict(), strict=False)  # the same model, with gates besides
    with torch.no_grad():
        for gate in fox.encoding.gates.values():
            gate.weight.zero_()
            gate.bias.fill_(200.0)  # sigma(200) = 1 in float32: log f = 0
    tokens = torch.randint(4, 20, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(fox(tokens), nope(tokens), atol=1e-6)


def test_the_gates_come_from_each_token_per_head_and_layer():
    geometry = ModelConfig(d_model=4, n_heads=2, n_layers=1).geometry(8)
    fox = FoX(geometry)
    with torch.no_grad():
        gate = fox.gates["decoder_0"]
        gate.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]))
        gate.bias.copy_(torch.tensor([0.0, math.log(3.0)]))  # head 1: sigma(log 3) = 3/4
    x = torch.tensor([[[0.0, 5.0, 5.0, 5.0], [math.log(4.0), 0.0, 0.0, 0.0]]])  # head 0: sigma(0) = 1/2, sigma(log 4) = 4/5
    state = fox.key_state(x, torch.arange(2), Site("decoder", 0, "self"))
    assert state.shape == (1, 2, 2) and torch.allclose(state.exp()[0], torch.tensor([[0.5, 0.8], [0.75, 0.75]]))
    assert fox.key_state(x, torch.arange(2), Site("decoder", 0, "cross")) is None


@pytest.mark.parametrize("check", pebench.testing.checks(FoX), ids=str)
def test_fox_passes_the_conformance_kit(check):
    check()
