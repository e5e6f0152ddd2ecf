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

import functools
import math

import torch
from torch import Tensor, nn

from pebench.encodings.attention import as_4d, scaled_dot_product, tiled_attention
from pebench.encodings.base import Geometry, PositionalEncoding, Site, require_range

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
        from pebench.core.registry import ENCODINGS, plugin  # the registry imports plugins: import it late

        require_range("DAPE", "mlp_width", mlp_width, at_least=1)
        inner = plugin(ENCODINGS, base)
        overridden = [hook for hook in OTHER_HOOKS if getattr(inner, hook) is not getattr(PositionalEncoding, hook)]
        if overridden:
            uses = ", ".join(overridden)
            raise ValueError(f"DAPE adds an MLP to its base's attention bias; the base '{base}' ({inner.__name__}) also uses {uses}: choose a bias-only base")
        self.base = inner(geometry, **(base_params or {}))
        self.max_positions = self.base.max_positions
        h = geometry.n_heads
        self.mlp_width = mlp_width
        self.mlps = nn.ModuleDict({_key(site): mlp(2 * h, mlp_width, h) for site in geometry.sites if site.kind == "self"})

    def prepare(self, num_positions: int, device: torch.device) -> None:
        self.base.prepare(num_positions, device)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site, causal: bool = False) -> Tensor:
        if site.kind == "cross":
            return scaled_dot_product(q, k, v, allowed, None, causal)

        def logit_bias(q_block: Tensor, k_block: Tensor, allowed_block: Tensor, tile: tuple) -> Tensor:
            examples, rows, keys = tile
            q_block_pos, k_block_pos = _block(q_pos, examples, rows), _block(k_pos, examples, slice(0, keys))
            return self.logit_bias(q_block, k_block, q_block_pos, k_block_pos, site, causal_from=(rows.start or 0) if causal else None)

        # Blocks bound memory only where autograd records nothing (evaluation): there they are sized
        # by the MLP's hidden features per (query, key) pair; in training autograd keeps every
        # block's intermediates anyway, and blocks sized by the scores alone run faster on 2
        # threads. benchmarks/dape_tiles.py on an idle 2-core machine, by the MLP against by the
        # scores: evaluation (b = 8, s = 1,024) 22.5 against 113 MiB peak, x0.60-1.12 the time
        # (four runs, 1 and 2 threads); a training step (b = 32, s = 256) 358 against 350 MiB,
        # x0.98-1.02 the time on 1 thread, x1.18-1.48 on 2.
        pair_values = None if torch.is_grad_enabled() else max(q.shape[1], self.mlp_width)
        return tiled_attention(q, k, v, allowed, logit_bias, causal, pair_values=pair_values)

    def logit_bias(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor, site: Site, causal_from: int | None = None) -> Tensor:
        """B + f([A; B]), what DAPE adds to the scaled logits A. q: ``[b, h, s_q, d_h]``, k:
        ``[b, h, s_k, d_h]``; causal_from: in a causal full pass, the key of the first query (q
        a block of rows), where f is computed at the pairs of key j <= causal_from + i only and
        is 0 above them, where the attention masks every logit. Returns ``[b, h, s_q, s_k]``."""
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        base = self.base.bias(q_pos, k_pos, site)
        base = logits.new_zeros(()) if base is None else base.to(logits.dtype)
        return base + adapted_bias(self.mlps[_key(site)], logits, base, causal_from)


def adapted_bias(f: nn.Sequential, logits: Tensor, base: Tensor, causal_from: int | None = None) -> Tensor:
    """f([A; B]) of eq. 4 at every (i, j), or with ``causal_from`` = r at the pairs j <= r + i
    only (0 above).

    The MLP's first layer is split into its columns for A and for B, W1 [A; B] = W_A A + W_B B,
    so that B, the same for every example of a batch for position-only bases, is multiplied once
    and not per example.
    Args:
        f: the MLP (:func:`mlp`, 2h inputs, h outputs).
        logits: A, ``[b, h, s_q, s_k]``; base: B, broadcastable to it.
        causal_from: r, the key of the first query row in a causal block of rows; None: every pair.
    Returns:
        ``[b, h, s_q, s_k]``.
    """
    first, activation, second = f
    b, h, s_q, s_k = logits.shape
    a = logits.flatten(2)  # [b, h, n], n = s_q s_k pairs
    base = as_4d(base).expand(-1, h, s_q, s_k).flatten(2)  # [1 or b, h, n]
    if causal_from is not None:
        pairs = lower_pairs(s_q, s_k, causal_from, logits.device)
        a, base = a[..., pairs], base[..., pairs]
    w_a, w_b = first.weight[:, :h], first.weight[:, h:]  # [width, h] each
    from_base = torch.addmm(first.bias, base.transpose(1, 2).flatten(0, 1), w_b.T).view(base.shape[0], -1, w_b.shape[0])  # [1 or b, n, width]
    hidden = torch.baddbmm(from_base, a.transpose(1, 2), w_a.T.expand(b, h, w_a.shape[0]))  # [b, n, width]
    out = second(activation(hidden))  # [b, n, h]
    if causal_from is not None:
        out = out.new_zeros(b, s_q * s_k, h).index_copy(1, pairs, out)
    return out.view(b, s_q, s_k, h).permute(0, 3, 1, 2)


@functools.lru_cache(maxsize=32)
def lower_pairs(rows: int, keys: int, first_row: int, device: torch.device) -> Tensor:
    """The flat indices i * keys + j of the pairs j <= first_row + i of a ``[rows, keys]`` block, built once per shape and device."""
    row, col = torch.tril_indices(rows, keys, offset=first_row, device=device)
    return row * keys + col


def _block(positions: Tensor, examples: slice, part: slice) -> Tensor:
    """The positions ``[s]`` or ``[b, s]`` of a block's examples and tokens."""
    return positions[part] if positions.dim() == 1 else positions[examples, part]


def mlp(inputs: int, width: int, outputs: int) -> nn.Sequential:
    """f of eq. 4: linear, LeakyReLU, linear (the authors' ``mlp2``)."""
    return nn.Sequential(nn.Linear(inputs, width), nn.LeakyReLU(), nn.Linear(width, outputs))


def _key(site: Site) -> str:
    return f"{site.stack}_{site.layer}_{site.kind}"
