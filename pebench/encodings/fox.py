"""FoX: the Forgetting Transformer's forget gate, without positional encoding.

Lin, Nikishin, He and Courville 2025, "Forgetting Transformer: Softmax Attention with a Forget
Gate" (arXiv:2503.02130, ICLR), sec. 2, eqs. 4-6, and the authors' code
(github.com/zhixuan-lin/forgetting-transformer,
``model/forgetting_transformer/modeling_forgetting_transformer.py``, ``fgate_type="full"``).
Each head has a scalar forget gate per token, f_t = σ(w · x_t + b) (x_t the attention layer's
input, w and b per head and layer; the code's ``fgate_proj``, weights N(0, 0.02²), bias 0), and
the logit of query i and key j gets the decay bias

    D_ij = Σ_{l=j+1..i} log f_l                                     (eq. 6)

(0 at j = i; the code's cumulative sums of ``logsigmoid``). The paper's main model uses no
positional encoding besides (NoPE), as here; its "Pro" block (output gate, QK-norm, key and
value shifts) is not part of the encoding and is not built.

Where pebench goes beyond the paper, which defines FoX for causal attention:
- an encoder's (bidirectional) self-attention decays by the gates strictly between the two
  tokens whichever comes first: D_ij = Σ_{l between i and j, l ≠ min(i, j)} log f_l (the
  symmetric variant, as ALiBi's);
- cross-attention gets no decay (its queries and keys index different sequences);
- a token a query may not attend (padding) forgets nothing (its log f_l counts as 0), so a
  padded example decays as it does alone.

The causal full pass (training, and evaluation without a cache) adds no [b, h, s, s] bias: with
C_t = Σ_{l<=t} log f_l, D_ij = C_i - C_j, and C_i is the same for every key of query i, which
the softmax ignores; so the logits need only -C_j, a bias per key, which one more dimension of
q (1 / scale) and k (-C_j) carries into torch's fused ``scaled_dot_product_attention``
(:func:`causal_forgetting_attention`; v gets a zero dimension too, since torch's fused CPU
kernel needs q, k and v of one width). Equal in exact arithmetic; in float32 the logits round
at |C_j| 2^-24 (1e-5 for |C| = 200, 256 tokens at gates of 1/2) where the written-out bias
rounds at |D_ij| 2^-24. In half precision (bf16 autocast, as pebench trains on CUDA, or a model
cast to bf16 or fp16) that rounding would be 2^-8 |C_j|, so there the bias is written out, as in
cached decoding and in an encoder: the fused pass is a float32/float64 (CPU) saving.
Shapes: b batch, h heads, s (q, k) sequence, d model width, d_h head width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pebench.encodings.attention import scaled_dot_product
from pebench.encodings.base import Geometry, PositionalEncoding, Site


def decay_bias(log_gates: Tensor, allowed: Tensor, causal: bool) -> Tensor:
    """D of eq. 6 from the log forget gates ``[b, h, s_k]`` of the keys and the bool mask
    ``allowed`` broadcastable to ``[b, h, s_q, s_k]``.

    Causal: D_ij = the sum of log f_l over the attended keys after j (the query's own key is its
    last). Bidirectional (s_q = s_k, query i at key i): the sum over the attended keys strictly
    after the earlier of i and j, up to the later.
    Returns ``[b, h, s_q, s_k]``.
    """
    if not causal:  # every query row of its own (an encoder's mask is [b, 1, 1, s]: padding only)
        n = log_gates.shape[-1]
        allowed = allowed.expand(*allowed.shape[:-2], n, n)
    counted = log_gates[..., None, :] * allowed  # [b, h, s_q, s_k]: log f_l where row i attends key l, else 0
    if causal:
        return counted.flip(-1).cumsum(-1).flip(-1) - counted  # Σ_{l > j}
    total = counted.cumsum(-1)  # c_ij = Σ_{l <= j}
    own = total.diagonal(dim1=-2, dim2=-1)[..., None]  # c_ii
    return -(own - total).abs()  # j <= i: c_ii - c_ij <= 0; j > i: c_ij - c_ii <= 0


def causal_forgetting_attention(q: Tensor, k: Tensor, v: Tensor, log_gates: Tensor) -> Tensor:
    """Causal attention softmax(q k^T / sqrt(d_h) + D) v with FoX's decay D (eq. 6), D folded
    into a bias -C_j per key (C the cumulative sums of the log gates; see the module).

    Args:
        q, k, v: ``[b, h, s, d_h]``, query i at key i.
        log_gates: log f of every key ``[b, h, s]``.
    Returns:
        ``[b, h, s, d_h]``.
    """
    scale = q.shape[-1] ** -0.5
    cumulative = log_gates.cumsum(-1).to(k.dtype)[..., None]  # C_j, [b, h, s, 1]
    q = torch.cat([q, q.new_full((*q.shape[:-1], 1), 1 / scale)], dim=-1)  # (q, 1/scale) . (k, -C_j) * scale = q.k * scale - C_j
    k = torch.cat([k, -cumulative], dim=-1)
    v = F.pad(v, (0, 1))  # v as wide as q and k: otherwise the CPU kernel falls back to [s, s] scores (7x slower at 1,024)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)[..., :-1]


class FoX(PositionalEncoding):
    """A data-dependent forget gate per head and token, decaying attention logits; no positions.

    Args:
        geometry: the model served.
    """

    description = "FoX: a forget gate sigmoid(w.x + b) per head and token, logits decayed by the sum of log gates between key and query"
    reference = "Lin et al. 2025, arXiv:2503.02130"

    def __init__(self, geometry: Geometry):
        super().__init__(geometry)
        self.gates = nn.ModuleDict({_key(site): nn.Linear(geometry.d_model, geometry.n_heads) for site in geometry.sites if site.kind == "self"})
        for gate in self.gates.values():  # the authors' initialisation
            nn.init.normal_(gate.weight, std=0.02)
            nn.init.zeros_(gate.bias)

    def key_state(self, x: Tensor, pos: Tensor, site: Site) -> Tensor | None:
        """log f_t = log σ(w · x_t + b) of every token and head: ``[b, h, s_k]``; None in cross-attention."""
        if site.kind == "cross":
            return None
        return nn.functional.logsigmoid(self.gates[_key(site)](x).float()).transpose(1, 2)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        q_pos: Tensor,
        k_pos: Tensor,
        allowed: Tensor,
        site: Site,
        causal: bool = False,
        key_state: Tensor | None = None,
    ) -> Tensor:
        if key_state is None:  # cross-attention
            return scaled_dot_product(q, k, v, allowed, None, causal)
        if causal and q.dtype in (torch.float32, torch.float64) and not torch.is_autocast_enabled(q.device.type):
            return causal_forgetting_attention(q, k, v, key_state)
        bias = decay_bias(key_state, allowed, causal=site.stack == "decoder").to(q.dtype)
        return scaled_dot_product(q, k, v, allowed, bias, causal)


def _key(site: Site) -> str:
    return f"{site.stack}_{site.layer}"
