"""DAPE: data-adaptive positional encoding.

Zheng, Gao, Shi, Huang, Li, Xiong, Wang and Li 2024, "DAPE: Data-Adaptive Positional Encoding for
Length Extrapolation" (arXiv:2405.14722, NeurIPS), eq. 4, and the authors' code
(github.com/chuanyang-Zheng/DAPE, ``DAPE.py``: ``ParallelKerpleLog_DAPE``, ``AliBi_DAPE``,
``FIRE_DAPE``). With A the scaled attention logits q_i · k_j / sqrt(d_h) of every head and B a
base encoding's additive bias, the logits become

    A + B + f([A; B]),

f an MLP applied at every (i, j) to the 2h values of A and B stacked over the heads: a linear map
to ``mlp_width`` features (D_DAPE, 32 in the paper and the code), LeakyReLU, a linear map back
to h, one f per layer (the code builds one per attention layer). The bias f adds depends on the
query and key contents, not only on their positions.

The base is a pebench encoding that acts only through its attention-logit ``bias`` (KERPLE, the
paper's main base and the default here; ALiBi, FIRE, T5, or NoPE for B = 0), built with
``base_params``; its own parameters train with DAPE's, as in the code. Where the base gives no
bias (cross-attention for the distance encodings) B is 0 there. In an encoder the base's own
bidirectional bias is used (KERPLE's and ALiBi's |i - j|), which the paper, on causal language
models, does not define.
Shapes: b batch, h heads, s (q, k) sequence, d_h head width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..attention import scaled_dot_product
from .base import Geometry, PositionalEncoding, Site, require_range

# hooks a base may not override: DAPE adds only its bias to the logits
OTHER_HOOKS = ("positions", "batch_positions", "embed", "query_bias", "key_value_bias", "project_query", "project_key_value", "attend")


class DAPE(PositionalEncoding):
    """A base encoding's bias plus an MLP of the logits and that bias, per layer.

    Args:
        geometry: the model served.
        base: the name of the base encoding plugin, one that acts through ``bias`` alone.
        base_params: its parameters (None: its defaults).
        mlp_width: the MLP's hidden width (D_DAPE).
    Raises:
        ValueError: for ``mlp_width`` < 1 or a base with other hooks than ``bias``;
            UnknownNameError for an unknown base.
    """

    description = "DAPE: a base bias plus an MLP over the heads of the attention logits and that bias"
    reference = "Zheng et al. 2024, arXiv:2405.14722"

    def __init__(self, geometry: Geometry, base: str = "kerple", base_params: dict | None = None, mlp_width: int = 32):
        super().__init__(geometry)
        from ..registry import ENCODINGS, plugin  # the registry imports plugins: import it late

        require_range("DAPE", "mlp_width", mlp_width, at_least=1)
        inner = plugin(ENCODINGS, base)
        overridden = [hook for hook in OTHER_HOOKS if getattr(inner, hook) is not getattr(PositionalEncoding, hook)]
        if overridden:
            uses = ", ".join(overridden)
            raise ValueError(f"DAPE adds an MLP to its base's attention bias; the base '{base}' ({inner.__name__}) also uses {uses}: choose a bias-only base")
        self.base = inner(geometry, **(base_params or {}))
        self.max_positions = self.base.max_positions
        h = geometry.n_heads
        self.mlps = nn.ModuleDict({_key(site): mlp(2 * h, mlp_width, h) for site in geometry.sites if site.kind == "self"})

    def prepare(self, num_positions: int, device: torch.device) -> None:
        self.base.prepare(num_positions, device)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site, causal: bool = False) -> Tensor:
        if site.kind == "cross":
            return scaled_dot_product(q, k, v, allowed, None, causal)
        return scaled_dot_product(q, k, v, allowed, self.logit_bias(q, k, q_pos, k_pos, site), causal)

    def logit_bias(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor, site: Site) -> Tensor:
        """B + f([A; B]), what DAPE adds to the scaled logits A. q: ``[b, h, s_q, d_h]``, k:
        ``[b, h, s_k, d_h]``. Returns ``[b, h, s_q, s_k]``."""
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        base = self.base.bias(q_pos, k_pos, site)
        base = logits.new_zeros(()) if base is None else base.to(logits.dtype)
        stacked = torch.cat(torch.broadcast_tensors(logits, base), dim=1)  # [b, 2h, s_q, s_k]
        adapted = self.mlps[_key(site)](stacked.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # f over the heads at each (i, j)
        return base + adapted


def mlp(inputs: int, width: int, outputs: int) -> nn.Sequential:
    """f of eq. 4: linear, LeakyReLU, linear (the authors' ``mlp2``)."""
    return nn.Sequential(nn.Linear(inputs, width), nn.LeakyReLU(), nn.Linear(width, outputs))


def _key(site: Site) -> str:
    return f"{site.stack}_{site.layer}_{site.kind}"
